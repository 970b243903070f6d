package region_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/region"
	"github.com/edgecount/edgecount/store/embedded"
	"github.com/edgecount/edgecount/store/embedded/embeddedtest"
)

// countingStore counts the totals reads that reach a real embedded store.
type countingStore struct {
	*embedded.Store
	reads atomic.Int64
	// during, if set, runs inside a read, after the store answered.
	during func()
}

func (s *countingStore) ReadStats(ctx context.Context, ids []string) (map[string][]engagement.Stats, error) {
	s.reads.Add(1)
	got, err := s.Store.ReadStats(ctx, ids)
	if s.during != nil {
		s.during()
	}
	return got, err
}

func newCacheAgent(t *testing.T, ttl time.Duration, entries int) (*region.Agent, *countingStore) {
	t.Helper()
	st := &countingStore{Store: embeddedtest.Open(t, embedded.Config{Timeout: time.Second})}
	cfg := region.DefaultConfig("us", "us-a1")
	cfg.CacheTTL, cfg.CacheEntries = ttl, entries
	a, err := region.New(cfg, region.Deps{Reactions: st, Stats: st, Publisher: newRecorder(t)})
	if err != nil {
		t.Fatal(err)
	}
	a.Start()
	t.Cleanup(func() { a.Stop(context.Background()) })
	return a, st
}

// newBenchCacheAgent starts an agent on a real embedded store whose read
// cache holds items for an hour, and returns it with ids item-0 to
// item-(items-1), none read yet.
func newBenchCacheAgent(b *testing.B, items int) (*region.Agent, []string) {
	b.Helper()
	st := embeddedtest.Open(b, embedded.Config{Timeout: time.Second})
	cfg := region.DefaultConfig("us", "us-a1")
	cfg.CacheTTL, cfg.CacheEntries = time.Hour, 2*items
	a, err := region.New(cfg, region.Deps{Reactions: st, Stats: st, Publisher: nopPublisher{}})
	if err != nil {
		b.Fatal(err)
	}
	a.Start()
	b.Cleanup(func() { a.Stop(context.Background()) })
	ids := make([]string, items)
	for i := range ids {
		ids[i] = fmt.Sprintf("item-%d", i)
	}
	return a, ids
}

func likes(t *testing.T, a *region.Agent, id, scope string) int64 {
	t.Helper()
	got, err := a.Counts(context.Background(), []string{id})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range got[id] {
		if r.Scope == scope {
			return r.Likes
		}
	}
	return -1
}

// TestPushUpdatesWarmItems: a warm item takes the rows the rollup pushes
// without a store read; an older or repeated push changes nothing; an item
// nobody read is not made warm by a push.
func TestPushUpdatesWarmItems(t *testing.T) {
	a, st := newCacheAgent(t, time.Hour, 1000)
	ctx := context.Background()
	at := time.Now()
	g := engagement.Stats{ContentID: "v", Scope: engagement.GlobalScope, Likes: 3, LastSeq: 10, UpdatedAt: at}
	if err := st.WriteStats(ctx, []engagement.Stats{g}); err != nil {
		t.Fatal(err)
	}
	if got := likes(t, a, "v", engagement.GlobalScope); got != 3 {
		t.Fatalf("likes = %d, want 3", got)
	}
	reads := st.reads.Load()

	newer := g
	newer.Likes, newer.LastSeq = 5, 11
	eu := engagement.Stats{ContentID: "v", Scope: "eu", Likes: 2, LastSeq: 11, UpdatedAt: at}
	if n := a.ApplyRows(time.Now(), []engagement.Stats{newer, eu, {ContentID: "cold", Scope: engagement.GlobalScope, Likes: 9, LastSeq: 11}}); n != 2 {
		t.Fatalf("ApplyRows = %d, want 2 (the cold item is not warm)", n)
	}
	if got := likes(t, a, "v", engagement.GlobalScope); got != 5 {
		t.Fatalf("likes after push = %d, want 5", got)
	}
	if got := likes(t, a, "v", "eu"); got != 2 {
		t.Fatalf("eu likes after push = %d, want 2", got)
	}
	if n := a.ApplyRows(time.Now(), []engagement.Stats{g, newer}); n != 0 { // late and repeated
		t.Fatalf("ApplyRows of old rows = %d, want 0", n)
	}
	if got := likes(t, a, "v", engagement.GlobalScope); got != 5 {
		t.Fatalf("likes after an old push = %d, want 5", got)
	}
	if got := st.reads.Load(); got != reads {
		t.Fatalf("store reads = %d, want %d: a warm item reads no store", got, reads)
	}
	if s := a.ReadCacheStats(); s.Items != 1 || s.Pushes != 2 || s.PushRows != 5 || s.PushRowsApplied != 2 {
		t.Fatalf("ReadCacheStats = %+v, want 1 item, 2 pushes of 5 rows, 2 applied", s)
	}
	st.reads.Store(0)
	if _, err := a.Counts(ctx, []string{"cold"}); err != nil || st.reads.Load() != 1 {
		t.Fatalf("cold item: %v, %d store reads, want 1", err, st.reads.Load())
	}
}

