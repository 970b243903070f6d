package topk

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
	"unsafe"
)

// Benchmarks for docs/design.md target G8 (update cost against a map
// increment) and the merge cost. Run them with
//
//	go test ./topk -run '^$' -bench . -benchmem
//
// G8 = ns/op of Add/zipf-S ÷ ns/op of MapIncrement/zipf-S. The full
// accuracy and speed report is `go run -C tools ./topk-report`.

const (
	benchItems  = 1_000_000
	benchEvents = 1 << 21
	benchIDLen  = 16
)

var benchStreams sync.Map // exponent → []byte of benchEvents ids

// benchStream returns benchEvents ids of benchIDLen bytes, laid out one
// after another (as ids arrive in requests), drawn from a Zipf law of
// exponent s over benchItems items.
func benchStream(s float64) []byte {
	if v, ok := benchStreams.Load(s); ok {
		return v.([]byte)
	}
	cdf := make([]float64, benchItems)
	sum := 0.0
	for i := range cdf {
		sum += math.Pow(float64(i+1), -s)
		cdf[i] = sum
	}
	r := rand.New(rand.NewPCG(42, uint64(s*10)))
	buf := make([]byte, 0, benchEvents*benchIDLen)
	for range benchEvents {
		i, _ := slices.BinarySearch(cdf, r.Float64()*sum)
		buf = fmt.Appendf(buf, "%016x", uint64(i)*0x9e3779b97f4a7c15)
	}
	benchStreams.Store(s, buf)
	return buf
}

func benchID(buf []byte, i int) string {
	i &= benchEvents - 1
	return unsafe.String(&buf[i*benchIDLen], benchIDLen)
}

var zipfExponents = []float64{0.8, 1.0, 1.2}

func BenchmarkAdd(b *testing.B) {
	for _, sk := range zipfExponents {
		b.Run("zipf-"+strconv.FormatFloat(sk, 'f', 1, 64), func(b *testing.B) {
			buf := benchStream(sk)
			s := SummaryForBytes(64 << 10)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				s.Add(benchID(buf, i), 1)
			}
		})
	}
}

func BenchmarkMapIncrement(b *testing.B) {
	for _, sk := range zipfExponents {
		b.Run("zipf-"+strconv.FormatFloat(sk, 'f', 1, 64), func(b *testing.B) {
			buf := benchStream(sk)
			m := make(map[string]int64)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				m[benchID(buf, i)]++
			}
		})
	}
}

func BenchmarkMerge(b *testing.B) {
	buf := benchStream(1.0)
	for _, kib := range []int{16, 64, 256} {
		b.Run(strconv.Itoa(kib)+"KiB", func(b *testing.B) {
			var parts [2]*Summary
			for p := range parts {
				parts[p] = SummaryForBytes(kib << 10)
				for i := p; i < benchEvents; i += 2 {
					parts[p].Add(benchID(buf, i), 1)
				}
			}
			dst := SummaryForBytes(kib << 10)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				dst.Reset()
				dst.Merge(parts[0])
				dst.Merge(parts[1])
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(2*b.N)/1000, "µs/merge")
		})
	}
}

func BenchmarkWindowAdd(b *testing.B) {
	buf := benchStream(1.0)
	w, err := NewWindow(DefaultWindowConfig(DefaultConfig(500)))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		// One million adds a minute: rollovers included.
		w.Add(t0.Add(time.Duration(i)*60*time.Microsecond), benchID(buf, i), 1)
	}
}
