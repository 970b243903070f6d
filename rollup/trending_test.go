package rollup_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/internal/testenv"
	"github.com/edgecount/edgecount/partial"
	"github.com/edgecount/edgecount/rollup"
	"github.com/edgecount/edgecount/store/embedded"
	"github.com/edgecount/edgecount/store/embedded/embeddedtest"
)

// minuteM is 30 s into a minute; minute(k) is k minutes later.
var minuteM = time.Date(2026, 3, 1, 10, 0, 30, 0, time.UTC)

func minute(k int) time.Time { return minuteM.Add(time.Duration(k) * time.Minute) }

// trendRig is a rollup with trending on over one partition, writing to a
// real embedded store, applying hand-made messages in sequence.
type trendRig struct {
	t   *testing.T
	r   *rollup.Rollup
	st  *embedded.Store
	seq uint64
	// newest is the newest flush time sent; the rig's rollup clock trails
	// it by two minutes (agent clocks a little ahead).
	newest time.Time
}

// now is the rig's rollup clock: two minutes behind the newest flush,
// and minuteM-2m before any.
func (g *trendRig) now() time.Time {
	if g.newest.After(minuteM) {
		return g.newest.Add(-2 * time.Minute)
	}
	return minuteM.Add(-2 * time.Minute)
}

func newTrendRig(t *testing.T, partitions int) *trendRig {
	t.Helper()
	st := embeddedtest.Open(t, embedded.Config{Timeout: time.Second})
	// The rollup started two minutes before the first flush it sees.
	g := &trendRig{t: t, st: st}
	g.r = rollup.New(st, g.now, nil)
	cfg := rollup.DefaultTrendingConfig(partitions)
	cfg.Interval = time.Hour // written by WriteTrending only
	if err := g.r.EnableTrending(cfg, st); err != nil {
		t.Fatal(err)
	}
	return g
}

// send applies one message of agent (region-epoch) at time at through the
// wire encoding, as the consumer hands it over.
func (g *trendRig) send(agent string, epoch uint64, region string, at time.Time, sums []partial.Sum, tops ...partial.TopList) uint64 {
	g.t.Helper()
	g.seq++
	if at.After(g.newest) {
		g.newest = at
	}
	for i := range sums {
		if sums[i].Region == "" {
			sums[i].Region = region
		}
	}
	b := &partial.Batch{Agent: agent, Region: region, Epoch: epoch, Seq: g.seq, FlushedAt: at, Sums: sums, Tops: tops}
	if err := g.r.Handle(context.Background(), g.seq, partial.Append(nil, b)); err != nil {
		g.t.Fatalf("Handle: %v", err)
	}
	return g.seq
}

// rows writes the lists and returns (scope, counter, window) → items of
// partition 0.
func (g *trendRig) rows(scope, counter, window string) ([]engagement.TrendingItem, time.Time) {
	g.t.Helper()
	if err := g.r.WriteTrending(context.Background()); err != nil {
		g.t.Fatalf("WriteTrending: %v", err)
	}
	return stored(g.t, g.st, scope, counter, window)
}

// stored returns the stored list of (scope, counter, window) of partition
// 0: its items and as-of time.
func stored(t *testing.T, st *embedded.Store, scope, counter, window string) ([]engagement.TrendingItem, time.Time) {
	t.Helper()
	tr, _, err := st.GetTrending(context.Background(), engagement.TrendingKey{Scope: scope, Counter: counter, Window: window})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Items, tr.AsOf
}

// storedX returns the items of the stored us view 5m list, the one sendX
// sends.
func storedX(t *testing.T, st *embedded.Store) []engagement.TrendingItem {
	t.Helper()
	items, _ := stored(t, st, "us", "view", "5m")
	return items
}

// sendX applies message seq of agent "a" (region us, epoch 1), flushed at
// at, whose one list (view, 5m) names x with count.
func sendX(t *testing.T, r *rollup.Rollup, seq uint64, at time.Time, count int64) {
	t.Helper()
	b := &partial.Batch{Agent: "a", Region: "us", Epoch: 1, Seq: seq, FlushedAt: at, Tops: []partial.TopList{list("5m", 0, item("x", count, 0))}}
	if err := r.Handle(context.Background(), seq, partial.Append(nil, b)); err != nil {
		t.Fatal(err)
	}
}

func list(window string, floor int64, items ...partial.TopItem) partial.TopList {
	return partial.TopList{Counter: "view", Window: window, Floor: floor, Items: items}
}

