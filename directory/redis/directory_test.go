package redis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/edgecount/edgecount/internal/testenv"
	"github.com/edgecount/edgecount/region"
)

// Directory must satisfy the interface the agent consumes.
var _ region.Directory = (*Directory)(nil)

// The hot-counter rule writes through it.
var _ region.ShardWriter = (*Directory)(nil)

// TestMissAnswersAtOnce holds every round trip to Redis in a hook and shows
// that Shards answers a miss with the default while its fetch is stuck,
// fetches a counter once however often it misses, and reports the fetched
// count through OnChange once the round trip completes.
func TestMissAnswersAtOnce(t *testing.T) {
	addr := redisAddr(t)
	reg := testRegion(t, addr)
	seed(t, addr, reg, "v1", "view", 8)
	rec := &recorder{}
	cfg := testConfig(addr, reg)
	cfg.DefaultShards = 2
	d, changes := open(t, cfg, rec)
	waitReady(t, d)

	entered, release := rec.holdAll()
	defer release()
	if got, want := d.Shards("v1", "view"), 2; got != want {
		t.Fatalf("Shards on a miss = %d, want the default %d", got, want)
	}
	<-entered // the fetch is now waiting inside its round trip
	for range 3 {
		if got, want := d.Shards("v1", "view"), 2; got != want {
			t.Fatalf("Shards while the fetch is held = %d, want the default %d", got, want)
		}
	}
	if s := d.Stats(); s.Misses != 4 || s.Hits != 0 || s.Dropped != 0 {
		t.Fatalf("while held: misses %d, hits %d, dropped %d; want 4, 0, 0", s.Misses, s.Hits, s.Dropped)
	}
	release()
	waitIdle(t, d)
	if got, want := changes.all(), []change{{"v1", "view", 8}}; !slices.Equal(got, want) {
		t.Fatalf("OnChange calls = %v, want %v", got, want)
	}
	if got, want := d.Shards("v1", "view"), 8; got != want {
		t.Fatalf("Shards after the fetch = %d, want %d", got, want)
	}
	// The item's counter set came with the fetch: another counter of the
	// same item is a hit, answered with the default.
	if got, want := d.Shards("v1", "like"), 2; got != want {
		t.Fatalf("Shards of a counter without an entry = %d, want %d", got, want)
	}
	if s := d.Stats(); s.Fetches != 1 || s.Hits != 2 {
		t.Fatalf("after the fetch: fetches %d, hits %d; want 1, 2", s.Fetches, s.Hits)
	}
}

// TestLookupsAndHits counts the commands the client sends: a miss costs
// one round trip carrying both lookups, and cached answers cost none.
func TestLookupsAndHits(t *testing.T) {
	addr := redisAddr(t)
	reg := testRegion(t, addr)
	seed(t, addr, reg, "v1", "share", 4)
	rec := &recorder{}
	d, _ := open(t, testConfig(addr, reg), rec)
	waitReady(t, d)
	// The first pipeline opens a connection (HELLO), once per connection.
	d.Shards("warm-up", "share")
	waitIdle(t, d)

	before := rec.count()
	d.Shards("v1", "share")
	waitIdle(t, d)
	got := rec.since(before)
	want := [][]string{{"multi", "smembers", "hget", "exec"}}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("round trips for one miss = %q, want %q", got, want)
	}

	before = rec.count()
	hits := d.Stats().Hits
	const n = 1000
	for i := range n {
		counter := []string{"share", "view", "like"}[i%3]
		want := 1
		if counter == "share" {
			want = 4
		}
		if got := d.Shards("v1", counter); got != want {
			t.Fatalf("Shards(v1, %s) = %d, want %d", counter, got, want)
		}
	}
	if got := rec.since(before); len(got) != 0 {
		t.Fatalf("cached answers sent %d round trips (%q), want none", len(got), got)
	}
	if got := d.Stats().Hits - hits; got != n {
		t.Fatalf("hits = %d, want %d", got, n)
	}
}

