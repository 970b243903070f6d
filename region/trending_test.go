package region_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgecount/edgecount/directory"
	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/internal/testenv"
	"github.com/edgecount/edgecount/partial"
	"github.com/edgecount/edgecount/region"
	"github.com/edgecount/edgecount/store/embedded"
	"github.com/edgecount/edgecount/store/embedded/embeddedtest"
)

// minute0 is a time 30 s into a minute.
var minute0 = time.Date(2026, 3, 1, 10, 0, 30, 0, time.UTC)

// trendAgent starts an agent with a fake clock and deps.
func trendAgent(t *testing.T, pub region.Publisher, clk *testenv.Clock, tweak func(*region.Config, *region.Deps)) *region.Agent {
	t.Helper()
	st := embeddedtest.Open(t, embedded.Config{Timeout: time.Second})
	cfg := region.DefaultConfig("us", "us-a1")
	cfg.FlushInterval = 10 * time.Millisecond
	cfg.PublishRetryMin = time.Millisecond
	cfg.PublishRetryMax = 5 * time.Millisecond
	cfg.Trending.SummaryBytes = 16 << 10
	cfg.Trending.Hot.Top = 0
	deps := region.Deps{Reactions: st, Stats: st, Publisher: pub, Now: clk.Now, Trending: st}
	if tweak != nil {
		tweak(&cfg, &deps)
	}
	a, err := region.New(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	a.Start()
	t.Cleanup(func() { a.Stop(context.Background()) })
	return a
}

// waitFlushes waits until the agent has run n more flushes, so that
// everything accepted before the call has been flushed.
func waitFlushes(t *testing.T, a *region.Agent, n uint64) {
	t.Helper()
	target := a.Stats().Flushes.Load() + n
	testenv.Eventually(t, 10*time.Second, fmt.Sprintf("%d flushes", target), func() (string, bool) {
		got := a.Stats().Flushes.Load()
		return fmt.Sprintf("%d flushes", got), got >= target
	})
}

// tops returns, from what rec received so far, the lists of (counter,
// window) by partition, the latest per partition, and how many were
// received in all.
func (r *recorder) tops(counter, window string) (map[uint32]partial.TopList, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[uint32]partial.TopList)
	n := 0
	for _, b := range r.batches {
		for _, l := range b.Tops {
			if l.Counter == counter && l.Window == window {
				out[b.Partition] = l
				n++
			}
		}
	}
	return out, n
}

func incr(t *testing.T, a *region.Agent, counter string, counts map[string]int64) {
	t.Helper()
	var incs []region.Increment
	for id, n := range counts {
		incs = append(incs, region.Increment{ContentID: id, Counter: counter, Delta: n})
	}
	if err := a.Increment(context.Background(), incs); err != nil {
		t.Fatal(err)
	}
}

