package rollup

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/internal/testenv"
	"github.com/edgecount/edgecount/natsjs"
	"github.com/edgecount/edgecount/natsjs/natsjstest"
	"github.com/edgecount/edgecount/partial"
	"github.com/edgecount/edgecount/region"
	"github.com/edgecount/edgecount/store"
	"github.com/edgecount/edgecount/store/embedded"
	"github.com/edgecount/edgecount/store/embedded/embeddedtest"
)

// testRecountConfig checks every stats row on every pass (any row older
// than a nanosecond is stale) with a short quiet period.
func testRecountConfig(quiet time.Duration) RecountConfig {
	c := DefaultRecountConfig()
	c.StaleAfter = time.Nanosecond
	c.Quiet = quiet
	c.Sample = 0
	return c
}

func newTestRecounter(t *testing.T, st RecountStore, cfg RecountConfig) *Recounter {
	t.Helper()
	rc, err := NewRecounter(New(st, nil, nil), st, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return rc
}

// reaction is one user's reaction in a test's setup.
type reaction struct {
	user, region string
	action       engagement.Action
}

func insertReactions(t *testing.T, st *embedded.Store, content string, rs []reaction) {
	t.Helper()
	for _, r := range rs {
		row := engagement.Reaction{UserID: r.user, ContentID: content, Action: r.action, Region: r.region,
			Version: 1, Incarnation: rand.Uint64() | 1, UpdatedAt: time.Now()}
		if ok, err := st.InsertReaction(t.Context(), row); err != nil || !ok {
			t.Fatalf("InsertReaction(%+v) = %v, %v", row, ok, err)
		}
	}
}

// tallies reads an item's rows as scope → likes/dislikes.
func tallies(t *testing.T, st StatsStore, id string) map[string]Tally {
	t.Helper()
	got, err := st.ReadStats(t.Context(), []string{id})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]Tally{}
	for _, r := range got[id] {
		out[r.Scope] = Tally{r.Likes, r.Dislikes}
	}
	return out
}

// counted returns what the reactions of id say the rows should hold.
func counted(t *testing.T, st RecountStore, id string) map[string]Tally {
	t.Helper()
	ts, err := st.CountReactions(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]Tally{}
	var g Tally
	for _, x := range ts {
		out[x.Region] = Tally{x.Likes, x.Dislikes}
		g.Likes += x.Likes
		g.Dislikes += x.Dislikes
	}
	if len(ts) > 0 {
		out[engagement.GlobalScope] = g
	}
	return out
}

// equalNonZero compares two scope maps ignoring rows of zero totals.
func equalNonZero(a, b map[string]Tally) bool {
	nz := func(m map[string]Tally) map[string]Tally {
		out := map[string]Tally{}
		for k, v := range m {
			if v != (Tally{}) {
				out[k] = v
			}
		}
		return out
	}
	return maps.Equal(nz(a), nz(b))
}

