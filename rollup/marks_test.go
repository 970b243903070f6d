package rollup

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/internal/testenv"
	"github.com/edgecount/edgecount/partial"
	"github.com/edgecount/edgecount/store"
)

// flush returns message seq of agent's run epoch to partition p: views of
// item id in the agent's region.
func flush(agent string, epoch, seq uint64, p uint32, id string, views int64) *partial.Batch {
	return &partial.Batch{Agent: agent, Region: "us", Epoch: epoch, Seq: seq, Partition: p, FlushedAt: time.UnixMilli(1000),
		Sums: []partial.Sum{{ContentID: id, Counter: "view", Region: "us", Delta: views}}}
}

// views returns the global views of id.
func views(t *testing.T, st *memStats, id string) int64 {
	t.Helper()
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.rows[rowKey{id, engagement.GlobalScope}].Counters["view"]
}

// TestRepublishAfterApplyIsDropped: a copy of an applied message reaches
// the stream under a new broker sequence (the agent re-published it after
// the broker's de-duplication window): it is acknowledged and dropped.
func TestRepublishAfterApplyIsDropped(t *testing.T) {
	st := newMemStats()
	r := New(st, nil, nil)
	ctx := context.Background()
	b := flush("a", 3, 10, 2, "v", 4)
	if err := r.Apply(ctx, 100, b); err != nil {
		t.Fatal(err)
	}
	next := flush("a", 3, 11, 2, "v", 1)
	if err := r.Apply(ctx, 101, next); err != nil {
		t.Fatal(err)
	}
	for _, seq := range []uint64{5000, 5001} { // both copies, hours later
		if err := r.Apply(ctx, seq, b); err != nil {
			t.Fatalf("Apply of a copy: %v", err)
		}
	}
	if err := r.Apply(ctx, 5002, next); err != nil {
		t.Fatal(err)
	}
	if got := views(t, st, "v"); got != 5 {
		t.Fatalf("views = %d, want 5 (each message once)", got)
	}
	s := r.Stats()
	if got := s.DuplicatesDropped.Load(); got != 3 {
		t.Fatalf("duplicates dropped = %d, want 3", got)
	}
	if got := s.Messages.Load(); got != 2 {
		t.Fatalf("messages applied = %d, want 2", got)
	}
	if st.markReads != 1 {
		t.Fatalf("ReadMarks calls = %d, want 1 (read once, then kept in memory)", st.markReads)
	}
}

// TestRepublishBeforeApplyIsAppliedOnce: the copy reaches the stream
// before the original is applied (the rollup is behind): the original is
// applied, the copy behind it dropped.
func TestRepublishBeforeApplyIsAppliedOnce(t *testing.T) {
	st := newMemStats()
	r := New(st, nil, nil)
	ctx := context.Background()
	b := flush("a", 1, 1, 0, "v", 7)
	// Stream: original (1), the agent's next message (2), the copy (3).
	for _, m := range []struct {
		seq uint64
		b   *partial.Batch
	}{{1, b}, {2, flush("a", 1, 2, 0, "v", 1)}, {3, b}} {
		if err := r.Apply(ctx, m.seq, m.b); err != nil {
			t.Fatal(err)
		}
	}
	if got := views(t, st, "v"); got != 8 {
		t.Fatalf("views = %d, want 8", got)
	}
	if got := r.Stats().DuplicatesDropped.Load(); got != 1 {
		t.Fatalf("duplicates dropped = %d, want 1", got)
	}
}

