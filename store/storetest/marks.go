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
// back: one per (partition, agent), sorted by agent, replaced whole.
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

	// A later mark of the same agent replaces the earlier one.
	mb2 := store.Mark{Partition: p, Agent: b, Epoch: 8, Seq: 1, FlushedAt: now(), UpdatedAt: now().Add(time.Second)}
	writeMark(t, s, nil, mb2)
	checkMarks(t, "ReadMarks after a newer mark", readMarks(t, s, p), []store.Mark{ma, mb2})

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
	var marks []store.Mark
	for i, agent := range []string{a, b, c} {
		m := store.Mark{Partition: p, Agent: agent, Epoch: 1, Seq: uint64(i + 1), UpdatedAt: now()}
		writeMark(t, s, nil, m)
		marks = append(marks, m)
	}
	if err := s.DeleteMarks(t.Context(), p, []string{a, c, uniq("never-marked")}); err != nil {
		t.Fatalf("DeleteMarks: %v", err)
	}
	if err := s.DeleteMarks(t.Context(), p, nil); err != nil {
		t.Fatalf("DeleteMarks(none): %v", err)
	}
	checkMarks(t, "ReadMarks after DeleteMarks", readMarks(t, s, p), marks[1:2])
	// A deleted mark can be written again.
	writeMark(t, s, nil, marks[0])
	checkMarks(t, "ReadMarks after a rewrite", readMarks(t, s, p), marks[:2])
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
	if err := s.DeleteMarks(t.Context(), p, []string{""}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("DeleteMarks(empty agent) = %v; want %v", err, store.ErrInvalid)
	}
	if err := s.DeleteMarks(cancelled, p, []string{"a"}); !errors.Is(err, context.Canceled) {
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
		var mark store.Mark
		for _, m := range readMarks(t, s, p) {
			if m.Agent == agent {
				mark = m
			}
		}
		if mark.Agent != "" && mark.Covers(epoch, seq) {
			return
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
		{a, 1, 3, 7, 100_000}, // a straggler of the old epoch: already covered
	} {
		apply(m.agent, m.epoch, m.seq, m.sseq, m.likes)
	}
	rows := readStats(t, s, id)[id]
	if len(rows) != 1 || rows[0].Likes != 1111 || rows[0].LastSeq != 6 {
		t.Fatalf("after redelivered and re-published messages: %+v; want one row with 1111 likes at sequence 6", rows)
	}
}
