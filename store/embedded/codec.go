package embedded

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/edgecount/edgecount/engagement"
)

// formatV1 is the leading byte of every value this version writes.
const formatV1 = 1

// sep joins the parts of a key. No id, scope, counter or window contains it.
const sep = 0x00

// maxKeyPart bounds one part of a key; bbolt's own key limit is 32 KiB.
const maxKeyPart = 1024

// validKeyPart reports whether s can be one part of a key: non-empty, short,
// and free of the separator byte.
func validKeyPart(s string) bool {
	if len(s) == 0 || len(s) > maxKeyPart {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] == sep {
			return false
		}
	}
	return true
}

// key joins parts with sep.
func key(parts ...string) []byte {
	n := len(parts) - 1
	for _, p := range parts {
		n += len(p)
	}
	k := make([]byte, 0, n)
	for i, p := range parts {
		if i > 0 {
			k = append(k, sep)
		}
		k = append(k, p...)
	}
	return k
}

// prefix returns part followed by sep: the common prefix of all keys whose
// first part is part.
func prefix(part string) []byte {
	k := make([]byte, 0, len(part)+1)
	k = append(k, part...)
	return append(k, sep)
}

func appendTime(dst []byte, t time.Time) []byte {
	dst = binary.AppendVarint(dst, t.Unix())
	return binary.AppendUvarint(dst, uint64(t.Nanosecond()))
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// formatReactionV2 leads a reaction row with writer tokens.
const formatReactionV2 = 2

// Reaction row: format, action, varint version, fixed64 incarnation, time,
// (format 2 only) the writers, region (the rest of the value). A row
// without writers is written in format 1, as before writer tokens.
func encodeReaction(r *engagement.Reaction) []byte {
	dst := make([]byte, 0, 2+binary.MaxVarintLen64+8+3*binary.MaxVarintLen64+8*len(r.Writers)+len(r.Region))
	format := byte(formatV1)
	if len(r.Writers) > 0 {
		format = formatReactionV2
	}
	dst = append(dst, format, byte(r.Action))
	dst = binary.AppendVarint(dst, r.Version)
	dst = binary.LittleEndian.AppendUint64(dst, r.Incarnation)
	dst = appendTime(dst, r.UpdatedAt)
	if format == formatReactionV2 {
		dst = appendTokens(dst, r.Writers)
	}
	return append(dst, r.Region...)
}

// decodeReaction fills the stored fields of r (not its ids) from v.
func decodeReaction(v []byte, r *engagement.Reaction) error {
	d := decoder{buf: v}
	v2 := d.formatOf(formatV1, formatReactionV2) == formatReactionV2
	r.Action = d.action()
	r.Version = d.varint()
	r.Incarnation = d.fixed64()
	r.UpdatedAt = d.time()
	r.Writers = nil
	if v2 {
		if r.Writers = d.tokens(); len(r.Writers) == 0 && d.err == nil {
			d.fail(errors.New("format 2 row without writers"))
		}
	}
	r.Region = d.rest()
	return d.done("reaction")
}

// appendTokens appends a uvarint count and the tokens as fixed64s.
func appendTokens(dst []byte, tokens []uint64) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(tokens)))
	for _, t := range tokens {
		dst = binary.LittleEndian.AppendUint64(dst, t)
	}
	return dst
}

// tokens reads what appendTokens wrote: at most engagement.MaxWritersKept.
func (d *decoder) tokens() []uint64 {
	n := d.count(8)
	if n > engagement.MaxWritersKept {
		d.fail(fmt.Errorf("%d writer tokens, above %d", n, engagement.MaxWritersKept))
		return nil
	}
	if n == 0 {
		return nil
	}
	out := make([]uint64, n)
	for i := range out {
		out[i] = d.fixed64()
	}
	return out
}

// Undone entry: format, the writers of the deleted row.
func encodeUndone(writers []uint64) []byte {
	return appendTokens([]byte{formatV1}, writers)
}

func decodeUndone(v []byte) ([]uint64, error) {
	d := decoder{buf: v}
	d.format()
	w := d.tokens()
	return w, d.done("undone entry")
}

// Index entry: format, action, region (the rest of the value).
func encodeIndex(r *engagement.Reaction) []byte {
	dst := make([]byte, 0, 2+len(r.Region))
	dst = append(dst, formatV1, byte(r.Action))
	return append(dst, r.Region...)
}

// decodeIndex returns the action and the region of an index entry. The
// region aliases v and is valid only inside the transaction.
func decodeIndex(v []byte) (engagement.Action, []byte, error) {
	d := decoder{buf: v}
	d.format()
	a := d.action()
	region := d.restBytes()
	return a, region, d.done("reaction index entry")
}

// Stats row: format, varint likes, varint dislikes, uvarint last sequence,
// time, uvarint counter count, then per counter (sorted by name) its
// length-prefixed name and varint value.
func encodeStats(s *engagement.Stats) []byte {
	n := 1 + 5*binary.MaxVarintLen64
	names := make([]string, 0, len(s.Counters))
	for name := range s.Counters {
		names = append(names, name)
		n += 1 + len(name) + binary.MaxVarintLen64
	}
	slices.Sort(names)
	dst := make([]byte, 0, n)
	dst = append(dst, formatV1)
	dst = binary.AppendVarint(dst, s.Likes)
	dst = binary.AppendVarint(dst, s.Dislikes)
	dst = binary.AppendUvarint(dst, s.LastSeq)
	dst = appendTime(dst, s.UpdatedAt)
	dst = binary.AppendUvarint(dst, uint64(len(names)))
	for _, name := range names {
		dst = appendString(dst, name)
		dst = binary.AppendVarint(dst, s.Counters[name])
	}
	return dst
}

