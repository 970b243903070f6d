package storetest

import (
	"slices"
	"testing"

	"github.com/edgecount/edgecount/engagement"
)

// getRow reads the row of (user, content), failing the test on an error.
func getRow(t *testing.T, s Store, user, content string) (engagement.Reaction, bool) {
	t.Helper()
	r, found, err := s.GetReaction(t.Context(), user, content)
	if err != nil {
		t.Fatalf("GetReaction(%s, %s): %v", user, content, err)
	}
	return r, found
}

func wantWriters(t *testing.T, r engagement.Reaction, want ...uint64) {
	t.Helper()
	if !slices.Equal(r.Writers, want) {
		t.Fatalf("writers %v; want %v", r.Writers, want)
	}
}

// testWriters checks that every applied write adds its token to the row's
// writers, that an undone row keeps them (a read that finds no row returns
// them) and a new row over it continues them, that a write which did not
// apply adds nothing, and that they keep the newest MaxWriters.
func testWriters(t *testing.T, s Store) {
	const user, content = "u-writers", "c-writers"
	if r, found := getRow(t, s, user, content); found || len(r.Writers) != 0 {
		t.Fatalf("missing row: found %v, writers %v; want none", found, r.Writers)
	}

	r := newReaction(user, content, engagement.ActionLike, "eu")
	r.Token = 11
	mustInsert(t, s, r)
	cur, _ := getRow(t, s, user, content)
	wantWriters(t, cur, 11)

	next := bump(cur, engagement.ActionDislike, "eu")
	next.Token = 12
	mustUpdate(t, s, cur, next)
	cur, _ = getRow(t, s, user, content)
	wantWriters(t, cur, 11, 12)

	// A compare-and-set that does not apply (stale prev) leaves no trace.
	stale := bump(r, engagement.ActionDislike, "us")
	stale.Token = 99
	if applied, err := s.UpdateReaction(t.Context(), r, stale); err != nil || applied {
		t.Fatalf("stale UpdateReaction = %v, %v; want false, nil", applied, err)
	}
	if applied, err := s.InsertReaction(t.Context(), engagement.Reaction{UserID: user, ContentID: content,
		Action: engagement.ActionLike, Region: "us", Version: 1, Incarnation: 5, UpdatedAt: now(), Token: 98}); err != nil || applied {
		t.Fatalf("InsertReaction over a row = %v, %v; want false, nil", applied, err)
	}
	cur, _ = getRow(t, s, user, content)
	wantWriters(t, cur, 11, 12)

	undo := cur
	undo.Token = 13
	mustDelete(t, s, undo)
	gone, found := getRow(t, s, user, content)
	if found {
		t.Fatalf("undone row still found: %+v", gone)
	}
	wantWriters(t, gone, 11, 12, 13)
	if rows, err := s.GetReactions(t.Context(), user, []string{content}); err != nil || len(rows) != 0 {
		t.Fatalf("GetReactions of an undone row = %v, %v; want none", rows, err)
	}

	again := newReaction(user, content, engagement.ActionLike, "us")
	again.Token = 14
	mustInsert(t, s, again)
	cur, _ = getRow(t, s, user, content)
	wantWriters(t, cur, 11, 12, 13, 14)
	rows, err := s.GetReactions(t.Context(), user, []string{content})
	if err != nil || !slices.Equal(rows[content].Writers, cur.Writers) {
		t.Fatalf("GetReactions writers = %v, %v; want %v", rows[content].Writers, err, cur.Writers)
	}

	// The newest MaxWriters are kept; a zero token is replaced by one the
	// store picks.
	for tok := uint64(15); tok < 15+engagement.MaxWriters; tok++ {
		next := bump(cur, engagement.ActionLike, "us")
		next.Token = tok
		mustUpdate(t, s, cur, next)
		cur, _ = getRow(t, s, user, content)
	}
	want := make([]uint64, 0, engagement.MaxWriters)
	for tok := uint64(15); tok < 15+engagement.MaxWriters; tok++ {
		want = append(want, tok)
	}
	wantWriters(t, cur, want...)
	next = bump(cur, engagement.ActionDislike, "us")
	mustUpdate(t, s, cur, next)
	cur, _ = getRow(t, s, user, content)
	if n := len(cur.Writers); n != engagement.MaxWriters || cur.Writers[n-1] == 0 || !slices.Equal(cur.Writers[:n-1], want[1:]) {
		t.Fatalf("writers after a write without a token = %v; want %v and one non-zero token", cur.Writers, want[1:])
	}
}
