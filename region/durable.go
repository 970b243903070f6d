package region

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/store"
	"github.com/edgecount/edgecount/wal"
)

// LogConfig configures the agent's two local logs (package wal): the
// intake log, which holds every acknowledged write until a flush that
// carries it is stored by the broker, and the outbox log, which holds the
// flushed messages until the broker stored them. docs/wal.md and the
// package documentation describe the protocol.
type LogConfig struct {
	// Durability is wal.Fsync (an fsync before every acknowledgement,
	// group-committed), wal.Interval (fsync every SyncInterval) or wal.None
	// (no log, memory only; the zero value means None).
	Durability wal.Durability
	// Dir holds the logs: Dir/intake and Dir/outbox. Required unless None.
	Dir string
	// SyncInterval is the fsync interval of Interval mode.
	SyncInterval time.Duration
	// MaxBytes bounds the intake log; when it is full, writes fail with
	// ErrLogFull (503). The outbox log's budget is OutboxBytes × 2 plus
	// room for one flush (see outboxLogBytes).
	MaxBytes int64
	// ObserveFsync, if set, gets every fsync's duration of both logs.
	ObserveFsync func(time.Duration)
}

// DefaultLogConfig returns the defaults of the agent's log: no log (memory
// only), as the library default; the configuration package defaults to
// fsync.
func DefaultLogConfig() LogConfig {
	return LogConfig{Durability: wal.None, SyncInterval: 10 * time.Millisecond, MaxBytes: 1 << 30}
}

// Enabled reports whether the agent keeps a log.
func (c LogConfig) Enabled() bool { return c.Durability != "" && c.Durability != wal.None }

// minLogBytes is the smallest intake budget: four minimal segments.
const minLogBytes = 256 << 10

// Validate reports every problem with c.
func (c LogConfig) Validate() error {
	if !c.Enabled() {
		return nil
	}
	var errs []error
	if _, err := wal.ParseDurability(string(c.Durability)); err != nil {
		errs = append(errs, fmt.Errorf("log %w", err))
	}
	if c.Dir == "" {
		errs = append(errs, errors.New("log dir: must not be empty with a durable log"))
	}
	if c.Durability == wal.Interval && c.SyncInterval <= 0 {
		errs = append(errs, fmt.Errorf("log sync interval %v: must be positive in interval mode", c.SyncInterval))
	}
	if c.MaxBytes < minLogBytes {
		errs = append(errs, fmt.Errorf("log max bytes %d: want at least %d", c.MaxBytes, minLogBytes))
	}
	return errors.Join(errs...)
}

// walConfig returns one log's configuration with budget max.
func (c LogConfig) walConfig(dir string, max int64) wal.Config {
	w := wal.DefaultConfig()
	w.Dir, w.Durability, w.SyncInterval, w.MaxBytes = dir, c.Durability, c.SyncInterval, max
	w.SegmentBytes = min(64<<20, max/4)
	w.MaxRecordBytes = int(min(4<<20, w.SegmentBytes-128))
	w.ObserveFsync = c.ObserveFsync
	return w
}

// Errors of the durable write path; the HTTP layer answers 503 with
// Retry-After for each.
var (
	// ErrLogFull: the intake log is at its byte budget (or the disk is
	// full); nothing was written.
	ErrLogFull = errors.New("agent log full")
	// ErrBacklog: the broker has been unreachable longer than the log's
	// budget covers; nothing was written.
	ErrBacklog = errors.New("broker unreachable and the agent's log is full")
	// ErrLogFailed: an fsync failed; the agent takes no writes until it is
	// restarted (and replays what is really on disk).
	ErrLogFailed = errors.New("agent log failed")
	// ErrRecovering: the agent is still replaying its log.
	ErrRecovering = errors.New("agent is replaying its log")
)

