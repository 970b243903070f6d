package rollup_test

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/internal/testenv"
	"github.com/edgecount/edgecount/natsjs"
	"github.com/edgecount/edgecount/natsjs/natsjstest"
	"github.com/edgecount/edgecount/region"
	"github.com/edgecount/edgecount/rollup"
	"github.com/edgecount/edgecount/store/embedded"
	"github.com/edgecount/edgecount/store/embedded/embeddedtest"
)

// TestTrendingAcrossRegions splits a known stream of views over 3 regions
// × 2 agents (region.Agent), published through a real embedded NATS
// JetStream server to the rollup, which stores trending lists in a real
// embedded store; the agents read them back. The merged global and
// regional top-10 match the exact answer, and every reported error bound
// holds, for every window.
//
// Two bursts, at minute 0 and minute 7 of the test clock, with the same
// item popularity: the 5m window at minute 7 holds only the second, which
// the rollup counted exactly for the items the first burst made candidates
// (error 0); 1h and 24h hold both, bounded by the agents' summaries (small
// enough to evict, so some bounds are wide).
func TestTrendingAcrossRegions(t *testing.T) {
	const (
		partitions = 4
		items      = 3000
		perBurst   = 30000
	)
	ctx := context.Background()
	stream := natsjs.DefaultStreamConfig()
	stream.Name, stream.SubjectPrefix, stream.Partitions = "TRENDING_TEST", "trending.test", partitions
	client := natsjstest.Stream(t, natsjs.DefaultServerConfig(t.TempDir()), "trending-test", stream)
	st := embeddedtest.Open(t, embedded.Config{Timeout: 5 * time.Second})

	start := time.Date(2026, 3, 1, 10, 0, 30, 0, time.UTC)
	clk := testenv.NewClock(start)
	ru := rollup.New(st, clk.Now, nil)
	if err := ru.EnableTrending(rollup.TrendingConfig{Partitions: partitions, Interval: time.Hour}, st); err != nil {
		t.Fatal(err)
	}
	consumer := client.Consumer(natsjs.ConsumerConfig{Stream: stream, Durable: "trending-test", RetryMin: time.Millisecond, RetryMax: 10 * time.Millisecond})
	parts := []uint32{0, 1, 2, 3}
	cctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := consumer.Run(cctx, parts, ru.Handle); err != nil {
			t.Errorf("consumer: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })

	regions := []string{"us", "eu", "ap"}
	var agents []*region.Agent
	for _, r := range regions {
		for i := range 2 {
			cfg := region.DefaultConfig(r, fmt.Sprintf("%s-%d", r, i))
			cfg.Partitions = partitions
			cfg.FlushInterval = 10 * time.Millisecond
			cfg.Trending = region.TrendingConfig{Counters: []string{"view"}, SummaryBytes: 8 << 10, ListLen: 40}
			a, err := region.New(cfg, region.Deps{Reactions: st, Stats: st, Publisher: client.Publisher(stream), Now: clk.Now, Trending: st})
			if err != nil {
				t.Fatal(err)
			}
			a.Start()
			t.Cleanup(func() { a.Stop(context.Background()) })
			agents = append(agents, a)
		}
	}

	// exact[minute][scope][item] is what the test sent.
	exact := map[int]map[string]map[string]int64{}
	rng := rand.New(rand.NewPCG(42, 7))
	burst := func(minute int) {
		t.Helper()
		clk.Set(start.Add(time.Duration(minute) * time.Minute))
		counts := map[string]map[string]int64{}
		for _, s := range append(slices.Clone(regions), engagement.GlobalScope) {
			counts[s] = map[string]int64{}
		}
		zipf := rand.NewZipf(rng, 1.2, 1, items-1)
		batches := make([][]region.Increment, len(agents))
		for range perBurst {
			id := fmt.Sprintf("video-%04d", zipf.Uint64())
			ai := rng.IntN(len(agents))
			batches[ai] = append(batches[ai], region.Increment{ContentID: id, Counter: "view", Delta: 1})
			counts[agents[ai].Config().Region][id]++
			counts[engagement.GlobalScope][id]++
			if len(batches[ai]) == 100 {
				if err := agents[ai].Increment(ctx, batches[ai]); err != nil {
					t.Fatal(err)
				}
				batches[ai] = batches[ai][:0]
			}
		}
		for ai, b := range batches {
			if err := agents[ai].Increment(ctx, b); err != nil {
				t.Fatal(err)
			}
		}
		exact[minute] = counts
		// Every increment flushed at this minute, published and applied.
		for _, a := range agents {
			n := a.Stats().Flushes.Load() + 2
			testenv.Eventually(t, 30*time.Second, "two flushes", testenv.Until(func() bool { return a.Stats().Flushes.Load() >= n }))
			testenv.Eventually(t, 30*time.Second, "an empty outbox", testenv.Until(func() bool { return a.Stats().OutboxMessages.Load() == 0 }))
		}
		// Six agents flushing every 10 ms feed one consumer: under -race
		// beside other packages' tests it needs more than 30 s.
		testenv.Eventually(t, 2*time.Minute, "the rollup to apply everything", testenv.Until(func() bool {
			n, err := consumer.Pending(ctx, parts)
			return err == nil && n == 0
		}))
	}
	burst(0)
	burst(7)
	if got := ru.Stats().Poison.Load(); got != 0 {
		t.Errorf("poison messages = %d, want 0", got)
	}
	if err := ru.WriteTrending(ctx); err != nil {
		t.Fatal(err)
	}

	// windowCounts returns the exact counts of scope over window at minute 7.
	windowCounts := func(scope, window string) map[string]int64 {
		out := map[string]int64{}
		for minute, counts := range exact {
			if window == engagement.Window5m && minute < 7-4 {
				continue
			}
			for id, n := range counts[scope] {
				out[id] += n
			}
		}
		return out
	}
	reader := agents[0]
	zeroErrors, wideBounds := 0, 0
	for _, scope := range append(slices.Clone(regions), engagement.GlobalScope) {
		for _, w := range engagement.TrendingWindows() {
			want := windowCounts(scope, w)
			ids := slices.SortedFunc(maps.Keys(want), func(a, b string) int {
				return cmp.Or(cmp.Compare(want[b], want[a]), strings.Compare(a, b))
			})
			if want[ids[9]] == want[ids[10]] {
				t.Fatalf("%s %s: exact counts tie at rank 10 (%d); pick other seeds", scope, w, want[ids[9]])
			}
			got, err := reader.Trending(ctx, scope, "view", w, region.MaxTrendingK)
			if err != nil {
				t.Fatal(err)
			}
			if want := start.Add(7 * time.Minute).Truncate(time.Millisecond); !got.AsOf.Equal(want) {
				t.Errorf("%s %s: as of %v, want the last flush %v", scope, w, got.AsOf, want)
			}
			if len(got.Items) < 10 {
				t.Fatalf("%s %s: %d items", scope, w, len(got.Items))
			}
			var top []string
			for i, it := range got.Items {
				e := want[it.ContentID]
				if e < it.Count-it.Error || e > it.Count {
					t.Errorf("%s %s: %q exact %d not in [%d, %d]", scope, w, it.ContentID, e, it.Count-it.Error, it.Count)
				}
				if i < 10 {
					top = append(top, it.ContentID)
					if it.Error == 0 {
						zeroErrors++
					}
				}
				if it.Error > 0 {
					wideBounds++
				}
			}
			if !slices.Equal(top, ids[:10]) {
				t.Errorf("%s %s: top 10 = %v\nexact      %v", scope, w, top, ids[:10])
			}
			if w == engagement.Window5m {
				for _, it := range got.Items[:10] {
					if it.Error != 0 {
						t.Errorf("%s 5m: %+v has an error bound; the rollup counted it exactly", scope, it)
					}
				}
			}
		}
	}
	t.Logf("top-10 items with error 0: %d of %d; items with a wider bound: %d", zeroErrors, 4*3*10, wideBounds)
	if ts := ru.TrendingStats(); ts.StatesWritten.Load() > 0 {
		t.Logf("trending states: %d written, %.1f KB each on average", ts.StatesWritten.Load(), float64(ts.StateBytes.Load())/float64(ts.StatesWritten.Load())/1024)
	}
	if wideBounds == 0 {
		t.Errorf("no item with an error bound: the summaries did not evict, the bounds were not exercised")
	}
	if s := ru.TrendingStats(); s.BadItems.Load() != 0 || s.BadLists.Load() != 0 || s.Lists.Load() == 0 {
		t.Errorf("rollup trending stats: %d lists, %d bad lists, %d bad items", s.Lists.Load(), s.BadLists.Load(), s.BadItems.Load())
	}
}
