package cassandra

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/rollup"
)

// legacyIndex makes s's keyspace one whose index is not known complete:
// as a keyspace made before pending entries is until RepairIndex ran.
func legacyIndex(t *testing.T, s *Store) {
	t.Helper()
	if err := s.session.Query(`DELETE FROM `+s.keyspace+`.layout WHERE name = ?`, layoutComplete).ExecContext(t.Context()); err != nil {
		t.Fatal(err)
	}
	s.complete.Store(false)
}

// lagIndex builds an item whose by-content entries lag user_likes in every
// way a failed follow-up write left them before pending entries
// (ErrIndexBehind, on a keyspace made by an older version), and returns
// its id. Truth (user_likes): stale-undo none, stale-update dislike/us,
// missing like/eu, fine like/us. Entries: a leftover like/us for
// stale-undo, a like/us for stale-update, none for missing, like/us for
// fine.
func lagIndex(t *testing.T, s *Store) string {
	t.Helper()
	ctx := t.Context()
	legacyIndex(t, s)
	content := fmt.Sprintf("lag-%016x", rand.Uint64())
	mk := func(user string, a engagement.Action, region string) engagement.Reaction {
		return engagement.Reaction{UserID: user, ContentID: content, Action: a, Region: region, Version: 1,
			Incarnation: rand.Uint64() | 1, UpdatedAt: time.Now().Truncate(time.Microsecond)}
	}
	insert := func(r engagement.Reaction) {
		if ok, err := s.InsertReaction(ctx, r); err != nil || !ok {
			t.Fatalf("InsertReaction(%+v) = %v, %v", r, ok, err)
		}
	}
	// An undo whose entry delete failed: the row is a marker, and an
	// entry remains (written under another incarnation key, where the
	// delete's tombstone cannot reach, as a leftover would be).
	undone := mk("stale-undo", engagement.ActionLike, "us")
	insert(undone)
	if ok, err := s.DeleteReaction(ctx, undone); err != nil || !ok {
		t.Fatalf("DeleteReaction = %v, %v", ok, err)
	}
	leftover := undone
	leftover.Incarnation++
	if err := s.putIndex(ctx, &leftover); err != nil {
		t.Fatal(err)
	}
	// An update whose entry write failed: the row says dislike, the entry
	// still like.
	updated := mk("stale-update", engagement.ActionLike, "us")
	insert(updated)
	applied, err := s.session.Query(s.q.updateReaction, "dislike", "us", int64(2), micros(time.Now()), []int64{1},
		updated.UserID, content, int64(1), int64(updated.Incarnation)).
		SerialConsistency(s.serialCons).MapScanCASContext(ctx, map[string]any{})
	if err != nil || !applied {
		t.Fatalf("update without its entry = %v, %v", applied, err)
	}
	// An insert whose entry write failed: no entry at all (the
	// transaction alone, as an older version's insert left it).
	missing := mk("missing", engagement.ActionLike, "eu")
	applied, err = s.session.Query(s.q.insertReaction, missing.UserID, content, "like", "eu", int64(1), int64(missing.Incarnation),
		micros(missing.UpdatedAt), []int64{1}).SerialConsistency(s.serialCons).MapScanCASContext(ctx, map[string]any{})
	if err != nil || !applied {
		t.Fatalf("insert without its entry = %v, %v", applied, err)
	}
	insert(mk("fine", engagement.ActionLike, "us"))
	return content
}

// TestVerifyReactionsReadsRows checks that RecountReactions counts the
// lagging index as it is (one read per entry, complete false), and that
// VerifyReactions counts by user_likes for every user an entry names — a
// leftover entry of an undone reaction counts nothing, a stale one counts
// what the row holds — and cannot see a missing entry.
func TestVerifyReactionsReadsRows(t *testing.T) {
	_, s := testKeyspace(t)
	content := lagIndex(t, s)
	index, err := s.CountReactions(t.Context(), content)
	if err != nil {
		t.Fatal(err)
	}
	want := []engagement.RegionTally{{Region: "us", Likes: 3}}
	if !slices.Equal(index, want) {
		t.Fatalf("CountReactions = %+v; want the lagging index's %+v", index, want)
	}
	got, next, complete, err := s.RecountReactions(t.Context(), content, "", 1000)
	if err != nil || next != "" || complete || !slices.Equal(got, want) {
		t.Fatalf("RecountReactions = %+v, %q, complete %v, %v; want %+v, \"\", false, nil", got, next, complete, err, want)
	}
	got, err = s.VerifyReactions(t.Context(), content)
	if err != nil {
		t.Fatal(err)
	}
	// Truth is us 1 like + 1 dislike, eu 1 like; the missing entry's eu
	// like cannot be found: every cell is at most the truth.
	if want := []engagement.RegionTally{{Region: "us", Likes: 1, Dislikes: 1}}; !slices.Equal(got, want) {
		t.Fatalf("VerifyReactions = %+v; want %+v", got, want)
	}
}

