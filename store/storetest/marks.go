package storetest

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/store"
)

// uniqPartition returns a partition no other subtest uses (with high
// probability), so that subtests sharing a keyspace never see each other's
// marks.
func uniqPartition() uint32 {
	return 1 + rand.Uint32N(store.MaxPartition-1)
}

func equalMark(a, b store.Mark) bool {
	return a.Partition == b.Partition && a.Agent == b.Agent && a.Epoch == b.Epoch && a.Seq == b.Seq &&
		a.FlushedAt.Equal(b.FlushedAt) && a.UpdatedAt.Equal(b.UpdatedAt)
}

func readMarks(t *testing.T, s Store, p uint32) []store.Mark {
	t.Helper()
	got, err := s.ReadMarks(t.Context(), p)
	if err != nil {
		t.Fatalf("ReadMarks(%d): %v", p, err)
	}
	if got == nil {
		t.Fatalf("ReadMarks(%d) = nil; want a slice, empty when there are no marks", p)
	}
	return got
}

// checkMarks fails unless got holds exactly want, in order.
func checkMarks(t *testing.T, what string, got, want []store.Mark) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s = %+v; want %+v", what, got, want)
	}
	for i := range got {
		if !equalMark(got[i], want[i]) {
			t.Fatalf("%s[%d] = %+v; want %+v", what, i, got[i], want[i])
		}
	}
}

func writeMark(t *testing.T, s Store, rows []engagement.Stats, m store.Mark) {
	t.Helper()
	if err := s.WriteStatsMark(t.Context(), rows, m); err != nil {
		t.Fatalf("WriteStatsMark(%d rows, %+v): %v", len(rows), m, err)
	}
}

// testMarksRoundTrip writes marks with and without rows and reads them
// back: one per (partition, agent, epoch), sorted by agent and epoch,
// replaced whole.
func testMarksRoundTrip(t *testing.T, s Store) {
	p, other := uniqPartition(), uniqPartition()
	if got := readMarks(t, s, p); len(got) != 0 {
		t.Fatalf("ReadMarks of a new partition = %+v; want none", got)
	}
	b, a := uniq("agent-b"), uniq("agent-a")
	id := uniq("c")
	row := engagement.Stats{ContentID: id, Scope: engagement.GlobalScope, Likes: 2, UpdatedAt: now(), LastSeq: 40}
	mb := store.Mark{Partition: p, Agent: b, Epoch: 7, Seq: 3, FlushedAt: now().Add(-time.Second), UpdatedAt: now()}
	writeMark(t, s, []engagement.Stats{row}, mb)
	checkStats(t, "ReadStats after WriteStatsMark", readStats(t, s, id)[id], []engagement.Stats{row})

	ma := store.Mark{Partition: p, Agent: a, Epoch: 1, Seq: 9, UpdatedAt: now()}
	writeMark(t, s, nil, ma) // a mark alone: every row of its message was written already
	mo := store.Mark{Partition: other, Agent: a, Epoch: 2, Seq: 1, UpdatedAt: now()}
	writeMark(t, s, nil, mo)
	checkMarks(t, "ReadMarks", readMarks(t, s, p), []store.Mark{ma, mb})
	checkMarks(t, "ReadMarks(other)", readMarks(t, s, other), []store.Mark{mo})

	// A later mark of the same run replaces the earlier one; another run
	// of the agent has a mark of its own.
	mb2 := store.Mark{Partition: p, Agent: b, Epoch: 7, Seq: 4, FlushedAt: now(), UpdatedAt: now().Add(time.Second)}
	writeMark(t, s, nil, mb2)
	mb3 := store.Mark{Partition: p, Agent: b, Epoch: 8, Seq: 1, FlushedAt: now(), UpdatedAt: now().Add(time.Second)}
	writeMark(t, s, nil, mb3)
	mb0 := store.Mark{Partition: p, Agent: b, Epoch: 2, Seq: 100, FlushedAt: now(), UpdatedAt: now()}
	writeMark(t, s, nil, mb0)
	checkMarks(t, "ReadMarks after newer marks", readMarks(t, s, p), []store.Mark{ma, mb0, mb2, mb3})

	// Extremes: the edge partitions, the largest epoch and sequence, the
	// zero time.
	for _, m := range []store.Mark{
		{Partition: 0, Agent: uniq("x"), Epoch: math.MaxUint64, Seq: math.MaxUint64, FlushedAt: time.Date(2262, 4, 11, 0, 0, 0, 1000, time.UTC), UpdatedAt: now()},
		{Partition: store.MaxPartition, Agent: uniq("x"), Epoch: 1 << 63, Seq: 1<<63 - 1},
	} {
		writeMark(t, s, nil, m)
		got := readMarks(t, s, m.Partition)
		found := false
		for _, g := range got {
			if g.Agent == m.Agent {
				found = true
				checkMarks(t, "ReadMarks", []store.Mark{g}, []store.Mark{m})
			}
		}
		if !found {
			t.Fatalf("ReadMarks(%d) = %+v; want it to hold %+v", m.Partition, got, m)
		}
	}
}

