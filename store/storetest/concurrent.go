package storetest

import (
	"slices"
	"sync"
	"testing"

	"github.com/edgecount/edgecount/engagement"
)

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
