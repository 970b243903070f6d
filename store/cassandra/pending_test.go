package cassandra

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/rollup"
	"github.com/edgecount/edgecount/store"
)

// TestPendingEntriesKeepCountsExact: every change whose follow-up write
// fails (the by-content write after the transaction: a node lost at that
// moment) leaves its entry pending, so a count on a keyspace this version
// made is exact and complete: a pending entry is counted by its row, and
// written again from it. An insert that never applied leaves a pending
// entry that counts nothing.
func TestPendingEntriesKeepCountsExact(t *testing.T) {
	_, s := testKeyspace(t)
	ctx := t.Context()
	if !s.IndexComplete(ctx) {
		t.Fatal("a keyspace this version made: index not complete")
	}
	content := fmt.Sprintf("pending-%016x", rand.Uint64())
	mk := func(user string, a engagement.Action, region string) engagement.Reaction {
		return engagement.Reaction{UserID: user, ContentID: content, Action: a, Region: region, Version: 1,
			Incarnation: rand.Uint64() | 1, UpdatedAt: time.Now().Truncate(time.Microsecond)}
	}
	// applied checks a write that applied, its follow-up failing when the
	// store was told to.
	applied := func(what string, ok bool, err error) {
		t.Helper()
		if !ok || (err != nil) != s.failFollowUp.Load() || (err != nil && !errors.Is(err, ErrIndexBehind)) {
			t.Fatalf("%s = %v, %v; want applied (with ErrIndexBehind: %v)", what, ok, err, s.failFollowUp.Load())
		}
	}
	insert := func(r engagement.Reaction) {
		t.Helper()
		ok, err := s.InsertReaction(ctx, r)
		applied("insert "+r.UserID, ok, err)
	}
	update := func(prev engagement.Reaction, a engagement.Action, region string) {
		t.Helper()
		next := prev
		next.Action, next.Region, next.Version, next.UpdatedAt = a, region, prev.Version+1, time.Now().Truncate(time.Microsecond)
		ok, err := s.UpdateReaction(ctx, prev, next)
		applied("update "+prev.UserID, ok, err)
	}
	undo := func(prev engagement.Reaction) {
		t.Helper()
		ok, err := s.DeleteReaction(ctx, prev)
		applied("undo "+prev.UserID, ok, err)
	}
	fail := func(on bool) { s.failFollowUp.Store(on) }

	fine := mk("fine", engagement.ActionLike, "eu")
	insert(fine)
	inserted := mk("inserted", engagement.ActionLike, "us")
	fail(true)
	insert(inserted) // no entry written after: pending like/us
	fail(false)
	updated := mk("updated", engagement.ActionLike, "us")
	insert(updated)
	fail(true)
	update(updated, engagement.ActionDislike, "eu") // entry still like/us, pending
	fail(false)
	undone := mk("undone", engagement.ActionLike, "us")
	insert(undone)
	fail(true)
	undo(undone) // entry still like/us, pending; the row is a marker
	fail(false)
	reborn := mk("reborn", engagement.ActionDislike, "us")
	insert(reborn)
	undo(reborn)
	again := mk("reborn", engagement.ActionLike, "us")
	fail(true)
	insert(again) // over the marker, a new incarnation: pending
	fail(false)
	// An insert that never ran its transaction: its entry alone.
	never := mk("never", engagement.ActionLike, "us")
	if err := s.preIndex(ctx, &never); err != nil {
		t.Fatal(err)
	}

	// Truth: fine like/eu, inserted like/us, updated dislike/eu, reborn
	// like/us.
	want := []engagement.RegionTally{{Region: "eu", Likes: 1, Dislikes: 1}, {Region: "us", Likes: 2}}
	for pass := range 2 {
		before := s.counters.IndexRepaired.Load()
		got, next, complete, err := s.RecountReactions(ctx, content, "", 1000)
		if err != nil || next != "" || !complete || !slices.Equal(got, want) {
			t.Fatalf("pass %d: RecountReactions = %+v, %q, complete %v, %v; want %+v, complete", pass, got, next, complete, err, want)
		}
		// The first count writes the three live rows' entries again;
		// the second finds them written.
		if n, wantN := s.counters.IndexRepaired.Load()-before, int64(3*(1-pass)); n != wantN {
			t.Errorf("pass %d: entries repaired = %d, want %d", pass, n, wantN)
		}
	}
}