// testMarksDelete removes some marks of a partition and keeps the rest.
func testMarksDelete(t *testing.T, s Store) {
	p := uniqPartition()
	a, b, c := uniq("a"), uniq("b"), uniq("c")
	if a > b {
		a, b = b, a
	}
	var marks []store.Mark
	for i, k := range []store.MarkKey{{Agent: a, Epoch: 1}, {Agent: a, Epoch: 2}, {Agent: b, Epoch: 1}, {Agent: c, Epoch: 5}} {
		m := store.Mark{Partition: p, Agent: k.Agent, Epoch: k.Epoch, Seq: uint64(i + 1), UpdatedAt: now()}
		writeMark(t, s, nil, m)
		marks = append(marks, m)
	}
	if err := s.DeleteMarks(t.Context(), p, []store.MarkKey{{Agent: a, Epoch: 1}, {Agent: c, Epoch: 5}, {Agent: b, Epoch: 9}, {Agent: uniq("never-marked"), Epoch: 1}}); err != nil {
		t.Fatalf("DeleteMarks: %v", err)
	}
	if err := s.DeleteMarks(t.Context(), p, nil); err != nil {
		t.Fatalf("DeleteMarks(none): %v", err)
	}
	checkMarks(t, "ReadMarks after DeleteMarks", readMarks(t, s, p), marks[1:3])
	// A deleted mark can be written again.
	writeMark(t, s, nil, marks[0])
	checkMarks(t, "ReadMarks after a rewrite", readMarks(t, s, p), marks[:3])
}