// TestRecountPassRepairsCorruption corrupts totals on purpose (added to,
// subtracted from, a region row dropped, rows without reactions) and checks
// that one pass repairs every one of them, reports the exact drift, keeps
// the other counters and the sequence, and that the next pass finds none.
func TestRecountPassRepairsCorruption(t *testing.T) {
	st := embeddedtest.Open(t, embedded.Config{NoSync: true})
	rc := newTestRecounter(t, st, testRecountConfig(time.Millisecond))
	old := time.Now().Add(-time.Hour).UTC()
	row := func(id, scope string, likes, dislikes int64, seq uint64) engagement.Stats {
		return engagement.Stats{ContentID: id, Scope: scope, Likes: likes, Dislikes: dislikes,
			Counters: map[string]int64{"view": 7}, UpdatedAt: old, LastSeq: seq}
	}
	usLikes := []reaction{{"u1", "us", engagement.ActionLike}, {"u2", "us", engagement.ActionLike}, {"u3", "eu", engagement.ActionDislike}}
	tests := []struct {
		id        string
		reactions []reaction
		rows      []engagement.Stats
		wantDrift int64
		wantRows  int // rows rewritten
	}{
		{"clean", usLikes, []engagement.Stats{
			row("clean", "global", 2, 1, 9), row("clean", "us", 2, 0, 9), row("clean", "eu", 0, 1, 4)}, 0, 0},
		{"added", usLikes, []engagement.Stats{
			row("added", "global", 7, 1, 9), row("added", "us", 2, 0, 9), row("added", "eu", 0, 1, 4)}, 5, 1},
		{"subtracted", usLikes, []engagement.Stats{
			row("subtracted", "global", 2, 1, 9), row("subtracted", "us", 2, 0, 9), row("subtracted", "eu", 0, -2, 4)}, 3, 1},
		{"region-dropped", usLikes, []engagement.Stats{
			row("region-dropped", "global", 2, 1, 9), row("region-dropped", "us", 2, 0, 9)}, 1, 1},
		{"both-ways", usLikes, []engagement.Stats{
			row("both-ways", "global", 2, 0, 12), row("both-ways", "us", 6, 0, 12), row("both-ways", "eu", 0, 1, 4)}, 5, 2},
		{"no-reactions", nil, []engagement.Stats{
			row("no-reactions", "global", 3, 1, 2), row("no-reactions", "us", 3, 1, 2)}, 8, 2},
	}
	for _, tt := range tests {
		insertReactions(t, st, tt.id, tt.reactions)
		if err := st.WriteStats(t.Context(), tt.rows); err != nil {
			t.Fatal(err)
		}
	}

	rep, err := rc.Pass(t.Context())
	if err != nil {
		t.Fatalf("Pass: %v", err)
	}
	if !rep.Wrapped || rep.Stale != len(tests) {
		t.Fatalf("pass report = %+v; want every item stale and the scan wrapped", rep)
	}
	results := map[string]ItemResult{}
	for _, it := range rep.Items {
		results[it.ContentID] = it
	}
	var totalDrift, totalRows int64
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			res := results[tt.id]
			wantStatus := ItemRepaired
			if tt.wantDrift == 0 {
				wantStatus = ItemClean
			}
			if res.Status != wantStatus || res.Drift != tt.wantDrift {
				t.Fatalf("result = %+v; want status %s, drift %d", res, wantStatus, tt.wantDrift)
			}
			if got, want := changed(res.Rows), tt.wantRows; got != want {
				t.Fatalf("rows changed = %d; want %d (%+v)", got, want, res.Rows)
			}
			if got, want := tallies(t, st, tt.id), counted(t, st, tt.id); !equalNonZero(got, want) {
				t.Fatalf("totals after the pass = %v; want the count %v", got, want)
			}
			after, err := st.ReadStats(t.Context(), []string{tt.id})
			if err != nil {
				t.Fatal(err)
			}
			var maxSeq uint64
			for _, r := range tt.rows {
				maxSeq = max(maxSeq, r.LastSeq)
			}
			for _, r := range after[tt.id] {
				before := slices.IndexFunc(tt.rows, func(o engagement.Stats) bool { return o.Scope == r.Scope })
				rewritten := before < 0 || tt.rows[before].Likes != r.Likes || tt.rows[before].Dislikes != r.Dislikes
				if rewritten && (r.LastSeq != maxSeq || !r.UpdatedAt.After(old)) {
					t.Errorf("repaired row %s: seq %d, updated %v; want seq %d and a fresh time", r.Scope, r.LastSeq, r.UpdatedAt, maxSeq)
				}
				if before >= 0 && r.Counters["view"] != 7 {
					t.Errorf("row %s lost its other counters: %v", r.Scope, r.Counters)
				}
			}
		})
		totalDrift += tt.wantDrift
		totalRows += int64(tt.wantRows)
	}
	s := rc.Stats()
	if got := s.DriftRepaired.Load(); got != uint64(totalDrift) {
		t.Errorf("drift repaired metric = %d; want %d", got, totalDrift)
	}
	if got := s.RowsRepaired.Load(); got != uint64(totalRows) {
		t.Errorf("rows repaired metric = %d; want %d", got, totalRows)
	}
	if got := s.ItemsChecked.Load(); got != uint64(len(tests)) {
		t.Errorf("items checked = %d; want %d", got, len(tests))
	}

	// The next pass starts over and finds nothing left.
	rep, err = rc.Pass(t.Context())
	if err != nil {
		t.Fatalf("second Pass: %v", err)
	}
	for _, it := range rep.Items {
		if it.Status != ItemClean {
			t.Errorf("second pass: %s is %s (%+v); want clean", it.ContentID, it.Status, it.Rows)
		}
	}
	if got := s.DriftRepaired.Load(); got != uint64(totalDrift) {
		t.Errorf("drift repaired after the second pass = %d; want still %d", got, totalDrift)
	}
}

// TestRecountPassResumes checks that passes continue where the previous
// one stopped and that a full cycle checks every item once.
func TestRecountPassResumes(t *testing.T) {
	st := embeddedtest.Open(t, embedded.Config{NoSync: true})
	cfg := testRecountConfig(time.Millisecond)
	cfg.Batch = 4
	rc := newTestRecounter(t, st, cfg)
	var rows []engagement.Stats
	for i := range 10 {
		id := fmt.Sprintf("item-%02d", i)
		rows = append(rows, engagement.Stats{ContentID: id, Scope: engagement.GlobalScope, Likes: 1},
			engagement.Stats{ContentID: id, Scope: "us", Likes: 1})
	}
	if err := st.WriteStats(t.Context(), rows); err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for pass := 0; ; pass++ {
		if pass == 10 {
			t.Fatal("the scan did not wrap after 10 passes")
		}
		rep, err := rc.Pass(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if rep.RowsScanned > cfg.Batch {
			t.Fatalf("pass scanned %d rows; batch is %d", rep.RowsScanned, cfg.Batch)
		}
		for _, it := range rep.Items {
			seen[it.ContentID]++
		}
		if rep.Wrapped {
			break
		}
	}
	// 20 rows in pages of 4: an item's two rows never straddle a page, so
	// each item is checked exactly once per cycle.
	if len(seen) != 10 {
		t.Fatalf("one cycle checked %d items; want 10: %v", len(seen), seen)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("%s checked %d times in one cycle", id, n)
		}
		if got := tallies(t, st, id); !equalNonZero(got, nil) {
			t.Errorf("%s totals = %v; want zero (no reactions)", id, got)
		}
	}
	if got := rc.Stats().ScanCycles.Load(); got != 1 {
		t.Errorf("scan cycles = %d; want 1", got)
	}
}

