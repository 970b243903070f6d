package rollup

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/edgecount/edgecount/partial"
	"github.com/edgecount/edgecount/store"
)

// streamMsg is one message of a partition's stream: its broker sequence
// and body.
type streamMsg struct {
	seq  uint64
	data []byte
}

// agentStream returns the messages of partition 0 from three agent runs,
// interleaved, with copies of some earlier messages (re-published after
// the de-duplication window) under new broker sequences.
func agentStream(rng *rand.Rand, n int) []streamMsg {
	agents := []string{"a", "b", "c"}
	next := map[string]uint64{}
	var sent []*partial.Batch
	var out []streamMsg
	for i := range n {
		var b *partial.Batch
		if len(sent) > 3 && rng.IntN(8) == 0 {
			b = sent[rng.IntN(len(sent))] // a copy
		} else {
			ag := agents[rng.IntN(len(agents))]
			next[ag]++
			region := []string{"us", "eu"}[rng.IntN(2)]
			b = &partial.Batch{Agent: ag, Region: region, Epoch: 1, Seq: next[ag], FlushedAt: time.UnixMilli(int64(1000 + i))}
			for range 1 + rng.IntN(6) {
				counter := []string{"view", "like", "share"}[rng.IntN(3)]
				b.Sums = append(b.Sums, partial.Sum{ContentID: fmt.Sprintf("v%d", rng.IntN(12)), Counter: counter, Region: region, Delta: 1 + rng.Int64N(5)})
			}
			sent = append(sent, b)
		}
		out = append(out, streamMsg{seq: uint64(100 + i), data: partial.Append(nil, b)})
	}
	return out
}

func toMessages(ms []streamMsg) []Message {
	out := make([]Message, len(ms))
	for i, m := range ms {
		out[i] = Message{Seq: m.seq, Data: m.data}
	}
	return out
}

// TestBatchEqualsOneByOne: coalesced batches of any size leave the same
// totals as the messages applied one at a time, with fewer row writes,
// also when writes fail part-way (rows written without their marks, or
// only some rows) and the broker delivers the batch again, whole or one
// message at a time, and when an applied batch is delivered again (a lost
// ack), to this rollup or to a new one that reads the marks from the store.
func TestBatchEqualsOneByOne(t *testing.T) {
	ctx := context.Background()
	for round := range 20 {
		rng := rand.New(rand.NewPCG(uint64(round), 7))
		stream := agentStream(rng, 80)

		want := newMemStats()
		one := New(want, nil, nil)
		for _, m := range stream {
			if err := one.Handle(ctx, m.seq, m.data); err != nil {
				t.Fatal(err)
			}
		}

		got := newMemStats()
		r := New(got, nil, nil)
		for i := 0; i < len(stream); {
			n := min(1+rng.IntN(16), len(stream)-i)
			batch := toMessages(stream[i : i+n])
			switch rng.IntN(4) {
			case 0: // rows written, a mark not: the batch comes again
				got.mu.Lock()
				got.failMark = 1
				got.mu.Unlock()
			case 1: // only some rows written
				got.mu.Lock()
				got.failAfter = 1 + rng.IntN(4)
				got.mu.Unlock()
			}
			if err := r.HandleBatch(ctx, batch); err != nil {
				if !errors.Is(err, errWrite) {
					t.Fatal(err)
				}
				if rng.IntN(2) == 0 {
					// Redelivered to a new rollup, one at a time.
					r = New(got, nil, nil)
					for _, m := range stream[i : i+n] {
						if err := r.Handle(ctx, m.seq, m.data); err != nil {
							t.Fatal(err)
						}
					}
				} else if err := r.HandleBatch(ctx, toMessages(stream[i:i+n])); err != nil {
					t.Fatal(err)
				}
			}
			got.mu.Lock()
			got.failMark, got.failAfter = 0, 0
			got.mu.Unlock()
			if rng.IntN(5) == 0 { // the ack was lost
				if rng.IntN(2) == 0 {
					r = New(got, nil, nil)
				}
				if err := r.HandleBatch(ctx, toMessages(stream[i:i+n])); err != nil {
					t.Fatal(err)
				}
			}
			i += n
		}
		if w, g := want.snapshot(), got.snapshot(); fmt.Sprint(g) != fmt.Sprint(w) {
			t.Fatalf("round %d: batched totals\n%v\nwant (one by one)\n%v", round, g, w)
		}
	}
}

