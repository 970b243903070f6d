package storetest

import (
	"context"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgecount/edgecount/engagement"
)

// Store is the behaviour every store implementation shares.
type Store interface {
	Ping(ctx context.Context) error

	// UserLikes.
	GetReaction(ctx context.Context, userID, contentID string) (engagement.Reaction, bool, error)
	GetReactions(ctx context.Context, userID string, contentIDs []string) (map[string]engagement.Reaction, error)
	InsertReaction(ctx context.Context, r engagement.Reaction) (applied bool, err error)
	UpdateReaction(ctx context.Context, prev, next engagement.Reaction) (applied bool, err error)
	DeleteReaction(ctx context.Context, prev engagement.Reaction) (applied bool, err error)
	CountReactions(ctx context.Context, contentID string) ([]engagement.RegionTally, error)

	// ContentStats.
	ReadStats(ctx context.Context, contentIDs []string) (map[string][]engagement.Stats, error)
	WriteStats(ctx context.Context, rows []engagement.Stats) error

	// Trending.
	PutTrending(ctx context.Context, t engagement.Trending) error
	GetTrending(ctx context.Context, k engagement.TrendingKey) (engagement.Trending, bool, error)
	ReadTrending(ctx context.Context, scope, counter, window string) ([]engagement.Trending, error)
}

// Run runs the conformance suite against stores made by open.
func Run(t *testing.T, open func(t *testing.T) Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s Store)
	}{
		{"Ping", testPing},
		{"Reaction/GetMissing", testGetMissing},
		{"Reaction/InsertGet", testInsertGet},
		{"Reaction/InsertTwiceRefused", testInsertTwice},
		{"Reaction/Update", testUpdate},
		{"Reaction/Delete", testDelete},
		{"Reaction/ABA", testABA},
		{"Reaction/KeysUnambiguous", testReactionKeys},
		{"Reaction/GetReactions", testGetReactions},
		{"Reaction/Misuse", testMisuse},
		{"Reaction/ConcurrentInsert", testConcurrentInsert},
		{"Reaction/ConcurrentCAS", testConcurrentCAS},
		{"Reaction/ConcurrentDelete", testConcurrentDelete},
		{"Reaction/ConcurrentInsertAfterUndo", testConcurrentInsertAfterUndo},
		{"Reaction/ConcurrentDistinctRows", testConcurrentDistinct},
		{"Count/FollowsChanges", testCountFollows},
		{"Stats/RoundTrip", testStatsRoundTrip},
		{"Stats/Batch", testStatsBatch},
		{"Stats/Overwrite", testStatsOverwrite},
		{"Stats/IdempotentApply", testStatsIdempotent},
		{"Trending", testTrending},
		{"Trending/Partitions", testTrendingPartitions},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.fn(t, open(t))
		})
	}
}

// uniq returns name with a random suffix, so subtests sharing a database do
// not see each other's rows. The result is a valid id and, for a lower-case
// name, a valid region.
func uniq(name string) string {
	return fmt.Sprintf("%s-%016x", name, rand.Uint64())
}

// now returns the current time truncated to the precision the suite
// requires.
func now() time.Time {
	return time.Now().Truncate(time.Microsecond)
}

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

func equalStats(a, b engagement.Stats) bool {
	return a.ContentID == b.ContentID && a.Scope == b.Scope && a.Likes == b.Likes &&
		a.Dislikes == b.Dislikes && maps.Equal(a.Counters, b.Counters) &&
		a.UpdatedAt.Equal(b.UpdatedAt) && a.LastSeq == b.LastSeq
}