// TestRecountSample checks that a pass checks Sample of the items updated
// recently, and no more.
func TestRecountSample(t *testing.T) {
	st := embeddedtest.Open(t, embedded.Config{NoSync: true})
	cfg := testRecountConfig(time.Millisecond)
	cfg.StaleAfter = time.Hour
	cfg.Sample = 3
	rc := newTestRecounter(t, st, cfg)
	var rows []engagement.Stats
	for i := range 8 {
		rows = append(rows, engagement.Stats{ContentID: fmt.Sprintf("fresh-%d", i), Scope: engagement.GlobalScope, UpdatedAt: time.Now()})
	}
	rows = append(rows, engagement.Stats{ContentID: "stale", Scope: engagement.GlobalScope, UpdatedAt: time.Now().Add(-2 * time.Hour)})
	if err := st.WriteStats(t.Context(), rows); err != nil {
		t.Fatal(err)
	}
	rep, err := rc.Pass(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if rep.Stale != 1 || rep.Sampled != 3 || len(rep.Items) != 4 {
		t.Fatalf("report = stale %d, sampled %d, %d items; want 1, 3, 4", rep.Stale, rep.Sampled, len(rep.Items))
	}
	if rep.Items[0].ContentID != "stale" {
		t.Fatalf("first item = %s; want the stale one", rep.Items[0].ContentID)
	}
}

// TestRecountOnDemand covers the on-demand recount's answers and its bad
// input: nothing is read or written for a call with a malformed id.
func TestRecountOnDemand(t *testing.T) {
	st := embeddedtest.Open(t, embedded.Config{NoSync: true})
	cfg := testRecountConfig(time.Millisecond)
	cfg.Partitions = 4
	// Own only the partition of "mine".
	cfg.Owned = []uint32{partial.PartitionOf("mine", 4)}
	// An id in another partition, and one in ours that nothing knows.
	other, unknown := "", ""
	for i := 0; other == "" || unknown == ""; i++ {
		id := fmt.Sprintf("id-%d", i)
		if partial.PartitionOf(id, 4) != cfg.Owned[0] {
			other = cmp.Or(other, id)
		} else {
			unknown = cmp.Or(unknown, id)
		}
	}
	rc := newTestRecounter(t, st, cfg)
	insertReactions(t, st, "mine", []reaction{{"u1", "us", engagement.ActionLike}, {"u2", "eu", engagement.ActionDislike}})
	insertReactions(t, st, other, []reaction{{"u1", "us", engagement.ActionLike}})
	corrupt := []engagement.Stats{{ContentID: other, Scope: engagement.GlobalScope, Likes: 40}, {ContentID: other, Scope: "us", Likes: 40}}
	if err := st.WriteStats(t.Context(), corrupt); err != nil {
		t.Fatal(err)
	}

	for _, tt := range []struct {
		name    string
		ids     []string
		wantIdx int // IDError index, or -1 for another ErrInvalid
	}{
		{"malformed id", []string{"mine", "bad id", "x"}, 1},
		{"slash", []string{"a/b"}, 0},
		{"empty id", []string{"mine", ""}, 1},
		{"too long", []string{strings.Repeat("v", engagement.MaxIDLen+1)}, 0},
		{"no ids", nil, -1},
		{"too many ids", make([]string, MaxRecountIDs+1), -1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res, err := rc.Recount(t.Context(), tt.ids, RecountOptions{})
			if !errors.Is(err, store.ErrInvalid) || res != nil {
				t.Fatalf("Recount(%q) = %v, %v; want ErrInvalid and no results", tt.ids, res, err)
			}
			var idErr *IDError
			if tt.wantIdx >= 0 && (!errors.As(err, &idErr) || idErr.Index != tt.wantIdx) {
				t.Fatalf("error %v; want an IDError at index %d", err, tt.wantIdx)
			}
		})
	}
	if got := rc.Stats().ItemsChecked.Load(); got != 0 {
		t.Fatalf("bad input checked %d items", got)
	}
	if got := tallies(t, st, "mine"); len(got) != 0 {
		t.Fatalf("bad input wrote rows of mine: %v", got)
	}

	res, err := rc.Recount(t.Context(), []string{"mine", unknown, other, "mine"}, RecountOptions{})
	if err != nil {
		t.Fatalf("Recount: %v", err)
	}
	if len(res) != 3 {
		t.Fatalf("got %d results; want 3 (one per distinct id): %+v", len(res), res)
	}
	want := []struct {
		id     string
		status ItemStatus
		drift  int64
	}{{"mine", ItemRepaired, 4}, {unknown, ItemUnknown, 0}, {other, ItemNotOwned, 0}}
	for i, w := range want {
		if res[i].ContentID != w.id || res[i].Status != w.status || res[i].Drift != w.drift {
			t.Errorf("result %d = %+v; want %s %s drift %d", i, res[i], w.id, w.status, w.drift)
		}
	}
	if got := tallies(t, st, "mine"); !maps.Equal(got, map[string]Tally{"global": {1, 1}, "us": {1, 0}, "eu": {0, 1}}) {
		t.Errorf("mine after recount = %v", got)
	}
	if got := tallies(t, st, unknown); len(got) != 0 {
		t.Errorf("an unknown id got rows: %v", got)
	}
	if got := tallies(t, st, other); got["global"].Likes != 40 {
		t.Errorf("an item of another rollup's partition was touched: %v", got)
	}
	if !strings.Contains(res[2].Reason, fmt.Sprint("partition ", partial.PartitionOf(other, 4))) {
		t.Errorf("not-owned reason %q does not name the partition", res[2].Reason)
	}
}

