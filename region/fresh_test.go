package region_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/internal/testenv"
	"github.com/edgecount/edgecount/partial"
	"github.com/edgecount/edgecount/region"
	"github.com/edgecount/edgecount/store/embedded"
	"github.com/edgecount/edgecount/store/embedded/embeddedtest"
)

func TestMergeHeld(t *testing.T) {
	row := func(scope string, likes, views int64, last uint64) engagement.Stats {
		return engagement.Stats{ContentID: "c", Scope: scope, Likes: likes, Counters: map[string]int64{"view": views}, LastSeq: last}
	}
	for _, c := range []struct {
		name                 string
		rows                 []engagement.Stats
		held                 []region.Held
		wantGlobal, wantUS   int64 // views
		wantGlobalL, wantUSL int64 // likes
	}{
		{"unflushed counts on every row", []engagement.Stats{row("global", 1, 10, 9), row("us", 1, 10, 9)},
			[]region.Held{{Counter: "view", Region: "us", Delta: 5}, {Counter: "like", Region: "us", Delta: 2}}, 15, 15, 3, 3},
		{"no rows: created", nil, []region.Held{{Counter: "view", Region: "us", Delta: 5}}, 5, 5, 0, 0},
		{"acked, row below its seq", []engagement.Stats{row("global", 0, 10, 6), row("us", 0, 10, 6)},
			[]region.Held{{Counter: "view", Region: "us", Delta: 5, Flushed: true, Seq: 7}}, 15, 15, 0, 0},
		{"acked, row at its seq: applied", []engagement.Stats{row("global", 0, 15, 7), row("us", 0, 15, 7)},
			[]region.Held{{Counter: "view", Region: "us", Delta: 5, Flushed: true, Seq: 7}}, 15, 15, 0, 0},
		{"acked, global applied, regional row older", []engagement.Stats{row("global", 0, 15, 8), row("us", 0, 10, 3)},
			[]region.Held{{Counter: "view", Region: "us", Delta: 5, Flushed: true, Seq: 7}}, 15, 15, 0, 0},
		{"unacked, rows at the floor", []engagement.Stats{row("global", 0, 10, 4), row("us", 0, 10, 4)},
			[]region.Held{{Counter: "view", Region: "us", Delta: 5, Flushed: true, Floor: 4}}, 15, 15, 0, 0},
		{"unacked, rows moved past the floor: maybe applied, left out", []engagement.Stats{row("global", 0, 15, 5), row("us", 0, 15, 5)},
			[]region.Held{{Counter: "view", Region: "us", Delta: 5, Flushed: true, Floor: 4}}, 15, 15, 0, 0},
		{"undo held, like in store: clamped at zero", []engagement.Stats{row("global", 0, 0, 5), row("us", 0, 0, 5)},
			[]region.Held{{Counter: "like", Region: "us", Delta: -1}}, 0, 0, 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := engagement.Stats{}
			if len(c.rows) > 0 {
				before = c.rows[0]
				before.Counters = map[string]int64{"view": c.rows[0].Counters["view"]}
			}
			got := region.MergeHeld(c.rows, "c", c.held)
			by := map[string]engagement.Stats{}
			for _, r := range got {
				by[r.Scope] = r
			}
			if g, u := by["global"], by["us"]; g.Counters["view"] != c.wantGlobal || u.Counters["view"] != c.wantUS ||
				g.Likes != c.wantGlobalL || u.Likes != c.wantUSL {
				t.Errorf("views global %d us %d, likes %d %d; want %d %d, %d %d", g.Counters["view"], u.Counters["view"],
					g.Likes, u.Likes, c.wantGlobal, c.wantUS, c.wantGlobalL, c.wantUSL)
			}
			if len(c.rows) > 0 && (c.rows[0].Counters["view"] != before.Counters["view"] || c.rows[0].Likes != before.Likes) {
				t.Errorf("the stored rows were modified: %+v", c.rows[0])
			}
		})
	}
}

