package region

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/partial"
	"github.com/edgecount/edgecount/store/embedded"
	"github.com/edgecount/edgecount/store/embedded/embeddedtest"
	"github.com/edgecount/edgecount/topk"
)

// nopPublisher stores nothing.
type nopPublisher struct{}

func (nopPublisher) Publish(context.Context, uint32, string, []byte) error { return nil }

// shardLog is a Directory and ShardWriter that remembers every write.
type shardLog struct {
	shards map[hotKey]int
	writes []string
	fail   bool // refuse every write (the directory is down)
}

func (l *shardLog) Shards(contentID, counter string) int {
	if n, ok := l.shards[hotKey{contentID, counter}]; ok {
		return n
	}
	return 1
}

func (l *shardLog) SetShards(_ context.Context, contentID, counter string, shards int) error {
	if l.fail {
		return errors.New("directory down")
	}
	l.writes = append(l.writes, fmt.Sprintf("%s/%s=%d", contentID, counter, shards))
	if shards <= 1 {
		delete(l.shards, hotKey{contentID, counter})
	} else {
		l.shards[hotKey{contentID, counter}] = shards
	}
	return nil
}

func newTestAgent(t *testing.T, cfg Config, deps Deps) *Agent {
	t.Helper()
	st := embeddedtest.Open(t, embedded.Config{Timeout: time.Second})
	deps.Reactions, deps.Stats, deps.Publisher = st, st, nopPublisher{}
	a, err := New(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func ranked(ids ...string) []engagement.TrendingItem {
	out := make([]engagement.TrendingItem, len(ids))
	for i, id := range ids {
		out[i] = engagement.TrendingItem{ContentID: id, Count: int64(1000 - i)}
	}
	return out
}

// TestHotRuleHysteresis walks the rule through its cases: the top N become
// hot; ranks N+1..2N keep a hot item hot but make none hot; an item out of
// the top 2N cools only after CoolAfter without being seen there; a write
// the directory already holds is not repeated.
func TestHotRuleHysteresis(t *testing.T) {
	log := &shardLog{shards: map[hotKey]int{}}
	cfg := DefaultConfig("us", "us-a1")
	cfg.Trending.Hot = HotConfig{Top: 2, Shards: 16, CoolAfter: time.Minute, Interval: time.Hour}
	a := newTestAgent(t, cfg, Deps{Directory: log, ShardWriter: log})
	key := func(id string) Key { return Key{ContentID: id, Counter: "view", Region: "us"} }
	a.counters.Add(key("a"), 5) // a live counter of a
	h := a.hot
	ctx := context.Background()
	t0 := minuteTime(0)
	type step struct {
		at         time.Duration
		list       []engagement.TrendingItem
		wantHot    []string
		wantWrites []string
	}
	steps := []step{
		{0, ranked("a", "b", "c", "d", "e"), []string{"a", "b"}, []string{"a/view=16", "b/view=16"}},
		// c enters ranks 1-2, a drops to 3 (kept), b to 5 (out, not yet cooled).
		{30 * time.Second, ranked("c", "d", "a", "e", "b"), []string{"a", "b", "c", "d"}, []string{"c/view=16", "d/view=16"}},
		// b was last seen in the top 4 at 0: a minute later it cools.
		{60 * time.Second, ranked("c", "d", "a", "e", "b"), []string{"a", "c", "d"}, []string{"b/view=1"}},
		// e at rank 4 never was in the top 2: not hot.
		{70 * time.Second, ranked("c", "d", "x", "e"), []string{"a", "c", "d"}, nil},
		// a out since 60s (last seen at 60s, rank 3): cools at 120s, not before.
		{119 * time.Second, ranked("c", "d"), []string{"a", "c", "d"}, nil},
		{120 * time.Second, ranked("c", "d"), []string{"c", "d"}, []string{"a/view=1"}},
		// An empty list cools nothing early.
		{150 * time.Second, nil, []string{"c", "d"}, nil},
	}
	for i, st := range steps {
		log.writes = nil
		h.apply(ctx, "view", st.list, t0.Add(st.at))
		var hot []string
		for k := range h.hot {
			hot = append(hot, k.contentID)
		}
		slices.Sort(hot)
		if !slices.Equal(hot, st.wantHot) {
			t.Errorf("step %d: hot = %v, want %v", i, hot, st.wantHot)
		}
		slices.Sort(log.writes)
		if !slices.Equal(log.writes, st.wantWrites) {
			t.Errorf("step %d: directory writes = %v, want %v", i, log.writes, st.wantWrites)
		}
	}
	// a's live counter was resharded to 16 and back to 1, keeping its value.
	if got := a.counters.Shards(key("a")); got != 1 {
		t.Errorf("a's live counter has %d shards after cooling, want 1", got)
	}
	if got := a.counters.Stats().Resharded; got != 2 {
		t.Errorf("resharded %d times, want 2 (hot, cold)", got)
	}
	var total int64
	a.counters.Drain(func(k Key, d int64) { total += d })
	if total != 5 {
		t.Errorf("a's counter drained %d after resharding, want 5", total)
	}
	// Another agent of the region already wrote c hot: no second write.
	log.writes = nil
	h2 := newHotRule(a, h.cfg, []string{"view"})
	h2.apply(ctx, "view", ranked("c", "d"), t0)
	if len(log.writes) != 0 {
		t.Errorf("writes of counts the directory holds: %v", log.writes)
	}
}

// TestHotRuleReadError: a list that cannot be read cools nothing.
func TestHotRuleReadError(t *testing.T) {
	log := &shardLog{shards: map[hotKey]int{}}
	cfg := DefaultConfig("us", "us-a1")
	cfg.Trending.Hot = HotConfig{Top: 1, Shards: 4, CoolAfter: time.Second, Interval: time.Hour}
	now := minuteTime(0)
	a := newTestAgent(t, cfg, Deps{Directory: log, ShardWriter: log, Now: func() time.Time { return now }})
	a.hot.apply(context.Background(), "view", ranked("a"), now)
	now = now.Add(time.Hour)
	a.hot.step(context.Background()) // no trending store: every read fails
	if _, hot := a.hot.hot[hotKey{"a", "view"}]; !hot || a.stats.HotReadErrors.Load() == 0 {
		t.Fatalf("after a failed read: hot %v, read errors %d; want a still hot", a.hot.hot, a.stats.HotReadErrors.Load())
	}
}

// TestHotRuleRetriesCooling: an item whose cooling write fails stays hot
// until a later round writes it, so the region's directory does not keep
// the hot shard count for good.
func TestHotRuleRetriesCooling(t *testing.T) {
	log := &shardLog{shards: map[hotKey]int{}}
	cfg := DefaultConfig("us", "us-a1")
	cfg.Trending.Hot = HotConfig{Top: 1, Shards: 4, CoolAfter: time.Minute, Interval: time.Hour}
	a := newTestAgent(t, cfg, Deps{Directory: log, ShardWriter: log})
	ctx := context.Background()
	a.hot.apply(ctx, "view", ranked("a"), minuteTime(0))
	log.fail = true
	a.hot.apply(ctx, "view", nil, minuteTime(2))
	if _, hot := a.hot.hot[hotKey{"a", "view"}]; !hot || log.shards[hotKey{"a", "view"}] != 4 || a.stats.HotCooled.Load() != 0 {
		t.Fatalf("after a failed cooling write: hot %v, directory %v, cooled %d; want a still hot with 4 shards",
			a.hot.hot, log.shards, a.stats.HotCooled.Load())
	}
	log.fail = false
	a.hot.apply(ctx, "view", nil, minuteTime(3))
	if _, hot := a.hot.hot[hotKey{"a", "view"}]; hot || log.shards[hotKey{"a", "view"}] != 0 || a.stats.HotCooled.Load() != 1 {
		t.Fatalf("after the retry: hot %v, directory %v, cooled %d; want a cooled once",
			a.hot.hot, log.shards, a.stats.HotCooled.Load())
	}
}

func minuteTime(m int) time.Time {
	return time.Date(2026, 3, 1, 10, m, 0, 0, time.UTC)
}

// TestEncodeListsAfterSums: when a partition's sums take several messages
// the lists go in the last one (or after it), never before a sum of the
// same flush; every message stays within MaxMessageBytes.
func TestEncodeListsAfterSums(t *testing.T) {
	cfg := DefaultConfig("us", "us-a1")
	cfg.MaxMessageBytes = 4 << 10
	a := newTestAgent(t, cfg, Deps{})
	var sums []partial.Sum
	for i := range 400 {
		// Long ids: the room a message has left is often more than a
		// short list needs, and still too little for the next sum.
		sums = append(sums, partial.Sum{ContentID: fmt.Sprint(strings.Repeat("i", 90+i%30), i), Counter: "view", Region: "us", Delta: 1})
	}
	tops := []partial.TopList{{Counter: "like", Window: "5m", Floor: 1}}
	for _, w := range engagement.TrendingWindows() {
		l := partial.TopList{Counter: "view", Window: w, Floor: 3}
		for i := range 20 {
			l.Items = append(l.Items, partial.TopItem{ContentID: fmt.Sprint("item-", i), Count: 100})
		}
		tops = append(tops, l)
	}
	msgs := a.flusher.encode(nil, 3, sums, tops, minuteTime(0))
	nSums, nTops, lastSum, firstTop := 0, 0, -1, -1
	for i, m := range msgs {
		if len(m.data) > cfg.MaxMessageBytes {
			t.Errorf("message %d has %d bytes, over %d", i, len(m.data), cfg.MaxMessageBytes)
		}
		var b partial.Batch
		if err := partial.Decode(m.data, &b); err != nil {
			t.Fatal(err)
		}
		if len(b.Sums) > 0 {
			lastSum = i
		}
		if len(b.Tops) > 0 && firstTop < 0 {
			firstTop = i
		}
		nSums += len(b.Sums)
		nTops += len(b.Tops)
		if want := i < len(msgs)-1; b.More != want {
			t.Errorf("message %d of %d: More = %v, want %v", i, len(msgs), b.More, want)
		}
	}
	if nSums != len(sums) || nTops != len(tops) || len(msgs) < 3 {
		t.Fatalf("%d messages carry %d sums and %d lists; want several carrying %d and %d", len(msgs), nSums, nTops, len(sums), len(tops))
	}
	if firstTop < lastSum {
		t.Fatalf("a list in message %d before sums in message %d", firstTop, lastSum)
	}
}

// TestSplitKeepsListsInAMessage: a partition's list that would not fit in
// one message keeps its largest items and raises its floor to the largest
// count it drops, so the bound of every other item still holds.
func TestSplitKeepsListsInAMessage(t *testing.T) {
	tr, err := newTrending(DefaultTrendingConfig().withDefaults(64), "us", 1, 2048)
	if err != nil {
		t.Fatal(err)
	}
	var items []topk.Item
	for i := range 100 {
		items = append(items, topk.Item{ID: strings.Repeat("x", 60) + fmt.Sprint(i), Count: int64(1000 - i), Error: 1})
	}
	tr.split("view", "5m", items, 7)
	l := tr.per[0][0]
	if size := partial.TopListSize(&l); size > 2048-64 || len(l.Items) == 0 || len(l.Items) == 100 {
		t.Fatalf("list of %d items, %d bytes; want it cut to fit %d", len(l.Items), size, 2048-64)
	}
	n := len(l.Items)
	if want := items[n].Count; l.Floor != want {
		t.Fatalf("floor = %d, want the largest dropped count %d", l.Floor, want)
	}
	for i, it := range l.Items {
		if it.ContentID != items[i].ID {
			t.Fatalf("item %d = %q, want %q: the largest must be kept", i, it.ContentID, items[i].ID)
		}
	}
}

// BenchmarkFlushTrending measures one flush of 2,000 keys (a Zipf stream
// of 20,000 increments over 10,000 items) with and without trending: the
// time trending adds where it runs, off the increment path.
func BenchmarkFlushTrending(b *testing.B) {
	for _, c := range []struct {
		on   bool
		step time.Duration // clock step per flush: 1m fills every bucket of the hour
	}{{false, time.Second}, {true, time.Second}, {true, time.Minute}} {
		on := c.on
		b.Run(fmt.Sprintf("trending=%v/step=%v", on, c.step), func(b *testing.B) {
			cfg := DefaultConfig("us", "us-a1")
			if !on {
				cfg.Trending = TrendingConfig{}
			}
			st := embeddedtest.Open(b, embedded.Config{Timeout: time.Second})
			now := minuteTime(0)
			a, err := New(cfg, Deps{Reactions: st, Stats: st, Publisher: nopPublisher{}, Now: func() time.Time { return now }})
			if err != nil {
				b.Fatal(err)
			}
			ids := make([]string, 10000)
			for i := range ids {
				ids[i] = fmt.Sprint("item-", i)
			}
			zipf := newZipf(len(ids))
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				for range 20000 {
					a.counters.Add(Key{ContentID: ids[zipf()], Counter: "view", Region: "us"}, 1)
				}
				now = now.Add(c.step)
				a.flusher.queue = nil
				a.stats.OutboxBytes.Store(0)
				b.StartTimer()
				a.flusher.flush(false)
			}
		})
	}
}

// newZipf returns a Zipf(1.0) sampler over 0..n-1 with a fixed seed.
func newZipf(n int) func() int {
	z := rand.NewZipf(rand.New(rand.NewPCG(3, 4)), 1.0001, 1, uint64(n-1))
	return func() int { return int(z.Uint64()) }
}

// TestTrendingViewsMatchWindow: the views a flush ships (closed buckets
// merged once a minute, plus the current minute) are the window's own
// views, minute after minute, hour after hour.
func TestTrendingViewsMatchWindow(t *testing.T) {
	cfg := DefaultTrendingConfig().withDefaults(64)
	cfg.Counters = []string{"view"}
	cfg.ListLen = 1000
	tr, err := newTrending(cfg, "us", 4, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	at := minuteTime(0)
	for step := range 400 {
		// Mostly seconds apart, now and then minutes or hours.
		switch r := rng.IntN(100); {
		case r < 5:
			at = at.Add(time.Duration(rng.IntN(180)) * time.Minute)
		case r < 30:
			at = at.Add(time.Duration(rng.IntN(3)) * time.Minute)
		default:
			at = at.Add(time.Duration(rng.IntN(20)) * time.Second)
		}
		at = time.UnixMilli(at.UnixMilli())
		parts := make([][]partial.Sum, 4)
		for range rng.IntN(20) {
			id := fmt.Sprint("item-", rng.IntN(50))
			p := partial.PartitionOf(id, 4)
			parts[p] = append(parts[p], partial.Sum{ContentID: id, Counter: "view", Region: "us", Delta: int64(1 + rng.IntN(9))})
		}
		tr.flush(parts, at)
		for wi, w := range tr.windows {
			want, err := tr.counters["view"].window.Merged(at, tr.spans[wi])
			if err != nil {
				t.Fatal(err)
			}
			snap := tr.snapshot("view", w)
			if snap == nil {
				t.Fatalf("step %d: no %s snapshot", step, w)
			}
			got, err := topk.DecodeSummary(snap.enc)
			if err != nil {
				t.Fatal(err)
			}
			if g, wt := fmt.Sprint(got.Top(-1)), fmt.Sprint(want.Top(-1)); g != wt {
				t.Fatalf("step %d at %v, %s: shipped %s\nwindow's %s", step, at, w, g, wt)
			}
		}
	}
}

// TestTrendingCoverage: what an answer from the stored lists says it
// counts. Each region is as of the newest of its flushes any partition
// counts; one more than behind older than the newest region's is left
// out (behind); a global answer is complete when every region of the
// system is included, a regional one when its region is; states older
// than the window count for nothing.
func TestTrendingCoverage(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	ra := func(r string, s int) engagement.RegionAsOf { return engagement.RegionAsOf{Region: r, AsOf: at(s)} }
	st := func(p uint32, rs ...engagement.RegionAsOf) engagement.TrendingState {
		return engagement.TrendingState{Partition: p, Regions: rs}
	}
	system := []string{"ap", "eu", "us"}
	for _, tc := range []struct {
		name           string
		states         []engagement.TrendingState
		scope          string
		want           []string
		included, left []engagement.RegionAsOf
		complete       bool
	}{
		{"every region current", []engagement.TrendingState{st(0, ra("us", 100), ra("eu", 99)), st(1, ra("ap", 98), ra("us", 97))},
			engagement.GlobalScope, system, []engagement.RegionAsOf{ra("ap", 98), ra("eu", 99), ra("us", 100)}, nil, true},
		{"newest flush over the partitions", []engagement.TrendingState{st(0, ra("us", 90), ra("eu", 99)), st(1, ra("ap", 98), ra("us", 100))},
			engagement.GlobalScope, system, []engagement.RegionAsOf{ra("ap", 98), ra("eu", 99), ra("us", 100)}, nil, true},
		{"one region not heard of yet", []engagement.TrendingState{st(0, ra("us", 100), ra("eu", 99))},
			engagement.GlobalScope, system, []engagement.RegionAsOf{ra("eu", 99), ra("us", 100)}, nil, false},
		{"one region behind", []engagement.TrendingState{st(0, ra("us", 100), ra("eu", 99), ra("ap", 96))},
			engagement.GlobalScope, system, []engagement.RegionAsOf{ra("eu", 99), ra("us", 100)}, []engagement.RegionAsOf{ra("ap", 96)}, false},
		{"just within 3 intervals", []engagement.TrendingState{st(0, ra("us", 100), ra("eu", 99), ra("ap", 97))},
			engagement.GlobalScope, system, []engagement.RegionAsOf{ra("ap", 97), ra("eu", 99), ra("us", 100)}, nil, true},
		{"older than the window", []engagement.TrendingState{st(0, ra("us", 100), ra("eu", 99), ra("ap", -400))},
			engagement.GlobalScope, system, []engagement.RegionAsOf{ra("eu", 99), ra("us", 100)}, nil, false},
		{"no system list: behind only", []engagement.TrendingState{st(0, ra("us", 100), ra("eu", 99))},
			engagement.GlobalScope, nil, []engagement.RegionAsOf{ra("eu", 99), ra("us", 100)}, nil, true},
		{"regional", []engagement.TrendingState{st(0, ra("us", 100), ra("eu", 50))},
			"eu", system, []engagement.RegionAsOf{ra("eu", 50)}, nil, true},
		{"regional, nothing yet", []engagement.TrendingState{st(0, ra("us", 100))},
			"eu", system, nil, nil, false},
		{"nothing stored", nil, engagement.GlobalScope, system, nil, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inc, left, complete := coverage(tc.states, tc.scope, tc.want, at(-300), 3*time.Second)
			if !slices.Equal(inc, tc.included) || !slices.Equal(left, tc.left) || complete != tc.complete {
				t.Errorf("coverage = %v, behind %v, complete %v\nwant       %v, behind %v, complete %v", inc, left, complete, tc.included, tc.left, tc.complete)
			}
		})
	}
}