// TestTrendingListsShipped: each flush ships the lists of the partitions
// whose lists changed, after their sums, with the items of the partition
// only; unchanged lists are not shipped again within the minute, are
// shipped again when the minute changes, and once the windows are empty
// an empty list tells the rollup so.
func TestTrendingListsShipped(t *testing.T) {
	rec := newRecorder(t)
	clk := testenv.NewClock(minute0)
	a := trendAgent(t, rec, clk, nil)
	incr(t, a, "view", map[string]int64{"a": 100, "b": 50, "c": 7})
	incr(t, a, "view", map[string]int64{"a": 1})
	incr(t, a, "dislike_x", map[string]int64{"a": 1000}) // not a trending counter
	waitFlushes(t, a, 2)

	want := map[string]int64{"a": 101, "b": 50, "c": 7}
	check := func(step string, lists map[uint32]partial.TopList, want map[string]int64) {
		t.Helper()
		got := map[string]int64{}
		for p, l := range lists {
			if l.Floor != 0 {
				t.Errorf("%s: partition %d floor = %d, want 0 (nothing evicted)", step, p, l.Floor)
			}
			for _, it := range l.Items {
				if q := partial.PartitionOf(it.ContentID, 16); q != p {
					t.Errorf("%s: item %q in the list of partition %d, belongs to %d", step, it.ContentID, p, q)
				}
				if it.Error != 0 {
					t.Errorf("%s: item %+v has an error bound; nothing was evicted", step, it)
				}
				got[it.ContentID] += it.Count
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: listed counts = %v, want %v", step, got, want)
		}
	}
	for _, w := range engagement.TrendingWindows() {
		lists, _ := rec.tops("view", w)
		check("first flush "+w, lists, want)
	}
	if lists, _ := rec.tops("dislike_x", engagement.Window5m); len(lists) != 0 {
		t.Errorf("lists of an untracked counter: %v", lists)
	}
	ids := map[uint32]bool{}
	for id := range want {
		ids[partial.PartitionOf(id, 16)] = true
	}
	if lists, _ := rec.tops("view", engagement.Window5m); len(lists) != len(ids) {
		t.Errorf("lists shipped to %d partitions, want the %d that hold items", len(lists), len(ids))
	}

	// Nothing new: nothing shipped.
	_, before := rec.tops("view", engagement.Window5m)
	shipped := a.Stats().TopListsShipped.Load()
	waitFlushes(t, a, 3)
	if got := a.Stats().TopListsShipped.Load(); got != shipped {
		t.Errorf("unchanged lists shipped again within the minute: %d lists, before %d", got, shipped)
	}

	// Next minute: the same lists again, so the rollup sees them current.
	clk.Add(time.Minute)
	waitFlushes(t, a, 2)
	lists, after := rec.tops("view", engagement.Window5m)
	if after != before+len(ids) {
		t.Errorf("next minute: %d more 5m lists, want %d", after-before, len(ids))
	}
	check("next minute", lists, want)

	// The 5m window has moved past the counts: its lists are shipped empty.
	clk.Add(5 * time.Minute)
	waitFlushes(t, a, 2)
	lists, _ = rec.tops("view", engagement.Window5m)
	check("5m later", lists, map[string]int64{})
	if lists, _ := rec.tops("view", engagement.Window1h); len(lists) != len(ids) {
		t.Errorf("1h lists: %v", lists)
	} else {
		check("5m later, 1h", lists, want)
	}
}

// peerSet hands agents' own summaries to each other, as gossip would.
type peerSet struct {
	self   *region.Agent
	agents []*region.Agent
}

func (p peerSet) PeerSummaries(key string) []region.PeerSummary {
	var out []region.PeerSummary
	for i, a := range p.agents {
		if a == p.self {
			continue
		}
		for _, s := range a.TrendingSummaries() {
			if s.Key == key {
				out = append(out, region.PeerSummary{Agent: fmt.Sprint("peer-", i), AsOf: s.AsOf, Data: s.Data})
			}
		}
	}
	return out
}

// TestTrendingFromPeers: an agent answers its own region from its summary
// and its peers'; with summaries too small to track every item the counts
// have error bounds, and every bound holds against the exact counts.
func TestTrendingFromPeers(t *testing.T) {
	for _, tc := range []struct {
		name     string
		bytes    int
		wantZero bool // every error bound is 0
	}{
		{"exact", 64 << 10, true},
		{"evicting", 4 << 10, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := testenv.NewClock(minute0)
			var agents []*region.Agent
			for i := range 3 {
				agents = append(agents, trendAgent(t, newRecorder(t), clk, func(c *region.Config, d *region.Deps) {
					c.AgentID = fmt.Sprint("us-a", i)
					c.Trending.SummaryBytes = tc.bytes
				}))
			}
			exact := map[string]int64{}
			rng := rand.New(rand.NewPCG(1, 2))
			zipf := rand.NewZipf(rng, 1.1, 1, 499)
			for range 20000 {
				id := fmt.Sprint("item-", zipf.Uint64())
				a := agents[rng.IntN(len(agents))]
				incr(t, a, "share", map[string]int64{id: 1})
				exact[id]++
			}
			for _, a := range agents {
				waitFlushes(t, a, 2)
			}
			a := agents[0]
			a.SetPeers(peerSet{self: a, agents: agents})
			got, err := a.Trending(context.Background(), "us", "share", engagement.Window1h, 20)
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Items) != 20 || !got.AsOf.Equal(minute0) {
				t.Fatalf("Trending = %d items as of %v; want 20 as of %v", len(got.Items), got.AsOf, minute0)
			}
			for i, it := range got.Items {
				e := exact[it.ContentID]
				if e < it.Count-it.Error || e > it.Count {
					t.Errorf("item %d %q: exact %d not in [%d, %d]", i, it.ContentID, e, it.Count-it.Error, it.Count)
				}
				if tc.wantZero && it.Error != 0 {
					t.Errorf("item %d %+v: error bound with room for every item", i, it)
				}
				if i > 0 && got.Items[i-1].Count < it.Count {
					t.Errorf("items not ranked: %+v before %+v", got.Items[i-1], it)
				}
			}
			if !tc.wantZero && !slices.ContainsFunc(got.Items, func(it engagement.TrendingItem) bool { return it.Error > 0 }) {
				t.Errorf("no error bound with 4 KiB summaries; the test did not exercise evictions")
			}
			// The exact top 5 are all there and in order: Zipf 1.1 separates them.
			top := slices.SortedFunc(func(yield func(string) bool) {
				for id := range exact {
					if !yield(id) {
						return
					}
				}
			}, func(x, y string) int { return int(exact[y] - exact[x]) })
			for i := range 5 {
				if got.Items[i].ContentID != top[i] {
					t.Errorf("rank %d = %q, exact %q", i, got.Items[i].ContentID, top[i])
				}
			}
			// Without peers the agent answers from the store, which holds nothing.
			a.SetPeers(nil)
			clk.Add(time.Second) // past the cache
			got, err = a.Trending(context.Background(), "us", "share", engagement.Window1h, 20)
			if err != nil || len(got.Items) != 0 || !got.AsOf.IsZero() {
				t.Fatalf("Trending without peers and stored lists = %+v, %v; want nothing", got, err)
			}
		})
	}
}