// duringQuiet runs an on-demand recount of id and calls fn once the item
// has been counted, while the recount waits for its quiet period.
func duringQuiet(t *testing.T, rc *Recounter, id string, fn func()) ItemResult {
	t.Helper()
	type result struct {
		res []ItemResult
		err error
	}
	done := make(chan result, 1)
	before := rc.Stats().RowsChecked.Load()
	go func() {
		res, err := rc.Recount(t.Context(), []string{id}, RecountOptions{})
		done <- result{res, err}
	}()
	testenv.Eventually(t, 30*time.Second, "the item to be counted", testenv.Until(func() bool { return rc.Stats().RowsChecked.Load() > before }))
	fn()
	r := <-done
	if r.err != nil || len(r.res) != 1 {
		t.Fatalf("Recount = %+v, %v", r.res, r.err)
	}
	return r.res[0]
}

// likeMsg is a message of one like of id in us, flushed at flushed.
func likeMsg(id string, flushed time.Time) []byte {
	return partial.Append(nil, &partial.Batch{Agent: "a", Region: "us", Epoch: 1, Seq: 1, FlushedAt: flushed,
		Sums: []partial.Sum{{ContentID: id, Counter: engagement.CounterLike, Region: "us", Delta: 1}}})
}

// driftedRecounter is a recounter with quiet period quiet over a fresh
// store where x has one like in its reactions and 10 in its totals.
func driftedRecounter(t *testing.T, quiet time.Duration) (*Recounter, *embedded.Store) {
	t.Helper()
	st := embeddedtest.Open(t, embedded.Config{NoSync: true})
	rc := newTestRecounter(t, st, testRecountConfig(quiet))
	insertReactions(t, st, "x", []reaction{{"u1", "us", engagement.ActionLike}})
	if err := st.WriteStats(t.Context(), []engagement.Stats{
		{ContentID: "x", Scope: engagement.GlobalScope, Likes: 10, LastSeq: 5},
		{ContentID: "x", Scope: "us", Likes: 10, LastSeq: 5},
	}); err != nil {
		t.Fatal(err)
	}
	return rc, st
}

// handleLate applies a message of y flushed three quiet periods ago.
func handleLate(t *testing.T, rc *Recounter, quiet time.Duration) {
	t.Helper()
	if err := rc.ru.Handle(t.Context(), 100, likeMsg("y", time.Now().Add(-3*quiet))); err != nil {
		t.Fatal(err)
	}
}

// failApply makes an apply fail (its context is cancelled).
func failApply(t *testing.T, rc *Recounter) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := rc.ru.Handle(ctx, 100, likeMsg("y", time.Now())); err == nil {
		t.Fatal("Handle with a cancelled context succeeded")
	}
}

// TestRecountLeavesMovingTotals checks the race rule directly: an item
// whose totals change while it is counted, or a pipeline seen to be
// behind, gets no repair; the drift is left for a later pass.
func TestRecountLeavesMovingTotals(t *testing.T) {
	// The quiet period only has to outlast fn, which runs right after the
	// count; 2 s leaves room for a slow machine.
	const quiet = 2 * time.Second
	tests := []struct {
		name       string
		during     func(t *testing.T, rc *Recounter)
		wantReason string
		// wantLikes is x's global likes right after the recount.
		wantLikes int64
	}{
		{"applied meanwhile", func(t *testing.T, rc *Recounter) {
			if err := rc.ru.Handle(t.Context(), 100, likeMsg("x", time.Now())); err != nil {
				t.Fatal(err)
			}
		}, "changed while the item was counted", 11},
		{"late message", func(t *testing.T, rc *Recounter) { handleLate(t, rc, quiet) }, "pipeline behind", 10},
		{"failed apply", failApply, "failed to apply", 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rc, st := driftedRecounter(t, quiet)
			res := duringQuiet(t, rc, "x", func() { tt.during(t, rc) })
			if res.Status != ItemDeferred || !strings.Contains(res.Reason, tt.wantReason) {
				t.Fatalf("result = %+v; want deferred because %q", res, tt.wantReason)
			}
			if got := tallies(t, st, "x")[engagement.GlobalScope].Likes; got != tt.wantLikes {
				t.Fatalf("global likes = %d; want %d (untouched by the recount)", got, tt.wantLikes)
			}
			s := rc.Stats()
			if s.RowsRepaired.Load() != 0 || s.RowsDeferred.Load() != 2 {
				t.Fatalf("repaired %d, deferred %d rows; want 0 and 2", s.RowsRepaired.Load(), s.RowsDeferred.Load())
			}
		})
	}
}

// TestPlanRows checks the repair rule cell by cell: an exact count is the
// target; a count that may be short only raises a total, unless lowering
// is allowed.
func TestPlanRows(t *testing.T) {
	rows := []engagement.Stats{
		{Scope: "global", Likes: 5, Dislikes: 2},
		{Scope: "eu", Likes: 1, Dislikes: 2},
		{Scope: "us", Likes: 4},
	}
	counts := []engagement.RegionTally{{Region: "eu", Likes: 3, Dislikes: 1}, {Region: "us", Likes: 2}, {Region: "ap", Dislikes: 1}}
	tests := []struct {
		name                 string
		complete, allowLower bool
		want                 map[string]Tally
		wantUnrepaired       int
	}{
		{"exact count", true, false, map[string]Tally{"global": {5, 2}, "eu": {3, 1}, "us": {2, 0}, "ap": {0, 1}}, 0},
		{"short count raises only", false, false, map[string]Tally{"global": {5, 2}, "eu": {3, 2}, "us": {4, 0}, "ap": {0, 1}}, 2},
		{"short count, lowering allowed", false, true, map[string]Tally{"global": {5, 2}, "eu": {3, 1}, "us": {2, 0}, "ap": {0, 1}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan, err := planRows(rows, counts, tt.complete, tt.allowLower)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]Tally{}
			for _, r := range plan {
				got[r.Scope] = r.After
			}
			if !maps.Equal(got, tt.want) {
				t.Fatalf("after = %v; want %v", got, tt.want)
			}
			if n := unrepaired(plan); n != tt.wantUnrepaired {
				t.Fatalf("unrepaired rows = %d; want %d", n, tt.wantUnrepaired)
			}
		})
	}
	if _, err := planRows(nil, []engagement.RegionTally{{Region: "global", Likes: 1}}, true, false); err == nil {
		t.Fatal("a reaction region named global was accepted as a scope")
	}
}

