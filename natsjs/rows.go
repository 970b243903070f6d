package natsjs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/internal/pbwire"
	"github.com/edgecount/edgecount/internal/periodic"
)

// Row pushes: after every write the rollup publishes the rows it wrote on
// the core NATS subject <prefix>.<partition> (no stream: best effort, a
// subscriber that is away or slow misses them), and edge agents update the
// items they keep warm from them (region.Agent.ApplyPush). Every push of a
// partition carries the sender (a random id per pusher) and a sequence
// that grows by one per message, and a pusher sends an empty push (a
// heartbeat) of each partition it owns every RowsHeartbeat, so a
// subscriber sees a missed push as a gap within one heartbeat and a sender
// gone silent within a few (docs/read-cache.md).

// DefaultRowsPrefix is the subject prefix of row pushes.
const DefaultRowsPrefix = "edgecount.rows"

// ErrMalformedRows marks a row push that does not decode.
var ErrMalformedRows = errors.New("malformed row push")

// RowsHeartbeat is how often a pusher sends an empty push of every
// partition it owns (RowPusher.RunHeartbeats).
const RowsHeartbeat = time.Second

// Wire format (protobuf wire encoding, docs/read-cache.md):
//
//	push:    1 version (=1), 2 written_at (Unix µs), 3 row (repeated, bytes),
//	         4 partition, 5 sender, 6 seq (absent in pushes of old senders:
//	         sender 0, which a subscriber cannot check for gaps)
//	row:     1 content_id, 2 scope, 3 likes (zigzag), 4 dislikes (zigzag),
//	         5 counter (repeated, bytes), 6 last_seq, 7 updated_at (Unix µs)
//	counter: 1 name, 2 value (zigzag)
const rowsVersion = 1

// RowsPush is one decoded push.
type RowsPush struct {
	// Partition, Sender and Seq place the push in its sender's sequence
	// of the partition's pushes; Sender 0: unsequenced.
	Partition   uint32
	Sender, Seq uint64
	Written     time.Time
	Rows        []engagement.Stats
}

// AppendRows appends the encoding of a push of rows written at written,
// without a sequence (Sender 0).
func AppendRows(buf []byte, written time.Time, rows []engagement.Stats) []byte {
	return AppendPush(buf, RowsPush{Written: written, Rows: rows})
}

// AppendPush appends the encoding of push.
func AppendPush(buf []byte, push RowsPush) []byte {
	buf = appendPushHead(buf, push)
	var row []byte
	rows := push.Rows
	for i := range rows {
		row = appendRow(row[:0], &rows[i])
		buf = protowire.AppendTag(buf, 3, protowire.BytesType)
		buf = protowire.AppendBytes(buf, row)
	}
	return buf
}

func appendPushHead(buf []byte, push RowsPush) []byte {
	buf = protowire.AppendTag(buf, 1, protowire.VarintType)
	buf = protowire.AppendVarint(buf, rowsVersion)
	buf = protowire.AppendTag(buf, 2, protowire.VarintType)
	buf = protowire.AppendVarint(buf, uint64(push.Written.UnixMicro()))
	if push.Sender != 0 {
		buf = protowire.AppendTag(buf, 4, protowire.VarintType)
		buf = protowire.AppendVarint(buf, uint64(push.Partition))
		buf = protowire.AppendTag(buf, 5, protowire.VarintType)
		buf = protowire.AppendVarint(buf, push.Sender)
		buf = protowire.AppendTag(buf, 6, protowire.VarintType)
		buf = protowire.AppendVarint(buf, push.Seq)
	}
	return buf
}

