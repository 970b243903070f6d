package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/store"
)

// RecountStore is a Store with the two methods the recount job needs: a
// resumable scan of ContentStats and a count of one item's reactions meant
// for repairs.
type RecountStore interface {
	Store

	// ScanStats returns up to limit rows after cursor in the store's scan
	// order and the cursor to pass next; "" starts the scan, and a next
	// cursor of "" means the scan reached the end. Every row that exists
	// for the whole scan is returned exactly once per round, even when the
	// rows of one item are split between two calls.
	ScanStats(ctx context.Context, cursor string, limit int) (rows []engagement.Stats, next string, err error)
	// RecountReactions counts one item's reactions by region, resumably:
	// cursor "" starts a count; a call reads about budget entries and
	// returns the tallies so far and the cursor to continue from ("" when
	// the count is finished). complete reports whether a finished count is
	// exact (the store's index cannot lag its rows). A cursor the store did
	// not make for this item, or a budget below 1, gives ErrInvalid.
	RecountReactions(ctx context.Context, contentID, cursor string, budget int) (tallies []engagement.RegionTally, next string, complete bool, err error)
}

// RunRecount runs the recount part of the conformance suite against stores
// made by open. Like Run, its subtests run in parallel with unique ids and
// work on a shared database.
func RunRecount(t *testing.T, open func(t *testing.T) RecountStore) {
	runParallel(t, open, []suiteTest[RecountStore]{
		{"Scan/EveryRowOnce", testScanEveryRowOnce},
		{"Scan/StartsOver", testScanStartsOver},
		{"Scan/Misuse", testScanMisuse},
		{"Recount/FollowsChanges", testRecountFollows},
		{"Recount/ManyUsers", testRecountManyUsers},
		{"Recount/Resumes", testRecountResumes},
		{"Recount/ResumesAfterFailures", testRecountResumesAfterFailures},
		{"Recount/Misuse", testRecountMisuse},
	})
}

// maxScanCalls bounds a scan in the tests, so a cursor that never ends
// fails instead of hanging.
const maxScanCalls = 100_000

// scanAll scans from cursor "" to the end with limit and returns the rows
// whose content id is in mine, in scan order, and the number of calls.
func scanAll(t *testing.T, s RecountStore, limit int, mine map[string]bool) ([]engagement.Stats, int) {
	t.Helper()
	var (
		got    []engagement.Stats
		cursor string
	)
	for calls := 1; calls <= maxScanCalls; calls++ {
		rows, next, err := s.ScanStats(t.Context(), cursor, limit)
		if err != nil {
			t.Fatalf("ScanStats(%q, %d) after %d calls: %v", cursor, limit, calls-1, err)
		}
		if len(rows) > limit {
			t.Fatalf("ScanStats(limit %d) returned %d rows", limit, len(rows))
		}
		if next != "" && len(rows) == 0 {
			t.Fatalf("ScanStats(%q, %d) returned no rows but next cursor %q", cursor, limit, next)
		}
		for _, r := range rows {
			if mine[r.ContentID] {
				got = append(got, r)
			}
		}
		if next == "" {
			return got, calls
		}
		cursor = next
	}
	t.Fatalf("ScanStats(limit %d) did not end after %d calls", limit, maxScanCalls)
	return nil, 0
}

// statsKey names a row in test maps.
func statsKey(r engagement.Stats) string { return r.ContentID + "/" + r.Scope }