// TestChangeReachesOtherAgents runs two directories of one region, as two
// agents would, and changes entries through each: the other one answers the
// new count and reports it to OnChange within one second.
func TestChangeReachesOtherAgents(t *testing.T) {
	addr := redisAddr(t)
	reg := testRegion(t, addr)
	a, aChanges := open(t, testConfig(addr, reg))
	b, bChanges := open(t, testConfig(addr, reg))
	waitReady(t, a)
	waitReady(t, b)
	// b has served the default for v1/view and cached that.
	if got := b.Shards("v1", "view"); got != 1 {
		t.Fatalf("b.Shards before any Set = %d, want 1", got)
	}
	waitIdle(t, b)

	ctx := context.Background()
	steps := []struct {
		name           string
		from           *Directory
		fromLog, toLog *changeLog
		do             func(d *Directory) error
		want           change
	}{
		{"a sets, b sees", a, aChanges, bChanges, func(d *Directory) error { return d.Set(ctx, "v1", "view", 16) }, change{"v1", "view", 16}},
		{"b sets, a sees", b, bChanges, aChanges, func(d *Directory) error { return d.Set(ctx, "v1", "view", 4) }, change{"v1", "view", 4}},
		{"a deletes, b falls back to the default", a, aChanges, bChanges, func(d *Directory) error { return d.Delete(ctx, "v1", "view") }, change{"v1", "view", 1}},
		{"b sets a counter a never asked for", b, bChanges, aChanges, func(d *Directory) error { return d.Set(ctx, "v2", "share", 8) }, change{"v2", "share", 8}},
	}
	for _, st := range steps {
		start := time.Now()
		if err := st.do(st.from); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		// The other agent, as the issue demands, within one second.
		testenv.Eventually(t, time.Second, st.name, testenv.Until(func() bool { return st.toLog.has(st.want) }))
		t.Logf("%s: seen after %v", st.name, time.Since(start))
		// The setter re-reads its own change like everybody else.
		testenv.Eventually(t, time.Second, st.name+" (setter)", testenv.Until(func() bool { return st.fromLog.has(st.want) }))
		for _, d := range []*Directory{a, b} {
			if got := d.Shards(st.want.contentID, st.want.counter); got != st.want.shards {
				t.Fatalf("%s: Shards(%s, %s) = %d, want %d", st.name, st.want.contentID, st.want.counter, got, st.want.shards)
			}
		}
	}
	// Each directory reported each change exactly once, its own included,
	// even though each change reached it twice (its own invalidation and
	// the echo of the message).
	waitIdle(t, a)
	waitIdle(t, b)
	want := []change{{"v1", "view", 16}, {"v1", "view", 4}, {"v1", "view", 1}, {"v2", "share", 8}}
	for name, log := range map[string]*changeLog{"a": aChanges, "b": bChanges} {
		if got := log.all(); !slices.Equal(got, want) {
			t.Errorf("%s's OnChange calls = %v, want %v", name, got, want)
		}
	}
}