// onDemandRecounter returns a recount job on s for on-demand recounts,
// with a quiet period of 1 ms (no deltas are in flight in these tests).
func onDemandRecounter(t *testing.T, s *Store) *rollup.Recounter {
	t.Helper()
	cfg := rollup.DefaultRecountConfig()
	cfg.Quiet = time.Millisecond
	rc, err := rollup.NewRecounter(rollup.New(s, nil, nil), s, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return rc
}

// TestRecountJobOnCassandra runs the recount job on Cassandra, whose count
// may be short: a correct total above the count is left alone (reported
// unrepaired), a total below it is raised, and an operator's allow_lower
// lowers one.
func TestRecountJobOnCassandra(t *testing.T) {
	_, s := testKeyspace(t)
	ctx := t.Context()
	content := lagIndex(t, s)
	low := fmt.Sprintf("low-%016x", rand.Uint64())
	r := engagement.Reaction{UserID: "u", ContentID: low, Action: engagement.ActionLike, Region: "eu", Version: 1, Incarnation: 7, UpdatedAt: time.Now()}
	if ok, err := s.InsertReaction(ctx, r); err != nil || !ok {
		t.Fatalf("InsertReaction = %v, %v", ok, err)
	}
	// The lagging item's totals are right (what the agents counted); the
	// other item's lost its like.
	if err := s.WriteStats(ctx, []engagement.Stats{
		{ContentID: content, Scope: engagement.GlobalScope, Likes: 2, Dislikes: 1, LastSeq: 4},
		{ContentID: content, Scope: "us", Likes: 1, Dislikes: 1, LastSeq: 4},
		{ContentID: content, Scope: "eu", Likes: 1, LastSeq: 3},
		{ContentID: low, Scope: engagement.GlobalScope, LastSeq: 2},
	}); err != nil {
		t.Fatal(err)
	}
	rc := onDemandRecounter(t, s)
	if n := rc.Stats().CountComplete.Load(); n != -1 {
		t.Fatalf("count complete = %d before any count; want -1", n)
	}
	res, err := rc.Recount(ctx, []string{content, low}, rollup.RecountOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n := rc.Stats().CountComplete.Load(); n != 0 {
		t.Fatalf("count complete = %d on a keyspace of an older version; want 0", n)
	}
	if res[0].Status != rollup.ItemUnrepaired || res[1].Status != rollup.ItemRepaired || res[1].Drift != 2 {
		t.Fatalf("results = %+v; want the lagging item unrepaired and the other repaired (drift 2)", res)
	}
	// totals reads an item's rows as scope → {likes, dislikes}.
	totals := func(id string) map[string][2]int64 {
		rows, err := s.ReadStats(ctx, []string{id})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string][2]int64{}
		for _, r := range rows[id] {
			out[r.Scope] = [2]int64{r.Likes, r.Dislikes}
		}
		return out
	}
	if got, want := totals(content), map[string][2]int64{"global": {2, 1}, "us": {1, 1}, "eu": {1, 0}}; !maps.Equal(got, want) {
		t.Fatalf("correct totals changed by a short count: %v; want %v", got, want)
	}
	if got, want := totals(low), map[string][2]int64{"global": {1, 0}, "eu": {1, 0}}; !maps.Equal(got, want) {
		t.Fatalf("raised totals = %v; want %v", got, want)
	}
	if n := rc.Stats().RowsUnrepaired.Load(); n != 2 {
		t.Fatalf("rows unrepaired = %d; want 2 (global and eu)", n)
	}
	// The operator vouches for the count: the totals follow it.
	res, err = rc.Recount(ctx, []string{content}, rollup.RecountOptions{AllowLower: true})
	if err != nil || res[0].Status != rollup.ItemRepaired {
		t.Fatalf("allow_lower recount = %+v, %v; want repaired", res, err)
	}
	if got, want := totals(content), map[string][2]int64{"global": {1, 1}, "us": {1, 1}, "eu": {0, 0}}; !maps.Equal(got, want) {
		t.Fatalf("totals after allow_lower = %v; want %v", got, want)
	}
}