func testScanEveryRowOnce(t *testing.T, s RecountStore) {
	// Items with one to five rows: scanned two rows at a time, the rows of
	// most items are split between calls.
	mine := map[string]bool{}
	want := map[string]engagement.Stats{}
	var rows []engagement.Stats
	for i := range 7 {
		id := uniq(fmt.Sprintf("scan%d", i))
		mine[id] = true
		scopes := []string{engagement.GlobalScope, "ap-south", "eu-west", "us-east", "sa-east"}[:1+i%5]
		for j, scope := range scopes {
			r := engagement.Stats{ContentID: id, Scope: scope, Likes: int64(i*10 + j), Dislikes: int64(j),
				UpdatedAt: now(), LastSeq: uint64(100 + i)}
			if j%2 == 1 {
				r.Counters = map[string]int64{"view": int64(i + j)}
			}
			rows = append(rows, r)
			want[statsKey(r)] = r
		}
	}
	if err := s.WriteStats(t.Context(), rows); err != nil {
		t.Fatalf("WriteStats: %v", err)
	}
	var orders [][]string
	for _, limit := range []int{1, 2, 3, 1000} {
		got, _ := scanAll(t, s, limit, mine)
		seen := map[string]bool{}
		var order []string
		for _, r := range got {
			k := statsKey(r)
			if seen[k] {
				t.Fatalf("limit %d: row %s returned twice", limit, k)
			}
			seen[k] = true
			order = append(order, k)
			w, ok := want[k]
			if !ok {
				t.Fatalf("limit %d: unexpected row %+v", limit, r)
			}
			if !equalStats(r, w) {
				t.Fatalf("limit %d: row = %+v; want %+v", limit, r, w)
			}
		}
		if len(seen) != len(want) {
			t.Fatalf("limit %d: scan returned %d of the %d rows written", limit, len(seen), len(want))
		}
		orders = append(orders, order)
	}
	// The order does not depend on the page size: a scan resumed from a
	// cursor continues exactly where the previous call stopped.
	for i := 1; i < len(orders); i++ {
		if !slices.Equal(orders[i], orders[0]) {
			t.Fatalf("scan order depends on the limit:\n%v\n%v", orders[0], orders[i])
		}
	}
}

func testScanStartsOver(t *testing.T, s RecountStore) {
	id := uniq("scanover")
	row := engagement.Stats{ContentID: id, Scope: engagement.GlobalScope, Likes: 1, UpdatedAt: now()}
	if err := s.WriteStats(t.Context(), []engagement.Stats{row}); err != nil {
		t.Fatalf("WriteStats: %v", err)
	}
	mine := map[string]bool{id: true}
	// Two rounds: after next == "" a scan from "" sees the row again.
	for round := range 2 {
		got, _ := scanAll(t, s, 50, mine)
		if len(got) != 1 || !equalStats(got[0], row) {
			t.Fatalf("round %d: scan found %+v; want [%+v]", round, got, row)
		}
	}
	// A cursor taken on a row stays valid after that row is overwritten.
	var cursor string
	for calls := 0; calls < maxScanCalls; calls++ {
		rows, next, err := s.ScanStats(t.Context(), cursor, 1)
		if err != nil {
			t.Fatalf("ScanStats: %v", err)
		}
		if len(rows) == 1 && rows[0].ContentID == id {
			cursor = next
			break
		}
		if next == "" {
			t.Fatalf("scan ended without finding %s", id)
		}
		cursor = next
	}
	row.Likes = 2
	if err := s.WriteStats(t.Context(), []engagement.Stats{row}); err != nil {
		t.Fatalf("WriteStats: %v", err)
	}
	if cursor != "" {
		if _, _, err := s.ScanStats(t.Context(), cursor, 10); err != nil {
			t.Fatalf("ScanStats from a cursor whose row was rewritten: %v", err)
		}
	}
}

func testScanMisuse(t *testing.T, s RecountStore) {
	tests := []struct {
		name   string
		cursor string
		limit  int
	}{
		{"zero limit", "", 0},
		{"negative limit", "", -1},
		{"huge limit", "", 1 << 30},
		{"garbage cursor", "not a cursor", 10},
		{"binary cursor", "\xff\xfe", 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rows, next, err := s.ScanStats(t.Context(), tt.cursor, tt.limit)
			if !errors.Is(err, store.ErrInvalid) {
				t.Fatalf("ScanStats(%q, %d) = %d rows, %q, %v; want ErrInvalid", tt.cursor, tt.limit, len(rows), next, err)
			}
		})
	}
}

// maxRecountCalls bounds a count in the tests, so a cursor that never
// ends fails instead of hanging.
const maxRecountCalls = 100_000