// decodeStats fills the stored fields of s (not its ids) from v. Counters is
// nil when the row has none.
func decodeStats(v []byte, s *engagement.Stats) error {
	d := decoder{buf: v}
	d.format()
	s.Likes = d.varint()
	s.Dislikes = d.varint()
	s.LastSeq = d.uvarint()
	s.UpdatedAt = d.time()
	s.Counters = nil
	// Each counter takes at least two bytes, which bounds the allocation
	// a corrupt count can cause.
	if n := d.count(2); n > 0 {
		s.Counters = make(map[string]int64, n)
		for range n {
			name := d.string()
			s.Counters[name] = d.varint()
		}
	}
	return d.done("stats row")
}

// Trending list: format, time, uvarint item count, then per item its
// length-prefixed content id, varint count and varint error.
func encodeTrending(t *engagement.Trending) []byte {
	n := 1 + 3*binary.MaxVarintLen64
	for i := range t.Items {
		n += 1 + len(t.Items[i].ContentID) + 2*binary.MaxVarintLen64
	}
	dst := make([]byte, 0, n)
	dst = append(dst, formatV1)
	dst = appendTime(dst, t.AsOf)
	dst = binary.AppendUvarint(dst, uint64(len(t.Items)))
	for i := range t.Items {
		it := &t.Items[i]
		dst = appendString(dst, it.ContentID)
		dst = binary.AppendVarint(dst, it.Count)
		dst = binary.AppendVarint(dst, it.Error)
	}
	return dst
}

// decodeTrending fills AsOf and Items of t from v. Items is nil when the
// list is empty.
func decodeTrending(v []byte, t *engagement.Trending) error {
	d := decoder{buf: v}
	d.format()
	t.AsOf = d.time()
	t.Items = nil
	// Each item takes at least three bytes.
	if n := d.count(3); n > 0 {
		t.Items = make([]engagement.TrendingItem, n)
		for i := range t.Items {
			t.Items[i].ContentID = d.string()
			t.Items[i].Count = d.varint()
			t.Items[i].Error = d.varint()
		}
	}
	return d.done("trending list")
}

// errShort is the cause of a decode error when a value ends early.
var errShort = errors.New("value ends early")

// decoder reads a value and remembers the first error; after an error every
// read returns a zero value.
type decoder struct {
	buf []byte
	err error
}

func (d *decoder) fail(err error) {
	if d.err == nil {
		d.err = err
		d.buf = nil
	}
}

func (d *decoder) format() { d.formatOf(formatV1) }

// formatOf reads the leading format byte, which must be one of formats,
// and returns it (0 after an error).
func (d *decoder) formatOf(formats ...byte) byte {
	if len(d.buf) == 0 {
		d.fail(errShort)
		return 0
	}
	f := d.buf[0]
	if !slices.Contains(formats, f) {
		d.fail(fmt.Errorf("unknown format %d", f))
		return 0
	}
	d.buf = d.buf[1:]
	return f
}

func (d *decoder) action() engagement.Action {
	if len(d.buf) == 0 {
		d.fail(errShort)
		return engagement.ActionNone
	}
	a := engagement.Action(d.buf[0])
	if a != engagement.ActionLike && a != engagement.ActionDislike {
		d.fail(fmt.Errorf("invalid action %d", a))
		return engagement.ActionNone
	}
	d.buf = d.buf[1:]
	return a
}

// varint reads a zig-zag encoded varint, as binary.AppendVarint writes it.
func (d *decoder) varint() int64 {
	u := d.uvarint()
	return int64(u>>1) ^ -int64(u&1)
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.buf)
	if n <= 0 {
		d.fail(errShort)
		return 0
	}
	d.buf = d.buf[n:]
	return v
}

func (d *decoder) fixed64() uint64 {
	if len(d.buf) < 8 {
		d.fail(errShort)
		return 0
	}
	v := binary.LittleEndian.Uint64(d.buf)
	d.buf = d.buf[8:]
	return v
}

func (d *decoder) time() time.Time {
	sec := d.varint()
	nsec := d.uvarint()
	if d.err != nil {
		return time.Time{}
	}
	if nsec >= uint64(time.Second) {
		d.fail(fmt.Errorf("nanoseconds %d out of range", nsec))
		return time.Time{}
	}
	return time.Unix(sec, int64(nsec)).UTC()
}

// count reads an element count and checks it against the bytes left, given
// that each element takes at least minSize bytes.
func (d *decoder) count(minSize int) int {
	n := d.uvarint()
	if d.err != nil {
		return 0
	}
	if n > math.MaxInt32 || int(n)*minSize > len(d.buf) {
		d.fail(fmt.Errorf("count %d exceeds the value", n))
		return 0
	}
	return int(n)
}

func (d *decoder) string() string {
	n := d.uvarint()
	if d.err != nil {
		return ""
	}
	if n > uint64(len(d.buf)) {
		d.fail(errShort)
		return ""
	}
	s := string(d.buf[:n])
	d.buf = d.buf[n:]
	return s
}

func (d *decoder) restBytes() []byte {
	b := d.buf
	d.buf = d.buf[len(d.buf):]
	return b
}

func (d *decoder) rest() string {
	return string(d.restBytes())
}

// done returns the first error, wrapped with ErrCorrupt, or an error if bytes
// are left over.
func (d *decoder) done(what string) error {
	if d.err == nil && len(d.buf) > 0 {
		d.err = fmt.Errorf("%d trailing bytes", len(d.buf))
	}
	if d.err != nil {
		return fmt.Errorf("cannot decode %s: %w: %w", what, ErrCorrupt, d.err)
	}
	return nil
}
