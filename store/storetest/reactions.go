package storetest

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/edgecount/edgecount/engagement"
)

// newReaction returns a fresh row (version 1, random incarnation).
func newReaction(user, content string, a engagement.Action, region string) engagement.Reaction {
	return engagement.Reaction{
		UserID:      user,
		ContentID:   content,
		Action:      a,
		Region:      region,
		Version:     1,
		Incarnation: rand.Uint64(),
		UpdatedAt:   now(),
	}
}

// bump returns the row that a change of r to action a in region makes.
func bump(r engagement.Reaction, a engagement.Action, region string) engagement.Reaction {
	r.Action = a
	r.Region = region
	r.Version++
	r.UpdatedAt = now().Add(time.Duration(r.Version) * time.Microsecond)
	return r
}

func equalReaction(a, b engagement.Reaction) bool {
	return a.UserID == b.UserID && a.ContentID == b.ContentID && a.Action == b.Action &&
		a.Region == b.Region && a.Version == b.Version && a.Incarnation == b.Incarnation &&
		a.UpdatedAt.Equal(b.UpdatedAt)
}

func mustInsert(t *testing.T, s Store, r engagement.Reaction) {
	t.Helper()
	applied, err := s.InsertReaction(t.Context(), r)
	if err != nil || !applied {
		t.Fatalf("InsertReaction(%+v) = %v, %v; want true, nil", r, applied, err)
	}
}

func mustUpdate(t *testing.T, s Store, prev, next engagement.Reaction) {
	t.Helper()
	applied, err := s.UpdateReaction(t.Context(), prev, next)
	if err != nil || !applied {
		t.Fatalf("UpdateReaction(v%d → v%d) = %v, %v; want true, nil", prev.Version, next.Version, applied, err)
	}
}

func mustDelete(t *testing.T, s Store, prev engagement.Reaction) {
	t.Helper()
	applied, err := s.DeleteReaction(t.Context(), prev)
	if err != nil || !applied {
		t.Fatalf("DeleteReaction(v%d) = %v, %v; want true, nil", prev.Version, applied, err)
	}
}

// checkRow fails unless the stored row of (user, content) is want, or absent
// when want is nil.
func checkRow(t *testing.T, s Store, user, content string, want *engagement.Reaction) {
	t.Helper()
	got, ok, err := s.GetReaction(t.Context(), user, content)
	if err != nil {
		t.Fatalf("GetReaction(%q, %q): %v", user, content, err)
	}
	switch {
	case want == nil && ok:
		t.Fatalf("GetReaction(%q, %q) = %+v, found; want no row", user, content, got)
	case want != nil && !ok:
		t.Fatalf("GetReaction(%q, %q) found no row; want %+v", user, content, *want)
	case want != nil && !equalReaction(got, *want):
		t.Fatalf("GetReaction(%q, %q) = %+v; want %+v", user, content, got, *want)
	}
}

func checkCount(t *testing.T, s Store, content string, want []engagement.RegionTally) {
	t.Helper()
	got, err := s.CountReactions(t.Context(), content)
	if err != nil {
		t.Fatalf("CountReactions(%q): %v", content, err)
	}
	if len(got) != 0 || len(want) != 0 {
		if !slices.Equal(got, want) {
			t.Fatalf("CountReactions(%q) = %+v; want %+v", content, got, want)
		}
	}
}

func testGetMissing(t *testing.T, s Store) {
	checkRow(t, s, uniq("u"), uniq("c"), nil)
}

func testInsertGet(t *testing.T, s Store) {
	tests := []struct {
		name   string
		action engagement.Action
		time   time.Time
	}{
		{"like", engagement.ActionLike, now()},
		{"dislike", engagement.ActionDislike, now()},
		{"zero time", engagement.ActionLike, time.Time{}},
		{"microseconds", engagement.ActionLike, time.Date(2031, 2, 3, 4, 5, 6, 789_012_000, time.UTC)},
		{"before 1970", engagement.ActionDislike, time.Date(1969, 12, 31, 23, 59, 59, 1000, time.UTC)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newReaction(uniq("u"), uniq("c"), tt.action, "eu-west")
			r.UpdatedAt = tt.time
			r.Incarnation = math.MaxUint64 - uint64(len(tt.name))
			mustInsert(t, s, r)
			checkRow(t, s, r.UserID, r.ContentID, &r)
		})
	}
}

