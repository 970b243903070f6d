package region_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/edgecount/edgecount/region"
	"github.com/edgecount/edgecount/store/embedded"
	"github.com/edgecount/edgecount/store/embedded/embeddedtest"
	"github.com/edgecount/edgecount/wal"
)

type nopPublisher struct{}

func (nopPublisher) Publish(context.Context, uint32, string, []byte) error { return nil }

// BenchmarkAgentIncrement measures Agent.Increment without HTTP, 64
// goroutines, for each durability and batch size: what the log itself
// costs, beside BenchmarkDurableIngest in cmd/edge-agent (the same through
// the HTTP path).
//
//	go test -run '^$' -bench AgentIncrement -benchtime 2s ./region/
func BenchmarkAgentIncrement(b *testing.B) {
	st := embeddedtest.Open(b, embedded.Config{Timeout: time.Second})
	for _, size := range []int{100, 1} {
		for _, mode := range []wal.Durability{wal.None, wal.Fsync, wal.Interval} {
			b.Run(fmt.Sprintf("batch=%d/durability=%s", size, mode), func(b *testing.B) {
				cfg := region.DefaultConfig("us", "us-bench")
				cfg.Log = region.LogConfig{Durability: mode, Dir: filepath.Join(b.TempDir(), "log"), MaxBytes: 1 << 30, SyncInterval: 10 * time.Millisecond}
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
				b.SetParallelism(32) // 64 goroutines on 2 cores
				b.ReportAllocs()
				start := time.Now()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if err := a.Increment(context.Background(), incs); err != nil {
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