// TestTrendingFromStore: without peers, and for every scope but the own
// region with peers, the agent merges the rollup's per-partition lists.
func TestTrendingFromStore(t *testing.T) {
	clk := testenv.NewClock(minute0)
	st := embeddedtest.Open(t, embedded.Config{Timeout: time.Second})
	a := trendAgent(t, newRecorder(t), clk, func(c *region.Config, d *region.Deps) {
		d.Trending = st
		c.CacheTTL = time.Minute
	})
	ctx := context.Background()
	put := func(scope string, p uint32, asOf time.Time, items ...engagement.TrendingItem) {
		t.Helper()
		err := st.PutTrending(ctx, engagement.Trending{TrendingKey: engagement.TrendingKey{Scope: scope, Counter: "like", Window: "24h", Partition: p}, AsOf: asOf, Items: items})
		if err != nil {
			t.Fatal(err)
		}
	}
	put("global", 0, minute0, engagement.TrendingItem{ContentID: "x", Count: 50, Error: 2}, engagement.TrendingItem{ContentID: "y", Count: 10})
	put("global", 3, minute0.Add(-time.Second), engagement.TrendingItem{ContentID: "z", Count: 30, Error: 30}, engagement.TrendingItem{ContentID: "w", Count: 10})
	put("eu", 3, minute0, engagement.TrendingItem{ContentID: "eu-only", Count: 1})
	// Older than the window: nothing it counts can be in it any more.
	put("global", 9, minute0.Add(-24*time.Hour-time.Second), engagement.TrendingItem{ContentID: "stale", Count: 1000})
	a.SetPeers(peerSet{self: a, agents: []*region.Agent{a}}) // affects "us" only

	got, err := a.Trending(ctx, "global", "like", "24h", 3)
	if err != nil {
		t.Fatal(err)
	}
	want := []engagement.TrendingItem{{ContentID: "x", Count: 50, Error: 2}, {ContentID: "z", Count: 30, Error: 30}, {ContentID: "w", Count: 10}}
	if !slices.Equal(got.Items, want) || !got.AsOf.Equal(minute0.Add(-time.Second)) {
		t.Fatalf("Trending(global) = %+v; want %+v as of the oldest partition", got, want)
	}
	// Cached: a change is seen after CacheTTL.
	put("global", 5, minute0, engagement.TrendingItem{ContentID: "v", Count: 99})
	if got, _ := a.Trending(ctx, "global", "like", "24h", 1); got.Items[0].ContentID != "x" {
		t.Fatalf("within the cache TTL: %+v", got.Items)
	}
	clk.Add(time.Minute)
	if got, _ := a.Trending(ctx, "global", "like", "24h", 1); got.Items[0].ContentID != "v" {
		t.Fatalf("after the cache TTL: %+v", got.Items)
	}
	if got, err := a.Trending(ctx, "eu", "like", "24h", 10); err != nil || len(got.Items) != 1 {
		t.Fatalf("Trending(eu) = %+v, %v", got, err)
	}

	for _, c := range []struct {
		scope, counter, window string
		k                      int
		want                   error
	}{
		{"global", "dislike", "5m", 10, region.ErrNotTracked},
		{"global", "like", "10m", 10, region.ErrTrendingQuery},
		{"global", "like", "5m", 0, region.ErrTrendingQuery},
		{"global", "like", "5m", 1001, region.ErrTrendingQuery},
		{"GLOBAL", "like", "5m", 10, region.ErrTrendingQuery},
	} {
		if _, err := a.Trending(ctx, c.scope, c.counter, c.window, c.k); !errors.Is(err, c.want) {
			t.Errorf("Trending(%q, %q, %q, %d) = %v; want %v", c.scope, c.counter, c.window, c.k, err, c.want)
		}
	}
}

