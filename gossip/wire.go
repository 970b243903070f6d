package gossip

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/edgecount/edgecount/engagement"
)

// Wire limits that hold whatever the configuration says.
const (
	wireVersion    = 1
	kindEntries    = 1
	kindLeave      = 2
	kindQuery      = 3
	kindAnswer     = 4
	maxKeyLen      = 64
	maxNodeNameLen = engagement.MaxIDLen
	// MaxValueLimit is the largest Config.MaxValueBytes.
	MaxValueLimit = 1 << 20
	// maxPushStateBytes bounds what LocalState sends, well under
	// memberlist's own 20 MiB limit on push/pull user state.
	maxPushStateBytes = 8 << 20
	// maxWireEntries bounds the entries of one message.
	maxWireEntries = 1 << 16
)

// Decoding errors. errOversized is a message that is well formed so far but
// exceeds a size limit; errMalformed is everything else.
var (
	errMalformed = errors.New("malformed state message")
	errOversized = errors.New("oversized state message")
)

// entry is one published value: the latest Data that node Origin published
// under Key, with Origin's Version (strictly increasing per origin) and
// publish time in Unix milliseconds (Origin's clock).
type entry struct {
	Origin  string
	Key     string
	Version uint64
	Millis  int64
	Data    []byte
}

// encodeEntries appends the wire form of es to b:
//
//	version:1 (=1)  kind:1 (=1)  count:uvarint
//	count × { origin:uvarint-len bytes  key:uvarint-len bytes
//	          version:uvarint  millis:uvarint  data:uvarint-len bytes }
//
// Every uvarint is minimal, so that a message has one encoding.
func encodeEntries(b []byte, es []entry) []byte {
	b = append(b, wireVersion, kindEntries)
	b = binary.AppendUvarint(b, uint64(len(es)))
	for i := range es {
		b = appendEntry(b, &es[i])
	}
	return b
}

func appendEntry(b []byte, e *entry) []byte {
	b = binary.AppendUvarint(b, uint64(len(e.Origin)))
	b = append(b, e.Origin...)
	b = binary.AppendUvarint(b, uint64(len(e.Key)))
	b = append(b, e.Key...)
	b = binary.AppendUvarint(b, e.Version)
	b = binary.AppendUvarint(b, uint64(e.Millis))
	b = binary.AppendUvarint(b, uint64(len(e.Data)))
	return append(b, e.Data...)
}

// entrySize is the encoded size of e alone.
func entrySize(e *entry) int {
	return uvarintLen(uint64(len(e.Origin))) + len(e.Origin) +
		uvarintLen(uint64(len(e.Key))) + len(e.Key) +
		uvarintLen(e.Version) + uvarintLen(uint64(e.Millis)) +
		uvarintLen(uint64(len(e.Data))) + len(e.Data)
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// encodeLeave returns the wire form of "node is leaving":
//
//	version:1 (=1)  kind:1 (=2)  node:uvarint-len bytes
func encodeLeave(node string) []byte {
	b := []byte{wireVersion, kindLeave}
	b = binary.AppendUvarint(b, uint64(len(node)))
	return append(b, node...)
}

// message is a decoded state message: entries (kindEntries) or the name of
// a node about to leave (kindLeave).
type message struct {
	kind    byte
	entries []entry
	leaving string
	// A question or an answer (kindQuery, kindAnswer; query.go).
	id      uint64
	from    string
	payload []byte
	errMsg  string
}

// decodeMessage parses a state message, validating every field: names and
// keys (engagement.ValidID, validKey), version ≥ 1, publish time, values of at
// most maxValue bytes, no trailing bytes. It never panics, allocates at
// most about len(b) bytes plus one small struct per entry, and copies what
// it keeps: b may be reused.
func decodeMessage(b []byte, maxValue int) (message, error) {
	if len(b) < 2 {
		return message{}, fmt.Errorf("%w: %d bytes", errMalformed, len(b))
	}
	if b[0] != wireVersion {
		return message{}, fmt.Errorf("%w: version %d", errMalformed, b[0])
	}
	d := decoder{b: b[2:]}
	m := message{kind: b[1]}
	switch m.kind {
	case kindEntries:
		m.entries = d.entries(maxValue)
	case kindLeave:
		m.leaving = d.str(maxNodeNameLen, "node")
		if d.err == nil && !engagement.ValidID(m.leaving) {
			d.err = fmt.Errorf("%w: bad node name", errMalformed)
		}
	case kindQuery, kindAnswer:
		m.id = d.uvarint()
		m.from = d.str(maxNodeNameLen, "node")
		if p := d.bytes(MaxQueryBytes, "payload", errOversized); d.err == nil {
			m.payload = append([]byte{}, p...)
		}
		if m.kind == kindAnswer {
			m.errMsg = d.str(maxErrLen, "error")
		}
		if d.err == nil && !engagement.ValidID(m.from) {
			d.err = fmt.Errorf("%w: bad node name", errMalformed)
		}
	default:
		return message{}, fmt.Errorf("%w: kind %d", errMalformed, m.kind)
	}
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%w: %d trailing bytes", errMalformed, len(d.b))
	}
	if d.err != nil {
		return message{}, d.err
	}
	return m, nil
}

func (d *decoder) entries(maxValue int) []entry {
	n := d.uvarint()
	// An entry takes at least 7 bytes, so a count beyond that is a lie.
	switch {
	case d.err != nil:
	case n > maxWireEntries:
		d.err = fmt.Errorf("%w: %d entries", errOversized, n)
	case n > uint64(len(d.b))/7:
		d.err = fmt.Errorf("%w: %d entries in %d bytes", errMalformed, n, len(d.b))
	}
	var es []entry
	for i := uint64(0); i < n && d.err == nil; i++ {
		var e entry
		e.Origin = d.str(maxNodeNameLen, "origin")
		e.Key = d.str(maxKeyLen, "key")
		e.Version = d.uvarint()
		millis := d.uvarint()
		data := d.bytes(maxValue, "data", errOversized)
		if d.err != nil {
			break
		}
		if !engagement.ValidID(e.Origin) || !validKey(e.Key) || e.Version == 0 || millis > 1<<62 {
			d.err = fmt.Errorf("%w: entry %d: bad origin, key, version or time", errMalformed, i)
			break
		}
		e.Millis = int64(millis)
		e.Data = append([]byte{}, data...)
		es = append(es, e)
	}
	return es
}

type decoder struct {
	b   []byte
	err error
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 || n != uvarintLen(v) {
		d.err = fmt.Errorf("%w: bad varint", errMalformed)
		return 0
	}
	d.b = d.b[n:]
	return v
}

// bytes reads a length-prefixed field of at most max bytes; a longer one is
// the error tooLong.
func (d *decoder) bytes(max int, what string, tooLong error) []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(max) {
		d.err = fmt.Errorf("%w: %s of %d bytes exceeds %d", tooLong, what, n, max)
		return nil
	}
	if n > uint64(len(d.b)) {
		d.err = fmt.Errorf("%w: %s truncated", errMalformed, what)
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) str(max int, what string) string {
	return string(d.bytes(max, what, errMalformed))
}

// validKey reports whether k is a valid state key: 1–64 bytes of printable
// ASCII without spaces.
func validKey(k string) bool {
	return len(k) > 0 && len(k) <= maxKeyLen && printable(k)
}