// seqPublisher numbers the messages it stores as a broker would and
// answers with the sequence; while gated, it holds every publish.
type seqPublisher struct {
	mu   sync.Mutex
	next uint64
	gate chan struct{}
	msgs []partial.Batch
	seqs []uint64
}

func (p *seqPublisher) Publish(ctx context.Context, partition uint32, msgID string, data []byte) error {
	_, err := p.PublishSeq(ctx, partition, msgID, data)
	return err
}

func (p *seqPublisher) PublishSeq(ctx context.Context, partition uint32, msgID string, data []byte) (uint64, error) {
	p.mu.Lock()
	gate := p.gate
	p.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	var b partial.Batch
	if err := partial.Decode(data, &b); err != nil {
		return 0, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.next++
	p.msgs = append(p.msgs, b)
	p.seqs = append(p.seqs, p.next)
	return p.next, nil
}

// apply writes what the stored messages carry into st, as the rollup
// would: each row's LastSeq is the highest sequence applied to it.
func (p *seqPublisher) apply(t *testing.T, st *embedded.Store) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	rows := map[string]*engagement.Stats{}
	for i, b := range p.msgs {
		for _, s := range b.Sums {
			for _, scope := range []string{engagement.GlobalScope, s.Region} {
				r := rows[s.ContentID+"/"+scope]
				if r == nil {
					r = &engagement.Stats{ContentID: s.ContentID, Scope: scope, Counters: map[string]int64{}}
					rows[s.ContentID+"/"+scope] = r
				}
				r.Counters[s.Counter] += s.Delta
				r.LastSeq = p.seqs[i]
				r.UpdatedAt = time.Now()
			}
		}
	}
	var out []engagement.Stats
	for _, r := range rows {
		out = append(out, *r)
	}
	if err := st.WriteStats(t.Context(), out); err != nil {
		t.Fatal(err)
	}
}

func views(t *testing.T, a *region.Agent, mode region.Consistency, scope string) int64 {
	t.Helper()
	dst := make([]region.CountRead, 1)
	if _, err := a.ReadCounts(t.Context(), []string{"v1"}, mode, dst); err != nil {
		t.Fatal(err)
	}
	for _, r := range dst[0].Rows {
		if r.Scope == scope {
			return r.Counters["view"]
		}
	}
	return 0
}

// TestFreshCountsEachStepOnce: a delta held, then flushed, then
// acknowledged, then applied, is in a fresh answer exactly once at every
// step, in the global and the regional row.
func TestFreshCountsEachStepOnce(t *testing.T) {
	st := embeddedtest.Open(t, embedded.Config{Timeout: time.Second})
	pub := &seqPublisher{gate: make(chan struct{})}
	a := newAgent(t, st, pub, func(c *region.Config) {
		c.FlushInterval = time.Hour // the test flushes
		c.CacheTTL = 0              // every read goes to the store
	})
	check := func(step string, wantFresh, wantEventual int64) {
		t.Helper()
		for _, scope := range []string{"global", "us"} {
			if got := views(t, a, region.Fresh, scope); got != wantFresh {
				t.Errorf("%s: fresh %s views = %d, want %d", step, scope, got, wantFresh)
			}
			if got := views(t, a, region.Eventual, scope); got != wantEventual {
				t.Errorf("%s: eventual %s views = %d, want %d", step, scope, got, wantEventual)
			}
		}
	}
	if err := a.Increment(t.Context(), []region.Increment{{ContentID: "v1", Counter: "view", Delta: 5}}); err != nil {
		t.Fatal(err)
	}
	check("held in the counters", 5, 0)

	a.Flush()
	check("flushed, not acknowledged", 5, 0)

	close(pub.gate)
	testenv.Eventually(t, 5*time.Second, "the message acknowledged", testenv.Until(func() bool {
		pub.mu.Lock()
		defer pub.mu.Unlock()
		return len(pub.seqs) == 1
	}))
	testenv.Eventually(t, 5*time.Second, "the publisher to take the ack", testenv.Until(func() bool {
		return a.Stats().MessagesPublished.Load() == 1
	}))
	check("acknowledged, not applied", 5, 0)

	if err := a.Increment(t.Context(), []region.Increment{{ContentID: "v1", Counter: "view", Delta: 1}}); err != nil {
		t.Fatal(err)
	}
	check("acknowledged, and one more held", 6, 0)

	pub.apply(t, st)
	check("applied, one more held", 6, 5)

	a.Flush() // prunes the applied message (the read saw its row), sends the 1
	testenv.Eventually(t, 5*time.Second, "the second message acknowledged", testenv.Until(func() bool {
		return a.Stats().MessagesPublished.Load() == 2
	}))
	check("second flushed and acknowledged", 6, 5)
	if hs := a.HeldStats(); hs.Messages != 1 {
		t.Errorf("held messages = %d, want 1 (the applied one pruned)", hs.Messages)
	}
	pub.apply(t, st)
	check("both applied", 6, 6)
}