// TestRedisDown runs a Redis of the test's own and stops it. The directory
// keeps answering (cached entries, the default for the rest) and says it is
// unhealthy; when Redis is back it subscribes again and re-reads its cache,
// picking up the entries that changed while it could not hear about them.
func TestRedisDown(t *testing.T) {
	srv := startServer(t)
	addr := srv.addr()
	reg := "down"
	seed(t, addr, reg, "v1", "view", 6)
	cfg := testConfig(addr, reg)
	cfg.DefaultShards = 2
	d, changes := open(t, cfg)
	waitReady(t, d)
	d.Shards("v1", "view")
	testenv.Eventually(t, 5*time.Second, "v1/view to be fetched", testenv.Until(func() bool { return changes.has(change{"v1", "view", 6}) }))

	// Changes the directory does not hear about: no message is published.
	seed(t, addr, reg, "v1", "view", 9)
	seed(t, addr, reg, "v2", "like", 5)
	srv.shutdown()
	testenv.Eventually(t, 10*time.Second, "the directory to notice Redis is down", testenv.Until(func() bool { return !d.Healthy() }))
	if d.Stats().Up {
		t.Errorf("Stats().Up = true while Redis is down")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := d.Ping(ctx); err == nil {
		t.Errorf("Ping while Redis is down = nil, want an error")
	}
	if got, want := d.Shards("v1", "view"), 6; got != want {
		t.Errorf("Shards of a cached counter while down = %d, want %d", got, want)
	}
	if got, want := d.Shards("v2", "like"), 2; got != want {
		t.Errorf("Shards of an uncached counter while down = %d, want the default %d", got, want)
	}
	testenv.Eventually(t, 10*time.Second, "the miss's fetch to fail", fetchErrors(d))
	if got, want := d.Shards("v2", "like"), 2; got != want {
		t.Errorf("Shards after the failed fetch = %d, want the default %d", got, want)
	}

	srv.start()
	testenv.Eventually(t, 10*time.Second, "the directory to resubscribe", testenv.Until(d.Healthy))
	for _, c := range []change{{"v1", "view", 9}, {"v2", "like", 5}} {
		testenv.Eventually(t, 10*time.Second, fmt.Sprintf("the resync to report %v", c), testenv.Until(func() bool { return changes.has(c) }))
		if got := d.Shards(c.contentID, c.counter); got != c.shards {
			t.Errorf("Shards(%s, %s) after the resync = %d, want %d", c.contentID, c.counter, got, c.shards)
		}
	}
	if err := d.Ping(ctx); err != nil {
		t.Errorf("Ping after Redis is back: %v", err)
	}
	if s := d.Stats(); s.Resyncs < 2 || !s.Up {
		t.Errorf("after recovery: resyncs %d, up %v; want at least 2, true", s.Resyncs, s.Up)
	}
}

// TestUnreachable starts a directory on a port where nothing listens: it
// starts, answers defaults and reports the outage.
func TestUnreachable(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Addr = fmt.Sprintf("127.0.0.1:%d", freePort(t))
	cfg.DefaultShards = 3
	cfg.PingInterval = 50 * time.Millisecond
	d, _ := open(t, cfg)
	if got, want := d.Shards("v1", "view"), 3; got != want {
		t.Fatalf("Shards = %d, want the default %d", got, want)
	}
	testenv.Eventually(t, 10*time.Second, "a failed fetch", fetchErrors(d))
	if d.Healthy() {
		t.Errorf("Healthy() = true with nothing listening")
	}
	ctx := context.Background()
	if err := d.Ping(ctx); err == nil {
		t.Errorf("Ping = nil with nothing listening, want an error")
	}
	if err := d.Set(ctx, "v1", "view", 4); err == nil || errors.Is(err, ErrInvalid) {
		t.Errorf("Set with nothing listening = %v, want a connection error", err)
	}
	if got, want := d.Shards("v1", "view"), 3; got != want {
		t.Errorf("Shards after the failed fetch = %d, want the default %d", got, want)
	}
}

// TestQueueFull fills the miss queue while the only fetcher is held: the
// next miss is dropped and counted, repeated misses of queued counters are
// not, and everything queued is fetched once the fetcher is released.
func TestQueueFull(t *testing.T) {
	addr := redisAddr(t)
	reg := testRegion(t, addr)
	seed(t, addr, reg, "v2", "view", 5)
	rec := &recorder{}
	cfg := testConfig(addr, reg)
	cfg.QueueSize = 1
	cfg.Fetchers = 1
	d, changes := open(t, cfg, rec)
	waitReady(t, d)

	entered, release := rec.holdAll()
	defer release()
	d.Shards("v1", "view")
	<-entered // the fetcher holds v1 and the queue is empty
	d.Shards("v2", "view")
	d.Shards("v3", "view")
	if got := d.Stats().Dropped; got != 1 {
		t.Fatalf("dropped = %d after filling the queue, want 1", got)
	}
	d.Shards("v1", "view")
	d.Shards("v2", "view")
	if got := d.Stats().Dropped; got != 1 {
		t.Fatalf("dropped = %d after repeating queued misses, want still 1", got)
	}
	release()
	waitIdle(t, d)
	if got, want := changes.all(), []change{{"v2", "view", 5}}; !slices.Equal(got, want) {
		t.Fatalf("OnChange calls = %v, want %v", got, want)
	}
	hits := d.Stats().Hits
	d.Shards("v1", "view")
	d.Shards("v2", "view")
	if got := d.Stats().Hits - hits; got != 2 {
		t.Errorf("hits on the fetched counters = %d, want 2", got)
	}
	misses := d.Stats().Misses
	d.Shards("v3", "view")
	if got := d.Stats().Misses - misses; got != 1 {
		t.Errorf("misses on the dropped counter = %d, want 1 (it was never fetched)", got)
	}
}

// TestEvict checks what a refresh evicts: unused items without an explicit
// count go, used items and items with a count stay.
func TestEvict(t *testing.T) {
	addr := redisAddr(t)
	reg := testRegion(t, addr)
	seed(t, addr, reg, "hot", "view", 8)
	d, _ := open(t, testConfig(addr, reg))
	waitReady(t, d)
	for _, id := range []string{"hot", "cold", "warm"} {
		d.Shards(id, "view")
	}
	waitIdle(t, d)
	d.evict() // clears the used flags
	d.Shards("warm", "view")
	d.evict()
	var kept []string
	d.items.Range(func(k, _ any) bool {
		kept = append(kept, k.(string))
		return true
	})
	slices.Sort(kept)
	if want := []string{"hot", "warm"}; !slices.Equal(kept, want) {
		t.Errorf("cached items after two evictions = %q, want %q", kept, want)
	}
	if s := d.Stats(); s.Evicted != 1 || s.Items != 2 {
		t.Errorf("evicted %d, items %d; want 1, 2", s.Evicted, s.Items)
	}
	if got := d.Shards("hot", "view"); got != 8 {
		t.Errorf("Shards(hot, view) after eviction = %d, want 8", got)
	}
}

// TestConcurrent runs Shards from many goroutines against Sets from two
// directories; under -race it checks the locking, and at the end both
// directories answer the last value set for every counter.
func TestConcurrent(t *testing.T) {
	addr := redisAddr(t)
	reg := testRegion(t, addr)
	a, _ := open(t, testConfig(addr, reg))
	b, _ := open(t, testConfig(addr, reg))
	waitReady(t, a)
	waitReady(t, b)
	const items = 20
	ctx := context.Background()
	stop := make(chan struct{})
	var readers sync.WaitGroup
	for g := range 4 {
		readers.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				d := []*Directory{a, b}[g%2]
				if got := d.Shards(fmt.Sprintf("v%d", i%items), "view"); got < 1 {
					t.Errorf("Shards = %d, want at least 1", got)
					return
				}
			}
		})
	}
	var writers sync.WaitGroup
	for w, d := range []*Directory{a, b} {
		writers.Go(func() {
			for i := range items {
				if i%2 != w {
					continue
				}
				for n := 1; n <= 5; n++ {
					if err := d.Set(ctx, fmt.Sprintf("v%d", i), "view", n+i); err != nil {
						t.Errorf("Set: %v", err)
						return
					}
				}
			}
		})
	}
	writers.Wait()
	close(stop)
	readers.Wait()
	for _, d := range []*Directory{a, b} {
		for i := range items {
			id := fmt.Sprintf("v%d", i)
			testenv.Eventually(t, 5*time.Second, fmt.Sprintf("%s at %d shards", id, 5+i), func() (string, bool) {
				got := d.Shards(id, "view")
				return fmt.Sprintf("%d shards", got), got == 5+i
			})
		}
	}
}