func item(id string, count, errBound int64) partial.TopItem {
	return partial.TopItem{ContentID: id, Count: count, Error: errBound}
}

func ti(id string, count, errBound int64) engagement.TrendingItem {
	return engagement.TrendingItem{ContentID: id, Count: count, Error: errBound}
}

func sum(id string, d int64) partial.Sum {
	return partial.Sum{ContentID: id, Counter: "view", Delta: d}
}

func wantItems(t *testing.T, what string, got, want []engagement.TrendingItem) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s = %v\nwant %v", what, got, want)
	}
}

// TestTrendingMergesLists: the lists of two agents of a region add up,
// each agent's floor bounding the items it does not name, and the regions
// add up into the global list.
func TestTrendingMergesLists(t *testing.T) {
	g := newTrendRig(t, 1)
	g.send("us-1", 1, "us", minuteM, []partial.Sum{sum("x", 3)}, list("5m", 5, item("x", 100, 10), item("y", 50, 0)))
	g.send("us-2", 1, "us", minuteM, nil, list("5m", 3, item("x", 30, 0), item("z", 20, 2)))
	g.send("eu-1", 1, "eu", minuteM, nil, list("5m", 0, item("y", 70, 0), item("z", 60, 0)))

	us, asOf := g.rows("us", "view", "5m")
	wantItems(t, "us", us, []engagement.TrendingItem{ti("x", 130, 10), ti("y", 53, 3), ti("z", 25, 7)})
	if !asOf.Equal(minuteM) {
		t.Errorf("as of %v, want the newest flush %v", asOf, minuteM)
	}
	eu, _ := g.rows("eu", "view", "5m")
	wantItems(t, "eu", eu, []engagement.TrendingItem{ti("y", 70, 0), ti("z", 60, 0)})
	global, _ := g.rows("global", "view", "5m")
	wantItems(t, "global", global, []engagement.TrendingItem{ti("x", 130, 10), ti("y", 123, 3), ti("z", 85, 7)})
	if other, _ := g.rows("global", "view", "1h"); len(other) != 0 {
		t.Errorf("1h list without 1h lists: %v", other)
	}

	// A newer list of an agent replaces its older one.
	g.send("us-2", 1, "us", minuteM.Add(time.Second), nil, list("5m", 3, item("x", 31, 0), item("z", 20, 2)))
	us, _ = g.rows("us", "view", "5m")
	wantItems(t, "us after a newer list", us, []engagement.TrendingItem{ti("x", 131, 10), ti("y", 53, 3), ti("z", 25, 7)})
	// A restarted agent (new epoch) adds to what its last run listed.
	g.send("us-2", 2, "us", minuteM.Add(2*time.Second), nil, list("5m", 0, item("x", 1, 0)))
	us, _ = g.rows("us", "view", "5m")
	wantItems(t, "us after a restart", us, []engagement.TrendingItem{ti("x", 132, 10), ti("y", 53, 3), ti("z", 25, 7)})
	// An empty list says the agent's run has nothing any more.
	g.send("us-2", 2, "us", minuteM.Add(3*time.Second), nil, list("5m", 0))
	us, _ = g.rows("us", "view", "5m")
	wantItems(t, "us after an empty list", us, []engagement.TrendingItem{ti("x", 131, 10), ti("y", 53, 3), ti("z", 25, 7)})
}

