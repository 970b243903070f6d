package embedded

import (
	"path/filepath"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgecount/edgecount/engagement"
)

// benchWriters is how many goroutines write at once in the write benchmarks.
const benchWriters = 16

// benchModes are the commit settings the write benchmarks compare.
var benchModes = []struct {
	name   string
	commit commitMode
	noSync bool
	delay  time.Duration // DB.MaxBatchDelay, for commitBatch
}{
	{"group/fsync", commitGroup, false, 0},
	{"update/fsync", commitSolo, false, 0},
	{"batch-10ms/fsync", commitBatch, false, 10 * time.Millisecond}, // bbolt's default
	{"batch-250us/fsync", commitBatch, false, 250 * time.Microsecond},
	{"group/nosync", commitGroup, true, 0},
	{"update/nosync", commitSolo, true, 0},
	{"batch-250us/nosync", commitBatch, true, 250 * time.Microsecond},
}

func benchOpen(b *testing.B, commit commitMode, noSync bool, delay time.Duration) *Store {
	b.Helper()
	s, err := Open(Config{Path: filepath.Join(b.TempDir(), "bench.db"), NoSync: noSync})
	if err != nil {
		b.Fatalf("Open: %v", err)
	}
	s.commit = commit
	if delay > 0 {
		s.db.MaxBatchDelay = delay
	}
	b.Cleanup(func() {
		if err := s.Close(); err != nil {
			b.Errorf("Close: %v", err)
		}
	})
	return s
}

// runWriters runs fn from benchWriters goroutines and reports writes/s.
func runWriters(b *testing.B, fn func(pb *testing.PB)) {
	b.Helper()
	b.SetParallelism((benchWriters + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(fn)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "writes/s")
}

// BenchmarkInsertReaction inserts new rows from 16 goroutines.
func BenchmarkInsertReaction(b *testing.B) {
	for _, m := range benchModes {
		b.Run(m.name, func(b *testing.B) {
			s := benchOpen(b, m.commit, m.noSync, m.delay)
			var next atomic.Int64
			now := time.Now()
			runWriters(b, func(pb *testing.PB) {
				for pb.Next() {
					i := next.Add(1)
					r := engagement.Reaction{
						UserID: "user-" + strconv.FormatInt(i, 10), ContentID: "video-" + strconv.FormatInt(i%1000, 10),
						Action: engagement.ActionLike, Region: "eu-west", Version: 1, Incarnation: uint64(i), UpdatedAt: now,
					}
					if ok, err := s.InsertReaction(b.Context(), r); err != nil || !ok {
						b.Errorf("InsertReaction = %v, %v", ok, err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkUpdateReaction runs compare-and-set toggles from 16 goroutines,
// each on its own row.
func BenchmarkUpdateReaction(b *testing.B) {
	for _, m := range benchModes {
		b.Run(m.name, func(b *testing.B) {
			s := benchOpen(b, m.commit, m.noSync, m.delay)
			var next atomic.Int64
			runWriters(b, func(pb *testing.PB) {
				i := next.Add(1)
				cur := engagement.Reaction{
					UserID: "user-" + strconv.FormatInt(i, 10), ContentID: "video-1",
					Action: engagement.ActionLike, Region: "eu-west", Version: 1, Incarnation: uint64(i), UpdatedAt: time.Now(),
				}
				if ok, err := s.InsertReaction(b.Context(), cur); err != nil || !ok {
					b.Errorf("InsertReaction = %v, %v", ok, err)
					return
				}
				for pb.Next() {
					n := cur
					n.Version++
					n.Action = engagement.ActionLike + engagement.ActionDislike - cur.Action
					if ok, err := s.UpdateReaction(b.Context(), cur, n); err != nil || !ok {
						b.Errorf("UpdateReaction = %v, %v", ok, err)
						return
					}
					cur = n
				}
			})
		})
	}
}

// BenchmarkReadStats reads 16 items of three rows each per call.
func BenchmarkReadStats(b *testing.B) {
	s := benchOpen(b, commitGroup, true, 0)
	const items = 10_000
	rows := make([]engagement.Stats, 0, 3*items)
	for i := range items {
		id := "video-" + strconv.Itoa(i)
		for _, scope := range []string{engagement.GlobalScope, "eu-west", "us-east"} {
			rows = append(rows, engagement.Stats{ContentID: id, Scope: scope, Likes: int64(i), Counters: map[string]int64{"view": int64(i)}, UpdatedAt: time.Now(), LastSeq: uint64(i)})
		}
	}
	if err := s.WriteStats(b.Context(), rows); err != nil {
		b.Fatalf("WriteStats: %v", err)
	}
	var seed atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ids := make([]string, 16)
		j := int(seed.Add(1)) * 7919
		for pb.Next() {
			for k := range ids {
				j = (j + 104729) % items
				ids[k] = "video-" + strconv.Itoa(j)
			}
			got, err := s.ReadStats(b.Context(), ids)
			if err != nil || len(got) != len(ids) {
				b.Errorf("ReadStats = %d items, %v", len(got), err)
				return
			}
		}
	})
	b.ReportMetric(float64(16*b.N)/b.Elapsed().Seconds(), "items/s")
}