// TestPrecedingEntryFailureRefuses: a change whose pending entry cannot be
// written is refused before its transaction (store.ErrRefused): the row
// stays as it was, so no row is ever without an entry.
func TestPrecedingEntryFailureRefuses(t *testing.T) {
	_, s := testKeyspace(t)
	ctx := t.Context()
	r := engagement.Reaction{UserID: "u", ContentID: "c", Action: engagement.ActionLike, Region: "us", Version: 1,
		Incarnation: 5, UpdatedAt: time.Now()}
	// SERIAL is no consistency for a plain write: the pending entry's write
	// fails, before the transaction.
	s.indexCons = gocql.Serial
	ok, err := s.InsertReaction(ctx, r)
	if ok || !errors.Is(err, store.ErrRefused) {
		t.Fatalf("InsertReaction with the entry write failing = %v, %v; want refused", ok, err)
	}
	if _, found, gerr := s.GetReaction(ctx, "u", "c"); gerr != nil || found {
		t.Fatalf("row found %v (%v) after a refused insert", found, gerr)
	}
}

// TestRecountLowersOnCassandra (G22): on a keyspace whose index is complete,
// one pass of the recount repairs drift injected by hand in either
// direction — a total raised above its reactions and one lowered below —
// with no allow_lower, and reports the rows it raised and lowered.
func TestRecountLowersOnCassandra(t *testing.T) {
	_, s := testKeyspace(t)
	ctx := t.Context()
	up := fmt.Sprintf("up-%016x", rand.Uint64())
	down := fmt.Sprintf("down-%016x", rand.Uint64())
	for i, user := range []string{"a", "b", "c"} {
		for _, id := range []string{up, down} {
			a := engagement.ActionLike
			if i == 2 {
				a = engagement.ActionDislike
			}
			r := engagement.Reaction{UserID: user, ContentID: id, Action: a, Region: "us", Version: 1,
				Incarnation: rand.Uint64() | 1, UpdatedAt: time.Now()}
			if ok, err := s.InsertReaction(ctx, r); err != nil || !ok {
				t.Fatalf("InsertReaction = %v, %v", ok, err)
			}
		}
	}
	// Truth for both: us 2 likes, 1 dislike. "up" was raised by 5 likes
	// and 2 dislikes, "down" lowered by 2 likes and 1 dislike.
	if err := s.WriteStats(ctx, []engagement.Stats{
		{ContentID: up, Scope: engagement.GlobalScope, Likes: 7, Dislikes: 3, LastSeq: 9},
		{ContentID: up, Scope: "us", Likes: 7, Dislikes: 3, LastSeq: 9},
		{ContentID: down, Scope: engagement.GlobalScope, Likes: 0, Dislikes: 0, LastSeq: 9},
		{ContentID: down, Scope: "us", Likes: 0, Dislikes: 0, LastSeq: 9},
	}); err != nil {
		t.Fatal(err)
	}
	rc := onDemandRecounter(t, s)
	res, err := rc.Recount(ctx, []string{up, down}, rollup.RecountOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Status != rollup.ItemRepaired {
			t.Fatalf("%s: %s (%s); want repaired in one pass", r.ContentID, r.Status, r.Reason)
		}
	}
	for _, id := range []string{up, down} {
		rows, err := s.ReadStats(ctx, []string{id})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string][2]int64{}
		for _, r := range rows[id] {
			got[r.Scope] = [2]int64{r.Likes, r.Dislikes}
		}
		if want := map[string][2]int64{"global": {2, 1}, "us": {2, 1}}; !maps.Equal(got, want) {
			t.Errorf("%s: totals %v after one pass; want %v", id, got, want)
		}
	}
	st := rc.Stats()
	if st.RowsLowered.Load() != 2 || st.RowsRaised.Load() != 2 || st.RowsUnrepaired.Load() != 0 || st.CountComplete.Load() != 1 {
		t.Errorf("rows lowered %d, raised %d, unrepaired %d, count complete %d; want 2, 2, 0, 1",
			st.RowsLowered.Load(), st.RowsRaised.Load(), st.RowsUnrepaired.Load(), st.CountComplete.Load())
	}
}