// TestTrendingAgesLists: a list from an earlier minute than the newest
// flush bounds counts from above only (its window has moved since), and is
// dropped once the window is past it; its items' rows then go empty.
func TestTrendingAgesLists(t *testing.T) {
	g := newTrendRig(t, 1)
	g.send("us-1", 1, "us", minuteM, nil, list("5m", 0, item("x", 100, 10)), list("1h", 0, item("x", 100, 10)))
	g.send("us-2", 1, "us", minuteM, nil, list("5m", 2, item("x", 40, 0)), list("1h", 2, item("x", 40, 0)))
	// us-1 lists again in the next minute; us-2 has not yet.
	g.send("us-1", 1, "us", minute(1), nil, list("5m", 0, item("x", 100, 10)), list("1h", 0, item("x", 100, 10)))
	us, _ := g.rows("us", "view", "5m")
	wantItems(t, "5m, one list a minute old", us, []engagement.TrendingItem{ti("x", 140, 50)})

	// Five minutes on, us-2's list (minute 0) is out of every 5m window,
	// and the rollup has counted x exactly since minute 1: no sum, so x is
	// not trending over 5m any more (a count of 0 is not listed).
	g.send("us-1", 1, "us", minute(5), nil, list("5m", 0, item("w", 100, 10)), list("1h", 0, item("x", 100, 10), item("w", 100, 10)))
	us, _ = g.rows("us", "view", "5m")
	wantItems(t, "5m, one list past the window", us, []engagement.TrendingItem{ti("w", 100, 10)})
	us, _ = g.rows("us", "view", "1h")
	wantItems(t, "1h, one list a few minutes old", us, []engagement.TrendingItem{ti("x", 140, 50), ti("w", 102, 12)})

	// A day on, with no list since, nothing is left: the rows go empty.
	g.send("eu-1", 1, "eu", minute(25*60), nil, list("5m", 0, item("e", 1, 0)))
	for _, w := range []string{"5m", "1h"} {
		if us, _ = g.rows("us", "view", w); len(us) != 0 {
			t.Errorf("us %s a day later = %v, want empty", w, us)
		}
	}
	global, _ := g.rows("global", "view", "5m")
	wantItems(t, "global a day later", global, []engagement.TrendingItem{ti("e", 1, 0)})
}

// TestTrendingExactCounts: once an item is listed, the rollup counts its
// sums exactly; from the minute after, that count bounds it from below,
// and once it covers the whole window it is the count (error 0), whatever
// error the agents' lists carry. A redelivered message counts once.
func TestTrendingExactCounts(t *testing.T) {
	g := newTrendRig(t, 1)
	// Listed at minute 0: counted exactly from minute 1 on.
	g.send("us-1", 1, "us", minuteM, []partial.Sum{sum("x", 1000)}, list("5m", 50, item("x", 1000, 1000)))
	var exact int64
	for k := 1; k <= 6; k++ {
		seq := g.send("us-1", 1, "us", minute(k), []partial.Sum{sum("x", int64(k)), sum("other", 7)},
			list("5m", 50, item("x", 1000, 1000)))
		if k >= 2 {
			exact += int64(k) // minutes 2..6 are the 5m window at minute 6
		}
		if k == 3 {
			// Redelivered (the ack was lost): already counted.
			b := &partial.Batch{Agent: "us-1", Region: "us", Epoch: 1, Seq: seq, FlushedAt: minute(k),
				Sums: []partial.Sum{{ContentID: "x", Counter: "view", Region: "us", Delta: 3}}}
			if err := g.r.Apply(context.Background(), seq, b); err != nil {
				t.Fatal(err)
			}
		}
		if k == 4 {
			us, _ := g.rows("us", "view", "5m")
			// Minutes 1..4 counted, the window starts at minute 0: a lower bound.
			wantItems(t, "5m at minute 4", us, []engagement.TrendingItem{ti("x", 1000, 1000-(1+2+3+4))})
			if s := g.r.TrendingStats(); s.Candidates.Load() != 1 {
				t.Errorf("candidates = %d, want 1", s.Candidates.Load())
			}
		}
	}
	us, _ := g.rows("us", "view", "5m")
	wantItems(t, "5m at minute 6", us, []engagement.TrendingItem{ti("x", exact, 0)})
	global, _ := g.rows("global", "view", "5m")
	wantItems(t, "global 5m at minute 6", global, []engagement.TrendingItem{ti("x", exact, 0)})
	// No 1h list, and the exact count does not cover an hour: no 1h list.
	us, _ = g.rows("us", "view", "1h")
	if len(us) != 0 {
		t.Errorf("1h without 1h lists = %v", us)
	}
	// The redelivery is dropped by its agent's mark before the lists see it.
	if got := g.r.Stats().DuplicatesDropped.Load(); got != 1 {
		t.Errorf("duplicates dropped = %d, want 1", got)
	}
}