func equalTrending(a, b engagement.Trending) bool {
	return a.TrendingKey == b.TrendingKey && a.AsOf.Equal(b.AsOf) && slices.Equal(a.Items, b.Items)
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

func testPing(t *testing.T, s Store) {
	if err := s.Ping(t.Context()); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := s.Ping(ctx); err == nil {
		t.Fatal("Ping with a cancelled context = nil; want an error")
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

// workers is how many goroutines race in the concurrency tests.
const workers = 32

// maxAttempts bounds a compare-and-set retry loop, so that a store that
// never applies fails the test instead of hanging it.
const maxAttempts = 100_000

func testConcurrentInsert(t *testing.T, s Store) {
	user, content := uniq("u"), uniq("c")
	rows := make([]engagement.Reaction, workers)
	applied := make([]bool, workers)
	for i := range rows {
		rows[i] = newReaction(user, content, engagement.ActionLike, "eu-west")
		rows[i].Incarnation = uint64(i) + 1
	}
	var wg sync.WaitGroup
	for i := range rows {
		wg.Go(func() {
			ok, err := s.InsertReaction(t.Context(), rows[i])
			if err != nil {
				t.Errorf("InsertReaction %d: %v", i, err)
			}
			applied[i] = ok
		})
	}
	wg.Wait()
	winner := slices.Index(applied, true)
	if n := len(slices.DeleteFunc(slices.Clone(applied), func(b bool) bool { return !b })); n != 1 {
		t.Fatalf("%d concurrent inserts applied; want 1", n)
	}
	checkRow(t, s, user, content, &rows[winner])
	checkCount(t, s, content, []engagement.RegionTally{{Region: "eu-west", Likes: 1}})
}

// testConcurrentCAS runs read → compare-and-set retry loops on one row from
// many goroutines. Every successful change records the version it started
// from; with no lost update those are exactly 1…n, each once, and the row
// ends at version n+1 holding the last change.
func testConcurrentCAS(t *testing.T, s Store) {
	const perWorker = 5
	user, content := uniq("u"), uniq("c")
	regions := []string{"ap-south", "eu-west", "us-east"}
	first := newReaction(user, content, engagement.ActionLike, regions[0])
	mustInsert(t, s, first)

	from := make([][]int64, workers) // versions each worker changed from
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			ctx := t.Context()
			for attempt := 0; len(from[w]) < perWorker; attempt++ {
				if attempt == maxAttempts {
					t.Errorf("worker %d: %d attempts for %d changes", w, attempt, len(from[w]))
					return
				}
				cur, ok, err := s.GetReaction(ctx, user, content)
				if err != nil || !ok {
					t.Errorf("worker %d: GetReaction = %v, %v", w, ok, err)
					return
				}
				a := engagement.ActionDislike
				if cur.Action == engagement.ActionDislike {
					a = engagement.ActionLike
				}
				applied, err := s.UpdateReaction(ctx, cur, bump(cur, a, regions[w%len(regions)]))
				if err != nil {
					t.Errorf("worker %d: UpdateReaction: %v", w, err)
					return
				}
				if applied {
					from[w] = append(from[w], cur.Version)
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	const changes = workers * perWorker
	var all []int64
	last := -1 // the worker that made the last change
	for w, vs := range from {
		all = append(all, vs...)
		if slices.Contains(vs, changes) {
			last = w
		}
	}
	slices.Sort(all)
	for i, v := range all {
		if v != int64(i)+1 {
			t.Fatalf("changes started from versions %v; want each of 1…%d once (a repeat is a lost update)", all, changes)
		}
	}
	got, ok, err := s.GetReaction(t.Context(), user, content)
	if err != nil || !ok {
		t.Fatalf("GetReaction = %v, %v", ok, err)
	}
	if got.Version != changes+1 || got.Incarnation != first.Incarnation || got.Region != regions[last%len(regions)] {
		t.Fatalf("final row %+v; want version %d, incarnation %d, region %q", got, changes+1, first.Incarnation, regions[last%len(regions)])
	}
	// Each change toggled the action, and there was an even number.
	if got.Action != engagement.ActionLike {
		t.Fatalf("final action %v after %d toggles from like; want like", got.Action, changes)
	}
	checkCount(t, s, content, []engagement.RegionTally{{Region: got.Region, Likes: 1}})
}

func testConcurrentDelete(t *testing.T, s Store) {
	r := newReaction(uniq("u"), uniq("c"), engagement.ActionDislike, "eu-west")
	mustInsert(t, s, r)
	applied := make([]bool, workers)
	var wg sync.WaitGroup
	for i := range applied {
		wg.Go(func() {
			ok, err := s.DeleteReaction(t.Context(), r)
			if err != nil {
				t.Errorf("DeleteReaction %d: %v", i, err)
			}
			applied[i] = ok
		})
	}
	wg.Wait()
	if n := len(slices.DeleteFunc(slices.Clone(applied), func(b bool) bool { return !b })); n != 1 {
		t.Fatalf("%d concurrent deletes applied; want 1", n)
	}
	checkRow(t, s, r.UserID, r.ContentID, nil)
	checkCount(t, s, r.ContentID, nil)
}

// testConcurrentInsertAfterUndo undoes a row and re-creates it from many
// goroutines at once, several times over: each time exactly one insert
// applies, and the row and its count are that insert's.
func testConcurrentInsertAfterUndo(t *testing.T, s Store) {
	const cycles = 3
	user, content := uniq("u"), uniq("c")
	prev := newReaction(user, content, engagement.ActionDislike, "us-east")
	mustInsert(t, s, prev)
	for cycle := range cycles {
		mustDelete(t, s, prev)
		rows := make([]engagement.Reaction, workers)
		applied := make([]bool, workers)
		for i := range rows {
			rows[i] = newReaction(user, content, engagement.ActionLike, "eu-west")
		}
		var wg sync.WaitGroup
		for i := range rows {
			wg.Go(func() {
				ok, err := s.InsertReaction(t.Context(), rows[i])
				if err != nil {
					t.Errorf("cycle %d: InsertReaction %d: %v", cycle, i, err)
				}
				applied[i] = ok
			})
		}
		wg.Wait()
		winner := slices.Index(applied, true)
		if n := len(slices.DeleteFunc(slices.Clone(applied), func(b bool) bool { return !b })); n != 1 {
			t.Fatalf("cycle %d: %d concurrent inserts over an undone row applied; want 1", cycle, n)
		}
		checkRow(t, s, user, content, &rows[winner])
		checkCount(t, s, content, []engagement.RegionTally{{Region: "eu-west", Likes: 1}})
		prev = rows[winner]
	}
}

// testConcurrentDistinctRows writes many rows of one item at once and checks
// that the by-content index got every one.
func testConcurrentDistinct(t *testing.T, s Store) {
	const perWorker = 8
	content := uniq("c")
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range perWorker {
				r := newReaction(uniq("u"), content, engagement.ActionLike, "eu-west")
				if i%2 == 1 {
					r.Action, r.Region = engagement.ActionDislike, "us-east"
				}
				if ok, err := s.InsertReaction(t.Context(), r); err != nil || !ok {
					t.Errorf("worker %d: InsertReaction = %v, %v; want true, nil", w, ok, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	const half = workers * perWorker / 2
	checkCount(t, s, content, []engagement.RegionTally{{Region: "eu-west", Likes: half}, {Region: "us-east", Dislikes: half}})
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

// checkStats fails unless got holds exactly want, in order.
func checkStats(t *testing.T, what string, got, want []engagement.Stats) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s = %+v; want %+v", what, got, want)
	}
	for i := range got {
		if !equalStats(got[i], want[i]) {
			t.Fatalf("%s[%d] = %+v; want %+v", what, i, got[i], want[i])
		}
	}
}

func readStats(t *testing.T, s Store, ids ...string) map[string][]engagement.Stats {
	t.Helper()
	got, err := s.ReadStats(t.Context(), ids)
	if err != nil {
		t.Fatalf("ReadStats(%v): %v", ids, err)
	}
	return got
}

func testStatsRoundTrip(t *testing.T, s Store) {
	tests := []struct {
		name string
		row  engagement.Stats
	}{
		{"plain", engagement.Stats{Likes: 3, Dislikes: 1, UpdatedAt: now(), LastSeq: 7}},
		{"counters", engagement.Stats{Likes: 1, Counters: map[string]int64{"view": 10, "share": 2, "z9_x": 0}, UpdatedAt: now(), LastSeq: 1}},
		{"empty counters", engagement.Stats{Counters: map[string]int64{}, UpdatedAt: now()}},
		{"zero row", engagement.Stats{}},
		{"extremes", engagement.Stats{
			Likes: math.MaxInt64, Dislikes: math.MinInt64,
			Counters:  map[string]int64{"view": math.MaxInt64, "share": -1},
			UpdatedAt: time.Date(2262, 4, 11, 0, 0, 0, 1000, time.UTC), LastSeq: math.MaxUint64,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			row := tt.row
			row.ContentID, row.Scope = uniq("c"), engagement.GlobalScope
			if err := s.WriteStats(t.Context(), []engagement.Stats{row}); err != nil {
				t.Fatalf("WriteStats: %v", err)
			}
			got := readStats(t, s, row.ContentID)
			checkStats(t, "ReadStats", got[row.ContentID], []engagement.Stats{row})
		})
	}
	t.Run("scopes", func(t *testing.T) {
		id := uniq("c")
		ts := now()
		// Written out of order; read back sorted by scope.
		rows := []engagement.Stats{
			{ContentID: id, Scope: "us-east", Likes: 1, UpdatedAt: ts, LastSeq: 3},
			{ContentID: id, Scope: engagement.GlobalScope, Likes: 3, Dislikes: 1, Counters: map[string]int64{"view": 9}, UpdatedAt: ts, LastSeq: 9},
			{ContentID: id, Scope: "ap-south", Dislikes: 1, Counters: map[string]int64{"view": 4}, UpdatedAt: ts, LastSeq: 5},
			{ContentID: id, Scope: "eu-west", Likes: 2, Counters: map[string]int64{"view": 5}, UpdatedAt: ts, LastSeq: 4},
		}
		if err := s.WriteStats(t.Context(), rows); err != nil {
			t.Fatalf("WriteStats: %v", err)
		}
		want := slices.Clone(rows)
		slices.SortFunc(want, func(a, b engagement.Stats) int { return strings.Compare(a.Scope, b.Scope) })
		got := readStats(t, s, id)
		checkStats(t, "ReadStats", got[id], want)
	})
	t.Run("cancelled context", func(t *testing.T) {
		id := uniq("c")
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if err := s.WriteStats(ctx, []engagement.Stats{{ContentID: id, Scope: engagement.GlobalScope, Likes: 1}}); err == nil {
			t.Fatal("WriteStats with a cancelled context = nil; want an error")
		}
		if _, err := s.ReadStats(ctx, []string{id}); err == nil {
			t.Fatal("ReadStats with a cancelled context = nil; want an error")
		}
		if got := readStats(t, s, id); len(got) != 0 {
			t.Fatalf("ReadStats after a cancelled write = %+v; want nothing", got)
		}
	})
}

func testStatsBatch(t *testing.T, s Store) {
	a, b, missing := uniq("c"), uniq("c"), uniq("c")
	prefixOfB := b[:len(b)-1] // an id that is a prefix of another, with no rows
	ts := now()
	rowsA := []engagement.Stats{
		{ContentID: a, Scope: "eu-west", Likes: 1, UpdatedAt: ts, LastSeq: 1},
		{ContentID: a, Scope: engagement.GlobalScope, Likes: 1, UpdatedAt: ts, LastSeq: 1},
	}
	rowsB := []engagement.Stats{
		{ContentID: b, Scope: engagement.GlobalScope, Dislikes: 2, Counters: map[string]int64{"view": 1}, UpdatedAt: ts, LastSeq: 2},
		{ContentID: b + "x", Scope: engagement.GlobalScope, Likes: 99, UpdatedAt: ts, LastSeq: 2},
	}
	if err := s.WriteStats(t.Context(), append(slices.Clone(rowsA), rowsB...)); err != nil {
		t.Fatalf("WriteStats: %v", err)
	}
	if err := s.WriteStats(t.Context(), nil); err != nil {
		t.Fatalf("WriteStats(nil): %v", err)
	}
	tests := []struct {
		name string
		ids  []string
		want map[string][]engagement.Stats
	}{
		{"found and missing", []string{missing, a, b}, map[string][]engagement.Stats{a: rowsA, b: rowsB[:1]}},
		{"only missing", []string{missing}, nil},
		{"prefix of an id", []string{prefixOfB}, nil},
		{"none asked", nil, nil},
		{"repeated id", []string{b, b}, map[string][]engagement.Stats{b: rowsB[:1]}},
	}
	// rowsA sorted by scope: eu-west < global.
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := readStats(t, s, tt.ids...)
			if len(got) != len(tt.want) {
				t.Fatalf("ReadStats(%v) = %+v; want %+v", tt.ids, got, tt.want)
			}
			for id, want := range tt.want {
				checkStats(t, fmt.Sprintf("ReadStats(%v)[%q]", tt.ids, id), got[id], want)
			}
		})
	}
}

func testStatsOverwrite(t *testing.T, s Store) {
	id := uniq("c")
	first := []engagement.Stats{
		{ContentID: id, Scope: engagement.GlobalScope, Likes: 5, Dislikes: 2, Counters: map[string]int64{"view": 100, "share": 3}, UpdatedAt: now(), LastSeq: 10},
		{ContentID: id, Scope: "eu-west", Likes: 5, Dislikes: 2, Counters: map[string]int64{"view": 100, "share": 3}, UpdatedAt: now(), LastSeq: 10},
	}
	if err := s.WriteStats(t.Context(), first); err != nil {
		t.Fatalf("WriteStats: %v", err)
	}
	// A row is replaced, not merged: fewer counters, lower values.
	second := engagement.Stats{ContentID: id, Scope: engagement.GlobalScope, Likes: 4, Counters: map[string]int64{"view": 101}, UpdatedAt: now().Add(time.Second), LastSeq: 11}
	if err := s.WriteStats(t.Context(), []engagement.Stats{second}); err != nil {
		t.Fatalf("WriteStats: %v", err)
	}
	got := readStats(t, s, id)
	checkStats(t, "ReadStats", got[id], []engagement.Stats{first[1], second})
}

// testStatsIdempotent applies partial sums the way the rollup does — skip a
// message whose sequence is not above the row's LastSeq — and checks that a
// redelivered message changes nothing.
func testStatsIdempotent(t *testing.T, s Store) {
	id := uniq("c")
	apply := func(seq uint64, likes int64) {
		t.Helper()
		got := readStats(t, s, id)
		var row engagement.Stats
		if rows := got[id]; len(rows) == 1 {
			row = rows[0]
		} else {
			row = engagement.Stats{ContentID: id, Scope: engagement.GlobalScope}
		}
		if seq <= row.LastSeq {
			return
		}
		row.Likes += likes
		row.LastSeq = seq
		row.UpdatedAt = now()
		if err := s.WriteStats(t.Context(), []engagement.Stats{row}); err != nil {
			t.Fatalf("WriteStats: %v", err)
		}
	}
	for _, m := range []struct {
		seq   uint64
		likes int64
	}{{1, 2}, {2, 3}, {2, 3}, {1, 2}, {5, 1}, {5, 1}, {4, 100}} {
		apply(m.seq, m.likes)
	}
	rows := readStats(t, s, id)[id]
	if len(rows) != 1 || rows[0].Likes != 6 || rows[0].LastSeq != 5 {
		t.Fatalf("after redelivered messages: %+v; want one row with 6 likes at sequence 5", rows)
	}
}

func testTrending(t *testing.T, s Store) {
	scope := uniq("r")
	key := engagement.TrendingKey{Scope: scope, Counter: engagement.CounterLike, Window: "5m"}
	first := engagement.Trending{TrendingKey: key, AsOf: now(), Items: []engagement.TrendingItem{
		{ContentID: "a", Count: 100, Error: 3},
		{ContentID: "b", Count: 50},
		{ContentID: "c", Count: math.MaxInt64, Error: math.MaxInt64},
	}}
	second := engagement.Trending{TrendingKey: key, AsOf: now().Add(time.Minute), Items: []engagement.TrendingItem{
		{ContentID: "d", Count: 7, Error: 1},
	}}
	other := engagement.Trending{TrendingKey: engagement.TrendingKey{Scope: scope, Counter: "view", Window: "5m"}, AsOf: now()}

	get := func(k engagement.TrendingKey) (engagement.Trending, bool) {
		t.Helper()
		got, ok, err := s.GetTrending(t.Context(), k)
		if err != nil {
			t.Fatalf("GetTrending(%+v): %v", k, err)
		}
		return got, ok
	}
	put := func(tr engagement.Trending) {
		t.Helper()
		if err := s.PutTrending(t.Context(), tr); err != nil {
			t.Fatalf("PutTrending(%+v): %v", tr.TrendingKey, err)
		}
	}

	if got, ok := get(key); ok {
		t.Fatalf("GetTrending of a missing list = %+v, found; want none", got)
	}
	put(first)
	if got, ok := get(key); !ok || !equalTrending(got, first) {
		t.Fatalf("GetTrending = %+v, %v; want %+v", got, ok, first)
	}
	put(other) // an empty list under a key that differs in the counter only
	put(second)
	if got, ok := get(key); !ok || !equalTrending(got, second) {
		t.Fatalf("GetTrending after overwrite = %+v, %v; want %+v", got, ok, second)
	}
	if got, ok := get(other.TrendingKey); !ok || !equalTrending(got, other) {
		t.Fatalf("GetTrending(%+v) = %+v, %v; want %+v", other.TrendingKey, got, ok, other)
	}
	for _, k := range []engagement.TrendingKey{
		{Scope: scope, Counter: engagement.CounterLike, Window: "1h"},
		{Scope: engagement.GlobalScope + "x", Counter: engagement.CounterLike, Window: "5m"},
	} {
		if got, ok := get(k); ok {
			t.Fatalf("GetTrending(%+v) = %+v, found; want none", k, got)
		}
	}
}

// testTrendingPartitions checks that the lists of the partitions of one
// (scope, counter, window) are separate rows that ReadTrending returns
// together, in partition order, and nothing else: not a list of another
// window whose name extends this one's, another counter or scope.
func testTrendingPartitions(t *testing.T, s Store) {
	scope := uniq("r")
	ctx := t.Context()
	at := now()
	list := func(counter, window string, p uint32, id string) engagement.Trending {
		return engagement.Trending{
			TrendingKey: engagement.TrendingKey{Scope: scope, Counter: counter, Window: window, Partition: p},
			AsOf:        at.Add(time.Duration(p) * time.Microsecond),
			Items:       []engagement.TrendingItem{{ContentID: id, Count: int64(p) + 1}},
		}
	}
	// 65536 and 256 have zero bytes in the middle of their big-endian form.
	want := []engagement.Trending{
		list("like", "5m", 0, "p0"), list("like", "5m", 3, "p3"),
		list("like", "5m", 256, "p256"), list("like", "5m", 65536, "p65536"),
	}
	noise := []engagement.Trending{
		list("like", "5mx", 0, "longer-window"), list("like", "5mx", 3, "longer-window-3"),
		list("like", "5", 1, "shorter-window"), list("likes", "5m", 1, "longer-counter"),
		list("like", "1h", 2, "other-window"),
	}
	// Written out of order, noise in between.
	for _, i := range []int{2, 0, 3, 1} {
		if err := s.PutTrending(ctx, noise[i%len(noise)]); err != nil {
			t.Fatalf("PutTrending(%+v): %v", noise[i%len(noise)].TrendingKey, err)
		}
		if err := s.PutTrending(ctx, want[i]); err != nil {
			t.Fatalf("PutTrending(%+v): %v", want[i].TrendingKey, err)
		}
	}
	if err := s.PutTrending(ctx, noise[4]); err != nil {
		t.Fatalf("PutTrending(%+v): %v", noise[4].TrendingKey, err)
	}
	got, err := s.ReadTrending(ctx, scope, "like", "5m")
	if err != nil {
		t.Fatalf("ReadTrending: %v", err)
	}
	if !slices.EqualFunc(got, want, equalTrending) {
		t.Fatalf("ReadTrending = %+v; want %+v", got, want)
	}
	for _, w := range want {
		if g, ok, err := s.GetTrending(ctx, w.TrendingKey); err != nil || !ok || !equalTrending(g, w) {
			t.Fatalf("GetTrending(%+v) = %+v, %v, %v; want %+v", w.TrendingKey, g, ok, err, w)
		}
	}
	if g, ok, err := s.GetTrending(ctx, engagement.TrendingKey{Scope: scope, Counter: "like", Window: "5m", Partition: 1}); err != nil || ok {
		t.Fatalf("GetTrending of a missing partition = %+v, %v, %v; want none", g, ok, err)
	}
	if got, err := s.ReadTrending(ctx, uniq("r"), "like", "5m"); err != nil || len(got) != 0 {
		t.Fatalf("ReadTrending of a missing list = %+v, %v; want none", got, err)
	}
	// Overwriting one partition leaves the others.
	repl := list("like", "5m", 3, "p3-new")
	if err := s.PutTrending(ctx, repl); err != nil {
		t.Fatalf("PutTrending: %v", err)
	}
	want[1] = repl
	if got, err := s.ReadTrending(ctx, scope, "like", "5m"); err != nil || !slices.EqualFunc(got, want, equalTrending) {
		t.Fatalf("ReadTrending after overwrite = %+v, %v; want %+v", got, err, want)
	}
}
