package cassandra

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"golang.org/x/sync/errgroup"

	"github.com/edgecount/edgecount/engagement"
)

// The scale measurement of the data model (docs/data-model.md), run by
// scripts/measure-index.sh in three phases against a keyspace of its own
// (edgecount_dm_bench): fill, read (recount timings; nodetool runs
// between), drop. It skips unless EDGECOUNT_SCALE_PHASE is set.
//
//	EDGECOUNT_SCALE_PHASE=fill|read|drop
//	EDGECOUNT_SCALE_SIZES=100000,1000000   live reactions of each hot item
//	EDGECOUNT_SCALE_USER=100000            rows of the heavy user

const scaleKeyspace = "edgecount_dm_bench"

func scaleEnv(t *testing.T) (phase string, sizes []int, user int) {
	phase = os.Getenv("EDGECOUNT_SCALE_PHASE")
	if phase == "" {
		t.Skip("scale measurement: run scripts/measure-index.sh (sets EDGECOUNT_SCALE_PHASE)")
	}
	for _, f := range strings.Split(cmp.Or(os.Getenv("EDGECOUNT_SCALE_SIZES"), "100000,1000000"), ",") {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			t.Fatalf("EDGECOUNT_SCALE_SIZES: %q is not a size", f)
		}
		sizes = append(sizes, n)
	}
	user, err := strconv.Atoi(cmp.Or(os.Getenv("EDGECOUNT_SCALE_USER"), "100000"))
	if err != nil {
		t.Fatalf("EDGECOUNT_SCALE_USER: %v", err)
	}
	return phase, sizes, user
}

// hotItem names the item of n live reactions.
func hotItem(n int) string { return fmt.Sprintf("hot-%d", n) }

// scaleUser names the i-th user of a hot item: 36 bytes, as a UUID.
func scaleUser(i int) string { return fmt.Sprintf("%08x-%04x-4000-8000-%012x", i, i%65536, i*7919) }

// undone reports whether the i-th reaction of an item is undone: one in 11,
// so the live ones are 10 for every undone one (10 % of the live count).
func undone(i int) bool { return i%11 == 10 }

// scaleEntry is the i-th reaction of an item: like, dislike every third,
// one of three regions.
func scaleEntry(i int) (engagement.Action, string) {
	a := engagement.ActionLike
	if i%3 == 0 {
		a = engagement.ActionDislike
	}
	return a, []string{"ap-south", "eu-west", "us-east"}[i%3]
}

func TestScale(t *testing.T) {
	phase, sizes, user := scaleEnv(t)
	cfg := nodeConfig(t, scaleKeyspace)
	cfg.Timeout = 20 * time.Second
	switch phase {
	case "drop":
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := DropKeyspace(ctx, cfg); err != nil {
			t.Fatal(err)
		}
		return
	case "fill":
		s := openStore(t, cfg)
		if err := s.execSchema(t.Context(), legacySchema(scaleKeyspace)); err != nil {
			t.Fatal(err)
		}
		for _, n := range sizes {
			start := time.Now()
			total := n + n/10
			fillIndex(t, s, hotItem(n), total, true)
			fillIndex(t, s, hotItem(n), total, false)
			t.Logf("filled %s: %d live + %d undone reactions, bucketed and legacy index, in %v", hotItem(n), n, total-n, time.Since(start).Round(time.Second))
		}
		start := time.Now()
		fillUser(t, s, "heavy-user", user)
		// The rows of the smallest item's users, for the peer count that
		// reads them (VerifyReactions, the old recount).
		fillRows(t, s, hotItem(sizes[0]), sizes[0]+sizes[0]/10)
		t.Logf("filled %d rows of one user and the rows of %s in %v", user, hotItem(sizes[0]), time.Since(start).Round(time.Second))
	case "read":
		s := openStore(t, cfg)
		for _, n := range sizes {
			measureRecount(t, s, n, n == sizes[0])
		}
		traceTombstones(t, s, hotItem(sizes[len(sizes)-1]))
	default:
		t.Fatalf("EDGECOUNT_SCALE_PHASE=%q: want fill, read or drop", phase)
	}
}