// TestRepairIndex: on a keyspace made before pending entries, with its
// index lagging in every way a lost follow-up write left it, and damaged
// by hand (an entry's action and another's region rewritten, a copy in a
// bucket not its user's), RepairIndex writes the missing and stale
// entries, deletes the leftovers and the copy, and records the index
// complete: the count is then exact, and complete.
func TestRepairIndex(t *testing.T) {
	_, s := testKeyspace(t)
	ctx := t.Context()
	content := lagIndex(t, s)
	if s.IndexComplete(ctx) {
		t.Fatal("a keyspace made legacy is complete")
	}
	damaged := fmt.Sprintf("damaged-%016x", rand.Uint64())
	var rows []engagement.Reaction
	for _, u := range []string{"d1", "d2", "d3"} {
		r := engagement.Reaction{UserID: u, ContentID: damaged, Action: engagement.ActionLike, Region: "us", Version: 1,
			Incarnation: rand.Uint64() | 1, UpdatedAt: time.Now()}
		if ok, err := s.InsertReaction(ctx, r); err != nil || !ok {
			t.Fatalf("InsertReaction = %v, %v", ok, err)
		}
		rows = append(rows, r)
	}
	idx := s.keyspace + "." + indexTable
	for _, stmt := range []struct {
		cql  string
		args []any
	}{
		// By hand: wall-clock timestamps, above every version's.
		{`UPDATE ` + idx + ` SET action = 'dislike' WHERE content_id = ? AND bucket = ? AND user_id = ? AND incarnation = ?`,
			[]any{damaged, bucketOf("d1", s.buckets), "d1", int64(rows[0].Incarnation)}},
		{`UPDATE ` + idx + ` SET region = 'eu' WHERE content_id = ? AND bucket = ? AND user_id = ? AND incarnation = ?`,
			[]any{damaged, bucketOf("d2", s.buckets), "d2", int64(rows[1].Incarnation)}},
		{`INSERT INTO ` + idx + ` (content_id, bucket, user_id, incarnation, action, region, version) VALUES (?, ?, ?, ?, 'like', 'us', 1)`,
			[]any{damaged, (bucketOf("d3", s.buckets) + 1) % s.buckets, "d3", int64(rows[2].Incarnation)}},
	} {
		if err := s.session.Query(stmt.cql, stmt.args...).ExecContext(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got, _, _, _ := s.RecountReactions(ctx, damaged, "", 1000); slices.Equal(got, []engagement.RegionTally{{Region: "us", Likes: 3}}) {
		t.Fatal("the damage does not show in the count; the test proves nothing")
	}

	rep, err := s.RepairIndex(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	// lagIndex: the stale update's entry and the missing one written, the
	// undone reaction's leftover removed; the damage: two entries marked
	// pending, the copy removed.
	if rep.Written != 4 || rep.Removed != 2 {
		t.Errorf("repair = %+v; want 4 written, 2 removed", rep)
	}
	if !s.IndexComplete(ctx) {
		t.Error("the index is not recorded complete after the repair")
	}
	for id, want := range map[string][]engagement.RegionTally{
		content: {{Region: "eu", Likes: 1}, {Region: "us", Likes: 1, Dislikes: 1}},
		damaged: {{Region: "us", Likes: 3}},
	} {
		got, next, complete, err := s.RecountReactions(ctx, id, "", 1000)
		if err != nil || next != "" || !complete || !slices.Equal(got, want) {
			t.Errorf("%s after the repair: %+v, %q, complete %v, %v; want %+v, complete", id, got, next, complete, err, want)
		}
	}
	again, err := s.RepairIndex(ctx, nil)
	if err != nil || again.Written != 0 || again.Removed != 0 {
		t.Errorf("second repair = %+v, %v; want nothing to do", again, err)
	}
}