// LogStats are the counters of the log integration, for metrics.
type LogStats struct {
	RecordsReplayed   atomic.Uint64 // intake records applied at start
	MessagesReplayed  atomic.Uint64 // outbox messages re-published at start
	RecordsMalformed  atomic.Uint64 // records whose payload did not decode
	IntentsReplayed   atomic.Uint64 // unresolved intents found at start
	IntentsSettled    atomic.Uint64 // intents decided by reading the row
	IntentsApplied    atomic.Uint64 // settled intents counted as applied
	IntentsAmbiguous  atomic.Uint64 // settled intents whose outcome the row hides
	IntentsRefused    atomic.Uint64 // intents decided "not applied" at once: the store refused the write before it ran
	IntentsPending    atomic.Int64  // intents appended, not yet resolved
	IntentsReappended atomic.Uint64 // intent copies carried over a truncation
	WritesRefused     atomic.Uint64 // writes answered ErrLogFull, ErrBacklog or ErrLogFailed
	FlushesFailed     atomic.Uint64 // flushes whose logging failed (deltas kept)
	TruncateErrors    atomic.Uint64
}

// durable is the agent's log state.
type durable struct {
	cfg    LogConfig
	intake *wal.Log
	outbox *wal.Log
	keys   *wal.Log // idempotency keys that outlive their intake records

	recovered atomic.Bool
	fullAt    atomic.Int64 // unix ns of the last ErrFull, for Ready

	mu      sync.Mutex
	pending map[uint64]*pendingIntent // by intent id
	// settling is set while the background settler of pending intents
	// runs (see retryPending).
	settling atomic.Bool
}

// pendingIntent is an intent in the intake log without a resolution.
type pendingIntent struct {
	index   uint64 // of its latest copy in the intake log
	payload []byte
	in      intent
	// decided is set when the outcome is known but its resolution record
	// could not be appended; the flusher retries it.
	decided *resolution
	since   time.Time // when the intent was logged (this run)
	// owned is set while one goroutine decides the intent (the reaction
	// that logged it, then the flusher's retries one at a time): only the
	// owner settles it and logs its resolution. Guarded by durable.mu.
	owned bool
	// retryAt and retries pace the flusher's settles of an intent its
	// reaction could not decide (see retryPending). Guarded by durable.mu.
	retryAt time.Time
	retries int
	// key is the idempotency key of a keyed reaction (its record starts
	// with it); nil otherwise.
	key *keyClaim
}

// outboxLogBytes is the outbox log's budget: room for the in-memory bound
// twice over (a flush may pass it) plus a final flush's worth.
func outboxLogBytes(c Config) int64 {
	return max(2*c.OutboxBytes+8*int64(c.MaxMessageBytes), 4*minLogBytes)
}

// openLogs opens both logs; it replays nothing.
func openLogs(cfg Config) (*durable, []wal.Problem, error) {
	d := &durable{cfg: cfg.Log, pending: make(map[uint64]*pendingIntent)}
	in, rin, err := wal.Open(cfg.Log.walConfig(filepath.Join(cfg.Log.Dir, "intake"), cfg.Log.MaxBytes))
	if err != nil {
		return nil, nil, fmt.Errorf("cannot open intake log: %w", err)
	}
	out, rout, err := wal.Open(cfg.Log.walConfig(filepath.Join(cfg.Log.Dir, "outbox"), outboxLogBytes(cfg)))
	if err != nil {
		in.Close()
		return nil, nil, fmt.Errorf("cannot open outbox log: %w", err)
	}
	keys, rkeys, err := wal.Open(cfg.Log.walConfig(filepath.Join(cfg.Log.Dir, "keys"), keysLogBytes(cfg.Idempotency)))
	if err != nil {
		out.Close()
		in.Close()
		return nil, nil, fmt.Errorf("cannot open idempotency keys log: %w", err)
	}
	d.intake, d.outbox, d.keys = in, out, keys
	problems := append(rin.Problems, rout.Problems...)
	return d, append(problems, rkeys.Problems...), nil
}

// keysLogBytes is the keys log's budget: MaxKeys keys of the largest
// size, and three segments (the oldest, partly expired; the active one;
// the next).
func keysLogBytes(c IdempotencyConfig) int64 {
	const maxKeyRecord = maxKeyIDBytes + 48
	seg := int64(64 << 20)
	return max(int64(c.MaxKeys)*maxKeyRecord+3*seg, 4*minLogBytes)
}

func (d *durable) close() error {
	return errors.Join(d.outbox.Close(), d.intake.Close(), d.keys.Close())
}