func appendRow(buf []byte, r *engagement.Stats) []byte {
	buf = protowire.AppendTag(buf, 1, protowire.BytesType)
	buf = protowire.AppendString(buf, r.ContentID)
	buf = protowire.AppendTag(buf, 2, protowire.BytesType)
	buf = protowire.AppendString(buf, r.Scope)
	buf = protowire.AppendTag(buf, 3, protowire.VarintType)
	buf = protowire.AppendVarint(buf, protowire.EncodeZigZag(r.Likes))
	buf = protowire.AppendTag(buf, 4, protowire.VarintType)
	buf = protowire.AppendVarint(buf, protowire.EncodeZigZag(r.Dislikes))
	for name, v := range r.Counters {
		var c []byte
		c = protowire.AppendTag(c, 1, protowire.BytesType)
		c = protowire.AppendString(c, name)
		c = protowire.AppendTag(c, 2, protowire.VarintType)
		c = protowire.AppendVarint(c, protowire.EncodeZigZag(v))
		buf = protowire.AppendTag(buf, 5, protowire.BytesType)
		buf = protowire.AppendBytes(buf, c)
	}
	buf = protowire.AppendTag(buf, 6, protowire.VarintType)
	buf = protowire.AppendVarint(buf, r.LastSeq)
	if !r.UpdatedAt.IsZero() {
		buf = protowire.AppendTag(buf, 7, protowire.VarintType)
		buf = protowire.AppendVarint(buf, uint64(r.UpdatedAt.UnixMicro()))
	}
	return buf
}

// DecodeRows decodes a push's time and rows (DecodePush).
func DecodeRows(data []byte) (written time.Time, rows []engagement.Stats, err error) {
	p, err := DecodePush(data)
	return p.Written, p.Rows, err
}

// DecodePush decodes a push. Every error wraps ErrMalformedRows. Rows are
// grouped by item as AppendPush was given them; unknown fields are
// skipped. A push with a sender needs a sequence above 0 and a partition.
func DecodePush(data []byte) (RowsPush, error) {
	var (
		p               RowsPush
		version         uint64
		sawPart, sawSeq bool
	)
	err := walkFields(data, func(num protowire.Number, typ protowire.Type, v uint64, raw []byte) error {
		switch {
		case num == 1 && typ == protowire.VarintType:
			version = v
		case num == 2 && typ == protowire.VarintType:
			p.Written = time.UnixMicro(int64(v))
		case num == 3 && typ == protowire.BytesType:
			r, err := decodeRow(raw)
			if err != nil {
				return fmt.Errorf("row %d: %w", len(p.Rows), err)
			}
			p.Rows = append(p.Rows, r)
		case num == 4 && typ == protowire.VarintType:
			if v > math.MaxUint32 {
				return fmt.Errorf("partition %d out of range", v)
			}
			p.Partition, sawPart = uint32(v), true
		case num == 5 && typ == protowire.VarintType:
			p.Sender = v
		case num == 6 && typ == protowire.VarintType:
			p.Seq, sawSeq = v, true
		case num <= 6:
			return fmt.Errorf("field %d has wire type %d", num, typ)
		}
		return nil
	})
	if err == nil && version != rowsVersion {
		err = fmt.Errorf("version %d, want %d", version, rowsVersion)
	}
	if err == nil && p.Sender != 0 && (!sawPart || !sawSeq || p.Seq == 0) {
		err = errors.New("a sender without a partition or a sequence above 0")
	}
	if err != nil {
		return RowsPush{}, fmt.Errorf("%w: %v", ErrMalformedRows, err)
	}
	return p, nil
}

func decodeRow(data []byte) (engagement.Stats, error) {
	var r engagement.Stats
	var sawID, sawScope bool
	err := walkFields(data, func(num protowire.Number, typ protowire.Type, v uint64, raw []byte) error {
		switch {
		case num == 1 && typ == protowire.BytesType:
			r.ContentID, sawID = string(raw), true
		case num == 2 && typ == protowire.BytesType:
			r.Scope, sawScope = string(raw), true
		case num == 3 && typ == protowire.VarintType:
			r.Likes = protowire.DecodeZigZag(v)
		case num == 4 && typ == protowire.VarintType:
			r.Dislikes = protowire.DecodeZigZag(v)
		case num == 5 && typ == protowire.BytesType:
			var name string
			var val int64
			var sawName bool
			err := walkFields(raw, func(num protowire.Number, typ protowire.Type, v uint64, raw []byte) error {
				switch {
				case num == 1 && typ == protowire.BytesType:
					name, sawName = string(raw), true
				case num == 2 && typ == protowire.VarintType:
					val = protowire.DecodeZigZag(v)
				case num <= 2:
					return fmt.Errorf("counter field %d has wire type %d", num, typ)
				}
				return nil
			})
			if err != nil {
				return err
			}
			if !sawName || name == "" {
				return errors.New("counter without a name")
			}
			if r.Counters == nil {
				r.Counters = make(map[string]int64)
			}
			r.Counters[name] = val
		case num == 6 && typ == protowire.VarintType:
			r.LastSeq = v
		case num == 7 && typ == protowire.VarintType:
			r.UpdatedAt = time.UnixMicro(int64(v))
		case num <= 7:
			return fmt.Errorf("field %d has wire type %d", num, typ)
		}
		return nil
	})
	if err != nil {
		return r, err
	}
	if !sawID || r.ContentID == "" || !sawScope || r.Scope == "" {
		return r, errors.New("row without a content id or a scope")
	}
	return r, nil
}