func testInsertTwice(t *testing.T, s Store) {
	r := newReaction(uniq("u"), uniq("c"), engagement.ActionLike, "eu-west")
	mustInsert(t, s, r)
	other := newReaction(r.UserID, r.ContentID, engagement.ActionDislike, "us-east")
	applied, err := s.InsertReaction(t.Context(), other)
	if err != nil || applied {
		t.Fatalf("second InsertReaction = %v, %v; want false, nil", applied, err)
	}
	checkRow(t, s, r.UserID, r.ContentID, &r)
	checkCount(t, s, r.ContentID, []engagement.RegionTally{{Region: "eu-west", Likes: 1}})
}

func testUpdate(t *testing.T, s Store) {
	tests := []struct {
		name    string
		cond    func(stored engagement.Reaction) engagement.Reaction // what the writer read
		applied bool
	}{
		{"right version and incarnation", func(r engagement.Reaction) engagement.Reaction { return r }, true},
		{"older version", func(r engagement.Reaction) engagement.Reaction { r.Version--; return r }, false},
		{"newer version", func(r engagement.Reaction) engagement.Reaction { r.Version++; return r }, false},
		{"other incarnation", func(r engagement.Reaction) engagement.Reaction { r.Incarnation++; return r }, false},
		{"other action and region do not matter", func(r engagement.Reaction) engagement.Reaction {
			r.Action, r.Region = engagement.ActionLike, "ap-south"
			return r
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newReaction(uniq("u"), uniq("c"), engagement.ActionDislike, "eu-west")
			mustInsert(t, s, r)
			stored := bump(r, engagement.ActionDislike, "eu-west")
			mustUpdate(t, s, r, stored) // at version 2, so that older is 1
			prev := tt.cond(stored)
			next := bump(prev, engagement.ActionLike, "us-east")
			applied, err := s.UpdateReaction(t.Context(), prev, next)
			if err != nil || applied != tt.applied {
				t.Fatalf("UpdateReaction = %v, %v; want %v, nil", applied, err, tt.applied)
			}
			want := stored
			if tt.applied {
				want = next
			}
			checkRow(t, s, r.UserID, r.ContentID, &want)
		})
	}
	t.Run("missing row", func(t *testing.T) {
		r := newReaction(uniq("u"), uniq("c"), engagement.ActionLike, "eu-west")
		applied, err := s.UpdateReaction(t.Context(), r, bump(r, engagement.ActionDislike, "eu-west"))
		if err != nil || applied {
			t.Fatalf("UpdateReaction of a missing row = %v, %v; want false, nil", applied, err)
		}
		checkRow(t, s, r.UserID, r.ContentID, nil)
	})
}

