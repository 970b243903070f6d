package region_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/region"
	"github.com/edgecount/edgecount/store/embedded"
	"github.com/edgecount/edgecount/store/embedded/embeddedtest"
)

// BenchmarkReadCounts compares a warm eventual read with a fresh one of
// the same item, one id a read, in the same run: fresh adds the look-up
// of the agent's own held deltas (the item holds a view in the counters
// and in one flushed message) and the merge; no peers. Run with
//
//	taskset -c 1 go test -run '^$' -bench BenchmarkReadCounts -count 3 ./region
func BenchmarkReadCounts(b *testing.B) {
	const items = 10_000
	st := embeddedtest.Open(b, embedded.Config{Timeout: time.Second})
	cfg := region.DefaultConfig("us", "us-a1")
	cfg.CacheTTL, cfg.CacheEntries = time.Hour, 2*items
	cfg.FlushInterval = time.Hour // the benchmark flushes
	a, err := region.New(cfg, region.Deps{Reactions: st, Stats: st, Publisher: &seqPublisher{next: 100}})
	if err != nil {
		b.Fatal(err)
	}
	a.Start()
	defer a.Stop(context.Background())
	ids := make([]string, items)
	rows := make([]engagement.Stats, items)
	incs := make([]region.Increment, items)
	for i := range ids {
		ids[i] = fmt.Sprintf("item-%d", i)
		rows[i] = engagement.Stats{ContentID: ids[i], Scope: engagement.GlobalScope, Likes: 1, Counters: map[string]int64{"view": 1}, LastSeq: 1}
		incs[i] = region.Increment{ContentID: ids[i], Counter: "view", Delta: 1}
	}
	if _, err := a.Counts(context.Background(), ids); err != nil {
		b.Fatal(err)
	}
	a.ApplyRows(time.Now(), rows)
	a.HeldDeltas(ids[:1]) // fresh reads in use: flushes remember their messages
	// Each item: one view in a flushed, unapplied message, one in the counters.
	if err := a.Increment(context.Background(), incs); err != nil {
		b.Fatal(err)
	}
	a.Flush()
	if err := a.Increment(context.Background(), incs); err != nil {
		b.Fatal(err)
	}
	for _, mode := range []region.Consistency{region.Eventual, region.Fresh} {
		b.Run(mode.String(), func(b *testing.B) {
			dst := make([]region.CountRead, 1)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if _, err := a.ReadCounts(context.Background(), ids[i%items:i%items+1], mode, dst); err != nil {
					b.Fatal(err)
				}
				if mode == region.Fresh && dst[0].Rows[0].Counters["view"] != 3 {
					b.Fatalf("fresh views = %d, want 3", dst[0].Rows[0].Counters["view"])
				}
			}
		})
	}
}

// BenchmarkReadCounts16 reads 16 warm items in one call ("batch", the
// lookups in stages: statsCache.getAll) beside the same 16 read one call
// each ("one-by-one", the peer in the same run), over tables of 10^4 items
// (CPU-cache resident on a quiet core) and 10^6 (not): the difference is the
// overlap of the lookups' cache misses.
//
//	taskset -c 1 go test -run '^$' -bench ReadCounts16 -count 3 ./region
func BenchmarkReadCounts16(b *testing.B) {
	for _, items := range []int{10_000, 1_000_000} {
		b.Run(fmt.Sprintf("items=%d", items), func(b *testing.B) {
			a, ids := newBenchCacheAgent(b, items)
			for i := 0; i < items; i += 1000 {
				if _, err := a.Counts(context.Background(), ids[i:min(i+1000, items)]); err != nil {
					b.Fatal(err)
				}
			}
			// 16 ids a read, spread over the table.
			rng := rand.New(rand.NewPCG(1, 2))
			reads := make([][]string, 4096)
			for i := range reads {
				reads[i] = make([]string, 16)
				for j := range reads[i] {
					reads[i][j] = ids[rng.IntN(items)]
				}
			}
			dst := make([]region.CountRead, 16)
			b.Run("batch", func(b *testing.B) {
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					if _, err := a.ReadCounts(context.Background(), reads[i%len(reads)], region.Eventual, dst); err != nil {
						b.Fatal(err)
					}
					if dst[15].Stored.IsZero() {
						b.Fatal("not warm")
					}
				}
			})
			b.Run("one-by-one", func(b *testing.B) {
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					r := reads[i%len(reads)]
					for j := range r {
						if _, err := a.ReadCounts(context.Background(), r[j:j+1], region.Eventual, dst[j:j+1]); err != nil {
							b.Fatal(err)
						}
					}
					if dst[15].Stored.IsZero() {
						b.Fatal("not warm")
					}
				}
			})
		})
	}
}
