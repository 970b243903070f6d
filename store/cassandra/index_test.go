package cassandra

import (
	"reflect"
	"testing"

	"github.com/edgecount/edgecount/engagement"
)

func TestRecountCursorRoundTrip(t *testing.T) {
	want, err := decodeRecountCursor((&recountCursor{item: hashID("item"), pos: []bucketPos{
		{state: posDone}, {state: posAfter, after: "user-1"}, {}, {state: posAfter, after: "ü"},
	}, tallies: []engagement.RegionTally{{Region: "eu-west", Likes: 3, Dislikes: 1 << 40}, {Region: "", Likes: 1}}}).encode(), "item", 4)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeRecountCursor(want.encode(), "item", 4)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("round trip = %+v, %v; want %+v", got, err, want)
	}
	for name, args := range map[string][2]any{
		"other item":    {"other", 4},
		"other buckets": {"item", 8},
	} {
		if _, err := decodeRecountCursor(want.encode(), args[0].(string), args[1].(int)); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

// FuzzRecountCursor checks that no input crashes the cursor decoder and
// that whatever it accepts encodes back to a cursor that decodes the same.
func FuzzRecountCursor(f *testing.F) {
	seed := &recountCursor{item: hashID("item"), pos: []bucketPos{{state: posAfter, after: "u"}, {state: posDone}},
		tallies: []engagement.RegionTally{{Region: "us", Likes: 2}}}
	f.Add(seed.encode(), 2)
	f.Add("", 1)
	f.Add("cmMx", 1)
	f.Fuzz(func(t *testing.T, s string, n int) {
		if n < 1 || n > MaxIndexBuckets {
			return
		}
		c, err := decodeRecountCursor(s, "item", n)
		if err != nil {
			return
		}
		again, err := decodeRecountCursor(c.encode(), "item", n)
		if err != nil || !reflect.DeepEqual(again, c) {
			t.Fatalf("re-encoded cursor decodes to %+v, %v; want %+v", again, err, c)
		}
	})
}
