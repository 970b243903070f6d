package embedded

import (
	"maps"
	"math"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/edgecount/edgecount/engagement"
)

// TestCodecExact checks what the conformance suite leaves open: this store
// keeps times to the nanosecond, returns them in UTC, and keeps the zero time
// zero.
func TestCodecExact(t *testing.T) {
	times := []time.Time{
		{},
		time.Date(2030, 1, 2, 3, 4, 5, 123456789, time.UTC),
		time.Date(1960, 1, 2, 3, 4, 5, 999999999, time.FixedZone("x", 3600)),
		time.Unix(0, 0),
	}
	for _, ts := range times {
		want := ts.UTC()
		if ts.IsZero() {
			want = time.Time{}
		}
		r := engagement.Reaction{Action: engagement.ActionLike, Version: math.MinInt64, Incarnation: math.MaxUint64, UpdatedAt: ts, Region: "eu-west"}
		var gotR engagement.Reaction
		if err := decodeReaction(encodeReaction(&r), &gotR); err != nil {
			t.Fatalf("decodeReaction: %v", err)
		}
		if gotR.UpdatedAt != want || gotR.Version != r.Version || gotR.Incarnation != r.Incarnation || gotR.Region != r.Region {
			t.Errorf("reaction round trip of %v = %+v; want time %v (==) and the other fields unchanged", ts, gotR, want)
		}
		s := engagement.Stats{Counters: map[string]int64{}, UpdatedAt: ts}
		var gotS engagement.Stats
		if err := decodeStats(encodeStats(&s), &gotS); err != nil {
			t.Fatalf("decodeStats: %v", err)
		}
		if gotS.UpdatedAt != want || gotS.Counters != nil {
			t.Errorf("stats round trip of %v = %+v; want time %v (==) and nil counters", ts, gotS, want)
		}
	}
}

func TestCodecSizes(t *testing.T) {
	r := engagement.Reaction{Action: engagement.ActionLike, Version: 3, Incarnation: 1 << 60, UpdatedAt: time.Now(), Region: "eu-west"}
	s := engagement.Stats{Likes: 1000, Dislikes: 10, Counters: map[string]int64{"view": 1 << 20}, UpdatedAt: time.Now(), LastSeq: 1 << 30}
	for _, c := range []struct {
		name string
		got  int
		max  int
	}{
		{"reaction", len(encodeReaction(&r)), 32},
		{"index entry", len(encodeIndex(&r)), 9},
		{"stats row", len(encodeStats(&s)), 32},
	} {
		if c.got > c.max {
			t.Errorf("%s encodes to %d bytes; want at most %d", c.name, c.got, c.max)
		}
	}
}

func FuzzDecodeReaction(f *testing.F) {
	f.Add(encodeReaction(&engagement.Reaction{Action: engagement.ActionDislike, Version: 7, Incarnation: 9, UpdatedAt: time.Unix(5, 6), Region: "eu"}))
	f.Add([]byte{1, 1})
	f.Add(encodeReaction(&engagement.Reaction{Action: engagement.ActionLike, Version: 3, Incarnation: 4, UpdatedAt: time.Unix(7, 8), Region: "us",
		Writers: []uint64{1, 1 << 63, 42}}))
	f.Fuzz(func(t *testing.T, v []byte) {
		var r engagement.Reaction
		if err := decodeReaction(v, &r); err != nil {
			return
		}
		var again engagement.Reaction
		if err := decodeReaction(encodeReaction(&r), &again); err != nil || !reflect.DeepEqual(again, r) {
			t.Fatalf("re-encoding %+v gives %+v, %v", r, again, err)
		}
	})
}

func FuzzDecodeIndex(f *testing.F) {
	f.Add(encodeIndex(&engagement.Reaction{Action: engagement.ActionLike, Region: "us-east"}))
	f.Fuzz(func(t *testing.T, v []byte) {
		a, region, err := decodeIndex(v)
		if err != nil {
			return
		}
		r := engagement.Reaction{Action: a, Region: string(region)}
		a2, region2, err := decodeIndex(encodeIndex(&r))
		if err != nil || a2 != a || string(region2) != string(region) {
			t.Fatalf("re-encoding %v %q gives %v %q, %v", a, region, a2, region2, err)
		}
	})
}

func FuzzDecodeStats(f *testing.F) {
	f.Add(encodeStats(&engagement.Stats{Likes: -1, Dislikes: 2, Counters: map[string]int64{"view": 3, "share": 4}, UpdatedAt: time.Unix(1, 2), LastSeq: 5}))
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, v []byte) {
		var s engagement.Stats
		if err := decodeStats(v, &s); err != nil {
			return
		}
		var again engagement.Stats
		err := decodeStats(encodeStats(&s), &again)
		if err != nil || again.Likes != s.Likes || again.Dislikes != s.Dislikes || again.LastSeq != s.LastSeq ||
			again.UpdatedAt != s.UpdatedAt || !maps.Equal(again.Counters, s.Counters) {
			t.Fatalf("re-encoding %+v gives %+v, %v", s, again, err)
		}
	})
}

func FuzzDecodeTrending(f *testing.F) {
	f.Add(encodeTrending(&engagement.Trending{AsOf: time.Unix(1, 2), Items: []engagement.TrendingItem{{ContentID: "a", Count: 3, Error: 1}}}))
	f.Fuzz(func(t *testing.T, v []byte) {
		var tr engagement.Trending
		if err := decodeTrending(v, &tr); err != nil {
			return
		}
		var again engagement.Trending
		err := decodeTrending(encodeTrending(&tr), &again)
		if err != nil || again.AsOf != tr.AsOf || !slices.Equal(again.Items, tr.Items) {
			t.Fatalf("re-encoding %+v gives %+v, %v", tr, again, err)
		}
	})
}