// TestMarksSplitFlush: one flush cut into several messages (More) has a
// sequence per message, so every part is applied once and every copy of a
// part is dropped, without a special case.
func TestMarksSplitFlush(t *testing.T) {
	st := newMemStats()
	r := New(st, nil, nil)
	ctx := context.Background()
	var parts []*partial.Batch
	for i := range 3 {
		b := flush("a", 1, uint64(20+i), 0, fmt.Sprintf("v%d", i), int64(i+1))
		b.More = i < 2
		parts = append(parts, b)
	}
	seq := uint64(1)
	for range 2 { // the flush, then all of it again under new sequences
		for _, b := range parts {
			if err := r.Apply(ctx, seq, b); err != nil {
				t.Fatal(err)
			}
			seq++
		}
	}
	for i := range 3 {
		if got := views(t, st, fmt.Sprintf("v%d", i)); got != int64(i+1) {
			t.Errorf("v%d views = %d, want %d", i, got, i+1)
		}
	}
	if got := r.Stats().DuplicatesDropped.Load(); got != 3 {
		t.Fatalf("duplicates dropped = %d, want 3", got)
	}
}

// TestMarksInterleaved: three agents (two restarting into a new epoch)
// publish to four partitions; every message is acknowledged once, and
// some are re-published later, at random positions after the original,
// and some are redelivered. The partitions are applied concurrently, one
// goroutine each, as the consumer does. Every item counts exactly what
// was acknowledged.
func TestMarksInterleaved(t *testing.T) {
	const partitions = 4
	st := newMemStats()
	r := New(st, nil, nil)
	rng := rand.New(rand.NewPCG(1, 2))
	type msg struct {
		streamSeq uint64
		b         *partial.Batch
	}
	streams := make([][]msg, partitions)
	acked := make(map[string]int64)
	var streamSeq uint64
	copies := 0
	for _, agent := range []string{"a", "b", "c"} {
		seq := uint64(0)
		for epoch := uint64(1); epoch <= 2; epoch++ {
			for range 50 {
				seq++
				p := uint32(rng.IntN(partitions))
				id := fmt.Sprintf("v%d-%d", p, rng.IntN(3))
				n := int64(1 + rng.IntN(9))
				b := flush(agent, epoch*1000, seq, p, id, n)
				acked[id] += n
				streamSeq++
				streams[p] = append(streams[p], msg{streamSeq, b})
				if rng.IntN(3) == 0 { // a redelivery: same broker sequence
					streams[p] = append(streams[p], msg{streamSeq, b})
				}
				if rng.IntN(3) == 0 { // a re-publish, later in the stream
					copies++
					streamSeq++
					at := len(streams[p]) + rng.IntN(3)
					c := msg{streamSeq, b}
					if at >= len(streams[p]) {
						streams[p] = append(streams[p], c)
					} else {
						streams[p] = append(streams[p][:at+1], streams[p][at:]...)
						streams[p][at] = c
					}
				}
			}
			if agent == "c" {
				break // c never restarts
			}
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, partitions)
	for p := range partitions {
		wg.Go(func() {
			for _, m := range streams[p] {
				if err := r.Apply(context.Background(), m.streamSeq, m.b); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for id, want := range acked {
		if got := views(t, st, id); got != want {
			t.Errorf("%s: counted %d, acknowledged %d", id, got, want)
		}
	}
	if got := r.Stats().DuplicatesDropped.Load(); got < uint64(copies) {
		t.Fatalf("duplicates dropped = %d, want at least the %d copies", got, copies)
	}
}

// TestMarksSurviveRestart: a new Rollup on the same store reads the marks
// and drops a copy of what its predecessor applied.
func TestMarksSurviveRestart(t *testing.T) {
	st := newMemStats()
	ctx := context.Background()
	b := flush("a", 1, 1, 3, "v", 2)
	if err := New(st, nil, nil).Apply(ctx, 1, b); err != nil {
		t.Fatal(err)
	}
	r := New(st, nil, nil)
	if err := r.Apply(ctx, 9, b); err != nil {
		t.Fatal(err)
	}
	if got := views(t, st, "v"); got != 2 {
		t.Fatalf("views = %d, want 2", got)
	}
	if got := r.Stats().DuplicatesDropped.Load(); got != 1 {
		t.Fatalf("duplicates dropped = %d, want 1", got)
	}
}

// TestForgetPartition: a partition that went to another rollup and came
// back is read again, so what the other rollup applied meanwhile is known.
func TestForgetPartition(t *testing.T) {
	st := newMemStats()
	ctx := context.Background()
	a, other := New(st, nil, nil), New(st, nil, nil)
	if err := a.Apply(ctx, 1, flush("x", 1, 1, 0, "v", 1)); err != nil {
		t.Fatal(err)
	}
	a.ForgetPartition(0) // handed over
	b2 := flush("x", 1, 2, 0, "v", 10)
	if err := other.Apply(ctx, 2, b2); err != nil {
		t.Fatal(err)
	}
	// Back to a, which gets a copy of what the other applied.
	if err := a.Apply(ctx, 3, b2); err != nil {
		t.Fatal(err)
	}
	if got := views(t, st, "v"); got != 11 {
		t.Fatalf("views = %d, want 11", got)
	}
	if got := a.Stats().DuplicatesDropped.Load(); got != 1 {
		t.Fatalf("duplicates dropped = %d, want 1", got)
	}
	if st.markReads != 3 {
		t.Fatalf("ReadMarks calls = %d, want 3 (a, the other, a again)", st.markReads)
	}
}

// TestMarksPrune: a mark nobody moved for the TTL is deleted when the
// partition's marks are read, and checked again a day later; a recent
// one stays.
func TestMarksPrune(t *testing.T) {
	st := newMemStats()
	ctx := context.Background()
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := start
	now := func() time.Time { return clock }
	r := New(st, now, nil)
	r.SetMarkTTL(10 * 24 * time.Hour)
	if err := r.Apply(ctx, 1, flush("old", 1, 1, 0, "v", 1)); err != nil {
		t.Fatal(err)
	}
	day := 24 * time.Hour
	clock = start.Add(9*day + 12*time.Hour) // a look: old is not past the TTL yet
	if err := r.Apply(ctx, 2, flush("young", 1, 1, 0, "v", 1)); err != nil {
		t.Fatal(err)
	}
	clock = start.Add(10*day + 6*time.Hour) // old is past the TTL, but the last look is recent
	if err := r.Apply(ctx, 3, flush("young", 1, 2, 0, "v", 1)); err != nil {
		t.Fatal(err)
	}
	if _, ok := st.mark(0, "old", 1); !ok {
		t.Fatal("old mark pruned before a day passed since the last look")
	}
	clock = start.Add(10*day + 13*time.Hour)
	if err := r.Apply(ctx, 4, flush("young", 1, 3, 0, "v", 1)); err != nil {
		t.Fatal(err)
	}
	if _, ok := st.mark(0, "old", 1); ok {
		t.Fatal("old mark kept past the TTL")
	}
	if _, ok := st.mark(0, "young", 1); !ok {
		t.Fatal("young mark pruned")
	}
	if got := r.Stats().MarksPruned.Load(); got != 1 {
		t.Fatalf("marks pruned = %d, want 1", got)
	}
	// A new rollup prunes at its first read.
	st.marks[markKey{0, "stale", 1}] = store.Mark{Agent: "stale", Epoch: 1, Seq: 1, UpdatedAt: start}
	r2 := New(st, now, nil)
	r2.SetMarkTTL(10 * day)
	if err := r2.Apply(ctx, 5, flush("young", 1, 4, 0, "v", 1)); err != nil {
		t.Fatal(err)
	}
	if _, ok := st.mark(0, "stale", 1); ok {
		t.Fatal("stale mark kept by a new rollup's first read")
	}
}

// failingMarks is a memStats whose ReadMarks fails.
type failingMarks struct{ *memStats }

func (failingMarks) ReadMarks(context.Context, uint32) ([]store.Mark, error) { return nil, errWrite }

// TestMarksErrors: a message is not applied without its partition's
// marks, a message past its lease writes nothing, and an unnumbered
// message (seq 0) is applied without a mark.
func TestMarksErrors(t *testing.T) {
	ctx := context.Background()
	t.Run("marks unreadable", func(t *testing.T) {
		st := newMemStats()
		r := New(failingMarks{st}, nil, nil)
		if err := r.Apply(ctx, 1, flush("a", 1, 1, 0, "v", 1)); !errors.Is(err, errWrite) {
			t.Fatalf("Apply = %v, want %v", err, errWrite)
		}
		if len(st.snapshot()) != 0 || r.Stats().ApplyErrors.Load() != 1 {
			t.Fatalf("rows %v, apply errors %d; want none and 1", st.snapshot(), r.Stats().ApplyErrors.Load())
		}
	})
	t.Run("lease passed", func(t *testing.T) {
		st := newMemStats()
		r := New(st, nil, nil)
		dctx, cancel := context.WithDeadline(ctx, time.Now().Add(-time.Second))
		defer cancel()
		// A tops-only message writes its mark alone, under the same fence.
		b := &partial.Batch{Agent: "a", Region: "us", Epoch: 1, Seq: 1, FlushedAt: time.UnixMilli(1000)}
		if err := r.write(dctx, 1, nil, &partMarks{agents: map[store.MarkKey]store.Mark{}}, store.Mark{Agent: b.Agent, Epoch: 1, Seq: 1}); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("write past the lease = %v, want %v", err, context.DeadlineExceeded)
		}
		if _, ok := st.mark(0, "a", 1); ok {
			t.Fatal("mark written past the lease")
		}
	})
	t.Run("unnumbered", func(t *testing.T) {
		st := newMemStats()
		r := New(st, nil, nil)
		b := flush("a", 0, 0, 0, "v", 1)
		for seq := range uint64(2) {
			if err := r.Apply(ctx, seq+1, b); err != nil {
				t.Fatal(err)
			}
		}
		if got := views(t, st, "v"); got != 2 {
			t.Fatalf("views = %d, want 2 (an unnumbered message has no mark)", got)
		}
		if st.markReads != 0 || len(st.marks) != 0 {
			t.Fatalf("marks read %d times, %d written; want none", st.markReads, len(st.marks))
		}
	})
	t.Run("tops only", func(t *testing.T) {
		st := newMemStats()
		r := New(st, nil, nil)
		b := &partial.Batch{Agent: "a", Region: "us", Epoch: 1, Seq: 1, Partition: 1}
		if err := r.Apply(ctx, 1, b); err != nil {
			t.Fatal(err)
		}
		if m, ok := st.mark(1, "a", 1); !ok || m.Seq != 1 {
			t.Fatalf("mark of a message without sums = %+v, %v; want seq 1", m, ok)
		}
		if err := r.Apply(ctx, 2, b); err != nil {
			t.Fatal(err)
		}
		if got := r.Stats().DuplicatesDropped.Load(); got != 1 {
			t.Fatalf("duplicates dropped = %d, want 1", got)
		}
	})
}

// TestMarksPartitionOutOfRange: a numbered message naming a partition no
// store can key is poison, not retried forever.
func TestMarksPartitionOutOfRange(t *testing.T) {
	st := newMemStats()
	r := New(st, nil, nil)
	err := r.Apply(context.Background(), 1, flush("a", 1, 1, store.MaxPartition+1, "v", 1))
	if !errors.Is(err, ErrPoison) {
		t.Fatalf("Apply = %v, want %v", err, ErrPoison)
	}
	if len(st.snapshot()) != 0 || r.Stats().Poison.Load() != 1 {
		t.Fatalf("rows %v, poison %d; want none and 1", st.snapshot(), r.Stats().Poison.Load())
	}
}

// TestMarksOrderViolation: two running agents under one id count apart,
// because their runs (epochs) differ. A message of one run below its mark
// but flushed after it (the run's sequence went back, or two agents share
// an id and an epoch) is dropped like a copy (applying it would move the
// mark back) but counted apart, as a fault to fix.
func TestMarksOrderViolation(t *testing.T) {
	st := newMemStats()
	var logs testenv.Buffer
	r := New(st, nil, slog.New(slog.NewTextHandler(&logs, nil)))
	ctx := context.Background()
	at := func(b *partial.Batch, ms int64) *partial.Batch { b.FlushedAt = time.UnixMilli(ms); return b }
	newer := at(flush("twin", 200, 5, 0, "v", 1), 2000)
	for i, b := range []*partial.Batch{
		at(flush("twin", 100, 1, 0, "v", 10), 1000),
		newer,
		at(flush("twin", 100, 2, 0, "v", 100), 3000), // the other twin's next flush: counted
		newer, // a copy
		at(flush("twin", 200, 4, 0, "v", 1000), 4000), // run 200's sequence went back
	} {
		if err := r.Apply(ctx, uint64(i+1), b); err != nil {
			t.Fatal(err)
		}
	}
	s := r.Stats()
	if got := s.OrderViolations.Load(); got != 1 {
		t.Fatalf("order violations = %d, want 1", got)
	}
	if got := s.DuplicatesDropped.Load(); got != 1 {
		t.Fatalf("duplicates dropped = %d, want 1", got)
	}
	if got := views(t, st, "v"); got != 111 {
		t.Fatalf("views = %d, want 111", got)
	}
	if !strings.Contains(logs.String(), "share an id") {
		t.Fatalf("log = %q; want a warning naming the cause", logs.String())
	}
}

// TestMarksRunsApart: marks are per run (agent, epoch), so a restarted
// agent may re-publish its last run's messages after its new run's: the
// copy of an applied one is dropped, and one the broker never stored is
// applied.
func TestMarksRunsApart(t *testing.T) {
	st := newMemStats()
	r := New(st, nil, nil)
	ctx := context.Background()
	for i, b := range []*partial.Batch{
		flush("a", 1, 1, 0, "v", 1),
		flush("a", 1, 2, 0, "v", 10),
		// (1, 3) was published but never stored; the agent restarted.
		flush("a", 2, 1, 0, "v", 1000),
		flush("a", 1, 2, 0, "v", 10),  // re-published: a copy
		flush("a", 1, 3, 0, "v", 100), // re-published: the first time here
	} {
		if err := r.Apply(ctx, uint64(i+1), b); err != nil {
			t.Fatal(err)
		}
	}
	if got := views(t, st, "v"); got != 1111 {
		t.Fatalf("views = %d, want 1111", got)
	}
	if got := r.Stats().DuplicatesDropped.Load(); got != 1 {
		t.Fatalf("duplicates dropped = %d, want 1", got)
	}
}

// TestMarksGauge: Stats.Marks follows the marks held in memory through
// reads, new runs, prunes and ForgetPartition.
func TestMarksGauge(t *testing.T) {
	st := newMemStats()
	ctx := context.Background()
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := start
	r := New(st, func() time.Time { return clock }, nil)
	r.SetMarkTTL(48 * time.Hour)
	st.marks[markKey{0, "stored", 1}] = store.Mark{Agent: "stored", Epoch: 1, Seq: 1, UpdatedAt: start}
	gauge := func(want int64) {
		t.Helper()
		if got := r.Stats().Marks.Load(); got != want {
			t.Fatalf("marks held = %d, want %d", got, want)
		}
	}
	apply := func(seq uint64, b *partial.Batch) {
		t.Helper()
		if err := r.Apply(ctx, seq, b); err != nil {
			t.Fatal(err)
		}
	}
	apply(1, flush("a", 1, 1, 0, "v", 1))
	gauge(2) // the stored one and a's run 1
	apply(2, flush("a", 1, 2, 0, "v", 1))
	gauge(2)
	apply(3, flush("a", 2, 1, 0, "v", 1))
	apply(4, flush("a", 2, 1, 1, "v", 1))
	gauge(4)
	clock = start.Add(72 * time.Hour) // every mark of partition 0 is past the TTL
	apply(5, flush("b", 1, 1, 0, "v", 1))
	gauge(2) // b's in partition 0, a's run 2 in partition 1
	r.ForgetPartition(1)
	gauge(1)
	r.ForgetPartition(1)
	gauge(1)
}