// TestTrendingDropsStrays: items of another partition and lists of an
// unknown window are dropped and counted.
func TestTrendingDropsStrays(t *testing.T) {
	g := newTrendRig(t, 2)
	var in0, in1 string
	for i := 0; in0 == "" || in1 == ""; i++ {
		id := fmt.Sprint("id-", i)
		if partial.PartitionOf(id, 2) == 0 {
			in0 = id
		} else {
			in1 = id
		}
	}
	g.send("us-1", 1, "us", minuteM, nil,
		list("5m", 0, item(in0, 10, 0), item(in1, 20, 0)),
		partial.TopList{Counter: "view", Window: "10m", Items: []partial.TopItem{item(in0, 1, 0)}})
	us, _ := g.rows("us", "view", "5m")
	wantItems(t, "us", us, []engagement.TrendingItem{ti(in0, 10, 0)})
	s := g.r.TrendingStats()
	if s.BadItems.Load() != 1 || s.BadLists.Load() != 1 || s.Lists.Load() != 1 {
		t.Errorf("bad items %d, bad lists %d, lists %d; want 1, 1, 1", s.BadItems.Load(), s.BadLists.Load(), s.Lists.Load())
	}
}

// TestTrendingWritesEveryInterval: the partition's writer stores its lists
// by itself Interval after the first message counted since its last
// write, with every message counted meanwhile (not at the first one: the
// other regions' messages of the same flush would wait a whole Interval).
func TestTrendingWritesEveryInterval(t *testing.T) {
	st := embeddedtest.Open(t, embedded.Config{Timeout: time.Second})
	now := minuteM.Add(-2 * time.Minute)
	r := rollup.New(st, func() time.Time { return now }, nil)
	if err := r.EnableTrending(rollup.TrendingConfig{Partitions: 1, Interval: 10 * time.Second}, st); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	send := func(seq uint64, count int64) { sendX(t, r, seq, now, count) }
	read := func() []engagement.TrendingItem { r.WaitTrendingWrites(); return storedX(t, st) }
	send(1, 5) // starts the interval
	wantItems(t, "after the first message", read(), nil)
	now = now.Add(9 * time.Second)
	send(2, 6)
	wantItems(t, "within the interval", read(), nil)
	now = now.Add(time.Second)
	send(3, 7)
	wantItems(t, "after the interval", read(), []engagement.TrendingItem{ti("x", 7, 0)})
	if got := r.TrendingStats().RowsWritten.Load(); got != 2 { // us and global (read waited for the writer)
		t.Errorf("rows written = %d, want 2", got)
	}
	if got := r.TrendingStats().StatesWritten.Load(); got != 1 {
		t.Errorf("states written = %d, want 1, after the lists", got)
	}
	now = now.Add(5 * time.Second)
	send(4, 8)
	wantItems(t, "5 s into the next interval", read(), []engagement.TrendingItem{ti("x", 7, 0)})
	// A flush in two messages: the interval has passed at the first, but
	// its lists come with the second, so only the second writes.
	now = now.Add(10 * time.Second)
	b := &partial.Batch{Agent: "a", Region: "us", Epoch: 1, Seq: 5, FlushedAt: now, Sums: []partial.Sum{sum("x", 1)}, More: true}
	if err := r.Handle(ctx, 5, partial.Append(nil, b)); err != nil {
		t.Fatal(err)
	}
	wantItems(t, "after the first message of a flush", read(), []engagement.TrendingItem{ti("x", 7, 0)})
	send(6, 9)
	wantItems(t, "after its last message", read(), []engagement.TrendingItem{ti("x", 9, 0)})
}

// TestTrendingRestartDelaysExact: a rollup that starts after flushes a
// previous process may have counted does not claim exact counts for them:
// it counts exactly only from a minute after its start (plus clock skew),
// and answers from the agents' lists until then.
func TestTrendingRestartDelaysExact(t *testing.T) {
	st := embeddedtest.Open(t, embedded.Config{Timeout: time.Second})
	r := rollup.New(st, func() time.Time { return minute(3) }, nil) // started at minute 3
	if err := r.EnableTrending(rollup.TrendingConfig{Partitions: 1, Interval: time.Hour}, st); err != nil {
		t.Fatal(err)
	}
	g := &trendRig{t: t, r: r, st: st}
	// The backlog: listed at minute 0, sums every minute.
	g.send("us-1", 1, "us", minuteM, nil, list("5m", 0, item("x", 100, 100)))
	for k := 1; k <= 9; k++ {
		g.send("us-1", 1, "us", minute(k), []partial.Sum{sum("x", 1)}, list("5m", 0, item("x", 100, 100)))
	}
	// Exact from minute 5 (start 3 + 1 of skew, then the next minute):
	// minutes 5..9 are the 5m window at minute 9.
	us, _ := g.rows("us", "view", "5m")
	wantItems(t, "5m at minute 9", us, []engagement.TrendingItem{ti("x", 5, 0)})
	// At minute 8 it was not covered yet: only a lower bound.
	g2 := newTrendRig(t, 1)
	g2.r = rollup.New(g2.st, func() time.Time { return minute(3) }, nil)
	if err := g2.r.EnableTrending(rollup.TrendingConfig{Partitions: 1, Interval: time.Hour}, g2.st); err != nil {
		t.Fatal(err)
	}
	g2.send("us-1", 1, "us", minuteM, nil, list("5m", 0, item("x", 100, 100)))
	for k := 1; k <= 8; k++ {
		g2.send("us-1", 1, "us", minute(k), []partial.Sum{sum("x", 1)}, list("5m", 0, item("x", 100, 100)))
	}
	us, _ = g2.rows("us", "view", "5m")
	wantItems(t, "5m at minute 8", us, []engagement.TrendingItem{ti("x", 100, 100-4)})
}