// recountAll runs RecountReactions of content from "" to the end with
// budget and returns the tallies, complete and the number of calls.
func recountAll(t *testing.T, s RecountStore, content string, budget int) ([]engagement.RegionTally, bool, int) {
	t.Helper()
	var cursor string
	for calls := 1; calls <= maxRecountCalls; calls++ {
		got, next, complete, err := s.RecountReactions(t.Context(), content, cursor, budget)
		if err != nil {
			t.Fatalf("RecountReactions(%s, call %d, budget %d): %v", content, calls, budget, err)
		}
		if next == "" {
			return got, complete, calls
		}
		if next == cursor {
			t.Fatalf("RecountReactions(%s, budget %d) returned its own cursor: no progress", content, budget)
		}
		cursor = next
	}
	t.Fatalf("RecountReactions(%s, budget %d) did not end after %d calls", content, budget, maxRecountCalls)
	return nil, false, 0
}

// checkRecount fails unless RecountReactions of content gives want, with
// any budget, and agrees with CountReactions.
func checkRecount(t *testing.T, s RecountStore, content string, want []engagement.RegionTally) {
	t.Helper()
	for _, budget := range []int{1, 2, 1000} {
		got, complete, _ := recountAll(t, s, content, budget)
		if !slices.Equal(got, want) {
			t.Fatalf("RecountReactions(%s, budget %d) = %+v (complete %v); want %+v", content, budget, got, complete, want)
		}
	}
	counted, err := s.CountReactions(t.Context(), content)
	if err != nil {
		t.Fatalf("CountReactions(%s): %v", content, err)
	}
	if !slices.Equal(counted, want) {
		t.Fatalf("CountReactions(%s) = %+v; want %+v", content, counted, want)
	}
}

func testRecountFollows(t *testing.T, s RecountStore) {
	countFollows(t, s, "rc", func(content string, want []engagement.RegionTally) {
		t.Helper()
		checkRecount(t, s, content, want)
	})
}

// manyUsers writes n reactions on one item by n users (likes and dislikes
// in three regions; every tenth one undone, every seventh switched) and
// returns the item and its expected tallies. Enough users land in every
// bucket of a bucketed index.
func manyUsers(t *testing.T, s Store, n int) (string, []engagement.RegionTally) {
	t.Helper()
	content := uniq("many")
	regions := []string{"ap-south", "eu-west", "us-east"}
	var want []engagement.RegionTally
	for i := range n {
		a := engagement.ActionLike
		if i%3 == 0 {
			a = engagement.ActionDislike
		}
		r := newReaction(uniq(fmt.Sprintf("u%d", i)), content, a, regions[i%len(regions)])
		mustInsert(t, s, r)
		switch {
		case i%10 == 0:
			mustDelete(t, s, r)
			continue
		case i%7 == 0:
			flip := engagement.ActionLike
			if a == engagement.ActionLike {
				flip = engagement.ActionDislike
			}
			next := bump(r, flip, regions[(i+1)%len(regions)])
			mustUpdate(t, s, r, next)
			r = next
		}
		want = store.AddTally(want, r.Region, r.Action)
	}
	store.SortTallies(want)
	return content, want
}

func testRecountManyUsers(t *testing.T, s RecountStore) {
	content, want := manyUsers(t, s, 300)
	checkRecount(t, s, content, want)
}

func testRecountResumes(t *testing.T, s RecountStore) {
	content, want := manyUsers(t, s, 120)
	// A small budget splits the count over many calls; each returns the
	// tallies so far, which only grow.
	got, _, calls := recountAll(t, s, content, 5)
	if !slices.Equal(got, want) {
		t.Fatalf("RecountReactions(budget 5) = %+v; want %+v", got, want)
	}
	if calls < 2 {
		t.Fatalf("RecountReactions of 108 reactions with budget 5 took %d call; want several", calls)
	}
	// A count resumes from any cursor, in a new call as in a restarted
	// process: stop after the first call and continue later, twice.
	first, next, _, err := s.RecountReactions(t.Context(), content, "", 5)
	if err != nil || next == "" {
		t.Fatalf("first RecountReactions = %+v, %q, %v; want a cursor", first, next, err)
	}
	if total(first) > total(want) {
		t.Fatalf("first call counted %d reactions, more than the %d there are", total(first), total(want))
	}
	var last []engagement.RegionTally
	for range 2 {
		cursor := next
		for cursor != "" {
			last, cursor, _, err = s.RecountReactions(t.Context(), content, cursor, 1000)
			if err != nil {
				t.Fatalf("resumed RecountReactions: %v", err)
			}
		}
		if !slices.Equal(last, want) {
			t.Fatalf("resumed RecountReactions = %+v; want %+v", last, want)
		}
	}
}