// TestPushDuringMissIsKept: a push that lands while the first read of an
// item is at the store (which answered with the rows before the write) is
// not lost to the older answer.
func TestPushDuringMissIsKept(t *testing.T) {
	a, st := newCacheAgent(t, time.Hour, 1000)
	ctx := context.Background()
	old := engagement.Stats{ContentID: "v", Scope: engagement.GlobalScope, Likes: 1, LastSeq: 4, UpdatedAt: time.Now()}
	if err := st.WriteStats(ctx, []engagement.Stats{old}); err != nil {
		t.Fatal(err)
	}
	pushed := old
	pushed.Likes, pushed.LastSeq = 2, 5
	st.during = func() {
		st.during = nil
		a.ApplyRows(time.Now(), []engagement.Stats{pushed})
	}
	if got := likes(t, a, "v", engagement.GlobalScope); got != 2 {
		t.Fatalf("likes = %d, want 2 (the push beats the older store answer)", got)
	}
	if got := likes(t, a, "v", engagement.GlobalScope); got != 2 {
		t.Fatalf("warm likes = %d, want 2", got)
	}
}

// TestWarmItemRefreshedWithinTTL: with every push lost, a warm item is
// read from the store again once its last read is older than the TTL.
func TestWarmItemRefreshedWithinTTL(t *testing.T) {
	const ttl = 50 * time.Millisecond
	a, st := newCacheAgent(t, ttl, 1000)
	ctx := context.Background()
	row := engagement.Stats{ContentID: "v", Scope: engagement.GlobalScope, Likes: 1, LastSeq: 1, UpdatedAt: time.Now()}
	if err := st.WriteStats(ctx, []engagement.Stats{row}); err != nil {
		t.Fatal(err)
	}
	likes(t, a, "v", engagement.GlobalScope)
	row.Likes, row.LastSeq = 7, 2
	if err := st.WriteStats(ctx, []engagement.Stats{row}); err != nil { // its push is lost
		t.Fatal(err)
	}
	written := time.Now()
	for likes(t, a, "v", engagement.GlobalScope) != 7 {
		if time.Since(written) > 20*ttl {
			t.Fatalf("warm item still stale %v after the write, TTL %v", time.Since(written), ttl)
		}
		time.Sleep(time.Millisecond)
	}
	if d := time.Since(written); d > ttl+30*time.Millisecond {
		t.Errorf("stale for %v, want within the TTL %v (and a read)", d, ttl)
	}
}

// TestCacheStaysBounded: reads of many more items than the limit keep the
// cache near it, evicting items not read since the last sweep first.
func TestCacheStaysBounded(t *testing.T) {
	a, _ := newCacheAgent(t, time.Hour, 100)
	ctx := context.Background()
	for i := range 1000 {
		if _, err := a.Counts(ctx, []string{fmt.Sprintf("item-%d", i), "hot"}); err != nil {
			t.Fatal(err)
		}
	}
	s := a.ReadCacheStats()
	if s.Items > 100 || s.Evicted < 900 {
		t.Fatalf("ReadCacheStats = %+v, want at most 100 items and 900 evicted", s)
	}
	var dst [1][]engagement.Stats
	if !a.WarmCounts([]string{"hot"}, dst[:]) {
		t.Fatal("the item read every time was evicted")
	}
}

// BenchmarkWarmRead measures a read of a warm item (WarmCounts): no lock,
// no store, 0 allocs/op. The parallel variant reads while other goroutines
// increment and apply pushes to the same items, beside the old cache's
// mutex-guarded map as the peer (the previous cache's shape: a clock read
// and a lookup under sync.Mutex per call).
//
//	go test -run '^$' -bench WarmRead -cpu 1,2 ./region/
func BenchmarkWarmRead(b *testing.B) {
	const items = 10_000
	a, ids := newBenchCacheAgent(b, items)
	rows := make([]engagement.Stats, items)
	for i := range ids {
		rows[i] = engagement.Stats{ContentID: ids[i], Scope: engagement.GlobalScope, Likes: 1, LastSeq: 1}
	}
	if _, err := a.Counts(context.Background(), ids); err != nil {
		b.Fatal(err)
	}
	a.ApplyRows(time.Now(), rows)
	b.Run("warm", func(b *testing.B) {
		var dst [1][]engagement.Stats
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if !a.WarmCounts(ids[i%items:i%items+1], dst[:]) {
				b.Fatal("not warm")
			}
		}
	})
	b.Run("warm-parallel-with-writers", func(b *testing.B) {
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { // writers: increments and pushes of the same items
			defer wg.Done()
			seq := uint64(1)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if err := a.Increment(context.Background(), []region.Increment{{ContentID: ids[i%items], Counter: "view", Delta: 1}}); err != nil {
					b.Error(err)
					return
				}
				if i%100 == 0 {
					seq++
					for j := range rows[:100] {
						rows[j].LastSeq = seq
					}
					a.ApplyRows(time.Now(), append([]engagement.Stats(nil), rows[:100]...))
				}
			}
		}()
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			var dst [1][]engagement.Stats
			i := 0
			for pb.Next() {
				i++
				if !a.WarmCounts(ids[i%items:i%items+1], dst[:]) {
					b.Fatal("not warm")
				}
			}
		})
		b.StopTimer()
		close(stop)
		wg.Wait()
	})
	b.Run("peer-mutex-map-parallel", func(b *testing.B) {
		type entry struct {
			rows []engagement.Stats
			at   time.Time
		}
		var mu sync.Mutex
		m := make(map[string]entry, items)
		for i, id := range ids {
			m[id] = entry{rows[i : i+1], time.Now()}
		}
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				i++
				now := time.Now()
				mu.Lock()
				e, ok := m[ids[i%items]]
				mu.Unlock()
				if !ok || now.Sub(e.at) > time.Hour {
					b.Fatal("missing")
				}
			}
		})
	})
}