// pipeline is a real standalone pipeline in one test: an agent taking
// reactions into the embedded store and flushing partial sums to an
// embedded NATS JetStream server, and the rollup consuming them through a
// Recounter.
type pipeline struct {
	st       *embedded.Store
	rc       *Recounter
	agent    *region.Agent
	consumer *natsjs.Consumer
	parts    []uint32
}

const testPartitions = 4

func startPipeline(t *testing.T, quiet, flush time.Duration) *pipeline {
	t.Helper()
	p := &pipeline{st: embeddedtest.Open(t, embedded.Config{NoSync: true})}
	scfg := natsjs.DefaultServerConfig(t.TempDir())
	scfg.SyncAlways = false
	stream := natsjs.DefaultStreamConfig()
	stream.Partitions = testPartitions
	bus := natsjstest.Stream(t, scfg, "recount-test", stream)
	cfg := testRecountConfig(quiet)
	cfg.Partitions = testPartitions
	p.rc = newTestRecounter(t, p.st, cfg)
	for i := range testPartitions {
		p.parts = append(p.parts, uint32(i))
	}
	p.consumer = bus.Consumer(natsjs.ConsumerConfig{Stream: stream})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		err := p.consumer.Run(ctx, p.parts, p.rc.ru.Handle)
		if err != nil {
			t.Errorf("consumer: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
	acfg := region.DefaultConfig("us", "recount-agent")
	acfg.Partitions = testPartitions
	acfg.FlushInterval = flush
	var err error
	p.agent, err = region.New(acfg, region.Deps{Reactions: p.st, Stats: p.st, Publisher: bus.Publisher(stream)})
	if err != nil {
		t.Fatal(err)
	}
	p.agent.Start()
	t.Cleanup(func() { p.agent.Stop(context.Background()) })
	return p
}

// drain stops the agent (final flush and publish) and waits until the
// rollup applied everything.
func (p *pipeline) drain(t *testing.T) {
	t.Helper()
	if err := p.agent.Stop(t.Context()); err != nil {
		t.Fatalf("agent Stop: %v", err)
	}
	testenv.Eventually(t, 30*time.Second, "the rollup to apply every message", testenv.Until(func() bool {
		n, err := p.consumer.Pending(t.Context(), p.parts)
		return err == nil && n == 0
	}))
}

// toggle sets a random reaction; a contended compare-and-set is the only
// error a correct store gives here.
func toggle(t *testing.T, a *region.Agent, user, item string) {
	action := []engagement.Action{engagement.ActionLike, engagement.ActionDislike, engagement.ActionNone}[rand.IntN(3)]
	if _, err := a.React(context.Background(), user, item, action); err != nil && !errors.Is(err, region.ErrContended) {
		t.Errorf("React(%s, %s, %v): %v", user, item, action, err)
	}
}

// TestRecountRacesLivePipeline runs passes that check every item while
// reactions toggle and views flow through a real pipeline, on items whose
// totals are correct (any repair of them would be wrong) and on quiet
// items with drift (each must be repaired once, exactly). At the end every
// total equals a recount.
func TestRecountRacesLivePipeline(t *testing.T) {
	// Deltas reach the totals within a flush (20 ms) plus a publish and an
	// apply: a second of quiet leaves a wide margin on a loaded machine.
	p := startPipeline(t, time.Second, 20*time.Millisecond)
	ctx := t.Context()
	busy := []string{"busy-0", "busy-1", "busy-2", "busy-3", "busy-4", "busy-5"}
	drifted := map[string]int64{"drift-0": 3, "drift-1": 1, "drift-2": 6}
	for id, d := range drifted {
		insertReactions(t, p.st, id, []reaction{{"u1", "us", engagement.ActionLike}, {"u2", "eu", engagement.ActionDislike}})
		if err := p.st.WriteStats(ctx, []engagement.Stats{
			{ContentID: id, Scope: engagement.GlobalScope, Likes: 1 + d, Dislikes: 1},
			{ContentID: id, Scope: "us", Likes: 1 + d},
			{ContentID: id, Scope: "eu", Dislikes: 1},
		}); err != nil {
			t.Fatal(err)
		}
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var toggles atomic.Int64
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				item := busy[rand.IntN(len(busy))]
				toggle(t, p.agent, fmt.Sprintf("u%d-%d", w, rand.IntN(4)), item)
				if err := p.agent.Increment(ctx, []region.Increment{{ContentID: item, Counter: "view", Delta: 1}}); err != nil {
					t.Error(err)
				}
				toggles.Add(1)
				if i%8 == 0 {
					time.Sleep(time.Millisecond) // let flushes and passes interleave
				}
			}
		}()
	}
	repairs := map[string][]ItemResult{}
	var deferred int
	for pass := 0; pass < 3; pass++ {
		rep, err := p.rc.Pass(ctx)
		if err != nil {
			t.Fatalf("Pass: %v", err)
		}
		for _, it := range rep.Items {
			switch it.Status {
			case ItemRepaired:
				repairs[it.ContentID] = append(repairs[it.ContentID], it)
			case ItemDeferred:
				deferred++
			case ItemFailed:
				t.Errorf("pass: %s failed: %s", it.ContentID, it.Reason)
			}
		}
	}
	close(stop)
	wg.Wait()
	p.drain(t)
	t.Logf("%d toggles, %d deferred checks during 3 passes", toggles.Load(), deferred)

	for _, id := range busy {
		if r := repairs[id]; len(r) > 0 {
			t.Errorf("%s had correct totals but was repaired: %+v", id, r)
		}
		if got, want := tallies(t, p.st, id), counted(t, p.st, id); !equalNonZero(got, want) {
			t.Errorf("%s totals = %v; reactions count %v", id, got, want)
		}
	}
	for id, d := range drifted {
		r := repairs[id]
		if len(r) != 1 || r[0].Drift != 2*d {
			t.Errorf("%s repairs = %+v; want one repair of drift %d", id, r, 2*d)
		}
	}
	ids := append(slices.Clone(busy), slices.Sorted(maps.Keys(drifted))...)
	res, err := p.rc.Recount(ctx, ids, RecountOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range res {
		if it.Status != ItemClean && it.Status != ItemUnknown {
			t.Errorf("final recount: %s is %s: %+v", it.ContentID, it.Status, it.Rows)
		}
	}
}

// TestRecountAfterConcurrentToggles has many goroutines toggle one user's
// reaction on one item through the real pipeline; afterwards a recount
// finds zero drift.
func TestRecountAfterConcurrentToggles(t *testing.T) {
	p := startPipeline(t, 10*time.Millisecond, 20*time.Millisecond)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 40 {
				toggle(t, p.agent, "solo", "one-item")
			}
		}()
	}
	wg.Wait()
	p.drain(t)
	res, err := p.rc.Recount(t.Context(), []string{"one-item"}, RecountOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Status != ItemClean && res[0].Status != ItemUnknown {
		t.Fatalf("recount after concurrent toggles = %+v; want clean", res[0])
	}
	if d := p.rc.Stats().DriftRepaired.Load(); d != 0 {
		t.Fatalf("drift repaired = %d; want 0", d)
	}
	t.Logf("final state %v, result %s", tallies(t, p.st, "one-item"), res[0].Status)
}