func testDelete(t *testing.T, s Store) {
	tests := []struct {
		name    string
		cond    func(stored engagement.Reaction) engagement.Reaction
		applied bool
	}{
		{"right version and incarnation", func(r engagement.Reaction) engagement.Reaction { return r }, true},
		{"older version", func(r engagement.Reaction) engagement.Reaction { r.Version--; return r }, false},
		{"newer version", func(r engagement.Reaction) engagement.Reaction { r.Version++; return r }, false},
		{"other incarnation", func(r engagement.Reaction) engagement.Reaction { r.Incarnation ^= 1 << 63; return r }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newReaction(uniq("u"), uniq("c"), engagement.ActionLike, "eu-west")
			mustInsert(t, s, r)
			stored := bump(r, engagement.ActionLike, "eu-west")
			mustUpdate(t, s, r, stored)
			applied, err := s.DeleteReaction(t.Context(), tt.cond(stored))
			if err != nil || applied != tt.applied {
				t.Fatalf("DeleteReaction = %v, %v; want %v, nil", applied, err, tt.applied)
			}
			if tt.applied {
				checkRow(t, s, r.UserID, r.ContentID, nil)
				checkCount(t, s, r.ContentID, nil)
			} else {
				checkRow(t, s, r.UserID, r.ContentID, &stored)
				checkCount(t, s, r.ContentID, []engagement.RegionTally{{Region: "eu-west", Likes: 1}})
			}
		})
	}
	t.Run("missing row", func(t *testing.T) {
		r := newReaction(uniq("u"), uniq("c"), engagement.ActionLike, "eu-west")
		applied, err := s.DeleteReaction(t.Context(), r)
		if err != nil || applied {
			t.Fatalf("DeleteReaction of a missing row = %v, %v; want false, nil", applied, err)
		}
	})
}

// testABA re-creates a row after an undo and checks that writers holding the
// deleted row cannot touch the new one, even where the version numbers
// coincide.
func testABA(t *testing.T, s Store) {
	user, content := uniq("u"), uniq("c")
	old1 := newReaction(user, content, engagement.ActionLike, "eu-west")
	mustInsert(t, s, old1)
	old2 := bump(old1, engagement.ActionDislike, "eu-west")
	mustUpdate(t, s, old1, old2)
	mustDelete(t, s, old2)

	cur := newReaction(user, content, engagement.ActionLike, "us-east")
	for cur.Incarnation == old1.Incarnation {
		cur.Incarnation = rand.Uint64()
	}
	mustInsert(t, s, cur)

	// At version 1, old1 and cur differ only in incarnation.
	if applied, err := s.UpdateReaction(t.Context(), old1, bump(old1, engagement.ActionDislike, "eu-west")); err != nil || applied {
		t.Fatalf("UpdateReaction conditioned on the deleted row at v1 = %v, %v; want false, nil", applied, err)
	}
	if applied, err := s.DeleteReaction(t.Context(), old1); err != nil || applied {
		t.Fatalf("DeleteReaction conditioned on the deleted row at v1 = %v, %v; want false, nil", applied, err)
	}
	checkRow(t, s, user, content, &cur)

	// At version 2 too.
	cur2 := bump(cur, engagement.ActionLike, "us-east")
	mustUpdate(t, s, cur, cur2)
	if applied, err := s.UpdateReaction(t.Context(), old2, bump(old2, engagement.ActionLike, "eu-west")); err != nil || applied {
		t.Fatalf("UpdateReaction conditioned on the deleted row at v2 = %v, %v; want false, nil", applied, err)
	}
	if applied, err := s.DeleteReaction(t.Context(), old2); err != nil || applied {
		t.Fatalf("DeleteReaction conditioned on the deleted row at v2 = %v, %v; want false, nil", applied, err)
	}
	checkRow(t, s, user, content, &cur2)
	checkCount(t, s, content, []engagement.RegionTally{{Region: "us-east", Likes: 1}})
}

// testReactionKeys checks that rows whose ids would concatenate to the same
// bytes, or extend one another, stay apart.
func testReactionKeys(t *testing.T, s Store) {
	u, c := uniq("u"), uniq("c")
	rows := []engagement.Reaction{
		newReaction(u, "x"+c, engagement.ActionLike, "eu-west"),
		newReaction(u+"x", c, engagement.ActionDislike, "eu-west"),
		newReaction(u, c, engagement.ActionLike, "us-east"),
		newReaction(u, c+"x", engagement.ActionDislike, "us-east"),
	}
	for _, r := range rows {
		mustInsert(t, s, r)
	}
	for _, r := range rows {
		checkRow(t, s, r.UserID, r.ContentID, &r)
	}
	checkCount(t, s, c, []engagement.RegionTally{{Region: "eu-west", Dislikes: 1}, {Region: "us-east", Likes: 1}})
	checkCount(t, s, c+"x", []engagement.RegionTally{{Region: "us-east", Dislikes: 1}})
	checkCount(t, s, "x"+c, []engagement.RegionTally{{Region: "eu-west", Likes: 1}})
	got, err := s.GetReactions(t.Context(), u, []string{c, c + "x", "x" + c})
	if err != nil {
		t.Fatalf("GetReactions: %v", err)
	}
	if len(got) != 3 || !equalReaction(got[c], rows[2]) || !equalReaction(got[c+"x"], rows[3]) || !equalReaction(got["x"+c], rows[0]) {
		t.Fatalf("GetReactions(%q) = %+v; want rows %+v, %+v, %+v", u, got, rows[2], rows[3], rows[0])
	}
}