// TestHotRuleLoop: the agent's hot rule reads its region's stored list and
// gives the top items more shards, in the directory (for every counter
// created later) and on the live counter.
func TestHotRuleLoop(t *testing.T) {
	clk := testenv.NewClock(minute0)
	st := embeddedtest.Open(t, embedded.Config{Timeout: time.Second})
	dir := directory.NewLocal(1)
	a := trendAgent(t, newRecorder(t), clk, func(c *region.Config, d *region.Deps) {
		c.Trending.Hot = region.HotConfig{Top: 2, Shards: 8, Interval: 5 * time.Millisecond, CoolAfter: time.Minute}
		c.CacheTTL = 0
		d.Trending, d.Directory, d.ShardWriter = st, dir, dir
	})
	var items []engagement.TrendingItem
	for i := range 5 {
		items = append(items, engagement.TrendingItem{ContentID: fmt.Sprint("v", i), Count: int64(100 - i)})
	}
	if err := st.PutTrending(context.Background(), engagement.Trending{
		TrendingKey: engagement.TrendingKey{Scope: "us", Counter: "view", Window: "5m"}, AsOf: minute0, Items: items,
	}); err != nil {
		t.Fatal(err)
	}
	incr(t, a, "view", map[string]int64{"v0": 1}) // a live counter to reshard
	testenv.Eventually(t, 10*time.Second, "hot items promoted: v0 8, v1 8 shards", func() (string, bool) {
		v0, v1 := dir.Shards("v0", "view"), dir.Shards("v1", "view")
		return fmt.Sprintf("v0 %d, v1 %d shards", v0, v1), v0 == 8 && v1 == 8
	})
	if got := dir.Shards("v2", "view"); got != 1 || dir.Len() != 2 {
		t.Fatalf("v2 (rank 3) has %d shards, directory holds %d entries; want 1, 2", got, dir.Len())
	}
	if got := a.Stats().HotPromoted.Load(); got != 2 {
		t.Fatalf("promoted %d, want 2", got)
	}
	// The live counter of v0 was resharded: what it took before is kept.
	incr(t, a, "view", map[string]int64{"v0": 2})
	if got := a.Stats().HotCounters.Load(); got != 2 {
		t.Fatalf("hot counters gauge = %d, want 2", got)
	}
}

