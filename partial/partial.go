package partial

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/cespare/xxhash/v2"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/internal/pbwire"
)

// Version is the schema version this package writes and reads.
const Version = 1

// ErrMalformed is wrapped by every Decode error.
var ErrMalformed = errors.New("malformed partial-sum message")

// Batch is one partial-sum message.
type Batch struct {
	Agent     string
	Region    string
	Epoch     uint64
	Seq       uint64
	Partition uint32
	FlushedAt time.Time // kept to the millisecond on the wire
	Sums      []Sum
	// Tops are the agent's trending lists for this partition, computed at
	// FlushedAt (see TopList). A message carries them after its Sums; a
	// flush puts them in the last message of the partition.
	Tops []TopList
	// More says that another message of the same flush and partition
	// follows this one (a flush too big for one message): a reader that
	// acts on a flush's lists waits for the last message.
	More bool
}

// TopList is one agent's trending list of one counter over one window,
// cut to the items of the batch's partition: each item the agent's summary
// tracks among the list's first entries (more than the K a reader asks for)
// with its count and error bound (its true count is in [Count-Error,
// Count]), and Floor, which bounds the agent's count of every item of the
// partition the list does not name. The counts are of the agent's own
// region, as of Batch.FlushedAt.
type TopList struct {
	Counter string
	Window  string // "5m", "1h", "24h"
	Floor   int64
	Items   []TopItem
}

// TopItem is one item of a TopList.
type TopItem struct {
	ContentID string
	Count     int64 // 1..2^63-1
	Error     int64 // 0..Count
}

// Sum is the delta one agent accumulated for one counter of one item,
// attributed to one region.
type Sum struct {
	ContentID string
	Counter   string
	Region    string
	Delta     int64
}

// MsgID returns the broker de-duplication id: agent/epoch/seq/partition.
func (b *Batch) MsgID() string {
	buf := make([]byte, 0, len(b.Agent)+48)
	buf = append(buf, b.Agent...)
	buf = append(buf, '/')
	buf = strconv.AppendUint(buf, b.Epoch, 10)
	buf = append(buf, '/')
	buf = strconv.AppendUint(buf, b.Seq, 10)
	buf = append(buf, '/')
	buf = strconv.AppendUint(buf, uint64(b.Partition), 10)
	return string(buf)
}

// PartitionOf returns the partition of contentID among n partitions.
func PartitionOf(contentID string, n int) uint32 {
	return uint32(xxhash.Sum64String(contentID) % uint64(n))
}

// Field numbers.
const (
	fVersion   = 1
	fAgent     = 2
	fRegion    = 3
	fEpoch     = 4
	fSeq       = 5
	fPartition = 6
	fFlushedAt = 7
	fSums      = 8
	fTops      = 9
	fMore      = 10

	fSumContent = 1
	fSumCounter = 2
	fSumRegion  = 3
	fSumDelta   = 4

	fTopCounter = 1
	fTopWindow  = 2
	fTopFloor   = 3
	fTopItems   = 4

	fItemContent = 1
	fItemCount   = 2
	fItemError   = 3
)

// MaxWindowLen is the longest window name a TopList may carry.
const MaxWindowLen = 8

// Append appends the encoding of b to dst and returns the extended slice.
// A Sum whose Region equals b.Region is written without it.
func Append(dst []byte, b *Batch) []byte {
	dst = appendUint(dst, fVersion, Version)
	dst = appendString(dst, fAgent, b.Agent)
	dst = appendString(dst, fRegion, b.Region)
	dst = appendUint(dst, fEpoch, b.Epoch)
	dst = appendUint(dst, fSeq, b.Seq)
	dst = appendUint(dst, fPartition, uint64(b.Partition))
	if !b.FlushedAt.IsZero() {
		dst = protowire.AppendTag(dst, fFlushedAt, protowire.VarintType)
		dst = protowire.AppendVarint(dst, uint64(b.FlushedAt.UnixMilli()))
	}
	for i := range b.Sums {
		s := &b.Sums[i]
		region := wireRegion(s, b.Region)
		dst = appendLen(dst, fSums, sumSize(s, region))
		dst = appendString(dst, fSumContent, s.ContentID)
		dst = appendString(dst, fSumCounter, s.Counter)
		dst = appendString(dst, fSumRegion, region)
		dst = appendUint(dst, fSumDelta, protowire.EncodeZigZag(s.Delta))
	}
	for i := range b.Tops {
		dst = appendTop(dst, &b.Tops[i])
	}
	if b.More {
		dst = appendUint(dst, fMore, 1)
	}
	return dst
}