// TestForgetTrending: a partition handed over and back starts afresh: its
// exact counts do not claim the minutes another owner applied.
func TestForgetTrending(t *testing.T) {
	g := newTrendRig(t, 1)
	g.send("us-1", 1, "us", minuteM, nil, list("5m", 0, item("x", 100, 100)))
	for k := 1; k <= 6; k++ {
		g.send("us-1", 1, "us", minute(k), []partial.Sum{sum("x", 1)}, list("5m", 0, item("x", 100, 100)))
	}
	us, _ := g.rows("us", "view", "5m")
	wantItems(t, "before the handover", us, []engagement.TrendingItem{ti("x", 5, 0)})
	g.r.ForgetTrending(0)
	if got := g.r.TrendingStats().Candidates.Load(); got != 0 {
		t.Errorf("candidates after ForgetTrending = %d, want 0", got)
	}
	// Another rollup applied minutes 7 and 8; p comes back at minute 9.
	g.send("us-1", 1, "us", minute(9), []partial.Sum{sum("x", 1)}, list("5m", 0, item("x", 100, 100)))
	us, _ = g.rows("us", "view", "5m")
	wantItems(t, "after the handover", us, []engagement.TrendingItem{ti("x", 100, 100)})
}

// TestTrendingIgnoresFutureFlushes: a message flushed far ahead of the
// rollup's clock (an agent clock that jumped) does not move the
// partition's current minute, so the real lists stay in their windows.
func TestTrendingIgnoresFutureFlushes(t *testing.T) {
	g := newTrendRig(t, 1)
	g.r = rollup.New(g.st, func() time.Time { return minuteM }, nil)
	if err := g.r.EnableTrending(rollup.TrendingConfig{Partitions: 1, Interval: time.Hour}, g.st); err != nil {
		t.Fatal(err)
	}
	g.send("us-1", 1, "us", minuteM, nil, list("5m", 0, item("x", 10, 0)))
	g.send("us-2", 1, "us", minuteM.Add(48*time.Hour), []partial.Sum{sum("y", 1)}, list("5m", 0, item("y", 99, 0)))
	g.send("us-1", 1, "us", minute(1), nil, list("5m", 0, item("x", 12, 0)))
	us, _ := g.rows("us", "view", "5m")
	wantItems(t, "5m after a message from two days ahead", us, []engagement.TrendingItem{ti("x", 12, 0)})
	if got := g.r.TrendingStats().FutureSkips.Load(); got != 1 {
		t.Errorf("future skips = %d, want 1", got)
	}
}

// failingTrending is the real store with PutTrending refused while fail
// is set.
type failingTrending struct {
	*embedded.Store
	fail bool
}

func (f *failingTrending) PutTrending(ctx context.Context, tr engagement.Trending) error {
	if f.fail {
		return errors.New("store down")
	}
	return f.Store.PutTrending(ctx, tr)
}