func TestSetRejectsInvalid(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Addr = fmt.Sprintf("127.0.0.1:%d", freePort(t)) // never reached
	d, _ := open(t, cfg)
	tests := []struct {
		name, content, counter string
		shards                 int
	}{
		{"empty content", "", "view", 2},
		{"space in content", "v 1", "view", 2},
		{"slash in content", "v/1", "view", 2},
		{"upper-case counter", "v1", "View", 2},
		{"colon in counter", "v1", "vi:ew", 2},
		{"zero shards", "v1", "view", 0},
		{"too many shards", "v1", "view", MaxShards + 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := d.Set(context.Background(), tt.content, tt.counter, tt.shards)
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("Set(%q, %q, %d) = %v, want ErrInvalid", tt.content, tt.counter, tt.shards, err)
			}
			if tt.shards >= 1 && tt.shards <= MaxShards {
				if err := d.Delete(context.Background(), tt.content, tt.counter); !errors.Is(err, ErrInvalid) {
					t.Errorf("Delete(%q, %q) = %v, want ErrInvalid", tt.content, tt.counter, err)
				}
			}
		})
	}
}

// TestSetShards: the hot-counter rule's writes reach the region's other
// agents; 1 deletes the entry (back to the default), and a count above
// MaxShards is capped.
func TestSetShards(t *testing.T) {
	addr := redisAddr(t)
	reg := testRegion(t, addr)
	a, _ := open(t, testConfig(addr, reg))
	b, bChanges := open(t, testConfig(addr, reg))
	waitReady(t, a)
	waitReady(t, b)
	ctx := context.Background()
	for _, st := range []struct {
		name   string
		shards int
		want   int
	}{
		{"hot", 32, 32},
		{"capped", MaxShards + 100, MaxShards},
		{"cooled", 1, 1},
		{"hot again", 8, 8},
		{"cooled by zero", 0, 1},
	} {
		if err := a.SetShards(ctx, "v1", "like", st.shards); err != nil {
			t.Fatalf("%s: SetShards(%d): %v", st.name, st.shards, err)
		}
		testenv.Eventually(t, time.Second, st.name, testenv.Until(func() bool { return bChanges.has(change{"v1", "like", st.want}) && b.Shards("v1", "like") == st.want }))
	}
	raw := rawClient(addr)
	t.Cleanup(func() { raw.Close() })
	if n, err := raw.Exists(ctx, a.keys.counterKey("v1", "like")).Result(); err != nil || n != 0 {
		t.Fatalf("counter key after cooling: exists = %d, %v; want deleted", n, err)
	}
}