// TestFreshUnacknowledgedMovedRowLeftOut: a flushed message whose ack has
// not come back may already be applied once a row moved past what the
// agent had seen acknowledged; fresh leaves it out rather than risk
// counting it twice.
func TestFreshUnacknowledgedMovedRowLeftOut(t *testing.T) {
	st := embeddedtest.Open(t, embedded.Config{Timeout: time.Second})
	pub := &seqPublisher{gate: make(chan struct{})}
	a := newAgent(t, st, pub, func(c *region.Config) {
		c.FlushInterval = time.Hour
		c.CacheTTL = 0
	})
	t.Cleanup(func() { close(pub.gate) }) // before the agent's Stop
	if err := a.Increment(t.Context(), []region.Increment{{ContentID: "v1", Counter: "view", Delta: 5}}); err != nil {
		t.Fatal(err)
	}
	a.Flush()
	// The broker stored it and the rollup applied it; the ack is lost.
	if err := st.WriteStats(t.Context(), []engagement.Stats{
		{ContentID: "v1", Scope: "global", Counters: map[string]int64{"view": 5}, LastSeq: 1, UpdatedAt: time.Now()},
		{ContentID: "v1", Scope: "us", Counters: map[string]int64{"view": 5}, LastSeq: 1, UpdatedAt: time.Now()},
	}); err != nil {
		t.Fatal(err)
	}
	if got := views(t, a, region.Fresh, "global"); got != 5 {
		t.Errorf("fresh views = %d, want 5 (never 10)", got)
	}
}

// TestFreshOnASourcedStreamAddsOnlyUnflushed: when the agent publishes to
// a regional stream the hub sources (its sequences are not the rows'),
// fresh adds what the counters hold and nothing once flushed: it may miss
// a flush in flight, never count one twice.
func TestFreshOnASourcedStreamAddsOnlyUnflushed(t *testing.T) {
	st := embeddedtest.Open(t, embedded.Config{Timeout: time.Second})
	pub := &seqPublisher{gate: make(chan struct{})}
	a := newAgent(t, st, pub, func(c *region.Config) {
		c.FlushInterval = time.Hour
		c.CacheTTL = 0
		c.SourcedStream = true
	})
	if err := a.Increment(t.Context(), []region.Increment{{ContentID: "v1", Counter: "view", Delta: 5}}); err != nil {
		t.Fatal(err)
	}
	if got := views(t, a, region.Fresh, "global"); got != 5 {
		t.Errorf("held in the counters: fresh views = %d, want 5", got)
	}
	a.Flush()
	close(pub.gate)
	testenv.Eventually(t, 5*time.Second, "the publisher to take the ack", testenv.Until(func() bool {
		return a.Stats().MessagesPublished.Load() == 1
	}))
	if got := views(t, a, region.Fresh, "global"); got != 0 {
		t.Errorf("flushed, not applied: fresh views = %d, want 0 (the stored total)", got)
	}
	if hs := a.HeldStats(); hs.Messages != 0 {
		t.Errorf("held messages = %d, want none remembered", hs.Messages)
	}
	pub.apply(t, st)
	if got := views(t, a, region.Fresh, "global"); got != 5 {
		t.Errorf("applied: fresh views = %d, want 5", got)
	}
}
