package rollup

import (
	"context"
	"errors"
	"maps"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/partial"
	"github.com/edgecount/edgecount/store"
)

// memStats is an in-memory StatsStore for unit tests of the apply logic.
// failAfter > 0 makes WriteStats write that many rows and then fail, like a
// store that crashes in the middle of a multi-row write.
// failMark > 0 makes that many WriteStatsMark calls write their rows and
// then fail before the mark, like the Cassandra store crashing between the
// two. markReads counts ReadMarks calls.
type memStats struct {
	mu        sync.Mutex
	rows      map[rowKey]engagement.Stats
	marks     map[markKey]store.Mark
	failAfter int
	failMark  int
	markReads int
}

type markKey struct {
	part  uint32
	agent string
	epoch uint64
}

func newMemStats() *memStats {
	return &memStats{rows: make(map[rowKey]engagement.Stats), marks: make(map[markKey]store.Mark)}
}

func (m *memStats) ReadMarks(_ context.Context, p uint32) ([]store.Mark, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.markReads++
	out := []store.Mark{}
	for k, mk := range m.marks {
		if k.part == p {
			out = append(out, mk)
		}
	}
	return out, nil
}

func (m *memStats) WriteStatsMark(ctx context.Context, rows []engagement.Stats, mk store.Mark) error {
	if err := m.WriteStats(ctx, rows); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failMark > 0 {
		m.failMark--
		return errWrite
	}
	m.marks[markKey{mk.Partition, mk.Agent, mk.Epoch}] = mk
	return nil
}

func (m *memStats) DeleteMarks(_ context.Context, p uint32, keys []store.MarkKey) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, k := range keys {
		delete(m.marks, markKey{p, k.Agent, k.Epoch})
	}
	return nil
}

func (m *memStats) mark(p uint32, agent string, epoch uint64) (store.Mark, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mk, ok := m.marks[markKey{p, agent, epoch}]
	return mk, ok
}

var errWrite = errors.New("write failed")

func (m *memStats) ReadStats(_ context.Context, ids []string) (map[string][]engagement.Stats, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string][]engagement.Stats)
	for _, id := range ids {
		for k, row := range m.rows {
			if k.content == id {
				row.Counters = maps.Clone(row.Counters)
				out[id] = append(out[id], row)
			}
		}
	}
	return out, nil
}

func (m *memStats) WriteStats(_ context.Context, rows []engagement.Stats) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, row := range rows {
		if m.failAfter > 0 && i == m.failAfter {
			m.failAfter = 0
			return errWrite
		}
		row.Counters = maps.Clone(row.Counters)
		m.rows[rowKey{row.ContentID, row.Scope}] = row
	}
	return nil
}

// totals is the comparable part of a row.
type totals struct {
	Likes, Dislikes int64
	Counters        string
}

func (m *memStats) snapshot() map[rowKey]totals {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[rowKey]totals)
	for k, row := range m.rows {
		out[k] = totals{row.Likes, row.Dislikes, countersString(row.Counters)}
	}
	return out
}

