package storetest

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/edgecount/edgecount/engagement"
)

func equalTrending(a, b engagement.Trending) bool {
	return a.TrendingKey == b.TrendingKey && a.AsOf.Equal(b.AsOf) && slices.Equal(a.Items, b.Items)
}

func testTrending(t *testing.T, s Store) {
	scope := uniq("r")
	key := engagement.TrendingKey{Scope: scope, Counter: engagement.CounterLike, Window: "5m"}
	first := engagement.Trending{TrendingKey: key, AsOf: now(), Items: []engagement.TrendingItem{
		{ContentID: "a", Count: 100, Error: 3},
		{ContentID: "b", Count: 50},
		{ContentID: "c", Count: math.MaxInt64, Error: math.MaxInt64},
	}}
	second := engagement.Trending{TrendingKey: key, AsOf: now().Add(time.Minute), Items: []engagement.TrendingItem{
		{ContentID: "d", Count: 7, Error: 1},
	}}
	other := engagement.Trending{TrendingKey: engagement.TrendingKey{Scope: scope, Counter: "view", Window: "5m"}, AsOf: now()}

	get := func(k engagement.TrendingKey) (engagement.Trending, bool) {
		t.Helper()
		got, ok, err := s.GetTrending(t.Context(), k)
		if err != nil {
			t.Fatalf("GetTrending(%+v): %v", k, err)
		}
		return got, ok
	}
	put := func(tr engagement.Trending) {
		t.Helper()
		if err := s.PutTrending(t.Context(), tr); err != nil {
			t.Fatalf("PutTrending(%+v): %v", tr.TrendingKey, err)
		}
	}

	if got, ok := get(key); ok {
		t.Fatalf("GetTrending of a missing list = %+v, found; want none", got)
	}
	put(first)
	if got, ok := get(key); !ok || !equalTrending(got, first) {
		t.Fatalf("GetTrending = %+v, %v; want %+v", got, ok, first)
	}
	put(other) // an empty list under a key that differs in the counter only
	put(second)
	if got, ok := get(key); !ok || !equalTrending(got, second) {
		t.Fatalf("GetTrending after overwrite = %+v, %v; want %+v", got, ok, second)
	}
	if got, ok := get(other.TrendingKey); !ok || !equalTrending(got, other) {
		t.Fatalf("GetTrending(%+v) = %+v, %v; want %+v", other.TrendingKey, got, ok, other)
	}
	for _, k := range []engagement.TrendingKey{
		{Scope: scope, Counter: engagement.CounterLike, Window: "1h"},
		{Scope: engagement.GlobalScope + "x", Counter: engagement.CounterLike, Window: "5m"},
	} {
		if got, ok := get(k); ok {
			t.Fatalf("GetTrending(%+v) = %+v, found; want none", k, got)
		}
	}
}

// testTrendingPartitions checks that the lists of the partitions of one
// (scope, counter, window) are separate rows that ReadTrending returns
// together, in partition order, and nothing else: not a list of another
// window whose name extends this one's, another counter or scope.
func testTrendingPartitions(t *testing.T, s Store) {
	scope := uniq("r")
	ctx := t.Context()
	at := now()
	list := func(counter, window string, p uint32, id string) engagement.Trending {
		return engagement.Trending{
			TrendingKey: engagement.TrendingKey{Scope: scope, Counter: counter, Window: window, Partition: p},
			AsOf:        at.Add(time.Duration(p) * time.Microsecond),
			Items:       []engagement.TrendingItem{{ContentID: id, Count: int64(p) + 1}},
		}
	}
	// 65536 and 256 have zero bytes in the middle of their big-endian form.
	want := []engagement.Trending{
		list("like", "5m", 0, "p0"), list("like", "5m", 3, "p3"),
		list("like", "5m", 256, "p256"), list("like", "5m", 65536, "p65536"),
	}
	noise := []engagement.Trending{
		list("like", "5mx", 0, "longer-window"), list("like", "5mx", 3, "longer-window-3"),
		list("like", "5", 1, "shorter-window"), list("likes", "5m", 1, "longer-counter"),
		list("like", "1h", 2, "other-window"),
	}
	// Written out of order, noise in between.
	for _, i := range []int{2, 0, 3, 1} {
		if err := s.PutTrending(ctx, noise[i%len(noise)]); err != nil {
			t.Fatalf("PutTrending(%+v): %v", noise[i%len(noise)].TrendingKey, err)
		}
		if err := s.PutTrending(ctx, want[i]); err != nil {
			t.Fatalf("PutTrending(%+v): %v", want[i].TrendingKey, err)
		}
	}
	if err := s.PutTrending(ctx, noise[4]); err != nil {
		t.Fatalf("PutTrending(%+v): %v", noise[4].TrendingKey, err)
	}
	got, err := s.ReadTrending(ctx, scope, "like", "5m")
	if err != nil {
		t.Fatalf("ReadTrending: %v", err)
	}
	if !slices.EqualFunc(got, want, equalTrending) {
		t.Fatalf("ReadTrending = %+v; want %+v", got, want)
	}
	for _, w := range want {
		if g, ok, err := s.GetTrending(ctx, w.TrendingKey); err != nil || !ok || !equalTrending(g, w) {
			t.Fatalf("GetTrending(%+v) = %+v, %v, %v; want %+v", w.TrendingKey, g, ok, err, w)
		}
	}
	if g, ok, err := s.GetTrending(ctx, engagement.TrendingKey{Scope: scope, Counter: "like", Window: "5m", Partition: 1}); err != nil || ok {
		t.Fatalf("GetTrending of a missing partition = %+v, %v, %v; want none", g, ok, err)
	}
	if got, err := s.ReadTrending(ctx, uniq("r"), "like", "5m"); err != nil || len(got) != 0 {
		t.Fatalf("ReadTrending of a missing list = %+v, %v; want none", got, err)
	}
	// Overwriting one partition leaves the others.
	repl := list("like", "5m", 3, "p3-new")
	if err := s.PutTrending(ctx, repl); err != nil {
		t.Fatalf("PutTrending: %v", err)
	}
	want[1] = repl
	if got, err := s.ReadTrending(ctx, scope, "like", "5m"); err != nil || !slices.EqualFunc(got, want, equalTrending) {
		t.Fatalf("ReadTrending after overwrite = %+v, %v; want %+v", got, err, want)
	}
}
