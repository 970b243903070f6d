package region

import (
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"testing"
)

// zipfIDs draws item ranks 0..n-1 with probability proportional to
// 1/(rank+1)^s by inverting the cumulative distribution (math/rand/v2's
// Zipf needs s > 1; docs/design.md's G10 asks for s = 1.0).
type zipfIDs struct {
	cdf []float64
	rng *rand.Rand
}

func newZipfIDs(n int, s float64, seed uint64) *zipfIDs {
	cdf := make([]float64, n)
	var sum float64
	for i := range n {
		sum += 1 / math.Pow(float64(i+1), s)
		cdf[i] = sum
	}
	for i := range cdf {
		cdf[i] /= sum
	}
	return &zipfIDs{cdf: cdf, rng: rand.New(rand.NewPCG(seed, seed+1))}
}

func (z *zipfIDs) next() int { return sort.SearchFloat64s(z.cdf, z.rng.Float64()) }

// BenchmarkFlushAggregation measures DESIGN target G10's second ratio:
// increments taken ÷ ContentStats rows the rollup writes for them, for a
// Zipf 1.0 stream over 10^6 items at a 1 s flush. Each flush interval's
// increments go through region.Counters and are drained as the flusher
// does; each drained (item, counter) is one partial sum, which the rollup
// turns into two rows (the global and the region's). The rate is
// increments per flush interval: 2.1 M/s is what one pinned agent took
// through the HTTP API in scripts/bench.sh (G1), 200 k/s a lighter load.
func BenchmarkFlushAggregation(b *testing.B) {
	const items = 1_000_000
	z := newZipfIDs(items, 1.0, 1)
	ids := make([]string, items)
	for i := range ids {
		ids[i] = "video-" + strconv.Itoa(i)
	}
	for _, rate := range []int{200_000, 2_100_000} {
		b.Run("per-flush-"+strconv.Itoa(rate), func(b *testing.B) {
			c := NewCounters(nil, CountersConfig{})
			var incs, rows int
			for range b.N {
				for range rate {
					c.Add(Key{ContentID: ids[z.next()], Counter: "view", Region: "eu-west"}, 1)
				}
				incs += rate
				c.Drain(func(Key, int64) { rows += 2 })
			}
			b.ReportMetric(float64(incs)/float64(rows), "increments/row")
			b.ReportMetric(0, "ns/op")
		})
	}
}
