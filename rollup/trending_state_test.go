package rollup_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/partial"
	"github.com/edgecount/edgecount/rollup"
	"github.com/edgecount/edgecount/store/embedded"
	"github.com/edgecount/edgecount/store/embedded/embeddedtest"
)

// handoverFeed is a reproducible stream of two agents' messages (us-1 in
// us, eu-1 in eu), one per agent per 30 s over minutes 0..13, each with
// its view sums of a few items and its cumulative lists of the three
// windows, as the agents' exact windows would give them (error 0). truth
// is what each region counted per minute.
type handoverFeed struct {
	msgs  []partial.Batch
	truth map[string]map[int]map[string]int64 // region → minute → item → count
}

func newHandoverFeed() *handoverFeed {
	f := &handoverFeed{truth: map[string]map[int]map[string]int64{}}
	agents := []struct{ agent, region string }{{"us-1", "us"}, {"eu-1", "eu"}}
	items := []string{"a", "b", "c", "d", "e", "f"}
	seq := map[string]uint64{}
	for half := range 28 {
		k := half / 2
		at := minuteM.Add(time.Duration(half) * 30 * time.Second)
		for ai, ag := range agents {
			if f.truth[ag.region] == nil {
				f.truth[ag.region] = map[int]map[string]int64{}
			}
			if f.truth[ag.region][k] == nil {
				f.truth[ag.region][k] = map[string]int64{}
			}
			var sums []partial.Sum
			for ii, id := range items {
				// Popularity shifts over time, and differs per region.
				d := int64((ii*7+half*3+ai*5)%11 + 1)
				if (ii+k+ai)%4 == 0 {
					continue
				}
				sums = append(sums, partial.Sum{ContentID: id, Counter: "view", Region: ag.region, Delta: d})
				f.truth[ag.region][k][id] += d
			}
			seq[ag.agent]++
			f.msgs = append(f.msgs, partial.Batch{Agent: ag.agent, Region: ag.region, Epoch: 1, Seq: seq[ag.agent], FlushedAt: at, Sums: sums})
			var tops []partial.TopList
			for _, w := range engagement.TrendingWindows() {
				counts := f.window(ag.region, w, clockMinute(at), len(f.msgs))
				var its []partial.TopItem
				for _, id := range slices.Sorted(maps.Keys(counts)) {
					if counts[id] > 0 {
						its = append(its, item(id, counts[id], 0))
					}
				}
				tops = append(tops, list(w, 0, its...))
			}
			f.msgs[len(f.msgs)-1].Tops = tops
		}
	}
	return f
}

// window returns region's (or, for GlobalScope, every region's) exact
// counts over window w at minute k, of the messages before index upTo.
func (f *handoverFeed) window(scope, w string, k int, upTo int) map[string]int64 {
	out := map[string]int64{}
	for _, b := range f.msgs[:upTo] {
		m := clockMinute(b.FlushedAt)
		if (scope != engagement.GlobalScope && b.Region != scope) ||
			(w == engagement.Window5m && m < k-4) || (w == engagement.Window1h && m < k-59) {
			continue
		}
		for _, s := range b.Sums {
			out[s.ContentID] += s.Delta
		}
	}
	return out
}

// clockMinute is the minute of at (the rollup's buckets) after the hour of
// the feed's start.
func clockMinute(at time.Time) int { return int(at.Sub(minuteM.Truncate(time.Hour)) / time.Minute) }

// handoverRollup is a rollup with trending over one partition on st,
// written by WriteTrending only; its clock follows the feed.
func handoverRollup(t *testing.T, st *embedded.Store, clock *time.Time) *rollup.Rollup {
	t.Helper()
	r := rollup.New(st, func() time.Time { return *clock }, nil)
	if err := r.EnableTrending(rollup.TrendingConfig{Partitions: 1, Interval: time.Hour}, st); err != nil {
		t.Fatal(err)
	}
	return r
}

// apply sends message i of the feed to r, under broker sequence i+1.
func (f *handoverFeed) apply(t *testing.T, r *rollup.Rollup, clock *time.Time, i int) {
	t.Helper()
	b := f.msgs[i]
	*clock = b.FlushedAt.Add(time.Second)
	if err := r.Handle(context.Background(), uint64(i+1), partial.Append(nil, &b)); err != nil {
		t.Fatalf("message %d: %v", i, err)
	}
}

// allLists writes r's lists and returns every stored list of st.
func allLists(t *testing.T, r *rollup.Rollup, st *embedded.Store) map[string]engagement.Trending {
	t.Helper()
	if err := r.WriteTrending(context.Background()); err != nil {
		t.Fatal(err)
	}
	out := map[string]engagement.Trending{}
	for _, scope := range []string{"us", "eu", engagement.GlobalScope} {
		for _, w := range engagement.TrendingWindows() {
			tr, ok, err := st.GetTrending(context.Background(), engagement.TrendingKey{Scope: scope, Counter: "view", Window: w})
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				out[scope+" "+w] = tr
			}
		}
	}
	return out
}

func sameList(a, b engagement.Trending) bool {
	return a.AsOf.Equal(b.AsOf) && slices.Equal(a.Items, b.Items)
}

