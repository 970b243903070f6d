package cassandra

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/partial"
	"github.com/edgecount/edgecount/rollup"
	"github.com/edgecount/edgecount/store"
)

// TestRollupReplayOnCassandra: the rollup on a real node drops a copy of
// an applied message published under a new broker sequence, also after a
// restart (a new Store and Rollup on the keyspace); after a crash between
// the rows and the mark (rows written, mark not), the redelivery writes
// the mark, so a later copy is dropped too.
func TestRollupReplayOnCassandra(t *testing.T) {
	cfg, s := testKeyspace(t)
	ctx := t.Context()
	id := fmt.Sprintf("replay-%016x", rand.Uint64())
	const p = 5
	msg := func(seq uint64, n int64) *partial.Batch {
		return &partial.Batch{Agent: "edge-1", Region: "eu", Epoch: 9, Seq: seq, Partition: p, FlushedAt: time.UnixMilli(int64(seq) * 1000),
			Sums: []partial.Sum{{ContentID: id, Counter: "view", Region: "eu", Delta: n}}}
	}
	views := func() int64 {
		t.Helper()
		rows, err := s.ReadStats(ctx, []string{id})
		if err != nil {
			t.Fatal(err)
		}
		var global, regions int64
		for _, r := range rows[id] {
			if r.Scope == engagement.GlobalScope {
				global = r.Counters["view"]
			} else {
				regions += r.Counters["view"]
			}
		}
		if global != regions {
			t.Fatalf("global views %d, regions %d", global, regions)
		}
		return global
	}
	ru := rollup.New(s, nil, nil)
	apply := func(ru *rollup.Rollup, streamSeq uint64, b *partial.Batch) {
		t.Helper()
		if err := ru.Apply(ctx, streamSeq, b); err != nil {
			t.Fatal(err)
		}
	}
	apply(ru, 1, msg(1, 3))
	apply(ru, 2, msg(1, 3)) // a copy
	if got := views(); got != 3 {
		t.Fatalf("views = %d, want 3", got)
	}

	// A restart: a new store and rollup read the mark.
	s2 := openStore(t, cfg)
	ru2 := rollup.New(s2, nil, nil)
	apply(ru2, 3, msg(1, 3))
	if got := ru2.Stats().DuplicatesDropped.Load(); got != 1 {
		t.Fatalf("duplicates dropped after a restart = %d, want 1", got)
	}

	// A crash between the rows and the mark of message 2 (broker sequence
	// 4): its rows are written as Apply would, its mark is not.
	rows, err := s2.ReadStats(ctx, []string{id})
	if err != nil {
		t.Fatal(err)
	}
	written := rows[id]
	for i := range written {
		written[i].Counters = map[string]int64{"view": written[i].Counters["view"] + 4}
		written[i].LastSeq = 4
	}
	if err := s2.WriteStats(ctx, written); err != nil {
		t.Fatal(err)
	}
	ru3 := rollup.New(s2, nil, nil)
	apply(ru3, 4, msg(2, 4)) // the redelivery: rows skipped, mark written
	if got := ru3.Stats().RowsSkipped.Load(); got != 2 {
		t.Fatalf("rows skipped by the redelivery = %d, want 2", got)
	}
	apply(ru3, 5, msg(2, 4)) // a copy
	if got := views(); got != 7 {
		t.Fatalf("views = %d, want 7", got)
	}
	marks, err := s2.ReadMarks(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if len(marks) != 1 || marks[0].Agent != "edge-1" || marks[0].Epoch != 9 || marks[0].Seq != 2 || !marks[0].FlushedAt.Equal(time.UnixMilli(2000)) {
		t.Fatalf("marks = %+v; want edge-1 at (9, 2) flushed at 2 s", marks)
	}
}

// TestMarkWriteFenced: a mark (and its rows) whose write timestamp would
// fall at or after the lease deadline is not written, like WriteStats.
func TestMarkWriteFenced(t *testing.T) {
	_, s := testKeyspace(t)
	dl := time.Now().Add(time.Hour)
	ctx, cancel := context.WithDeadline(t.Context(), dl)
	defer cancel()
	s.lastTS.Store(dl.UnixMicro()) // the next timestamp is past the deadline
	id := fmt.Sprintf("fenced-%016x", rand.Uint64())
	rows := []engagement.Stats{{ContentID: id, Scope: engagement.GlobalScope, Likes: 1, LastSeq: 1}}
	m := store.Mark{Partition: 3, Agent: "a", Epoch: 1, Seq: 1}
	if err := s.WriteStatsMark(ctx, rows, m); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WriteStatsMark past the lease = %v, want %v", err, context.DeadlineExceeded)
	}
	if err := s.DeleteMarks(ctx, 3, []store.MarkKey{{Agent: "a", Epoch: 1}}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("DeleteMarks past the lease = %v, want %v", err, context.DeadlineExceeded)
	}
	got, err := s.ReadStats(t.Context(), []string{id})
	if err != nil || len(got) != 0 {
		t.Fatalf("ReadStats = %v, %v; want no rows", got, err)
	}
	marks, err := s.ReadMarks(t.Context(), 3)
	if err != nil || len(marks) != 0 {
		t.Fatalf("ReadMarks = %+v, %v; want none", marks, err)
	}
}