// BenchmarkIncrementTrending measures the agent's increment path with and
// without trending, from parallel goroutines over a Zipf stream of 10,000
// items, with the default one-second flush running alongside. Trending is
// fed from the flush, so the increment path is the same code either way;
// the ratio of the two ns/op is the cost trending adds, through the
// flusher's share of the CPU. Run it for whole seconds, pinned:
//
//	taskset -c 1 go test ./region -run '^$' -bench IncrementTrending -benchtime 5s -count 5
func BenchmarkIncrementTrending(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprint("trending=", on), func(b *testing.B) {
			st := embeddedtest.Open(b, embedded.Config{Timeout: time.Second})
			cfg := region.DefaultConfig("us", "us-a1") // flushes every second
			if !on {
				cfg.Trending = region.TrendingConfig{}
			}
			a, err := region.New(cfg, region.Deps{Reactions: st, Stats: st, Publisher: discard{}})
			if err != nil {
				b.Fatal(err)
			}
			a.Start()
			defer a.Stop(context.Background())
			ids := make([]string, 10000)
			for i := range ids {
				ids[i] = fmt.Sprint("item-", i)
			}
			var seed atomic.Uint64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				rng := rand.New(rand.NewPCG(seed.Add(1), 7))
				zipf := rand.NewZipf(rng, 1.01, 1, uint64(len(ids)-1))
				inc := []region.Increment{{Counter: "view", Delta: 1}}
				for pb.Next() {
					inc[0].ContentID = ids[zipf.Uint64()]
					if err := a.Increment(context.Background(), inc); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(a.Stats().TrendingNanos.Load())/float64(max(1, a.Stats().Flushes.Load()))/1e3, "trend-µs/flush")
			b.ReportMetric(float64(a.Stats().FlushNanos.Load())/float64(max(1, a.Stats().Flushes.Load()))/1e3, "flush-µs/flush")
		})
	}
}

// discard is a Publisher that stores nothing, for benchmarks.
type discard struct{}

func (discard) Publish(context.Context, uint32, string, []byte) error { return nil }

func TestTrendingConfigValidate(t *testing.T) {
	ok := region.DefaultTrendingConfig()
	for _, c := range []struct {
		name string
		mod  func(c *region.TrendingConfig)
		want string // "" means valid
	}{
		{"default", func(c *region.TrendingConfig) {}, ""},
		{"off", func(c *region.TrendingConfig) { *c = region.TrendingConfig{} }, ""},
		{"zero fields take defaults", func(c *region.TrendingConfig) { *c = region.TrendingConfig{Counters: []string{"view"}} }, ""},
		{"bad counter", func(c *region.TrendingConfig) { c.Counters = []string{"View"} }, "counters[0]"},
		{"counter twice", func(c *region.TrendingConfig) { c.Counters = []string{"view", "view"} }, "listed twice"},
		{"tiny summary", func(c *region.TrendingConfig) { c.SummaryBytes = 100 }, "summary bytes"},
		{"list too long", func(c *region.TrendingConfig) { c.ListLen = 1001 }, "list length"},
		{"negative list", func(c *region.TrendingConfig) { c.ListLen = -1 }, "list length"},
		{"hot top", func(c *region.TrendingConfig) { c.Hot.Top = 501 }, "hot top"},
		{"hot window", func(c *region.TrendingConfig) { c.Hot.Window = "10m" }, "hot window"},
		{"hot shards", func(c *region.TrendingConfig) { c.Hot.Shards = 5000 }, "hot shards"},
		{"hot cool after", func(c *region.TrendingConfig) { c.Hot.CoolAfter = -time.Second }, "cool after"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := ok
			cfg.Counters = slices.Clone(ok.Counters)
			c.mod(&cfg)
			err := cfg.Validate()
			if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
				t.Fatalf("Validate() = %v; want %q", err, c.want)
			}
			ac := region.DefaultConfig("us", "us-a1")
			ac.Trending = cfg
			if err2 := ac.Validate(); (err2 == nil) != (err == nil) {
				t.Fatalf("Config.Validate() = %v; TrendingConfig.Validate() = %v", err2, err)
			}
		})
	}
}