func appendTop(dst []byte, t *TopList) []byte {
	dst = appendLen(dst, fTops, topBodySize(t))
	dst = appendString(dst, fTopCounter, t.Counter)
	dst = appendString(dst, fTopWindow, t.Window)
	dst = appendUint(dst, fTopFloor, uint64(t.Floor))
	for i := range t.Items {
		it := &t.Items[i]
		dst = appendLen(dst, fTopItems, itemSize(it))
		dst = appendString(dst, fItemContent, it.ContentID)
		dst = appendUint(dst, fItemCount, uint64(it.Count))
		dst = appendUint(dst, fItemError, uint64(it.Error))
	}
	return dst
}

// TopListSize returns how many bytes t adds to an encoded batch.
func TopListSize(t *TopList) int {
	return protowire.SizeTag(fTops) + protowire.SizeBytes(topBodySize(t))
}

func topBodySize(t *TopList) int {
	n := stringSize(fTopCounter, t.Counter) + stringSize(fTopWindow, t.Window) + uintSize(fTopFloor, uint64(t.Floor))
	for i := range t.Items {
		n += protowire.SizeTag(fTopItems) + protowire.SizeBytes(itemSize(&t.Items[i]))
	}
	return n
}

func itemSize(it *TopItem) int {
	return stringSize(fItemContent, it.ContentID) + uintSize(fItemCount, uint64(it.Count)) + uintSize(fItemError, uint64(it.Error))
}

func uintSize(num protowire.Number, v uint64) int {
	if v == 0 {
		return 0
	}
	return protowire.SizeTag(num) + protowire.SizeVarint(v)
}

// SumSize returns how many bytes s adds to an encoded batch of region
// batchRegion, so that callers can cut messages to a size.
func SumSize(s *Sum, batchRegion string) int {
	return protowire.SizeTag(fSums) + protowire.SizeBytes(sumSize(s, wireRegion(s, batchRegion)))
}

// wireRegion is the region field written for s in a batch of region
// batchRegion: empty when it is the batch's own.
func wireRegion(s *Sum, batchRegion string) string {
	if s.Region == batchRegion {
		return ""
	}
	return s.Region
}

func sumSize(s *Sum, region string) int {
	return stringSize(fSumContent, s.ContentID) + stringSize(fSumCounter, s.Counter) + stringSize(fSumRegion, region) +
		uintSize(fSumDelta, protowire.EncodeZigZag(s.Delta))
}

func stringSize(num protowire.Number, s string) int {
	if s == "" {
		return 0
	}
	return protowire.SizeTag(num) + protowire.SizeBytes(len(s))
}

// appendString appends a string field, left out when empty
// (pbwire.AppendString).
func appendString(dst []byte, num protowire.Number, s string) []byte {
	return pbwire.AppendString(dst, num, s)
}

// appendLen appends the tag and length of a length-delimited field of
// size bytes; the caller appends the bytes.
func appendLen(dst []byte, num protowire.Number, size int) []byte {
	dst = protowire.AppendTag(dst, num, protowire.BytesType)
	return protowire.AppendVarint(dst, uint64(size))
}

// appendUint appends a varint field, left out when 0 (pbwire.AppendUint).
func appendUint(dst []byte, num protowire.Number, v uint64) []byte {
	return pbwire.AppendUint(dst, num, v)
}