func countersString(c map[string]int64) string {
	keys := make([]string, 0, len(c))
	for k, v := range c {
		if v != 0 {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	s := ""
	for _, k := range keys {
		s += k + "=" + strconv.FormatInt(c[k], 10) + ";"
	}
	return s
}

// batchSeq numbers the messages batch makes, as one agent run would.
var batchSeq atomic.Uint64

// batch returns a message of agent a1 with the next sequence of its epoch.
func batch(region string, sums ...partial.Sum) *partial.Batch {
	return &partial.Batch{Agent: "a1", Region: region, Epoch: 1, Seq: batchSeq.Add(1), FlushedAt: time.UnixMilli(1000), Sums: sums}
}

func TestApplyMergesIntoGlobalAndRegionalRows(t *testing.T) {
	st := newMemStats()
	r := New(st, nil, nil)
	ctx := context.Background()
	msgs := []*partial.Batch{
		batch("us", partial.Sum{ContentID: "v1", Counter: "like", Region: "us", Delta: 3},
			partial.Sum{ContentID: "v1", Counter: "view", Region: "us", Delta: 10},
			partial.Sum{ContentID: "v2", Counter: "dislike", Region: "us", Delta: 1}),
		batch("eu", partial.Sum{ContentID: "v1", Counter: "like", Region: "eu", Delta: 2},
			// an undo in eu of a like recorded in us subtracts from us
			partial.Sum{ContentID: "v1", Counter: "like", Region: "us", Delta: -1},
			partial.Sum{ContentID: "v1", Counter: "view", Region: "eu", Delta: 5}),
	}
	for i, b := range msgs {
		if err := r.Apply(ctx, uint64(i+1), b); err != nil {
			t.Fatalf("Apply(%d): %v", i+1, err)
		}
	}
	got := st.snapshot()
	want := map[rowKey]totals{
		{"v1", "global"}: {Likes: 4, Counters: "view=15;"},
		{"v1", "us"}:     {Likes: 2, Counters: "view=10;"},
		{"v1", "eu"}:     {Likes: 2, Counters: "view=5;"},
		{"v2", "global"}: {Dislikes: 1},
		{"v2", "us"}:     {Dislikes: 1},
	}
	if !maps.Equal(got, want) {
		t.Fatalf("rows = %v, want %v", got, want)
	}
}

func TestApplyTwiceIsIdempotent(t *testing.T) {
	st := newMemStats()
	r := New(st, nil, nil)
	ctx := context.Background()
	b1 := batch("us", partial.Sum{ContentID: "v1", Counter: "like", Region: "us", Delta: 1},
		partial.Sum{ContentID: "v2", Counter: "view", Region: "us", Delta: 7})
	b2 := batch("us", partial.Sum{ContentID: "v1", Counter: "view", Region: "us", Delta: 2})
	applyBoth := func() {
		t.Helper()
		for _, step := range []struct {
			seq uint64
			b   *partial.Batch
		}{{1, b1}, {2, b2}} {
			if err := r.Apply(ctx, step.seq, step.b); err != nil {
				t.Fatal(err)
			}
		}
	}
	applyBoth()
	before := st.snapshot()
	// Redelivery of both messages, in order, after a crash before the acks.
	applyBoth()
	if after := st.snapshot(); !maps.Equal(after, before) {
		t.Fatalf("after redelivery rows = %v, want unchanged %v", after, before)
	}
	// The marks drop both before the rows are looked at.
	if got := r.Stats().DuplicatesDropped.Load(); got != 2 {
		t.Fatalf("duplicates dropped = %d, want 2", got)
	}
}

// TestApplyRedeliveryAfterRowsWithoutMark: the Cassandra store writes the
// mark after the rows; a crash in between leaves the rows written and the
// mark behind. The redelivery (same broker sequence) skips every row by
// its LastSeq and writes the mark, so a later re-publish is dropped.
func TestApplyRedeliveryAfterRowsWithoutMark(t *testing.T) {
	st := newMemStats()
	r := New(st, nil, nil)
	ctx := context.Background()
	b := batch("us", partial.Sum{ContentID: "v1", Counter: "view", Region: "us", Delta: 5})
	st.failMark = 1
	if err := r.Apply(ctx, 7, b); !errors.Is(err, errWrite) {
		t.Fatalf("Apply with a failing mark write = %v, want %v", err, errWrite)
	}
	if _, ok := st.mark(0, "a1", 1); ok {
		t.Fatal("mark written by the failed apply")
	}
	if err := r.Apply(ctx, 7, b); err != nil {
		t.Fatalf("redelivery: %v", err)
	}
	if got := r.Stats().RowsSkipped.Load(); got != 2 {
		t.Fatalf("rows skipped = %d, want 2", got)
	}
	if m, ok := st.mark(0, "a1", 1); !ok || m.Epoch != b.Epoch || m.Seq != b.Seq {
		t.Fatalf("mark after the redelivery = %+v, %v; want epoch %d seq %d", m, ok, b.Epoch, b.Seq)
	}
	if err := r.Apply(ctx, 8, b); err != nil { // re-published
		t.Fatal(err)
	}
	if got := st.snapshot()[rowKey{"v1", "global"}].Counters; got != "view=5;" {
		t.Fatalf("global counters = %q, want view=5;", got)
	}
	if got := r.Stats().DuplicatesDropped.Load(); got != 1 {
		t.Fatalf("duplicates dropped = %d, want 1", got)
	}
}

func TestApplyCompletesAfterPartialWrite(t *testing.T) {
	st := newMemStats()
	r := New(st, nil, nil)
	ctx := context.Background()
	b := batch("us",
		partial.Sum{ContentID: "a", Counter: "view", Region: "us", Delta: 1},
		partial.Sum{ContentID: "b", Counter: "view", Region: "us", Delta: 2},
		partial.Sum{ContentID: "c", Counter: "view", Region: "us", Delta: 3})
	st.failAfter = 2 // write a/global and a/us, then fail
	if err := r.Apply(ctx, 5, b); !errors.Is(err, errWrite) {
		t.Fatalf("first Apply error = %v, want %v", err, errWrite)
	}
	if err := r.Apply(ctx, 5, b); err != nil {
		t.Fatalf("retry: %v", err)
	}
	got := st.snapshot()
	for _, c := range []struct {
		id   string
		want string
	}{{"a", "view=1;"}, {"b", "view=2;"}, {"c", "view=3;"}} {
		for _, scope := range []string{"global", "us"} {
			if g := got[rowKey{c.id, scope}].Counters; g != c.want {
				t.Errorf("%s/%s counters = %q, want %q", c.id, scope, g, c.want)
			}
		}
	}
}

func TestHandleRejectsPoison(t *testing.T) {
	st := newMemStats()
	r := New(st, nil, nil)
	for _, data := range [][]byte{
		nil,
		{0xff, 0xff},
		partial.Append(nil, &partial.Batch{Agent: "a", Region: "us", Sums: []partial.Sum{{ContentID: "bad id", Counter: "view", Delta: 1}}}),
	} {
		err := r.Handle(context.Background(), 1, data)
		if !errors.Is(err, ErrPoison) {
			t.Errorf("Handle(%x) error = %v, want ErrPoison", data, err)
		}
		// A broker consumer terminates it without an adapter.
		var p interface{ Permanent() bool }
		if !errors.As(err, &p) || !p.Permanent() {
			t.Errorf("Handle(%x) error = %v, want one that reports Permanent() true", data, err)
		}
	}
	if len(st.snapshot()) != 0 {
		t.Fatal("poison message wrote rows")
	}
	if got := r.Stats().Poison.Load(); got != 3 {
		t.Fatalf("poison count = %d, want 3", got)
	}
}

func TestHandleDecodesAndApplies(t *testing.T) {
	st := newMemStats()
	r := New(st, nil, nil)
	b := batch("us", partial.Sum{ContentID: "v", Counter: "share", Region: "us", Delta: 4})
	if err := r.Handle(context.Background(), 9, partial.Append(nil, b)); err != nil {
		t.Fatal(err)
	}
	if got := st.snapshot()[rowKey{"v", "global"}].Counters; got != "share=4;" {
		t.Fatalf("global counters = %q, want share=4;", got)
	}
}