// TestRecountWaitsForInFlightDeltas reacts and recounts at once, while the
// deltas of the reactions still sit in the agent's counters (flushed every
// 200 ms): the counts already hold the new reactions, the totals do not.
// The recount must wait out the quiet period, see the deltas land, and
// leave the items alone; repairing them would count each reaction twice.
func TestRecountWaitsForInFlightDeltas(t *testing.T) {
	p := startPipeline(t, time.Second, 200*time.Millisecond)
	ids := []string{"inflight-0", "inflight-1", "inflight-2", "inflight-3", "inflight-4"}
	for _, id := range ids {
		if _, err := p.agent.React(t.Context(), "u1", id, engagement.ActionLike); err != nil {
			t.Fatal(err)
		}
	}
	res, err := p.rc.Recount(t.Context(), ids, RecountOptions{})
	if err != nil {
		t.Fatal(err)
	}
	deferred := 0
	for _, it := range res {
		switch it.Status {
		case ItemDeferred:
			deferred++
		case ItemClean: // the flush came before the totals were read
		default:
			t.Errorf("%s: %s %+v; want deferred (or clean)", it.ContentID, it.Status, it.Rows)
		}
	}
	if deferred == 0 {
		t.Fatalf("no item was caught with its delta in flight: %+v", res)
	}
	p.drain(t)
	for _, id := range ids {
		if got := tallies(t, p.st, id); !maps.Equal(got, map[string]Tally{"global": {1, 0}, "us": {1, 0}}) {
			t.Errorf("%s totals = %v; want one like", id, got)
		}
	}
}

// TestHandleWaitsForRepair checks the exclusion itself: while a repair
// holds the apply lock, no message is applied.
func TestHandleWaitsForRepair(t *testing.T) {
	st := embeddedtest.Open(t, embedded.Config{NoSync: true})
	rc := newTestRecounter(t, st, testRecountConfig(time.Millisecond))
	msg := partial.Append(nil, &partial.Batch{Agent: "a", Region: "us", Epoch: 1, Seq: 1,
		Sums: []partial.Sum{{ContentID: "x", Counter: "view", Region: "us", Delta: 1}}})
	resume := rc.ru.pauseApplies()
	done := make(chan error, 1)
	go func() { done <- rc.ru.Handle(t.Context(), 1, msg) }()
	select {
	case err := <-done:
		resume()
		t.Fatalf("Handle returned (%v) while a repair held the lock", err)
	case <-time.After(50 * time.Millisecond):
	}
	if got := rc.ru.Stats().Messages.Load(); got != 0 {
		resume()
		t.Fatalf("%d messages applied while a repair held the lock", got)
	}
	resume()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := rc.ru.Stats().Messages.Load(); got != 1 {
		t.Fatalf("messages applied = %d; want 1", got)
	}
}