// testMarksMisuse: a mark that cannot be keyed, a partition out of range
// or a done context fail and write nothing, neither mark nor rows.
func testMarksMisuse(t *testing.T, s Store) {
	p := uniqPartition()
	id := uniq("c")
	rows := []engagement.Stats{{ContentID: id, Scope: engagement.GlobalScope, Likes: 1, UpdatedAt: now(), LastSeq: 1}}
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		m    store.Mark
		rows []engagement.Stats
		want error
	}{
		{"empty agent", t.Context(), store.Mark{Partition: p, Epoch: 1, Seq: 1}, rows, store.ErrInvalid},
		{"partition out of range", t.Context(), store.Mark{Partition: store.MaxPartition + 1, Agent: "a", Epoch: 1, Seq: 1}, rows, store.ErrInvalid},
		{"bad row", t.Context(), store.Mark{Partition: p, Agent: "a", Epoch: 1, Seq: 1}, []engagement.Stats{{Scope: engagement.GlobalScope}}, store.ErrInvalid},
		{"cancelled context", cancelled, store.Mark{Partition: p, Agent: "a", Epoch: 1, Seq: 1}, rows, context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := s.WriteStatsMark(tt.ctx, tt.rows, tt.m); !errors.Is(err, tt.want) {
				t.Fatalf("WriteStatsMark = %v; want %v", err, tt.want)
			}
		})
	}
	if got := readMarks(t, s, p); len(got) != 0 {
		t.Fatalf("ReadMarks after refused writes = %+v; want none", got)
	}
	if got := readStats(t, s, id); len(got) != 0 {
		t.Fatalf("ReadStats after refused writes = %+v; want none", got)
	}
	if _, err := s.ReadMarks(t.Context(), store.MaxPartition+1); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("ReadMarks(out of range) = %v; want %v", err, store.ErrInvalid)
	}
	if _, err := s.ReadMarks(cancelled, p); !errors.Is(err, context.Canceled) {
		t.Fatalf("ReadMarks(cancelled) = %v; want %v", err, context.Canceled)
	}
	if err := s.DeleteMarks(t.Context(), p, []store.MarkKey{{Epoch: 1}}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("DeleteMarks(empty agent) = %v; want %v", err, store.ErrInvalid)
	}
	if err := s.DeleteMarks(t.Context(), store.MaxPartition+1, []store.MarkKey{{Agent: "a", Epoch: 1}}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("DeleteMarks(partition out of range) = %v; want %v", err, store.ErrInvalid)
	}
	if err := s.DeleteMarks(cancelled, p, []store.MarkKey{{Agent: "a", Epoch: 1}}); !errors.Is(err, context.Canceled) {
		t.Fatalf("DeleteMarks(cancelled) = %v; want %v", err, context.Canceled)
	}
}

// testMarksIdempotentApply applies flush messages the way the rollup
// does — drop a message its agent's mark covers, skip a row whose LastSeq
// is not below the message's broker sequence — and checks that a
// redelivery (same broker sequence) and a re-publish (a new broker
// sequence, after the broker's de-duplication window) change nothing.
func testMarksIdempotentApply(t *testing.T, s Store) {
	p := uniqPartition()
	id := uniq("c")
	agents := []string{uniq("a"), uniq("b")}
	apply := func(agent string, epoch, seq, streamSeq uint64, likes int64) {
		t.Helper()
		for _, m := range readMarks(t, s, p) {
			if m.Agent == agent && m.Covers(epoch, seq) {
				return
			}
		}
		var rows []engagement.Stats
		row := engagement.Stats{ContentID: id, Scope: engagement.GlobalScope}
		if got := readStats(t, s, id)[id]; len(got) == 1 {
			row = got[0]
		}
		if streamSeq > row.LastSeq {
			row.Likes += likes
			row.LastSeq = streamSeq
			row.UpdatedAt = now()
			rows = append(rows, row)
		}
		writeMark(t, s, rows, store.Mark{Partition: p, Agent: agent, Epoch: epoch, Seq: seq, UpdatedAt: now()})
	}
	a, b := agents[0], agents[1]
	for _, m := range []struct {
		agent            string
		epoch, seq, sseq uint64
		likes            int64
	}{
		{a, 1, 1, 1, 1},
		{b, 5, 1, 2, 10},
		{a, 1, 2, 3, 100},
		{a, 1, 2, 3, 100},     // redelivery
		{a, 1, 2, 4, 100},     // re-publish after the window
		{b, 5, 1, 5, 10},      // re-publish of another agent
		{a, 2, 1, 6, 1000},    // the agent restarted: a new epoch
		{a, 1, 3, 7, 100_000}, // its last run's message, published after the new run's
		{a, 1, 2, 8, 100},     // and a re-publish of that run's
		{a, 1, 3, 9, 100_000}, // and of the one before
		{a, 2, 1, 10, 1000},   // and of the new run's
	} {
		apply(m.agent, m.epoch, m.seq, m.sseq, m.likes)
	}
	rows := readStats(t, s, id)[id]
	if len(rows) != 1 || rows[0].Likes != 101_111 || rows[0].LastSeq != 7 {
		t.Fatalf("after redelivered and re-published messages: %+v; want one row with 101111 likes at sequence 7", rows)
	}
}