// TestTrendingHandover: a rollup that takes a partition over from one that
// stopped (its lists and state written at the hand-back, as rollupd does)
// or that was dropped without a word right after its last periodic write
// (SIGKILL-like) goes on from the stored state: after every message from
// then on, its lists equal those of a reference rollup that applied the
// whole feed alone, from the first message on, not minutes later.
func TestTrendingHandover(t *testing.T) {
	f := newHandoverFeed()
	for _, tc := range []struct {
		name     string
		graceful bool // the old owner's last act is a WriteTrending
	}{{"stopped", true}, {"dropped after its last write", false}} {
		t.Run(tc.name, func(t *testing.T) {
			refStore := embeddedtest.Open(t, embedded.Config{Timeout: time.Second})
			var refClock, clock time.Time
			ref := handoverRollup(t, refStore, &refClock)
			st := embeddedtest.Open(t, embedded.Config{Timeout: time.Second})
			old := handoverRollup(t, st, &clock)
			const cut = 17 // minute 8
			for i := range f.msgs[:cut] {
				f.apply(t, ref, &refClock, i)
				f.apply(t, old, &clock, i)
				if !tc.graceful && i == cut-1 {
					allLists(t, old, st) // the periodic write; then the process is gone
				}
			}
			if tc.graceful {
				if err := old.WriteTrendingPartition(context.Background(), 0); err != nil {
					t.Fatal(err)
				}
				old.ForgetPartition(0)
			}
			next := handoverRollup(t, st, &clock)
			for i := cut; i < len(f.msgs); i++ {
				f.apply(t, ref, &refClock, i)
				f.apply(t, next, &clock, i)
				want, got := allLists(t, ref, refStore), allLists(t, next, st)
				if len(got) != len(want) {
					t.Fatalf("after message %d: %d lists, want %d", i, len(got), len(want))
				}
				for k, w := range want {
					if g := got[k]; !sameList(g, w) {
						t.Fatalf("after message %d: %s = %v as of %v\nwant %v as of %v", i, k, g.Items, g.AsOf, w.Items, w.AsOf)
					}
				}
			}
			s := next.TrendingStats()
			if s.StatesLoaded.Load() != 1 || s.StateGaps.Load() != 0 || s.StateLoadErrors.Load() != 0 {
				t.Errorf("states loaded %d, gaps %d, load errors %d; want 1, 0, 0", s.StatesLoaded.Load(), s.StateGaps.Load(), s.StateLoadErrors.Load())
			}
		})
	}
}

// TestTrendingHandoverAfterCrash: the old owner counted two messages after
// its last stored state and was then dropped (a crash between writes). The
// new owner sees from the marks that the state is behind what was applied
// and treats the minutes of the lost messages as a gap: every bound it
// stores holds against the exact counts (the lost sums are in no exact
// count any more, so no count claims to be exact over them), and once
// the 5m window has passed the gap its 5m lists equal the reference's
// again; the 1h and 24h lists still hold the gap and stay bounds.
func TestTrendingHandoverAfterCrash(t *testing.T) {
	f := newHandoverFeed()
	refStore := embeddedtest.Open(t, embedded.Config{Timeout: time.Second})
	var refClock, clock time.Time
	ref := handoverRollup(t, refStore, &refClock)
	st := embeddedtest.Open(t, embedded.Config{Timeout: time.Second})
	old := handoverRollup(t, st, &clock)
	const stored, crash = 13, 15 // state as of message 12 (minute 3); messages 13 and 14 (minute 3) lost
	for i := range f.msgs[:crash] {
		f.apply(t, ref, &refClock, i)
		f.apply(t, old, &clock, i)
		if i == stored-1 {
			allLists(t, old, st)
		}
	}
	next := handoverRollup(t, st, &clock)
	passed := 0 // 5m lists compared after the window passed the gap
	for i := crash; i < len(f.msgs); i++ {
		f.apply(t, ref, &refClock, i)
		f.apply(t, next, &clock, i)
		got, want := allLists(t, next, st), allLists(t, ref, refStore)
		// Until the stale agent runs have sent lists again, the store
		// holds the old owner's lists, as of message stored-1.
		upTo := stored
		if next.TrendingStats().RowsWritten.Load() > 0 {
			upTo = i + 1
		}
		for key, l := range got {
			var scope, w string
			fmt.Sscan(key, &scope, &w)
			k := clockMinute(l.AsOf)
			exact := f.window(scope, w, k, upTo)
			for _, it := range l.Items {
				if e := exact[it.ContentID]; e < it.Count-it.Error || e > it.Count {
					t.Errorf("after message %d: %s %q exact %d not in [%d, %d]", i, key, it.ContentID, e, it.Count-it.Error, it.Count)
				}
			}
			if w == engagement.Window5m && k-4 > 4 {
				passed++
			}
			if w == engagement.Window5m && k-4 > 4 && !sameList(l, want[key]) {
				t.Errorf("after message %d (minute %d): %s = %v\nwant %v (the 5m window has passed the gap)", i, k, key, l.Items, want[key].Items)
			}
		}
	}
	if passed == 0 {
		t.Error("no 5m list was compared after the window passed the gap")
	}
	if s := next.TrendingStats(); s.StatesLoaded.Load() != 1 || s.StateGaps.Load() != 1 {
		t.Errorf("states loaded %d, gaps %d; want 1, 1", s.StatesLoaded.Load(), s.StateGaps.Load())
	}
}