func testGetReactions(t *testing.T, s Store) {
	user, other := uniq("u"), uniq("u")
	c1, c2, c3, missing := uniq("c"), uniq("c"), uniq("c"), uniq("c")
	r1 := newReaction(user, c1, engagement.ActionLike, "eu-west")
	r2 := newReaction(user, c2, engagement.ActionDislike, "us-east")
	r3 := newReaction(other, c3, engagement.ActionLike, "eu-west") // another user's row
	for _, r := range []engagement.Reaction{r1, r2, r3} {
		mustInsert(t, s, r)
	}
	tests := []struct {
		name string
		ids  []string
		want []engagement.Reaction
	}{
		{"found and missing", []string{c1, missing, c2}, []engagement.Reaction{r1, r2}},
		{"another user's item", []string{c3}, nil},
		{"only missing", []string{missing}, nil},
		{"none asked", nil, nil},
		{"repeated id", []string{c1, c1}, []engagement.Reaction{r1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.GetReactions(t.Context(), user, tt.ids)
			if err != nil {
				t.Fatalf("GetReactions(%v): %v", tt.ids, err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("GetReactions(%v) = %+v; want %d rows: %+v", tt.ids, got, len(tt.want), tt.want)
			}
			for _, w := range tt.want {
				if g, ok := got[w.ContentID]; !ok || !equalReaction(g, w) {
					t.Fatalf("GetReactions(%v)[%q] = %+v (found %v); want %+v", tt.ids, w.ContentID, g, ok, w)
				}
			}
		})
	}
}

// testMisuse checks that calls breaking the Reaction contract fail and write
// nothing.
func testMisuse(t *testing.T, s Store) {
	user, content := uniq("u"), uniq("c")
	r := newReaction(user, content, engagement.ActionLike, "eu-west")
	mustInsert(t, s, r)
	other := uniq("c")
	tests := []struct {
		name string
		call func(ctx context.Context) (bool, error)
	}{
		{"insert without action", func(ctx context.Context) (bool, error) {
			return s.InsertReaction(ctx, newReaction(user, other, engagement.ActionNone, "eu-west"))
		}},
		{"insert with empty user", func(ctx context.Context) (bool, error) {
			return s.InsertReaction(ctx, newReaction("", other, engagement.ActionLike, "eu-west"))
		}},
		{"update to no action", func(ctx context.Context) (bool, error) {
			return s.UpdateReaction(ctx, r, bump(r, engagement.ActionNone, "eu-west"))
		}},
		{"update changing the incarnation", func(ctx context.Context) (bool, error) {
			next := bump(r, engagement.ActionDislike, "eu-west")
			next.Incarnation++
			return s.UpdateReaction(ctx, r, next)
		}},
		{"update skipping a version", func(ctx context.Context) (bool, error) {
			next := bump(r, engagement.ActionDislike, "eu-west")
			next.Version++
			return s.UpdateReaction(ctx, r, next)
		}},
		{"update keeping the version", func(ctx context.Context) (bool, error) {
			next := bump(r, engagement.ActionDislike, "eu-west")
			next.Version = r.Version
			return s.UpdateReaction(ctx, r, next)
		}},
		{"update onto another item", func(ctx context.Context) (bool, error) {
			next := bump(r, engagement.ActionDislike, "eu-west")
			next.ContentID = other
			return s.UpdateReaction(ctx, r, next)
		}},
		{"insert with a cancelled context", func(ctx context.Context) (bool, error) {
			ctx, cancel := context.WithCancel(ctx)
			cancel()
			return s.InsertReaction(ctx, newReaction(user, other, engagement.ActionLike, "eu-west"))
		}},
		{"update with a cancelled context", func(ctx context.Context) (bool, error) {
			ctx, cancel := context.WithCancel(ctx)
			cancel()
			return s.UpdateReaction(ctx, r, bump(r, engagement.ActionDislike, "eu-west"))
		}},
		{"delete with a cancelled context", func(ctx context.Context) (bool, error) {
			ctx, cancel := context.WithCancel(ctx)
			cancel()
			return s.DeleteReaction(ctx, r)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			applied, err := tt.call(t.Context())
			if err == nil || applied {
				t.Fatalf("call = %v, %v; want false and an error", applied, err)
			}
			checkRow(t, s, user, content, &r)
			checkRow(t, s, user, other, nil)
			checkCount(t, s, content, []engagement.RegionTally{{Region: "eu-west", Likes: 1}})
			checkCount(t, s, other, nil)
		})
	}
}

func testCountFollows(t *testing.T, s Store) {
	countFollows(t, s, "c", func(content string, want []engagement.RegionTally) {
		t.Helper()
		checkCount(t, s, content, want)
	})
}

// countFollows runs inserts, updates, refused updates, undos and a row
// re-created after an undo on one item, checking its count after each step
// with check.
func countFollows(t *testing.T, s Store, prefix string, check func(content string, want []engagement.RegionTally)) {
	t.Helper()
	content := uniq(prefix)
	u1, u2, u3 := uniq("u"), uniq("u"), uniq("u")
	check(content, nil)

	a := newReaction(u1, content, engagement.ActionLike, "eu-west")
	b := newReaction(u2, content, engagement.ActionDislike, "us-east")
	c := newReaction(u3, content, engagement.ActionLike, "eu-west")
	for _, r := range []engagement.Reaction{a, b, c} {
		mustInsert(t, s, r)
	}
	check(content, []engagement.RegionTally{
		{Region: "eu-west", Likes: 2},
		{Region: "us-east", Dislikes: 1},
	})

	a2 := bump(a, engagement.ActionDislike, "eu-west") // action changes
	mustUpdate(t, s, a, a2)
	check(content, []engagement.RegionTally{
		{Region: "eu-west", Likes: 1, Dislikes: 1},
		{Region: "us-east", Dislikes: 1},
	})

	b2 := bump(b, engagement.ActionLike, "ap-south") // action and region change
	mustUpdate(t, s, b, b2)
	check(content, []engagement.RegionTally{
		{Region: "ap-south", Likes: 1},
		{Region: "eu-west", Likes: 1, Dislikes: 1},
	})

	// A refused change leaves the count alone.
	if applied, err := s.UpdateReaction(t.Context(), b, bump(b, engagement.ActionDislike, "us-east")); err != nil || applied {
		t.Fatalf("stale UpdateReaction = %v, %v; want false, nil", applied, err)
	}
	mustDelete(t, s, c)
	check(content, []engagement.RegionTally{
		{Region: "ap-south", Likes: 1},
		{Region: "eu-west", Dislikes: 1},
	})
	// A row re-created after an undo is counted once, as what it is now.
	mustDelete(t, s, a2)
	a3 := newReaction(u1, content, engagement.ActionDislike, "us-east")
	mustInsert(t, s, a3)
	check(content, []engagement.RegionTally{
		{Region: "ap-south", Likes: 1},
		{Region: "us-east", Dislikes: 1},
	})
	mustDelete(t, s, a3)
	mustDelete(t, s, b2)
	check(content, nil)
}