// fillIndex writes total reactions of item into the bucketed index (or,
// with legacy false... the legacy table), with plain unlogged batches of
// one partition each, 16 at a time; the undone ones are written and then
// deleted as DeleteReaction's follow-up does (a tombstone at version+1).
func fillIndex(t *testing.T, s *Store, item string, total int, bucketed bool) {
	t.Helper()
	put := `INSERT INTO ` + scaleKeyspace + `.` + LegacyIndexTable +
		` (content_id, user_id, incarnation, action, region, version) VALUES (?, ?, ?, ?, ?, ?) USING TIMESTAMP ?`
	del := `DELETE FROM ` + scaleKeyspace + `.` + LegacyIndexTable + ` USING TIMESTAMP ? WHERE content_id = ? AND user_id = ? AND incarnation = ?`
	if bucketed {
		put, del = s.q.putIndex, s.q.delIndex
	}
	// Group by partition: a batch holds one partition's entries.
	groups := map[int][]int{}
	for i := range total {
		b := 0
		if bucketed {
			b = bucketOf(scaleUser(i), s.buckets)
		}
		groups[b] = append(groups[b], i)
	}
	const batch = 100
	g, ctx := errgroup.WithContext(t.Context())
	g.SetLimit(8)
	for b, is := range groups {
		for chunk := range slices.Chunk(is, batch) {
			g.Go(func() error {
				bt := s.session.Batch(gocql.UnloggedBatch).Consistency(gocql.One)
				for _, i := range chunk {
					a, region := scaleEntry(i)
					u, inc := scaleUser(i), int64(i+1)
					args := []any{item, u, inc, a.String(), region, int64(1), int64(1)}
					if bucketed {
						args = append([]any{item, b}, args[1:]...)
					}
					bt.Entries = append(bt.Entries, gocql.BatchEntry{Stmt: put, Args: args, Idempotent: true})
					if undone(i) {
						dargs := []any{int64(2), item, u, inc}
						if bucketed {
							dargs = []any{int64(2), item, b, u, inc}
						}
						bt.Entries = append(bt.Entries, gocql.BatchEntry{Stmt: del, Args: dargs, Idempotent: true})
					}
				}
				return retry(ctx, bt.ExecContext)
			})
		}
	}
	if err := g.Wait(); err != nil {
		t.Fatalf("fill %s: %v", item, err)
	}
}

