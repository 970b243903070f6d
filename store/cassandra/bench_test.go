package cassandra

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgecount/edgecount/engagement"
)

// benchWorkers goroutines write at once: enough requests in flight to keep
// one node busy.
const benchWorkers = 32

// benchBurst is the number of writes of one measured phase.
const benchBurst = 400

// BenchmarkReactionWrite compares each reaction write path with raw,
// non-LWT writes of the same row shape into a plain table (DESIGN target
// G11: the LWT path at ≥ 0.3 of raw writes). This machine is shared and its
// load changes from second to second, so every iteration runs a burst of
// raw writes and then a burst of the path, each from benchWorkers
// goroutines, and the ratio compares the sums of the two: both see the same
// conditions. Every goroutine writes rows of its own users, so transactions
// do not contend. Paths:
//
//	lwt-only   INSERT … IF NOT EXISTS alone, no by-content entry
//	insert     InsertReaction: the transaction and its by-content entry
//	update     UpdateReaction of an existing row (toggling like/dislike)
//
// paxos_variant is the node's: scripts/cassandra.sh starts v2 unless
// EDGECOUNT_CASSANDRA_PAXOS=v1.
func BenchmarkReactionWrite(b *testing.B) {
	cfg, s := testKeyspace(b)
	ctx := b.Context()
	raw := cfg.Keyspace + ".user_likes_raw"
	if err := s.session.Query(`CREATE TABLE IF NOT EXISTS ` + raw + ` (user_id text, content_id text, action text,
		region text, version bigint, incarnation bigint, updated_at bigint, writers list<bigint>, PRIMARY KEY ((user_id), content_id))`).ExecContext(ctx); err != nil {
		b.Fatalf("cannot create %s: %v", raw, err)
	}
	rawInsert := `INSERT INTO ` + raw + ` (user_id, content_id, action, region, version, incarnation, updated_at, writers) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`
	var seq atomic.Int64
	newRow := func() engagement.Reaction {
		n := seq.Add(1)
		return engagement.Reaction{
			UserID: fmt.Sprintf("u%d", n), ContentID: fmt.Sprintf("c%d", n%1000), Action: engagement.ActionLike,
			Region: "eu-west", Version: 1, Incarnation: rand.Uint64(), UpdatedAt: time.Now(),
		}
	}
	rawWrite := func(int) error {
		r := newRow()
		return s.query(rawInsert, r.UserID, r.ContentID, r.Action.String(), r.Region, r.Version,
			int64(r.Incarnation), micros(r.UpdatedAt), []int64{int64(engagement.NewToken(r.UpdatedAt))}).Idempotent(true).ExecContext(ctx)
	}
	// Rows of the update path: one per worker, each advanced by its worker only.
	rows := make([]engagement.Reaction, benchWorkers)
	for w := range rows {
		rows[w] = newRow()
		if applied, err := s.InsertReaction(ctx, rows[w]); err != nil || !applied {
			b.Fatalf("InsertReaction = %v, %v", applied, err)
		}
	}
	paths := []struct {
		name  string
		write func(worker int) error
	}{
		{"lwt-only", func(int) error {
			r := newRow()
			applied, err := s.query(s.q.insertReaction, r.UserID, r.ContentID, r.Action.String(), r.Region,
				r.Version, int64(r.Incarnation), micros(r.UpdatedAt), []int64{int64(engagement.NewToken(r.UpdatedAt))}).SerialConsistency(s.serialCons).
				MapScanCASContext(ctx, map[string]any{})
			if err != nil || !applied {
				return fmt.Errorf("LWT insert = %v, %v", applied, err)
			}
			return nil
		}},
		{"insert", func(int) error {
			if applied, err := s.InsertReaction(ctx, newRow()); err != nil || !applied {
				return fmt.Errorf("InsertReaction = %v, %v", applied, err)
			}
			return nil
		}},
		{"update", func(w int) error {
			cur := rows[w]
			next := cur
			next.Version++
			next.Action = engagement.ActionDislike + engagement.ActionLike - cur.Action
			next.UpdatedAt = time.Now()
			if applied, err := s.UpdateReaction(ctx, cur, next); err != nil || !applied {
				return fmt.Errorf("UpdateReaction = %v, %v", applied, err)
			}
			rows[w] = next
			return nil
		}},
	}
	for _, p := range paths {
		b.Run(p.name, func(b *testing.B) {
			var rawTime, pathTime time.Duration
			for range b.N {
				rawTime += burst(b, benchBurst, rawWrite)
				pathTime += burst(b, benchBurst, p.write)
			}
			n := float64(b.N * benchBurst)
			b.ReportMetric(n/rawTime.Seconds(), "raw-writes/s")
			b.ReportMetric(n/pathTime.Seconds(), "path-writes/s")
			b.ReportMetric(rawTime.Seconds()/pathTime.Seconds(), "ratio")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// burst runs n calls of write from benchWorkers goroutines and returns how
// long they took.
func burst(b *testing.B, n int, write func(worker int) error) time.Duration {
	b.Helper()
	return burstOf(b, benchWorkers, n, write)
}

// burstOf runs n calls of call from workers goroutines, worker w passing w,
// and returns how long they took.
func burstOf(b *testing.B, workers, n int, write func(worker int) error) time.Duration {
	b.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for w := range workers {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				if err := write(w); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return time.Since(start)
}

// BenchmarkReadStats compares the two ways of reading a batch of 16 items
// (each with a global and two regional rows): one IN query (ReadStats) and
// parallel single-partition queries. As in BenchmarkReactionWrite, every
// iteration runs a burst of each, from 1 or 16 concurrent callers, and
// in/parallel compares their sums.
func BenchmarkReadStats(b *testing.B) {
	_, s := testKeyspace(b)
	ctx := b.Context()
	const items, batch, reads = 1000, 16, 50
	ids := make([]string, items)
	var rows []engagement.Stats
	for i := range ids {
		ids[i] = fmt.Sprintf("content-%04d", i)
		for _, scope := range []string{engagement.GlobalScope, "eu-west", "us-east"} {
			rows = append(rows, engagement.Stats{ContentID: ids[i], Scope: scope, Likes: int64(i),
				Counters: map[string]int64{"view": int64(i) * 7, "share": 3}, UpdatedAt: time.Now(), LastSeq: uint64(i)})
		}
	}
	for i := 0; i < len(rows); i += 300 {
		if err := s.WriteStats(ctx, rows[i:min(i+300, len(rows))]); err != nil {
			b.Fatalf("WriteStats: %v", err)
		}
	}
	read := func(mode statsRead) func(int) error {
		return func(int) error {
			want := make([]string, batch)
			for i := range want {
				want[i] = ids[rand.IntN(items)]
			}
			got, err := s.readStats(ctx, want, mode)
			if err != nil || len(got) == 0 {
				return fmt.Errorf("readStats = %d items, %v", len(got), err)
			}
			return nil
		}
	}
	for _, callers := range []int{1, 16} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			var par, in time.Duration
			for range b.N {
				par += burstOf(b, callers, reads*callers, read(statsParallel))
				in += burstOf(b, callers, reads*callers, read(statsIn))
			}
			n := float64(b.N * reads * callers * batch)
			b.ReportMetric(n/par.Seconds(), "parallel-items/s")
			b.ReportMetric(n/in.Seconds(), "in-items/s")
			b.ReportMetric(par.Seconds()/in.Seconds(), "in/parallel")
			b.ReportMetric(0, "ns/op")
		})
	}
}