// TestTrendingRewritesFailedRows: a list that went empty while its store
// write failed is written (empty) by the next write, so the store does not
// keep the old list.
func TestTrendingRewritesFailedRows(t *testing.T) {
	g := newTrendRig(t, 1)
	fs := &failingTrending{Store: g.st}
	g.r = rollup.New(g.st, g.now, nil)
	if err := g.r.EnableTrending(rollup.TrendingConfig{Partitions: 1, Interval: time.Hour}, fs); err != nil {
		t.Fatal(err)
	}
	g.send("us-1", 1, "us", minuteM, nil, list("5m", 0, item("x", 10, 0)))
	us, _ := g.rows("us", "view", "5m")
	wantItems(t, "5m", us, []engagement.TrendingItem{ti("x", 10, 0)})
	g.send("us-1", 1, "us", minuteM.Add(time.Second), nil, list("5m", 0)) // nothing any more
	fs.fail = true
	if err := g.r.WriteTrending(context.Background()); err == nil {
		t.Fatal("WriteTrending with the store down: no error")
	}
	fs.fail = false
	us, _ = g.rows("us", "view", "5m")
	wantItems(t, "5m after a failed write and a good one", us, nil)
}

// TestRunTrendingWritesQuietPartitions: the last lists before a quiet
// spell are stored by RunTrending once Interval has passed, without
// waiting for another message; a partition handed away is not written.
func TestRunTrendingWritesQuietPartitions(t *testing.T) {
	st := embeddedtest.Open(t, embedded.Config{Timeout: time.Second})
	r := rollup.New(st, nil, nil)
	if err := r.EnableTrending(rollup.TrendingConfig{Partitions: 1, Interval: 100 * time.Millisecond}, st); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.RunTrending(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	send := func(seq uint64, count int64) { sendX(t, r, seq, time.Now(), count) }
	read := func() []engagement.TrendingItem { return storedX(t, st) }
	waitList := func(what string, want []engagement.TrendingItem) {
		t.Helper()
		testenv.Eventually(t, 10*time.Second, fmt.Sprintf("list %v %s", want, what), func() (string, bool) {
			got := read()
			return fmt.Sprintf("list %v", got), slices.Equal(got, want)
		})
	}
	send(1, 5) // written at once
	send(2, 6) // within the interval: left for RunTrending
	waitList("after a quiet interval", []engagement.TrendingItem{ti("x", 6, 0)})

	r.ForgetTrending(0)
	if err := st.PutTrending(ctx, engagement.Trending{TrendingKey: engagement.TrendingKey{Scope: "us", Counter: "view", Window: "5m"},
		AsOf: time.Now(), Items: []engagement.TrendingItem{ti("y", 1, 0)}}); err != nil { // the next owner's list
		t.Fatal(err)
	}
	if err := r.WriteTrending(ctx); err != nil {
		t.Fatal(err)
	}
	// Two passes of RunTrending that end after this point: the second one
	// began after the partition was handed away.
	passes := rollup.TrendingPasses(r)
	testenv.Eventually(t, 30*time.Second, "two passes of RunTrending", testenv.Until(func() bool { return rollup.TrendingPasses(r) >= passes+2 }))
	wantItems(t, "a partition handed away", read(), []engagement.TrendingItem{ti("y", 1, 0)})
}

// blockingTrending is the real store whose PutTrending waits for release
// while blocked is set, like a frozen database.
type blockingTrending struct {
	*embedded.Store
	blocked atomic.Bool
	entered chan struct{}
	release chan struct{}
}

func (b *blockingTrending) PutTrending(ctx context.Context, tr engagement.Trending) error {
	if b.blocked.Load() {
		select {
		case b.entered <- struct{}{}:
		default:
		}
		<-b.release
	}
	return b.Store.PutTrending(ctx, tr)
}

// TestTrendingStoreNeverHoldsUpApply: while a store of a partition's lists
// hangs (a frozen database), messages of that partition are still applied.
func TestTrendingStoreNeverHoldsUpApply(t *testing.T) {
	g := newTrendRig(t, 1)
	bs := &blockingTrending{Store: g.st, entered: make(chan struct{}, 1), release: make(chan struct{})}
	g.r = rollup.New(g.st, g.now, nil)
	if err := g.r.EnableTrending(rollup.TrendingConfig{Partitions: 1, Interval: time.Hour}, bs); err != nil {
		t.Fatal(err)
	}
	g.send("us-1", 1, "us", minuteM, nil, list("5m", 0, item("x", 10, 0))) // written at once
	bs.blocked.Store(true)
	done := make(chan error, 1)
	go func() { done <- g.r.WriteTrending(context.Background()) }()
	<-bs.entered // the store hangs in the middle of the lists
	applied := make(chan struct{})
	go func() {
		defer close(applied)
		g.send("us-1", 1, "us", minuteM.Add(time.Second), []partial.Sum{sum("x", 1)}, list("5m", 0, item("x", 11, 0)))
	}()
	select {
	case <-applied:
	case <-time.After(10 * time.Second):
		t.Error("a message was not applied while the trending store hung")
	}
	bs.blocked.Store(false)
	close(bs.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	<-applied
	us, _ := g.rows("us", "view", "5m")
	wantItems(t, "5m after the store came back", us, []engagement.TrendingItem{ti("x", 11, 0)})
}

// dueRig is a rollup with trending over one partition (Interval 1 s) on
// a real embedded store whose list stores can be made to hang (bs), and
// its clock: next moves it 2 s on and returns it, so every message sent at
// that time finds the partition due (Interval after the first message
// counted since its last lists).
func dueRig(t *testing.T) (st *embedded.Store, bs *blockingTrending, r *rollup.Rollup, next func() time.Time) {
	st = embeddedtest.Open(t, embedded.Config{Timeout: time.Second})
	bs = &blockingTrending{Store: st, entered: make(chan struct{}, 1), release: make(chan struct{})}
	var mu sync.Mutex
	now := minuteM.Add(-2 * time.Minute)
	r = rollup.New(st, func() time.Time { mu.Lock(); defer mu.Unlock(); return now }, nil)
	if err := r.EnableTrending(rollup.TrendingConfig{Partitions: 1, Interval: time.Second}, bs); err != nil {
		t.Fatal(err)
	}
	return st, bs, r, func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(2 * time.Second)
		return now
	}
}

// TestTrendingDueWriteNeverHoldsUpApply: the store of the lists a message
// makes due runs beside the apply: while it hangs (a store slowed down or
// just restarted), later messages of the partition are applied at once, and
// once it returns the newest lists are stored, the ones computed meanwhile
// superseded without a store of their own.
func TestTrendingDueWriteNeverHoldsUpApply(t *testing.T) {
	st, bs, r, next := dueRig(t)
	send := func(seq uint64, count int64) { sendX(t, r, seq, next(), count) }
	send(1, 5) // starts the interval
	bs.blocked.Store(true)
	applied := make(chan struct{})
	go func() {
		defer close(applied)
		for seq := uint64(2); seq <= 10; seq++ { // 2 is due: its store hangs
			send(seq, int64(seq)+4)
		}
	}()
	select {
	case <-bs.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the due lists were not stored")
	}
	select {
	case <-applied:
	case <-time.After(10 * time.Second):
		t.Error("messages were not applied while the store of the lists hung")
	}
	written := r.TrendingStats().RowsWritten.Load()
	bs.blocked.Store(false)
	close(bs.release)
	<-applied
	r.WaitTrendingWrites()
	wantItems(t, "after the store came back", storedX(t, st), []engagement.TrendingItem{ti("x", 14, 0)})
	// The hung set (us and global) and the newest one: the sets computed
	// while it hung were superseded.
	if got := r.TrendingStats().RowsWritten.Load() - written; got != 4 {
		t.Errorf("rows written after the store came back = %d, want 4 (2 sets of 2)", got)
	}
}

// TestTrendingSupersededEmptyListStored: a set of lists superseded while
// the background writer was busy is not stored itself, but a list only it
// emptied still is: the store never keeps a list the rollup no longer has.
func TestTrendingSupersededEmptyListStored(t *testing.T) {
	st, bs, r, next := dueRig(t)
	send := func(seq uint64, tops ...partial.TopList) {
		b := &partial.Batch{Agent: "a", Region: "us", Epoch: 1, Seq: seq, FlushedAt: next(), Sums: []partial.Sum{sum("y", 1)}, Tops: tops}
		b.Sums[0].Region = "us"
		if err := r.Handle(context.Background(), seq, partial.Append(nil, b)); err != nil {
			t.Fatal(err)
		}
	}
	send(1, list("5m", 0, item("x", 5, 0))) // starts the interval
	bs.blocked.Store(true)
	send(2, list("5m", 0, item("x", 6, 0))) // due: its store hangs
	<-bs.entered
	// A message makes the partition due Interval after the first one
	// counted since the last lists: each second message below is due.
	send(3, list("5m", 0)) // the list empties
	send(4)                // due: the lists with it emptied, handed, waiting
	send(5)
	send(6) // due: handed too, superseding them; the emptied list is not in it
	bs.blocked.Store(false)
	close(bs.release)
	r.WaitTrendingWrites()
	wantItems(t, "us 5m after the writer caught up", storedX(t, st), nil)
}