// Decode parses data into b, reusing b.Sums' backing array. Every Sum gets
// its Region filled in (the batch region when the wire left it empty). It
// rejects other schema versions, malformed wire data, a known field with
// the wrong wire type, invalid ids, counter and region names, and zero
// deltas.
func Decode(data []byte, b *Batch) error {
	*b = Batch{Sums: b.Sums[:0], Tops: b.Tops[:0]}
	var version uint64
	var sawVersion bool
	err := walk(data, batchFields, func(num protowire.Number, v uint64, raw []byte) error {
		switch num {
		case fVersion:
			version, sawVersion = v, true
		case fAgent:
			b.Agent = string(raw)
		case fRegion:
			b.Region = string(raw)
		case fEpoch:
			b.Epoch = v
		case fSeq:
			b.Seq = v
		case fPartition:
			if v > math.MaxUint32 {
				return fmt.Errorf("partition %d out of range", v)
			}
			b.Partition = uint32(v)
		case fFlushedAt:
			b.FlushedAt = time.UnixMilli(int64(v))
		case fSums:
			s, err := decodeSum(raw)
			if err != nil {
				return fmt.Errorf("sum %d: %w", len(b.Sums), err)
			}
			b.Sums = append(b.Sums, s)
		case fTops:
			t, err := decodeTop(raw)
			if err != nil {
				return fmt.Errorf("top list %d: %w", len(b.Tops), err)
			}
			for i := range b.Tops {
				if b.Tops[i].Counter == t.Counter && b.Tops[i].Window == t.Window {
					return fmt.Errorf("top list %d: counter %q window %q listed twice", len(b.Tops), t.Counter, t.Window)
				}
			}
			b.Tops = append(b.Tops, t)
		case fMore:
			b.More = v != 0
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if !sawVersion || version != Version {
		return fmt.Errorf("%w: schema version %d, want %d", ErrMalformed, version, Version)
	}
	if !engagement.ValidID(b.Agent) {
		return fmt.Errorf("%w: invalid agent id %q", ErrMalformed, b.Agent)
	}
	if !engagement.ValidRegion(b.Region) {
		return fmt.Errorf("%w: invalid region %q", ErrMalformed, b.Region)
	}
	for i := range b.Sums {
		s := &b.Sums[i]
		if s.Region == "" {
			s.Region = b.Region
		} else if !engagement.ValidRegion(s.Region) {
			return fmt.Errorf("%w: sum %d: invalid region %q", ErrMalformed, i, s.Region)
		}
	}
	return nil
}

func decodeSum(data []byte) (Sum, error) {
	var s Sum
	err := walk(data, sumFields, func(num protowire.Number, v uint64, raw []byte) error {
		switch num {
		case fSumContent:
			s.ContentID = string(raw)
		case fSumCounter:
			s.Counter = string(raw)
		case fSumRegion:
			s.Region = string(raw)
		case fSumDelta:
			s.Delta = protowire.DecodeZigZag(v)
		}
		return nil
	})
	switch {
	case err != nil:
		return s, err
	case !engagement.ValidID(s.ContentID):
		return s, fmt.Errorf("invalid content id %q", s.ContentID)
	case !engagement.ValidCounter(s.Counter):
		return s, fmt.Errorf("invalid counter %q", s.Counter)
	case s.Delta == 0:
		return s, errors.New("zero delta")
	}
	return s, nil
}

func decodeTop(data []byte) (TopList, error) {
	var t TopList
	var floor uint64
	err := walk(data, topFields, func(num protowire.Number, v uint64, raw []byte) error {
		switch num {
		case fTopCounter:
			t.Counter = string(raw)
		case fTopWindow:
			t.Window = string(raw)
		case fTopFloor:
			floor = v
		case fTopItems:
			it, err := decodeItem(raw)
			if err != nil {
				return fmt.Errorf("item %d: %w", len(t.Items), err)
			}
			t.Items = append(t.Items, it)
		}
		return nil
	})
	switch {
	case err != nil:
		return t, err
	case !engagement.ValidCounter(t.Counter):
		return t, fmt.Errorf("invalid counter %q", t.Counter)
	case !validWindow(t.Window):
		return t, fmt.Errorf("invalid window %q", t.Window)
	case floor > math.MaxInt64:
		return t, fmt.Errorf("floor %d out of range", floor)
	}
	t.Floor = int64(floor)
	if len(t.Items) > 1 {
		seen := make(map[string]struct{}, len(t.Items))
		for i := range t.Items {
			if _, dup := seen[t.Items[i].ContentID]; dup {
				return t, fmt.Errorf("item %q listed twice", t.Items[i].ContentID)
			}
			seen[t.Items[i].ContentID] = struct{}{}
		}
	}
	return t, nil
}

func decodeItem(data []byte) (TopItem, error) {
	var it TopItem
	var count, errBound uint64
	err := walk(data, itemFields, func(num protowire.Number, v uint64, raw []byte) error {
		switch num {
		case fItemContent:
			it.ContentID = string(raw)
		case fItemCount:
			count = v
		case fItemError:
			errBound = v
		}
		return nil
	})
	switch {
	case err != nil:
		return it, err
	case !engagement.ValidID(it.ContentID):
		return it, fmt.Errorf("invalid content id %q", it.ContentID)
	case count < 1 || count > math.MaxInt64:
		return it, fmt.Errorf("count %d is not in 1..%d", count, int64(math.MaxInt64))
	case errBound > count:
		return it, fmt.Errorf("error bound %d exceeds count %d", errBound, count)
	}
	it.Count, it.Error = int64(count), int64(errBound)
	return it, nil
}

// fields names the known fields of one message by their wire type: bit n
// of varints (bytes) is set when field n is a varint (length-delimited).
// Every field number of this schema is below 64.
type fields struct{ varints, bytes uint64 }

// The known fields of each message, as partial.proto declares them.
var (
	batchFields = fields{
		varints: bits(fVersion, fEpoch, fSeq, fPartition, fFlushedAt, fMore),
		bytes:   bits(fAgent, fRegion, fSums, fTops),
	}
	sumFields  = fields{varints: bits(fSumDelta), bytes: bits(fSumContent, fSumCounter, fSumRegion)}
	topFields  = fields{varints: bits(fTopFloor), bytes: bits(fTopCounter, fTopWindow, fTopItems)}
	itemFields = fields{varints: bits(fItemCount, fItemError), bytes: bits(fItemContent)}
)

func bits(nums ...protowire.Number) uint64 {
	var m uint64
	for _, n := range nums {
		m |= 1 << n
	}
	return m
}

// wireType returns the wire type of known field num, and false for a
// field that known does not name.
func (known fields) wireType(num protowire.Number) (protowire.Type, bool) {
	if num >= 64 {
		return 0, false
	}
	switch bit := uint64(1) << num; {
	case known.varints&bit != 0:
		return protowire.VarintType, true
	case known.bytes&bit != 0:
		return protowire.BytesType, true
	}
	return 0, false
}

// walk calls fn for every known field of data, in order, with the value
// of a varint or the bytes of a length-delimited field (raw aliases data).
// It skips unknown fields, as protobuf readers do, so that fields can be
// added, and rejects a known field with another wire type: skipping it
// would read it as its zero value (an error bound of 0 claims an exact
// count).
func walk(data []byte, known fields, fn func(num protowire.Number, v uint64, raw []byte) error) error {
	for len(data) > 0 {
		num, typ, n := protowire.ConsumeTag(data)
		if n < 0 {
			return protowire.ParseError(n)
		}
		data = data[n:]
		want, ok := known.wireType(num)
		if !ok {
			n = protowire.ConsumeFieldValue(num, typ, data)
			if n < 0 {
				return fmt.Errorf("field %d: %w", num, protowire.ParseError(n))
			}
			data = data[n:]
			continue
		}
		if typ != want {
			return fmt.Errorf("field %d has wire type %d, want %d", num, typ, want)
		}
		var (
			v   uint64
			raw []byte
		)
		if typ == protowire.VarintType {
			v, n = protowire.ConsumeVarint(data)
		} else {
			raw, n = protowire.ConsumeBytes(data)
		}
		if n < 0 {
			return fmt.Errorf("field %d: %w", num, protowire.ParseError(n))
		}
		data = data[n:]
		if err := fn(num, v, raw); err != nil {
			return err
		}
	}
	return nil
}

// validWindow reports whether s can name a window: 1..MaxWindowLen bytes
// of lower-case letters and digits. Which windows a reader keeps is its
// own business.
func validWindow(s string) bool {
	if len(s) == 0 || len(s) > MaxWindowLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