// fillUser writes n user_likes rows of one user (plain inserts: this
// keyspace is only measured).
func fillUser(t *testing.T, s *Store, user string, n int) {
	t.Helper()
	ins := `INSERT INTO ` + scaleKeyspace + `.user_likes (user_id, content_id, action, region, version, incarnation, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)`
	g, ctx := errgroup.WithContext(t.Context())
	g.SetLimit(16)
	now := time.Now().UnixMicro()
	for chunk := range slices.Chunk(seq(n), 100) {
		g.Go(func() error {
			bt := s.session.Batch(gocql.UnloggedBatch).Consistency(gocql.One)
			for _, i := range chunk {
				a, region := scaleEntry(i)
				bt.Entries = append(bt.Entries, gocql.BatchEntry{Stmt: ins, Idempotent: true,
					Args: []any{user, fmt.Sprintf("item-%08d", i), a.String(), region, int64(1), int64(i + 1), now}})
			}
			return retry(ctx, bt.ExecContext)
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatalf("fill user %s: %v", user, err)
	}
}

// fillRows writes the user_likes row of every reaction of item (a marker
// for an undone one), one user per row.
func fillRows(t *testing.T, s *Store, item string, total int) {
	t.Helper()
	ins := `INSERT INTO ` + scaleKeyspace + `.user_likes (user_id, content_id, action, region, version, incarnation, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)`
	g, ctx := errgroup.WithContext(t.Context())
	g.SetLimit(32)
	now := time.Now().UnixMicro()
	for i := range total {
		g.Go(func() error {
			a, region := scaleEntry(i)
			action, version := a.String(), int64(1)
			if undone(i) {
				action, version = markerAction, 2
			}
			return retry(ctx, s.session.Query(ins, scaleUser(i), item, action, region, version, int64(i+1), now).Consistency(gocql.One).ExecContext)
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatalf("fill rows of %s: %v", item, err)
	}
}

// retry runs an idempotent write until it succeeds, up to 10 times: the
// shared test node times out writes when other work loads it.
func retry(ctx context.Context, exec func(context.Context) error) error {
	var err error
	for attempt := range 10 {
		if err = exec(ctx); err == nil || ctx.Err() != nil {
			return err
		}
		time.Sleep(time.Duration(attempt+1) * 500 * time.Millisecond)
	}
	return err
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// measureRecount times three full recounts of the item of n reactions
// (RecountReactions with the job's default budget) and, with peer, three
// of VerifyReactions (the old recount: the index and one row per
// reaction), and checks the count and the rows read.
func measureRecount(t *testing.T, s *Store, n int, peer bool) {
	t.Helper()
	item := hotItem(n)
	var want int64
	for i := range n + n/10 {
		if !undone(i) {
			want++
		}
	}
	median := func(ds []time.Duration) time.Duration {
		slices.Sort(ds)
		return ds[len(ds)/2]
	}
	var times []time.Duration
	var rows, pages, warnings int64
	for range 3 {
		r0, p0, w0 := s.counters.IndexRowsRead.Load(), s.counters.IndexPages.Load(), s.counters.TombstoneWarnings.Load()
		start := time.Now()
		var (
			tallies []engagement.RegionTally
			cursor  string
			calls   int
		)
		for {
			var err error
			tallies, cursor, _, err = s.RecountReactions(t.Context(), item, cursor, 20_000)
			calls++
			if err != nil {
				t.Fatalf("RecountReactions(%s) call %d: %v", item, calls, err)
			}
			if cursor == "" {
				break
			}
		}
		times = append(times, time.Since(start))
		rows, pages, warnings = s.counters.IndexRowsRead.Load()-r0, s.counters.IndexPages.Load()-p0, s.counters.TombstoneWarnings.Load()-w0
		if got := total(tallies); got != want {
			t.Fatalf("recount of %s counted %d reactions; want %d", item, got, want)
		}
	}
	ratio := float64(rows) / float64(want)
	t.Logf("RESULT recount %s: %d reactions, median %v of 3 %v, rows read %d (%.4f per reaction), %d pages, %d tombstone warnings",
		item, want, median(times).Round(time.Millisecond), times, rows, ratio, pages, warnings)
	if ratio > 1.05 {
		t.Errorf("recount of %s read %.4f rows per reaction; G17 wants at most 1.05", item, ratio)
	}
	if !peer {
		return
	}
	var ptimes []time.Duration
	for range 3 {
		start := time.Now()
		tallies, err := s.VerifyReactions(t.Context(), item)
		if err != nil {
			t.Fatalf("VerifyReactions(%s): %v", item, err)
		}
		ptimes = append(ptimes, time.Since(start))
		if got := total(tallies); got != want {
			t.Fatalf("VerifyReactions of %s counted %d reactions; want %d", item, got, want)
		}
	}
	t.Logf("RESULT peer %s: VerifyReactions (index + one row read per reaction, the old recount) median %v of 3 %v; recount/peer time ratio %.3f",
		item, median(ptimes).Round(time.Millisecond), ptimes, float64(median(times))/float64(median(ptimes)))
}

func total(ts []engagement.RegionTally) int64 {
	var n int64
	for _, t := range ts {
		n += t.Likes + t.Dislikes
	}
	return n
}

// traceTombstones traces one page query of a few buckets of item and logs
// the live rows and tombstones each read, as the node reports them.
func traceTombstones(t *testing.T, s *Store, item string) {
	t.Helper()
	re := regexp.MustCompile(`Read (\d+) live rows and (\d+) tombstone cells`)
	for b := range 3 {
		var buf bytes.Buffer
		q := s.query(s.q.indexFirst, item, b, indexPage).PageSize(indexPage).Trace(gocql.NewTraceWriter(s.session, &buf))
		if _, err := s.scanEntries(t.Context(), q); err != nil {
			t.Fatal(err)
		}
		m := re.FindStringSubmatch(buf.String())
		if m == nil {
			t.Logf("RESULT trace bucket %d: no read line in the trace:\n%s", b, buf.String())
			continue
		}
		t.Logf("RESULT trace %s bucket %d, one page (LIMIT %d): %s live rows, %s tombstone cells", item, b, indexPage, m[1], m[2])
	}
}
