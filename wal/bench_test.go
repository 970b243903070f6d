package wal

import (
	"context"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func benchConfig(dir string, d Durability) Config {
	cfg := DefaultConfig()
	cfg.Dir = dir
	cfg.Durability = d
	cfg.SyncInterval = 10 * time.Millisecond
	return cfg
}

// BenchmarkAppend measures appends per second and the latency of each
// Append, per mode, with 1 and 16 appending goroutines (and 64 in Fsync
// mode) and 100 B and 4 KiB records. Each goroutine acknowledges its records every 4096 appends so the
// log stays small. Metrics: records/s, p50-µs and p99-µs of one Append,
// fsyncs/record.
func BenchmarkAppend(b *testing.B) {
	for _, d := range []Durability{Fsync, Interval, None} {
		writerCounts := []int{1, 16}
		if d == Fsync {
			writerCounts = append(writerCounts, 64) // how the groups grow
		}
		for _, writers := range writerCounts {
			for _, size := range []int{100, 4096} {
				b.Run(fmt.Sprintf("%s/writers=%d/size=%d", d, writers, size), func(b *testing.B) {
					benchAppend(b, d, writers, size)
				})
			}
		}
	}
}

func benchAppend(b *testing.B, d Durability, writers, size int) {
	l, _, err := Open(benchConfig(b.TempDir(), d))
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	payload := make([]byte, size)
	ctx := context.Background()
	inParallel(b, writers, func(_, i int) error {
		idx, err := l.Append(ctx, payload)
		if err == nil && i%4096 == 4095 {
			err = l.TruncateBefore(idx)
		}
		return err
	})
	b.ReportMetric(float64(l.Stats().Fsyncs)/float64(b.N), "fsyncs/record")
}

// inParallel runs op b.N times, split over the given number of goroutines
// (op gets the goroutine's number and the op's number within it), and
// reports records/s and the p50 and p99 of one op.
func inParallel(b *testing.B, goroutines int, op func(g, i int) error) {
	lat := make([]time.Duration, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	per := (b.N + goroutines - 1) / goroutines
	for g := range goroutines {
		lo, hi := g*per, min(b.N, (g+1)*per)
		wg.Go(func() {
			for i := lo; i < hi; i++ {
				t0 := time.Now()
				err := op(g, i-lo)
				lat[i] = time.Since(t0)
				if err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	reportLatency(b, "", lat)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// reportLatency reports the p50 and p99 of lat in microseconds.
func reportLatency(b *testing.B, prefix string, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	us := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))]) / float64(time.Microsecond) }
	b.ReportMetric(us(0.50), prefix+"p50-µs")
	b.ReportMetric(us(0.99), prefix+"p99-µs")
}

// BenchmarkAckLatency compares, in one run and alternating op by op, the
// latency of a Fsync-mode Append from one goroutine with a bare write(2) +
// fsync(2) of the same payload to a file of its own in the same directory:
// the goal G13 is log p99 ≤ 2 × bare p99. The log makes appends durable
// with fdatasync, so a bare write(2) + fdatasync(2) is measured too, as the
// stricter peer. Metrics: log-p50/p99-µs, bare-p50/p99-µs, p99-ratio,
// bare-fdatasync-p50/p99-µs, p99-ratio-fdatasync.
func BenchmarkAckLatency(b *testing.B) {
	for _, size := range []int{100, 4096} {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			dir := b.TempDir()
			l, _, err := Open(benchConfig(filepath.Join(dir, "log"), Fsync))
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			bare, err := os.OpenFile(filepath.Join(dir, "bare"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
			if err != nil {
				b.Fatal(err)
			}
			defer bare.Close()
			bareData, err := os.OpenFile(filepath.Join(dir, "bare-fdatasync"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
			if err != nil {
				b.Fatal(err)
			}
			defer bareData.Close()
			payload := make([]byte, size)
			logLat := make([]time.Duration, b.N)
			bareLat := make([]time.Duration, b.N)
			dataLat := make([]time.Duration, b.N)
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				t0 := time.Now()
				idx, err := l.Append(ctx, payload)
				t1 := time.Now()
				if err != nil {
					b.Fatal(err)
				}
				if _, err := bare.Write(payload); err != nil {
					b.Fatal(err)
				}
				if err := bare.Sync(); err != nil {
					b.Fatal(err)
				}
				t2 := time.Now()
				if _, err := bareData.Write(payload); err != nil {
					b.Fatal(err)
				}
				if err := syncData(bareData); err != nil {
					b.Fatal(err)
				}
				logLat[i], bareLat[i], dataLat[i] = t1.Sub(t0), t2.Sub(t1), time.Since(t2)
				if i%4096 == 4095 {
					if err := l.TruncateBefore(idx); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.StopTimer()
			reportLatency(b, "log-", logLat)
			reportLatency(b, "bare-", bareLat)
			reportLatency(b, "bare-fdatasync-", dataLat)
			b.ReportMetric(float64(logLat[len(logLat)*99/100])/float64(bareLat[len(bareLat)*99/100]), "p99-ratio")
			b.ReportMetric(float64(logLat[len(logLat)*99/100])/float64(dataLat[len(dataLat)*99/100]), "p99-ratio-fdatasync")
		})
	}
}

// BenchmarkBareFsync is the peer for BenchmarkAppend/fsync: write(2) +
// fsync(2) per record from 1 or 16 goroutines, each to its own file, with no
// log (16 files fsynced concurrently is what 16 appenders without group
// commit would cost at best).
func BenchmarkBareFsync(b *testing.B) {
	for _, writers := range []int{1, 16} {
		for _, size := range []int{100, 4096} {
			b.Run(fmt.Sprintf("writers=%d/size=%d", writers, size), func(b *testing.B) {
				dir := b.TempDir()
				payload := make([]byte, size)
				files := make([]*os.File, writers)
				for w := range files {
					f, err := os.OpenFile(filepath.Join(dir, fmt.Sprint(w)), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
					if err != nil {
						b.Fatal(err)
					}
					defer f.Close()
					files[w] = f
				}
				inParallel(b, writers, func(w, _ int) error {
					if _, err := files[w].Write(payload); err != nil {
						return err
					}
					return files[w].Sync()
				})
			})
		}
	}
}

// BenchmarkBusyAppenders is G13's shape at the log's level: writers
// goroutines, each doing a fixed piece of CPU work (a CRC over 512 KiB,
// standing for decoding a request; about 50 µs) and then an Append, first with
// durability None and then Fsync, b.N appends each. Run it with -cpu 1 (a
// process pinned to one core): an fsync then holds the only P until sysmon
// takes it back, and the ratio shows how well group commit hides that.
// Metrics: none-records/s, fsync-records/s, ratio (fsync ÷ none),
// fsyncs/record, work-µs (one piece of work alone).
//
//	taskset -c 1 go test -run '^$' -bench BusyAppenders -cpu 1 -benchtime 20000x ./wal
func BenchmarkBusyAppenders(b *testing.B) {
	for _, writers := range []int{32, 128, 512} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			work := make([]byte, 512<<10)
			t0 := time.Now()
			for range 100 {
				crc32.ChecksumIEEE(work)
			}
			b.ReportMetric(float64(time.Since(t0).Microseconds())/100, "work-µs")
			payload := make([]byte, 100)
			rate := map[Durability]float64{}
			var fsyncs uint64
			for _, d := range []Durability{None, Fsync} {
				l, _, err := Open(benchConfig(filepath.Join(b.TempDir(), string(d)), d))
				if err != nil {
					b.Fatal(err)
				}
				var wg sync.WaitGroup
				var next atomic.Int64
				start := time.Now()
				for range writers {
					wg.Go(func() {
						for next.Add(1) <= int64(b.N) {
							crc32.ChecksumIEEE(work)
							idx, err := l.Append(context.Background(), payload)
							if err == nil && idx%4096 == 0 {
								err = l.TruncateBefore(idx)
							}
							if err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				wg.Wait()
				rate[d] = float64(b.N) / time.Since(start).Seconds()
				fsyncs = l.Stats().Fsyncs
				if err := l.Close(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(rate[None], "none-records/s")
			b.ReportMetric(rate[Fsync], "fsync-records/s")
			b.ReportMetric(rate[Fsync]/rate[None], "ratio")
			b.ReportMetric(float64(fsyncs)/float64(b.N), "fsyncs/record")
			b.ReportMetric(0, "ns/op")
		})
	}
}