// walkFields calls fn with every varint and length-delimited field of
// data (pbwire.Walk); fields of other wire types are skipped.
func walkFields(data []byte, fn func(num protowire.Number, typ protowire.Type, v uint64, raw []byte) error) error {
	return pbwire.Walk(data, func(num protowire.Number, typ protowire.Type, v uint64, raw []byte) error {
		if typ != protowire.VarintType && typ != protowire.BytesType {
			return nil
		}
		return fn(num, typ, v, raw)
	})
}

// RowsSubject is the subject of partition p's row pushes under prefix.
func RowsSubject(prefix string, p uint32) string {
	return prefix + "." + strconv.FormatUint(uint64(p), 10)
}

// RowPusherStats are a pusher's counters.
type RowPusherStats struct {
	Pushes, Rows, Heartbeats, Errors uint64
}

// RowPusher publishes the rows a rollup wrote (best effort), each
// partition's pushes numbered 1, 2, … under the pusher's own sender id.
// Safe for concurrent use.
type RowPusher struct {
	nc     *nats.Conn
	prefix string
	log    *slog.Logger
	sender uint64

	mu  sync.Mutex
	seq map[uint32]*partPushes

	pushes, rows, beats, errs atomic.Uint64
	lastWarn                  atomic.Int64
}

// partPushes numbers one partition's pushes; mu keeps the publishes in
// the order of their numbers.
type partPushes struct {
	mu  sync.Mutex
	seq uint64
}

