package region_test

import (
	"slices"
	"testing"

	"github.com/edgecount/edgecount/region"
)

func TestHeldWireRoundTrip(t *testing.T) {
	ids := []string{"v1", "v2"}
	got, err := region.DecodeHeldQuery(region.AppendHeldQuery(nil, ids))
	if err != nil || !slices.Equal(got, ids) {
		t.Fatalf("query = %q, %v", got, err)
	}
	held := map[string][]region.Held{
		"v1": {{Counter: "view", Region: "us", Delta: 3}, {Counter: "like", Region: "eu", Delta: -1, Flushed: true, Seq: 9, Floor: 4}},
	}
	back, err := region.DecodeHeldAnswer(region.AppendHeldAnswer(nil, held))
	if err != nil || len(back) != 1 || !slices.Equal(back["v1"], held["v1"]) {
		t.Fatalf("answer = %+v, %v", back, err)
	}
}

// FuzzDecodeHeld: the peer exchange's decoders never panic, and what they
// accept encodes back to something they accept the same way.
func FuzzDecodeHeld(f *testing.F) {
	f.Add(region.AppendHeldQuery(nil, []string{"v1", "v2"}))
	f.Add(region.AppendHeldAnswer(nil, map[string][]region.Held{"v1": {{Counter: "view", Region: "us", Delta: -3, Flushed: true, Seq: 7, Floor: 2}}}))
	f.Add([]byte{0x08, 0x01, 0x12, 0x00})
	f.Fuzz(func(t *testing.T, data []byte) {
		if ids, err := region.DecodeHeldQuery(data); err == nil {
			again, err := region.DecodeHeldQuery(region.AppendHeldQuery(nil, ids))
			if err != nil || !slices.Equal(again, ids) {
				t.Fatalf("query %q re-decodes as %q, %v", ids, again, err)
			}
		}
		if held, err := region.DecodeHeldAnswer(data); err == nil {
			again, err := region.DecodeHeldAnswer(region.AppendHeldAnswer(nil, held))
			if err != nil {
				t.Fatalf("answer %+v re-decodes with %v", held, err)
			}
			for id, list := range held {
				if !slices.Equal(again[id], list) {
					t.Fatalf("item %q: %+v re-decodes as %+v", id, list, again[id])
				}
			}
		}
	})
}