// testRecountResumesAfterFailures counts an item in calls that mostly fail
// (a deadline that ends within the call, as a node that stops answering
// would): a failed call returns an error and either "" (resume from the
// cursor passed) or a later cursor, the tallies of any call never exceed
// the item's (a part that could not be read is missing, never invented),
// and the count resumed through the failures ends at the exact tallies.
func testRecountResumesAfterFailures(t *testing.T, s RecountStore) {
	content, want := manyUsers(t, s, 80)
	limit := map[string]engagement.RegionTally{}
	for _, w := range want {
		limit[w.Region] = w
	}
	var (
		cursor   string
		failures int
		got      []engagement.RegionTally
	)
	for calls := 0; ; calls++ {
		if calls == maxRecountCalls {
			t.Fatalf("no end after %d calls", calls)
		}
		// Deadlines from 0.1 ms to 5 ms; after many failures in a row
		// a call gets long enough to progress.
		d := time.Duration(1+calls%50) * 100 * time.Microsecond
		if failures > 20 {
			d = time.Minute
		}
		ctx, cancel := context.WithTimeout(t.Context(), d)
		tallies, next, _, err := s.RecountReactions(ctx, content, cursor, 7)
		cancel()
		for _, x := range tallies {
			if l := limit[x.Region]; x.Likes > l.Likes || x.Dislikes > l.Dislikes {
				t.Fatalf("call %d counted %+v in %s; the item has %+v", calls, x, x.Region, l)
			}
		}
		if err != nil {
			if errors.Is(err, store.ErrInvalid) {
				t.Fatalf("call %d: %v", calls, err)
			}
			failures++
			if next != "" {
				cursor = next
			}
			continue
		}
		failures = 0
		if next == "" {
			got = tallies
			break
		}
		cursor = next
	}
	if !slices.Equal(got, want) {
		t.Fatalf("count resumed through failures = %+v; want %+v", got, want)
	}
}

// total sums the likes and dislikes of tallies.
func total(ts []engagement.RegionTally) int64 {
	var n int64
	for _, t := range ts {
		n += t.Likes + t.Dislikes
	}
	return n
}

func testRecountMisuse(t *testing.T, s RecountStore) {
	// No store can key an empty id or one longer than 1 KiB.
	for _, id := range []string{"", strings.Repeat("x", 1025)} {
		if got, _, _, err := s.RecountReactions(t.Context(), id, "", 100); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("RecountReactions(%q) = %+v, %v; want ErrInvalid", id, got, err)
		}
	}
	content, _ := manyUsers(t, s, 12)
	_, cursor, _, err := s.RecountReactions(t.Context(), content, "", 1)
	if err != nil || cursor == "" {
		t.Fatalf("RecountReactions(budget 1) = %q, %v; want a cursor", cursor, err)
	}
	tests := []struct {
		name, content, cursor string
		budget                int
	}{
		{"zero budget", content, "", 0},
		{"negative budget", content, "", -1},
		{"garbage cursor", content, "not a cursor", 10},
		{"binary cursor", content, "\xff\xfe", 10},
		{"truncated cursor", content, cursor[:len(cursor)/2], 10},
		{"cursor of another item", uniq("other"), cursor, 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, next, _, err := s.RecountReactions(t.Context(), tt.content, tt.cursor, tt.budget)
			if !errors.Is(err, store.ErrInvalid) {
				t.Fatalf("RecountReactions(%q, %d) = %+v, %q, %v; want ErrInvalid", tt.cursor, tt.budget, got, next, err)
			}
		})
	}
}