// TestRecountDefersAfterTroubleJustBeforeTheCount: a failed apply or a
// late message just before an item is counted defers its repair too, not
// only one during the quiet period: the window is measured from the count,
// and a failed message keeps repairs deferred until a message applies.
func TestRecountDefersAfterTroubleJustBeforeTheCount(t *testing.T) {
	const quiet = time.Second
	tests := []struct {
		name       string
		before     func(t *testing.T, rc *Recounter)
		wantReason string
	}{
		{"late message", func(t *testing.T, rc *Recounter) { handleLate(t, rc, quiet) }, "was applied"},
		{"failed apply", func(t *testing.T, rc *Recounter) {
			failApply(t, rc)
			// Well past the quiet period: still not applied since.
			time.Sleep(2 * quiet)
		}, "none has been applied since"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rc, st := driftedRecounter(t, quiet)
			tt.before(t, rc)
			res, err := rc.Recount(t.Context(), []string{"x"}, RecountOptions{})
			if err != nil || len(res) != 1 {
				t.Fatalf("Recount = %+v, %v", res, err)
			}
			if res[0].Status != ItemDeferred || !strings.Contains(res[0].Reason, tt.wantReason) {
				t.Fatalf("result = %+v; want deferred because %q", res[0], tt.wantReason)
			}
			if got := tallies(t, st, "x")[engagement.GlobalScope].Likes; got != 10 {
				t.Fatalf("global likes = %d; want 10 (untouched by the recount)", got)
			}
		})
	}
}

// slowCount wraps a store (a unit test of the job above it): each
// RecountReactions call waits delay, and fails with ErrUnavailable, having
// read nothing, while failing is set (a bucket that cannot be read).
type slowCount struct {
	RecountStore
	delay   time.Duration
	failing atomic.Bool
	calls   atomic.Int64
}

