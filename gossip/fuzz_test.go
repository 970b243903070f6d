package gossip

import (
	"bytes"
	"testing"

	"github.com/hashicorp/memberlist"
)

// FuzzDecodeMeta: no input panics; what decodes is valid, and a version-1
// encoding is the only encoding of its value.
func FuzzDecodeMeta(f *testing.F) {
	for _, m := range []Meta{
		{Region: "us-east", AgentID: "us-east-1", HTTPAddr: "127.0.0.1:8080", Version: "v1", Keys: []string{"0a0b0c0d"}},
		{Region: "local", AgentID: "a"},
	} {
		b, err := encodeMeta(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{2, 1, 'a', 1, 'b', 0, 0, 0, 9, 9})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeMeta(b)
		if err != nil {
			return
		}
		if err := m.validate(); err != nil {
			t.Fatalf("decoded invalid meta %+v: %v", m, err)
		}
		if b[0] != metaVersion {
			return
		}
		again, err := encodeMeta(m)
		if err != nil {
			t.Fatalf("cannot re-encode %+v: %v", m, err)
		}
		if !bytes.Equal(again, b) || len(b) > memberlist.MetaMaxSize {
			t.Fatalf("re-encoded %x, want input %x", again, b)
		}
	})
}

// FuzzDecodeMessage: no input panics; what decodes respects every limit and
// re-encodes to exactly the input (one encoding per message).
func FuzzDecodeMessage(f *testing.F) {
	f.Add(encodeEntries(nil, []entry{{Origin: "us-east-1", Key: "like", Version: 1 << 60, Millis: 1700000000000, Data: []byte("top-k")}}))
	f.Add(encodeEntries(nil, []entry{
		{Origin: "a", Key: "k", Version: 1, Data: nil},
		{Origin: "b", Key: "trending/like/5m", Version: 2, Millis: 3, Data: bytes.Repeat([]byte{0}, 40)},
	}))
	f.Add(encodeEntries(nil, nil))
	f.Add(encodeLeave("us-east-2"))
	const maxValue = 64
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeMessage(b, maxValue)
		if err != nil {
			return
		}
		var again []byte
		switch m.kind {
		case kindEntries:
			for _, e := range m.entries {
				if len(e.Data) > maxValue || !validKey(e.Key) || e.Version == 0 || e.Millis < 0 {
					t.Fatalf("decoded entry beyond limits: %+v", e)
				}
			}
			again = encodeEntries(nil, m.entries)
		case kindLeave:
			again = encodeLeave(m.leaving)
		default:
			t.Fatalf("decoded kind %d", m.kind)
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("re-encoded %x, want input %x", again, b)
		}
	})
}
