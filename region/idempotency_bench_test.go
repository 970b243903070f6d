package region_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgecount/edgecount/region"
	"github.com/edgecount/edgecount/store/embedded"
	"github.com/edgecount/edgecount/store/embedded/embeddedtest"
	"github.com/edgecount/edgecount/wal"
)

// BenchmarkIncrementKeyed measures what an Idempotency-Key costs: the same
// increments through Increment (key=none) and through IncrementOnce with a
// new key per request (key=new: a digest, a table insert, a bigger log
// record, and, per flush, the keys-log write) and with a repeated key
// (key=retry: a digest and a lookup, nothing applied), 64 goroutines, in
// memory and with the fsync log. The ratio keyed ÷ plain of incs/s is the
// figure docs/idempotency.md reports; run the pairs in the same run:
//
//	taskset -c 1 go test -run '^$' -bench IncrementKeyed -benchtime 2s -count 3 ./region/
func BenchmarkIncrementKeyed(b *testing.B) {
	st := embeddedtest.Open(b, embedded.Config{Timeout: time.Second})
	for _, mode := range []wal.Durability{wal.None, wal.Fsync} {
		for _, size := range []int{1, 100} {
			for _, key := range []string{"none", "new", "retry"} {
				b.Run(fmt.Sprintf("durability=%s/batch=%d/key=%s", mode, size, key), func(b *testing.B) {
					cfg := region.DefaultConfig("us", "us-bench")
					cfg.Log = region.LogConfig{Durability: mode, Dir: filepath.Join(b.TempDir(), "log"), MaxBytes: 1 << 30, SyncInterval: 10 * time.Millisecond}
					cfg.Idempotency.MaxKeys = 100_000 // the table at its bound: inserts evict
					a, err := region.New(cfg, region.Deps{Reactions: st, Stats: st, Publisher: nopPublisher{}})
					if err != nil {
						b.Fatal(err)
					}
					if err := a.Recover(context.Background()); err != nil {
						b.Fatal(err)
					}
					a.Start()
					defer a.Stop(context.Background())
					incs := make([]region.Increment, size)
					for i := range incs {
						incs[i] = region.Increment{ContentID: fmt.Sprintf("item-%d", i), Counter: "view", Delta: 1}
					}
					var seq atomic.Uint64
					b.SetParallelism(32) // 64 goroutines on 2 cores
					b.ReportAllocs()
					start := time.Now()
					b.RunParallel(func(pb *testing.PB) {
						k := region.IdempotencyKey{Scope: "bench", Key: "retry-" + strconv.FormatUint(seq.Add(1), 10)}
						ctx := context.Background()
						for pb.Next() {
							var err error
							switch key {
							case "none":
								err = a.Increment(ctx, incs)
							case "new":
								k.Key = "0f3c9a1e-4b7d-4c2a-8e1f-" + strconv.FormatUint(seq.Add(1), 16)
								_, _, err = a.IncrementOnce(ctx, k, incs)
							default:
								_, _, err = a.IncrementOnce(ctx, k, incs)
							}
							if err != nil {
								b.Error(err)
								return
							}
						}
					})
					b.ReportMetric(float64(b.N*size)/time.Since(start).Seconds(), "incs/s")
				})
			}
		}
	}
}