// NewRowPusher returns a pusher publishing on nc under prefix (empty:
// DefaultRowsPrefix).
func NewRowPusher(nc *nats.Conn, prefix string, logger *slog.Logger) *RowPusher {
	if prefix == "" {
		prefix = DefaultRowsPrefix
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &RowPusher{nc: nc, prefix: prefix, log: logger.With("component", "natsjs-rows"),
		sender: rand.Uint64() | 1, seq: make(map[uint32]*partPushes)}
}

// RowPusher returns a pusher of rows on the client's connection.
func (c *Client) RowPusher(prefix string, logger *slog.Logger) *RowPusher {
	return NewRowPusher(c.nc, prefix, logger)
}

func (p *RowPusher) part(part uint32) *partPushes {
	p.mu.Lock()
	defer p.mu.Unlock()
	pp := p.seq[part]
	if pp == nil {
		pp = new(partPushes)
		p.seq[part] = pp
	}
	return pp
}

// Push publishes rows, written now, of partition p, split so that every
// message fits the server's payload limit. It does not wait: a publish
// that fails (disconnected, buffer full) is counted and the push lost (its
// number is used all the same, so subscribers see the gap).
func (p *RowPusher) Push(part uint32, rows []engagement.Stats) {
	subject := RowsSubject(p.prefix, part)
	limit := int(p.nc.MaxPayload())
	if limit <= 0 {
		limit = 1 << 20
	}
	pp := p.part(part)
	pp.mu.Lock()
	defer pp.mu.Unlock()
	now := time.Now()
	var buf []byte
	for start := 0; start < len(rows); {
		// Whole items per message, as a subscriber groups rows by item.
		pp.seq++
		buf = appendPushHead(buf[:0], RowsPush{Partition: part, Sender: p.sender, Seq: pp.seq, Written: now})
		end := start
		var row []byte
		for end < len(rows) {
			row = appendRow(row[:0], &rows[end])
			size := protowire.SizeTag(3) + protowire.SizeBytes(len(row))
			if end > start && len(buf)+size > limit-1024 && rows[end].ContentID != rows[end-1].ContentID {
				break
			}
			buf = protowire.AppendTag(buf, 3, protowire.BytesType)
			buf = protowire.AppendBytes(buf, row)
			end++
		}
		if p.publish(subject, buf) {
			p.pushes.Add(1)
			p.rows.Add(uint64(end - start))
		}
		start = end
	}
}

// Heartbeat publishes an empty push of partition part: it tells the
// subscribers that the pusher is alive and how many pushes it sent.
func (p *RowPusher) Heartbeat(part uint32) {
	pp := p.part(part)
	pp.mu.Lock()
	defer pp.mu.Unlock()
	pp.seq++
	if p.publish(RowsSubject(p.prefix, part), appendPushHead(nil, RowsPush{Partition: part, Sender: p.sender, Seq: pp.seq, Written: time.Now()})) {
		p.beats.Add(1)
	}
}

// RunHeartbeats sends a heartbeat of every partition owned returns, every
// interval (0: RowsHeartbeat), until ctx ends.
func (p *RowPusher) RunHeartbeats(ctx context.Context, interval time.Duration, owned func() []uint32) {
	if interval <= 0 {
		interval = RowsHeartbeat
	}
	periodic.Run(ctx, interval, func() {
		for _, part := range owned() {
			p.Heartbeat(part)
		}
	})
}

func (p *RowPusher) publish(subject string, data []byte) bool {
	if err := p.nc.Publish(subject, data); err != nil {
		p.errs.Add(1)
		if now := time.Now().UnixNano(); now-p.lastWarn.Load() > int64(10*time.Second) {
			p.lastWarn.Store(now)
			p.log.Warn("cannot push rows to the agents' read caches; they refresh at their short cache ttl until the pushes resume", "err", err)
		}
		return false
	}
	return true
}

// Stats returns the pusher's counters.
func (p *RowPusher) Stats() RowPusherStats {
	return RowPusherStats{Pushes: p.pushes.Load(), Rows: p.rows.Load(), Heartbeats: p.beats.Load(), Errors: p.errs.Load()}
}

// RowSubscription receives row pushes. Close ends it.
type RowSubscription struct {
	sub       *nats.Subscription
	malformed atomic.Uint64
}

// SubscribeRows calls apply with every push of every partition under
// prefix (empty: DefaultRowsPrefix), one at a time, on the connection's
// goroutine for the subscription; a push that does not decode is counted
// (Malformed) and dropped.
func SubscribeRows(nc *nats.Conn, prefix string, apply func(RowsPush), logger *slog.Logger) (*RowSubscription, error) {
	if prefix == "" {
		prefix = DefaultRowsPrefix
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	log := logger.With("component", "natsjs-rows")
	rs := &RowSubscription{}
	var lastWarn atomic.Int64
	sub, err := nc.Subscribe(prefix+".>", func(m *nats.Msg) {
		push, err := DecodePush(m.Data)
		if err != nil {
			rs.malformed.Add(1)
			if now := time.Now().UnixNano(); now-lastWarn.Load() > int64(10*time.Second) {
				lastWarn.Store(now)
				log.Warn("dropped a row push that does not decode", "subject", m.Subject, "err", err)
			}
			return
		}
		apply(push)
	})
	if err != nil {
		return nil, fmt.Errorf("cannot subscribe to row pushes: %w", err)
	}
	rs.sub = sub
	return rs, nil
}

// SubscribeRows subscribes to row pushes on the client's connection.
func (c *Client) SubscribeRows(prefix string, apply func(RowsPush), logger *slog.Logger) (*RowSubscription, error) {
	return SubscribeRows(c.nc, prefix, apply, logger)
}

// Malformed counts pushes dropped because they did not decode.
func (s *RowSubscription) Malformed() uint64 { return s.malformed.Load() }

// Dropped counts pushes the connection dropped because the subscriber was
// slow (a slow consumer): missed, repaired by the agents' refresh.
func (s *RowSubscription) Dropped() uint64 {
	n, _ := s.sub.Dropped()
	return uint64(max(n, 0))
}

// Close ends the subscription.
func (s *RowSubscription) Close() error {
	if err := s.sub.Unsubscribe(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) && !errors.Is(err, nats.ErrBadSubscription) {
		return fmt.Errorf("cannot unsubscribe from row pushes: %w", err)
	}
	return nil
}
