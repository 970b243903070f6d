package region_test

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/edgecount/edgecount/region"
	"github.com/edgecount/edgecount/store/embedded"
	"github.com/edgecount/edgecount/store/embedded/embeddedtest"
)

// quickPublisher stores nothing and answers at once.
type quickPublisher struct{}

func (quickPublisher) Publish(context.Context, uint32, string, []byte) error { return nil }

// BenchmarkAgentFlush times one flush of 10,000 items that each hold a
// delta (drain, encode, and, with fresh reads, remembering the messages'
// sums): what fresh reads add to the flush, and so to G12's lag, measured
// against the same benchmark on main. EDGECOUNT_BENCH_FRESH=1 makes a
// fresh read first, so that every flush remembers its sums; quickPublisher
// reports no sequences, so nothing is pruned and the agent keeps the
// bound's worth (2^18 sums): the worst case.
func BenchmarkAgentFlush(b *testing.B) {
	const items = 10_000
	st := embeddedtest.Open(b, embedded.Config{Timeout: time.Second})
	cfg := region.DefaultConfig("us", "us-a1")
	cfg.FlushInterval = time.Hour
	a, err := region.New(cfg, region.Deps{Reactions: st, Stats: st, Publisher: quickPublisher{}})
	if err != nil {
		b.Fatal(err)
	}
	a.Start()
	defer a.Stop(context.Background())
	incs := make([]region.Increment, items)
	for i := range incs {
		incs[i] = region.Increment{ContentID: "item-" + strconv.Itoa(i), Counter: "view", Delta: 1}
	}
	if fresh := os.Getenv("EDGECOUNT_BENCH_FRESH") != ""; fresh {
		a.HeldDeltas([]string{"item-0"}) // fresh reads in use: flushes remember
		b.Log("fresh reads in use")
	}
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		if err := a.Increment(context.Background(), incs); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		a.Flush()
	}
}
