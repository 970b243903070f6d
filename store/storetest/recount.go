package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

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
	// RecountReactions counts one item's reactions by region. complete
	// reports whether the count is exact; when it is false the tallies may
	// miss reactions but never count one that does not exist.
	RecountReactions(ctx context.Context, contentID string) (tallies []engagement.RegionTally, complete bool, err error)
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

// checkRecount fails unless RecountReactions of content gives want, and
// agrees with CountReactions when it says it is complete.
func checkRecount(t *testing.T, s RecountStore, content string, want []engagement.RegionTally) {
	t.Helper()
	got, complete, err := s.RecountReactions(t.Context(), content)
	if err != nil {
		t.Fatalf("RecountReactions(%s): %v", content, err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("RecountReactions(%s) = %+v (complete %v); want %+v", content, got, complete, want)
	}
	if complete {
		counted, err := s.CountReactions(t.Context(), content)
		if err != nil {
			t.Fatalf("CountReactions(%s): %v", content, err)
		}
		if !slices.Equal(counted, got) {
			t.Fatalf("complete RecountReactions(%s) = %+v; CountReactions = %+v", content, got, counted)
		}
	}
}

func testRecountFollows(t *testing.T, s RecountStore) {
	countFollows(t, s, "rc", func(content string, want []engagement.RegionTally) {
		t.Helper()
		checkRecount(t, s, content, want)
	})
}

func testRecountMisuse(t *testing.T, s RecountStore) {
	// No store can key an empty id or one longer than 1 KiB.
	for _, id := range []string{"", strings.Repeat("x", 1025)} {
		if got, _, err := s.RecountReactions(t.Context(), id); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("RecountReactions(%q) = %+v, %v; want ErrInvalid", id, got, err)
		}
	}
}