// mapLogErr turns a log error into the agent's sentinel.
func (a *Agent) mapLogErr(err error) error {
	switch {
	case errors.Is(err, wal.ErrFull):
		a.log.fullAt.Store(time.Now().UnixNano())
		a.logStats.WritesRefused.Add(1)
		if a.flusher.deferring.Load() {
			return fmt.Errorf("%w: %d messages wait for the broker: %w", ErrBacklog, a.stats.OutboxMessages.Load(), err)
		}
		return fmt.Errorf("%w: %w", ErrLogFull, err)
	case errors.Is(err, wal.ErrTooLarge):
		// A request larger than a segment: the budget is configured
		// below what one request may need.
		a.logStats.WritesRefused.Add(1)
		return fmt.Errorf("%w: one request does not fit in the log's segments (raise the log's byte budget): %w", ErrLogFull, err)
	case errors.Is(err, wal.ErrFailed):
		a.logStats.WritesRefused.Add(1)
		return fmt.Errorf("%w: %w", ErrLogFailed, err)
	case errors.Is(err, wal.ErrClosed):
		return ErrStopping
	}
	return err
}

// logReady reports why the log stops the agent being ready, or nil.
func (a *Agent) logReady() error {
	d := a.log
	if d == nil {
		return nil
	}
	if !d.recovered.Load() {
		return ErrRecovering
	}
	if err := d.intake.Stats().Failed; err != nil {
		return fmt.Errorf("%w: %w", ErrLogFailed, err)
	}
	if err := d.outbox.Stats().Failed; err != nil {
		return fmt.Errorf("%w: %w", ErrLogFailed, err)
	}
	if t := d.fullAt.Load(); t != 0 && time.Since(time.Unix(0, t)) < 2*time.Second {
		if a.flusher.deferring.Load() {
			return ErrBacklog
		}
		return ErrLogFull
	}
	return nil
}

// Recover replays the logs: it re-publishes (queues, first) the outbox's
// messages with their original ids, adds the intake records that no logged
// flush carries to the counters, settles every intent that has no
// resolution against the store, and only then truncates the intake log
// below what the outbox carries. It must be called once before Start when
// the agent has a log; until it returns nil, writes and Ready answer
// ErrRecovering. Without a log it does nothing.
//
// The steps, in this order (the package documentation says why):
// requeueOutbox, replayKeys, replayIntake, settleIntents, truncateCovered.
func (a *Agent) Recover(ctx context.Context) error {
	d := a.log
	if d == nil || d.recovered.Load() {
		return nil
	}
	covered, requeued, err := a.requeueOutbox()
	if err != nil {
		return err
	}
	if err := a.replayKeys(); err != nil {
		return fmt.Errorf("cannot replay idempotency keys log: %w", err)
	}
	ir, err := a.replayIntake(covered)
	if err != nil {
		return err
	}
	if err := a.settleIntents(ctx, ir); err != nil {
		return err
	}
	if err := a.truncateCovered(covered); err != nil {
		return err
	}
	d.recovered.Store(true)
	a.logger.Info("log replayed", "outbox_messages", requeued, "intake_records", a.logStats.RecordsReplayed.Load(),
		"idempotency_keys", a.keys.st.Keys.Load(),
		"intents_settled", a.logStats.IntentsSettled.Load(), "intents_ambiguous", a.logStats.IntentsAmbiguous.Load())
	return nil
}

// requeueOutbox queues every message of the outbox log, each one whose
// ack the agent did not see, with its original id, and returns the
// highest intake index they cover and how many it queued. It relies on
// running before any flush, so that a run's messages of a partition reach
// the stream in increasing (epoch, seq). A record that does not decode is
// counted, logged and not re-published.
func (a *Agent) requeueOutbox() (covered uint64, requeued int, err error) {
	var msgs []outMsg
	err = a.log.outbox.Replay(0, func(i uint64, p []byte) error {
		m, err := decodeOutRecord(p)
		if err != nil {
			a.logStats.RecordsMalformed.Add(1)
			a.logger.Error("outbox record does not decode; not re-published", "index", i, "err", err)
			return nil
		}
		covered = max(covered, m.covered)
		msgs = append(msgs, outMsg{partition: m.partition, id: m.id, data: append([]byte(nil), m.data...), sums: m.sums, logIndex: i})
		return nil
	})
	if err != nil {
		return 0, 0, fmt.Errorf("cannot replay outbox log: %w", err)
	}
	if len(msgs) > 0 {
		a.flusher.enqueue(msgs)
		a.logStats.MessagesReplayed.Add(uint64(len(msgs)))
	}
	return covered, len(msgs), nil
}