// TestBatchWritesEachRowOnce: a batch of messages that touch the same
// items writes each row once, with the highest sequence, and every run's
// mark.
func TestBatchWritesEachRowOnce(t *testing.T) {
	ctx := context.Background()
	st := newMemStats()
	r := New(st, nil, nil)
	var batch []Message
	for i, ag := range []string{"a", "b", "a", "c", "b"} {
		b := flush(ag, 1, uint64(i+1), 0, "v", 1)
		batch = append(batch, Message{Seq: uint64(10 + i), Data: partial.Append(nil, b)})
	}
	if err := r.HandleBatch(ctx, batch); err != nil {
		t.Fatal(err)
	}
	if got := views(t, st, "v"); got != 5 {
		t.Fatalf("views = %d, want 5", got)
	}
	s := r.Stats()
	if got, want := s.RowsWritten.Load(), uint64(2); got != want {
		t.Fatalf("rows written = %d, want %d (global and us, once)", got, want)
	}
	if got := s.RowWrites.Load(); got != 1 {
		t.Fatalf("row writes = %d, want 1", got)
	}
	st.mu.Lock()
	last := st.rows[rowKey{"v", "global"}].LastSeq
	st.mu.Unlock()
	if last != 14 {
		t.Fatalf("LastSeq = %d, want 14 (the batch's highest)", last)
	}
	for ag, seq := range map[string]uint64{"a": 3, "b": 5, "c": 4} {
		if m, ok := st.mark(0, ag, 1); !ok || m.Seq != seq {
			t.Fatalf("mark of %s = %+v %v, want seq %d", ag, m, ok, seq)
		}
	}
}

// TestBatchPoisonAndCopies: a message that does not decode is marked
// poison and the rest of the batch applied; a copy of a message earlier in
// the same batch is dropped.
func TestBatchPoisonAndCopies(t *testing.T) {
	ctx := context.Background()
	st := newMemStats()
	r := New(st, nil, nil)
	b1 := partial.Append(nil, flush("a", 1, 1, 0, "v", 2))
	batch := []Message{
		{Seq: 1, Data: b1},
		{Seq: 2, Data: []byte{0xff, 0xff, 0xff}},
		{Seq: 3, Data: b1}, // the copy
		{Seq: 4, Data: partial.Append(nil, flush("a", 1, 2, store.MaxPartition+1, "v", 1))},
		{Seq: 5, Data: partial.Append(nil, flush("a", 1, 3, 0, "v", 5))},
	}
	if err := r.HandleBatch(ctx, batch); err != nil {
		t.Fatal(err)
	}
	for i, wantPoison := range []bool{false, true, false, true, false} {
		if got := errors.Is(batch[i].Err, ErrPoison); got != wantPoison {
			t.Fatalf("message %d: Err = %v, want poison %v", i, batch[i].Err, wantPoison)
		}
	}
	if got := views(t, st, "v"); got != 7 {
		t.Fatalf("views = %d, want 7", got)
	}
	if got := r.Stats().DuplicatesDropped.Load(); got != 1 {
		t.Fatalf("duplicates dropped = %d, want 1", got)
	}
}

// TestBatchFence: past the lease nothing of the batch is written.
func TestBatchFence(t *testing.T) {
	st := newMemStats()
	r := New(st, nil, nil)
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Millisecond))
	defer cancel()
	batch := []Message{{Seq: 1, Data: partial.Append(nil, flush("a", 1, 1, 0, "v", 2))}}
	if err := r.HandleBatch(ctx, batch); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("HandleBatch past the lease = %v, want %v", err, context.DeadlineExceeded)
	}
	if len(st.snapshot()) != 0 {
		t.Fatalf("rows written past the lease: %v", st.snapshot())
	}
	if _, ok := st.mark(0, "a", 1); ok {
		t.Fatal("mark written past the lease")
	}
}
