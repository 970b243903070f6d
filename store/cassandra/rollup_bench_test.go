package cassandra

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/partial"
	"github.com/edgecount/edgecount/rollup"
)

// BenchmarkRollupWrite measures DESIGN target G10's first ratio: ContentStats
// rows written per second by the rollup (rollup.Apply of partial-sum
// messages: read the item's rows, add, write global and regional rows) ÷
// raw single-row INSERTs of the same row shape into the same table. The
// rollup applies one message at a time per partition, so it runs one
// goroutine per partition (16, the default); the raw writes run from
// benchWorkers goroutines. Each iteration runs a burst of each, and the
// ratio compares the sums (both see the same machine load). Every message
// carries rollupItems distinct items of one region: 2 rows each.
func BenchmarkRollupWrite(b *testing.B) {
	const (
		partitions  = 16
		rollupItems = 100
		messages    = 4 // per partition and iteration
	)
	_, s := testKeyspace(b)
	ctx := b.Context()
	ru := rollup.New(s, nil, nil)
	var seq, raw atomic.Int64
	rawWrite := func(int) error {
		n := raw.Add(1)
		r := engagement.Stats{ContentID: fmt.Sprintf("raw-%d", n), Scope: engagement.GlobalScope,
			Counters: map[string]int64{"view": n}, UpdatedAt: time.Now(), LastSeq: uint64(n)}
		return s.query(s.q.writeStats, statsArgs(&r)...).Idempotent(true).ExecContext(ctx)
	}
	msg := func(p int) *partial.Batch {
		n := seq.Add(1)
		bt := &partial.Batch{Agent: "bench", Region: "eu-west", Epoch: 1, Seq: uint64(n), Partition: uint32(p), FlushedAt: time.Now()}
		for i := range rollupItems {
			bt.Sums = append(bt.Sums, partial.Sum{ContentID: fmt.Sprintf("ru-%d-%d", p, i), Counter: "view", Region: "eu-west", Delta: 3})
		}
		return bt
	}
	var rawTime, rollupTime time.Duration
	var rows int
	for range b.N {
		start := time.Now()
		var wg sync.WaitGroup
		for p := range partitions {
			wg.Go(func() {
				for range messages {
					bt := msg(p)
					if err := ru.Apply(ctx, bt.Seq, bt); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		rollupTime += time.Since(start)
		n := partitions * messages * rollupItems * 2
		rows += n
		rawTime += burst(b, n, rawWrite)
	}
	b.ReportMetric(float64(rows)/rawTime.Seconds(), "raw-rows/s")
	b.ReportMetric(float64(rows)/rollupTime.Seconds(), "rollup-rows/s")
	b.ReportMetric(rawTime.Seconds()/rollupTime.Seconds(), "ratio")
	b.ReportMetric(0, "ns/op")
}