// intakeReplay is what replaying the intake log collects: the reaction
// intents, each with the index of its latest copy, in the order of their
// first copies, and the ids of the intents that have a resolution.
type intakeReplay struct {
	covered  uint64 // the lowest intake index no logged flush carries
	intents  map[uint64]*pendingIntent
	order    []uint64
	resolved map[uint64]bool
}

// replayIntake replays the intake log (replayRecord), adding to the
// counters what the logged flushes (the outbox, up to covered) do not
// carry, and returns the intents and resolutions it found.
func (a *Agent) replayIntake(covered uint64) (*intakeReplay, error) {
	ir := &intakeReplay{covered: covered, intents: make(map[uint64]*pendingIntent), resolved: make(map[uint64]bool)}
	err := a.log.intake.Replay(0, func(i uint64, p []byte) error {
		a.replayRecord(ir, i, p)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("cannot replay intake log: %w", err)
	}
	return ir, nil
}

// replayRecord replays intake record i: its write (replayWrite) and the
// idempotency key it carries, if answered, into the key table; a key
// alone is a reaction that changed nothing. A record that does not decode
// is counted and not applied, and logged when its write is what fails.
func (a *Agent) replayRecord(ir *intakeReplay, i uint64, p []byte) {
	if len(p) == 0 {
		a.logStats.RecordsMalformed.Add(1)
		return
	}
	orig := p
	p, key, answered := splitKeyed(p)
	if len(p) == 0 {
		if answered == nil {
			a.logStats.RecordsMalformed.Add(1)
			return
		}
		// A key alone: a reaction that changed nothing.
		a.keys.restore(answered, 0, i)
		a.logStats.RecordsReplayed.Add(1)
		return
	}
	if err := a.replayWrite(ir, i, p, orig, key); err != nil {
		a.logStats.RecordsMalformed.Add(1)
		a.logger.Error("intake record does not decode; not applied", "index", i, "err", err)
		return
	}
	if answered != nil {
		a.keys.restore(answered, 0, i)
	}
	a.logStats.RecordsReplayed.Add(1)
}

// splitKeyed splits an intake record that starts with an idempotency key
// (recKeyed) into the write it guards and the key: as key while the write
// had no answer, as answered once it had. A key that does not decode gives
// a write no record type matches, which replayWrite reports. A record
// without a key is all write.
func splitKeyed(p []byte) (write []byte, key *keyClaim, answered *keyRecord) {
	if p[0] != recKeyed {
		return p, nil, nil
	}
	k, write, err := decodeKeyed(p)
	switch {
	case err != nil:
		return []byte{0}, nil, nil // reported by replayWrite
	case k.answered:
		return write, nil, &k
	default:
		return write, &keyClaim{rec: k}, nil
	}
}

// replayWrite replays the write p of intake record i (orig is the whole
// record, key its unanswered idempotency key or nil). Increments, and the
// deltas of applied resolutions, at or above ir.covered are added to the
// counters: a logged flush carries those below. Intents and resolutions
// are collected at every index, for settleIntents.
func (a *Agent) replayWrite(ir *intakeReplay, i uint64, p, orig []byte, key *keyClaim) error {
	switch p[0] {
	case recIncrements:
		if i >= ir.covered {
			return decodeIncrements(p, func(k Key, delta int64) { a.counters.Add(k, delta) })
		}
		return nil
	case recIntent, recNamedIntent:
		in, err := decodeIntent(p)
		if err != nil {
			return err
		}
		if pi, ok := ir.intents[in.id]; ok {
			pi.index = i
		} else {
			ir.intents[in.id] = &pendingIntent{index: i, payload: append([]byte(nil), orig...), in: in, since: time.Now(), key: key}
			ir.order = append(ir.order, in.id)
		}
		return nil
	case recResolution:
		rs, err := decodeResolution(p)
		if err != nil {
			return err
		}
		ir.resolved[rs.id] = true
		if i >= ir.covered && rs.applied {
			a.addDeltas(rs.content, rs.deltas)
		}
		return nil
	default:
		return errRecord
	}
}

// settleIntents settles the intents without a resolution, in the order
// they were logged (settleReplayed).
func (a *Agent) settleIntents(ctx context.Context, ir *intakeReplay) error {
	for _, id := range ir.order {
		if ir.resolved[id] {
			continue
		}
		if err := a.settleReplayed(ctx, ir.intents[id]); err != nil {
			return err
		}
	}
	return nil
}

// settleReplayed decides an intent logged before the restart against the
// row (settle) and appends its resolution, counting its deltas and keeping
// its key inside the append: before truncateCovered can drop the intent.
func (a *Agent) settleReplayed(ctx context.Context, pi *pendingIntent) error {
	a.logStats.IntentsReplayed.Add(1)
	rs, err := a.settle(ctx, &pi.in)
	if err != nil {
		return fmt.Errorf("cannot settle the reaction of user %q on %q logged before the restart: %w", pi.in.user, pi.in.content, err)
	}
	rec, keep := a.keyedResolution(pi, &rs, appendResolution(nil, &rs))
	if _, err := a.log.intake.AppendApply(context.Background(), rec, func(i uint64) {
		a.addDeltas(rs.content, rs.deltas)
		keep(i)
	}); err != nil {
		return fmt.Errorf("cannot log a settled reaction: %w", err)
	}
	return nil
}

// truncateCovered drops the intake records below covered, which a logged
// flush carries (a crash between logging a flush and truncating the intake
// log below it leaves them), once their keys are in the keys log
// (moveKeys). It relies on every intent among them being settled.
func (a *Agent) truncateCovered(covered uint64) error {
	d := a.log
	if next := d.intake.Stats().NextIndex; covered > next {
		a.logger.Warn("outbox covers intake records the log does not have (power cut in interval mode?)", "covered", covered, "next", next)
		covered = next
	}
	a.moveKeys(covered)
	if err := d.intake.TruncateBefore(covered); err != nil {
		return fmt.Errorf("cannot truncate intake log: %w", err)
	}
	return nil
}

// addDeltas adds a reaction's deltas to the counters of content.
func (a *Agent) addDeltas(content string, deltas []Delta) {
	for _, d := range deltas {
		a.counters.Add(Key{ContentID: content, Counter: d.Counter, Region: d.Region}, d.Delta)
	}
}

// sameRow reports whether row is x: the same incarnation, version, action
// and recording region, written at the same microsecond (the precision
// every store keeps). The time tells this agent's write from another
// agent's identical change of the same row (same region, same version),
// which would otherwise be taken for ours and counted twice.
func sameRow(row, x engagement.Reaction) bool {
	return row.Incarnation == x.Incarnation && row.Version == x.Version && row.Action == x.Action && row.Region == x.Region &&
		row.UpdatedAt.UnixMicro() == x.UpdatedAt.UnixMicro()
}

// settle decides an intent from the row as it is now. A named intent
// (its write carries the intent id as token, see intent.named) is decided
// by the row's writers, which a store keeps across undos:
//   - the token is among them → applied;
//   - the row is still the row the intent was read from (for an insert: no
//     row, with the writers read then) → the same compare-and-set is sent
//     again, with the same token, as a delayed write that was never
//     acknowledged, and its answer decides. "Not applied" is never taken
//     from the row alone: the first compare-and-set may still be queued in
//     the store (its settle failed, as while Cassandra is frozen) and apply
//     later; once the repeat applies, or loses to another write, the
//     original's condition can never hold again;
//   - the row moved on without it → not applied, as long as no later write
//     can have dropped the token from the writers
//     (engagement.NotWrittenBy: a settle within WriterHistory − WriterSkew
//     of the intent); after that → ambiguous: not counted, counted in
//     IntentsAmbiguous and logged; the recount repairs the item's totals.
//
// The row is read at serial consistency when the store can (SerialReader):
// a row read from one data centre may not yet show a write applied through
// another, and would be taken for the row as read, or for one that moved
// on without the write.
//
// An intent logged before writer tokens is decided by comparing rows: the
// intended next row (for an undo: no row) → applied; the row as read →
// as above; anything else → ambiguous. An undo whose row is gone is then
// taken as applied.
func (a *Agent) settle(ctx context.Context, in *intent) (resolution, error) {
	rs := resolution{id: in.id, content: in.content}
	read := a.reactions.GetReaction
	if sr, ok := a.reactions.(SerialReader); ok {
		read = sr.GetReactionSerial
	}
	for try := 0; try < 3; try++ {
		row, found, err := read(ctx, in.user, in.content)
		if err != nil {
			return rs, fmt.Errorf("cannot read reaction: %w", err)
		}
		isNext, isPrev := false, false
		switch in.op {
		case opInsert:
			isNext, isPrev = found && sameRow(row, in.next), !found
			if in.named {
				isPrev = isPrev && slices.Equal(row.Writers, in.prevWriters)
			}
		case opUpdate:
			isNext, isPrev = found && sameRow(row, in.next), found && sameRow(row, in.prev)
		case opDelete:
			isNext, isPrev = !found, found && sameRow(row, in.prev)
		}
		if in.named {
			isNext = row.WrittenBy(in.id)
		}
		switch {
		case isNext:
			a.logStats.IntentsSettled.Add(1)
			a.logStats.IntentsApplied.Add(1)
			rs.applied = true
			rs.deltas = a.intentDeltas(in)
			return rs, nil
		case isPrev:
			applied, err := a.redo(ctx, in, row)
			if applied {
				if err != nil {
					a.logger.Warn("replayed reaction applied with a store warning", "user", in.user, "content", in.content, "err", err)
				}
				a.logStats.IntentsSettled.Add(1)
				a.logStats.IntentsApplied.Add(1)
				rs.applied = true
				rs.deltas = a.intentDeltas(in)
				return rs, nil
			}
			if err != nil {
				return rs, fmt.Errorf("cannot redo reaction: %w", err)
			}
			continue // lost the compare-and-set: decide from the row again
		case in.named && row.NotWrittenBy(in.id, time.Now()):
			a.logStats.IntentsSettled.Add(1)
			return rs, nil
		default:
			a.logStats.IntentsSettled.Add(1)
			a.logStats.IntentsAmbiguous.Add(1)
			rs.ambiguous = true
			a.logger.Warn("reaction outcome ambiguous: the row moved on; not counted, the recount repairs the totals",
				"user", in.user, "content", in.content, "intended_action", in.action, "row_version", row.Version, "row_found", found)
			return rs, nil
		}
	}
	// Each redo lost to a competitor and the row came back to the row as
	// read (it cannot: versions only grow, and markers carry new
	// incarnations; but were it so, the next try decides).
	return rs, fmt.Errorf("%w: the row kept its state across %d redos", store.ErrContention, 3)
}

// redo sends an intent's compare-and-set again, from row (the row as it is
// now, equal to the one the intent read), named by the intent's id.
func (a *Agent) redo(ctx context.Context, in *intent, row engagement.Reaction) (bool, error) {
	var token uint64
	if in.named {
		token = in.id
	}
	next := in.next
	next.Token = token
	switch in.op {
	case opInsert:
		return a.reactions.InsertReaction(ctx, next)
	case opUpdate:
		return a.reactions.UpdateReaction(ctx, row, next)
	default:
		row.Token = token
		return a.reactions.DeleteReaction(ctx, row)
	}
}

// intentDeltas are the counter deltas of an intent's transition.
func (a *Agent) intentDeltas(in *intent) []Delta {
	prev, prevRegion := engagement.ActionNone, ""
	if in.prevFound {
		prev, prevRegion = in.prev.Action, in.prev.Region
	}
	var buf [2]Delta
	return append([]Delta(nil), Transition(prev, prevRegion, in.action, in.region, &buf)...)
}

// LogStats returns the log integration's counters; nil without a log.
func (a *Agent) LogStats() *LogStats { return &a.logStats }

// IntakeLogStats and OutboxLogStats return the logs' statistics; ok is
// false without a log.
func (a *Agent) IntakeLogStats() (wal.Stats, bool) {
	if a.log == nil {
		return wal.Stats{}, false
	}
	return a.log.intake.Stats(), true
}

// OutboxLogStats: see IntakeLogStats.
func (a *Agent) OutboxLogStats() (wal.Stats, bool) {
	if a.log == nil {
		return wal.Stats{}, false
	}
	return a.log.outbox.Stats(), true
}
