package rollup_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/edgecount/edgecount/partial"
	"github.com/edgecount/edgecount/rollup"
	"github.com/edgecount/edgecount/store/embedded"
)

// Shape of BenchmarkCoalesce's stream (G10): agents each taking rate
// increments a second, Zipf 1.0 over 10^6 items, flushing every second,
// 16 partitions of which the benchmark applies partition 0.
const (
	coalesceItems      = 1_000_000
	coalesceAgents     = 4
	coalesceRate       = 500_000 // per agent and second: 2 M/s in all
	coalesceSeconds    = 8
	coalescePartitions = 16
)

// coalesceStream returns partition 0's messages, in the order the broker
// would hold them (second by second, the agents' flushes interleaved), and
// the increments they carry.
func coalesceStream(b *testing.B) ([][]byte, int64) {
	b.Helper()
	cdf := make([]float64, coalesceItems)
	var sum float64
	for i := range cdf {
		sum += 1 / float64(i+1) // Zipf, s = 1.0
		cdf[i] = sum
	}
	for i := range cdf {
		cdf[i] /= sum
	}
	ids := make([]string, coalesceItems)
	inPart := make([]bool, coalesceItems)
	for i := range ids {
		ids[i] = "item-" + strconv.Itoa(i)
		inPart[i] = partial.PartitionOf(ids[i], coalescePartitions) == 0
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var msgs [][]byte
	var incs int64
	seq := make([]uint64, coalesceAgents)
	for s := range coalesceSeconds {
		for a := range coalesceAgents {
			counts := make(map[int]int64)
			for range coalesceRate {
				i := sort.SearchFloat64s(cdf, rng.Float64())
				if i < coalesceItems && inPart[i] {
					counts[i]++
				}
			}
			seq[a]++
			bt := &partial.Batch{Agent: "agent-" + strconv.Itoa(a), Region: "eu", Epoch: 1, Seq: seq[a], Partition: 0,
				FlushedAt: time.UnixMilli(int64(1_000_000 + s*1000))}
			for i, n := range counts {
				bt.Sums = append(bt.Sums, partial.Sum{ContentID: ids[i], Counter: "view", Region: "eu", Delta: n})
				incs += n
			}
			msgs = append(msgs, partial.Append(nil, bt))
		}
	}
	return msgs, incs
}

// BenchmarkCoalesce measures G10, increments per row written, with the
// rollup taking batch consecutive messages of a partition at a time
// (HandleBatch) on the embedded store without fsync: batch=1 is one write
// per message (before coalescing), batch=4 one flush interval of the four
// agents, larger batches what a rollup behind by that many messages takes
// at once. It reports incs/row, rows/s (rows written per second of apply)
// and msgs/s.
//
//	go test -run '^$' -bench Coalesce -benchtime 1x ./rollup/
func BenchmarkCoalesce(b *testing.B) {
	msgs, incs := coalesceStream(b)
	for _, batch := range []int{1, 4, 16, 32} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			var rows, writes uint64
			var took time.Duration
			for range b.N {
				b.StopTimer()
				st, err := embedded.Open(embedded.Config{Path: filepath.Join(b.TempDir(), "db"), Timeout: time.Second, NoSync: true})
				if err != nil {
					b.Fatal(err)
				}
				ru := rollup.New(st, nil, nil)
				b.StartTimer()
				start := time.Now()
				for i := 0; i < len(msgs); i += batch {
					part := make([]rollup.Message, 0, batch)
					for j := i; j < min(i+batch, len(msgs)); j++ {
						part = append(part, rollup.Message{Seq: uint64(j + 1), Data: msgs[j]})
					}
					if err := ru.HandleBatch(b.Context(), part); err != nil {
						b.Fatal(err)
					}
				}
				took += time.Since(start)
				b.StopTimer()
				rows += ru.Stats().RowsWritten.Load()
				writes += ru.Stats().RowWrites.Load()
				if err := st.Close(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			n := float64(b.N)
			b.ReportMetric(float64(incs)*n/float64(rows), "incs/row")
			b.ReportMetric(float64(rows)/took.Seconds(), "rows/s")
			b.ReportMetric(float64(len(msgs))*n/took.Seconds(), "msgs/s")
			b.ReportMetric(float64(writes)/n, "writes")
			b.ReportMetric(math.Round(float64(rows)/n), "rows")
		})
	}
}