func (s *slowCount) RecountReactions(ctx context.Context, id, cursor string, budget int) ([]engagement.RegionTally, string, bool, error) {
	s.calls.Add(1)
	if !sleepCtx(ctx, s.delay) {
		return nil, cursor, false, ctx.Err()
	}
	if s.failing.Load() {
		return nil, cursor, false, fmt.Errorf("%w: bucket 3 of %s cannot be read", store.ErrUnavailable, id)
	}
	return s.RecountStore.RecountReactions(ctx, id, cursor, budget)
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// bigItem makes an item of n likes in "us" whose totals lost every one.
func bigItem(t *testing.T, st *embedded.Store, id string, n int) {
	t.Helper()
	rs := make([]reaction, n)
	for i := range rs {
		rs[i] = reaction{fmt.Sprintf("u%03d", i), "us", engagement.ActionLike}
	}
	insertReactions(t, st, id, rs)
	if err := st.WriteStats(t.Context(), []engagement.Stats{{ContentID: id, Scope: engagement.GlobalScope, LastSeq: 1}}); err != nil {
		t.Fatal(err)
	}
}

// TestRecountUnreadableIndexIsUnrepaired checks that a count that cannot
// read part of the index reports the item unrepaired and writes nothing
// (what it could not read is not taken as zero), and that the next check
// resumes the count and repairs the item.
func TestRecountUnreadableIndexIsUnrepaired(t *testing.T) {
	inner := embeddedtest.Open(t, embedded.Config{NoSync: true})
	bigItem(t, inner, "big", 40)
	st := &slowCount{RecountStore: inner}
	cfg := testRecountConfig(time.Millisecond)
	cfg.CountBudget = 10
	rc := newTestRecounter(t, st, cfg)
	// The first call reads 10 entries; the second cannot read.
	st.RecountStore = &failAfter{RecountStore: inner, n: 1, st: st}
	res, err := rc.Recount(t.Context(), []string{"big"}, RecountOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Status != ItemUnrepaired || !strings.Contains(res[0].Reason, "bucket 3") {
		t.Fatalf("result = %+v; want unrepaired, naming the failure", res[0])
	}
	if got := tallies(t, inner, "big"); got["global"] != (Tally{}) {
		t.Fatalf("a failed count wrote totals: %v", got)
	}
	if s := rc.Stats(); s.CountsUnfinished.Load() != 1 || s.InProgress.Load() != 1 {
		t.Fatalf("unfinished %d, in progress %d; want 1, 1", s.CountsUnfinished.Load(), s.InProgress.Load())
	}
	// The index is readable again: the count continues where it stopped.
	st.failing.Store(false)
	st.RecountStore = inner
	calls := st.calls.Load()
	res, err = rc.Recount(t.Context(), []string{"big"}, RecountOptions{})
	if err != nil || res[0].Status != ItemRepaired || res[0].Drift != 80 {
		t.Fatalf("second recount = %+v, %v; want repaired, drift 80", res, err)
	}
	if n := st.calls.Load() - calls; n != 3 {
		t.Fatalf("the resumed count took %d calls; want 3 (30 entries left, 10 a call)", n)
	}
	if s := rc.Stats(); s.CountsResumed.Load() != 1 || s.InProgress.Load() != 0 {
		t.Fatalf("resumed %d, in progress %d; want 1, 0", s.CountsResumed.Load(), s.InProgress.Load())
	}
}

// failAfter passes n RecountReactions calls to the store, then sets st
// failing.
type failAfter struct {
	RecountStore
	n  int
	st *slowCount
}

func (f *failAfter) RecountReactions(ctx context.Context, id, cursor string, budget int) ([]engagement.RegionTally, string, bool, error) {
	if f.n == 0 {
		f.st.failing.Store(true)
		return f.st.RecountReactions(ctx, id, cursor, budget)
	}
	f.n--
	return f.RecountStore.RecountReactions(ctx, id, cursor, budget)
}

// TestRecountResumesAcrossChecksAndRestarts checks that a count longer than
// ItemTimeout stops with its cursor, continues at later checks — of a
// Recounter started again from the progress file, as after a SIGKILL — and
// repairs the item once it ends.
func TestRecountResumesAcrossChecksAndRestarts(t *testing.T) {
	inner := embeddedtest.Open(t, embedded.Config{NoSync: true})
	bigItem(t, inner, "big", 60)
	st := &slowCount{RecountStore: inner, delay: 30 * time.Millisecond}
	cfg := testRecountConfig(time.Millisecond)
	cfg.CountBudget = 5
	cfg.ItemTimeout = 100 * time.Millisecond
	cfg.ProgressFile = filepath.Join(t.TempDir(), "progress.json")
	rc := newTestRecounter(t, st, cfg)
	res, err := rc.Recount(t.Context(), []string{"big"}, RecountOptions{})
	if err != nil || res[0].Status != ItemDeferred || !strings.Contains(res[0].Reason, "did not finish") {
		t.Fatalf("first recount = %+v, %v; want deferred, unfinished", res, err)
	}
	if got := tallies(t, inner, "big"); got["global"] != (Tally{}) {
		t.Fatalf("an unfinished count wrote totals: %v", got)
	}
	var status ItemStatus
	for restart := 0; restart < 20 && status != ItemRepaired; restart++ {
		// A new Recounter (a restarted process) finds the count in the
		// progress file.
		rc = newTestRecounter(t, st, cfg)
		if n := rc.Stats().InProgress.Load(); n != 1 {
			t.Fatalf("restart %d: %d counts in progress; want 1", restart, n)
		}
		res, err = rc.Recount(t.Context(), []string{"big"}, RecountOptions{})
		if err != nil {
			t.Fatal(err)
		}
		status = res[0].Status
		if status != ItemRepaired && status != ItemDeferred {
			t.Fatalf("restart %d: %+v; want deferred or repaired", restart, res[0])
		}
		if rc.Stats().CountsResumed.Load() != 1 {
			t.Fatalf("restart %d: the count did not resume", restart)
		}
	}
	if status != ItemRepaired || res[0].Drift != 120 {
		t.Fatalf("last recount = %+v; want repaired, drift 120", res[0])
	}
	// 60 entries, 5 a call: 12 calls and the one that finds the end, in
	// whatever checks; a count that started over would need more.
	if n := st.calls.Load(); n > 13+20 {
		t.Fatalf("%d calls in all; a resumed count should need about 13", n)
	}
	if got := tallies(t, inner, "big"); got["global"] != (Tally{60, 0}) || got["us"] != (Tally{60, 0}) {
		t.Fatalf("totals after the count = %v", got)
	}
}

// TestRecountRepairPushesRows: a repair tells the rows hook (the agents'
// read caches) of the rows it rewrote, with their partition, so that a warm
// item is not served at its drifted total; a clean item pushes nothing.
func TestRecountRepairPushesRows(t *testing.T) {
	st := embeddedtest.Open(t, embedded.Config{NoSync: true})
	rc := newTestRecounter(t, st, testRecountConfig(time.Millisecond))
	var (
		mu     sync.Mutex
		pushed = map[string]engagement.Stats{} // content/scope → row
		parts  = map[string]uint32{}
	)
	rc.ru.SetRowsHook(func(p uint32, rows []engagement.Stats) {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range rows {
			pushed[r.ContentID+"/"+r.Scope] = r
			parts[r.ContentID] = p
		}
	})
	old := time.Now().Add(-time.Hour).UTC()
	likes := []reaction{{"u1", "us", engagement.ActionLike}, {"u2", "us", engagement.ActionLike}}
	for _, id := range []string{"drifted", "clean"} {
		insertReactions(t, st, id, likes)
	}
	global := int64(2)
	if err := st.WriteStats(t.Context(), []engagement.Stats{
		{ContentID: "drifted", Scope: "global", Likes: 9, UpdatedAt: old, LastSeq: 3},
		{ContentID: "drifted", Scope: "us", Likes: 2, UpdatedAt: old, LastSeq: 3},
		{ContentID: "clean", Scope: "global", Likes: global, UpdatedAt: old, LastSeq: 3},
		{ContentID: "clean", Scope: "us", Likes: 2, UpdatedAt: old, LastSeq: 3},
	}); err != nil {
		t.Fatal(err)
	}
	rep, err := rc.Pass(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var part uint32
	for _, it := range rep.Items {
		if it.ContentID == "drifted" {
			if it.Status != ItemRepaired {
				t.Fatalf("drifted: %+v; want repaired", it)
			}
			part = it.Partition
		}
	}
	mu.Lock()
	defer mu.Unlock()
	got, ok := pushed["drifted/global"]
	if !ok || got.Likes != global || parts["drifted"] != part {
		t.Fatalf("pushed %v (partitions %v); want drifted/global with %d likes in partition %d", pushed, parts, global, part)
	}
	if len(pushed) != 1 {
		t.Errorf("pushed %d rows (%v); want only the one repaired", len(pushed), pushed)
	}
}
