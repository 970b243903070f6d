package region_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/internal/testenv"
	"github.com/edgecount/edgecount/region"
	"github.com/edgecount/edgecount/store/embedded"
	"github.com/edgecount/edgecount/store/embedded/embeddedtest"
	"github.com/edgecount/edgecount/wal"
)

// clock is a settable time source for the idempotency window.
type clock struct{ ns atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.ns.Store(time.Now().UnixNano())
	return c
}

func (c *clock) now() time.Time      { return time.Unix(0, c.ns.Load()) }
func (c *clock) add(d time.Duration) { c.ns.Add(int64(d)) }

// keyedAgent builds a recovered, started agent on dir (with a log) or in
// memory (dir ""), with the clock clk and the window and max keys given.
func keyedAgent(t *testing.T, dir string, st region.ReactionStore, stats region.StatsReader, pub region.Publisher, clk *clock, window time.Duration, maxKeys int) *region.Agent {
	t.Helper()
	cfg := region.DefaultConfig("us", "a1")
	var epoch uint64
	if dir != "" {
		id, err := region.LoadIdentity(dir, "", "us-test", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		cfg.AgentID, epoch = id.ID, id.Epoch
		cfg.Log = region.LogConfig{Durability: wal.Fsync, Dir: filepath.Join(dir, "log"), MaxBytes: 64 << 20}
	}
	cfg.FlushInterval = 10 * time.Millisecond
	cfg.PublishRetryMin, cfg.PublishRetryMax = time.Millisecond, 5*time.Millisecond
	cfg.Idempotency = region.IdempotencyConfig{Window: window, MaxKeys: maxKeys}
	a, err := region.New(cfg, region.Deps{Reactions: st, Stats: stats, Publisher: pub, Epoch: epoch, Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Recover(context.Background()); err != nil {
		a.Crash()
		t.Fatal(err)
	}
	a.Start()
	t.Cleanup(a.Crash)
	return a
}

func incs(content string, delta int64) []region.Increment {
	return []region.Increment{{ContentID: content, Counter: "view", Delta: delta}}
}

// once sends a keyed increment and checks its answer.
func once(t *testing.T, a *region.Agent, k region.IdempotencyKey, in []region.Increment, wantReplayed bool) {
	t.Helper()
	n, replayed, err := a.IncrementOnce(context.Background(), k, in)
	if err != nil {
		t.Fatalf("IncrementOnce(%q): %v", k.Key, err)
	}
	if n != len(in) || replayed != wantReplayed {
		t.Fatalf("IncrementOnce(%q) = %d, replayed %v; want %d, replayed %v", k.Key, n, replayed, len(in), wantReplayed)
	}
}

// counted waits until the broker's total of key is want, and checks that
// it stays there over a few more flushes.
func counted(t *testing.T, b *broker, key string, want int64) {
	t.Helper()
	testenv.Eventually(t, 5*time.Second, fmt.Sprintf("%s counted %d", key, want), func() (string, bool) {
		got := b.total(key)
		return fmt.Sprint(got), got >= want
	})
	time.Sleep(50 * time.Millisecond) // five flushes
	if got := b.total(key); got != want {
		t.Fatalf("%s counted %d, want %d", key, got, want)
	}
}

// TestIncrementOnceAppliesOnce: a retry is answered from the key and
// counted once; another body with the key is a conflict; another scope's
// key of the same name is a different key.
func TestIncrementOnceAppliesOnce(t *testing.T) {
	for _, mode := range []string{"memory", "fsync"} {
		t.Run(mode, func(t *testing.T) {
			dir := ""
			if mode == "fsync" {
				dir = t.TempDir()
			}
			st := embeddedtest.Open(t, embedded.Config{Timeout: time.Second})
			b := newBroker(t)
			a := keyedAgent(t, dir, st, st, b, newClock(), time.Hour, 1000)
			k := region.IdempotencyKey{Scope: "tenant-a", Key: "k1"}
			once(t, a, k, incs("v", 3), false)
			once(t, a, k, incs("v", 3), true)
			if _, _, err := a.IncrementOnce(context.Background(), k, incs("v", 4)); !errors.Is(err, region.ErrKeyConflict) {
				t.Fatalf("same key, other body: err %v, want ErrKeyConflict", err)
			}
			once(t, a, region.IdempotencyKey{Scope: "tenant-b", Key: "k1"}, incs("v", 3), false)
			counted(t, b, "v/view/us", 6)
			s := a.IdempotencyStats()
			if s.Keys.Load() != 2 || s.Hits.Load() != 1 || s.Conflicts.Load() != 1 {
				t.Errorf("keys %d hits %d conflicts %d; want 2 1 1", s.Keys.Load(), s.Hits.Load(), s.Conflicts.Load())
			}
		})
	}
}

// TestIdempotencyKeysSurviveACrash: keys are answered the same after the
// agent is killed (abandoned without a stop) and restarted on its data,
// both while they are in the intake log and once flushes have moved them
// to the keys log; the window's end lets the same key apply again.
func TestIdempotencyKeysSurviveACrash(t *testing.T) {
	dir := t.TempDir()
	st := embeddedtest.Open(t, embedded.Config{Timeout: time.Second})
	b := newBroker(t)
	clk := newClock()
	ctx := context.Background()
	a := keyedAgent(t, dir, st, st, b, clk, time.Hour, 1000)
	kInc := region.IdempotencyKey{Key: "inc-1"}
	kLike := region.IdempotencyKey{Key: "like-1"}
	kSame := region.IdempotencyKey{Key: "like-again"}
	once(t, a, kInc, incs("v", 3), false)
	first, replayed, err := a.ReactOnce(ctx, kLike, "u1", "r1", engagement.ActionLike)
	if err != nil || replayed || !first.Changed {
		t.Fatalf("first like = %+v, replayed %v, %v; want changed", first, replayed, err)
	}
	same, _, err := a.ReactOnce(ctx, kSame, "u1", "r1", engagement.ActionLike)
	if err != nil || same.Changed {
		t.Fatalf("repeated like = %+v, %v; want unchanged", same, err)
	}
	check := func(a *region.Agent, stage string) {
		t.Helper()
		once(t, a, kInc, incs("v", 3), true)
		if _, _, err := a.IncrementOnce(ctx, kInc, incs("v", 30)); !errors.Is(err, region.ErrKeyConflict) {
			t.Fatalf("%s: other body: %v, want ErrKeyConflict", stage, err)
		}
		for _, c := range []struct {
			k    region.IdempotencyKey
			want region.ReactResult
		}{{kLike, first}, {kSame, same}} {
			got, replayed, err := a.ReactOnce(ctx, c.k, "u1", "r1", engagement.ActionLike)
			if err != nil || !replayed || got != c.want {
				t.Fatalf("%s: retry %q = %+v, replayed %v, %v; want %+v replayed", stage, c.k.Key, got, replayed, err, c.want)
			}
		}
	}
	// Killed before any flush could truncate: the keys are in the intake
	// log, in the records of their writes.
	a.Crash()
	a = keyedAgent(t, dir, st, st, b, clk, time.Hour, 1000)
	check(a, "after a crash, keys in the intake log")
	// Flushes truncate the intake log: the keys move to the keys log.
	counted(t, b, "v/view/us", 3)
	testenv.Eventually(t, 5*time.Second, "the intake log truncated", testenv.Until(func() bool {
		s, _ := a.IntakeLogStats()
		return s.Unacknowledged == 0
	}))
	if a.IdempotencyKeysLogBytes() == 0 {
		t.Fatal("the keys log is empty after the intake log was truncated")
	}
	a.Crash()
	a = keyedAgent(t, dir, st, st, b, clk, time.Hour, 1000)
	check(a, "after a crash, keys in the keys log")
	counted(t, b, "v/view/us", 3)
	counted(t, b, "r1/like/us", 1)
	// Past the window, the key is new again.
	clk.add(time.Hour + time.Second)
	once(t, a, kInc, incs("v", 3), false)
	counted(t, b, "v/view/us", 6)
	if got := a.IdempotencyStats().Expired.Load(); got == 0 {
		t.Errorf("no key counted as expired")
	}
	a.Crash()
	// The expired keys are not restored: the new one is.
	a = keyedAgent(t, dir, st, st, b, clk, time.Hour, 1000)
	if got := a.IdempotencyStats().Keys.Load(); got != 1 {
		t.Errorf("keys restored after the window = %d, want 1", got)
	}
	once(t, a, kInc, incs("v", 3), true)
}

// TestKeyedReactionKilledInFlight: an agent killed while a keyed
// reaction's compare-and-set is in flight (applied, unanswered) settles
// it at the next start, and the retry gets the answer the first request
// would have had (changed), not the "unchanged" a fresh attempt would see.
func TestKeyedReactionKilledInFlight(t *testing.T) {
	dir := t.TempDir()
	st := embeddedtest.Open(t, embedded.Config{Timeout: time.Second})
	b := newBroker(t)
	clk := newClock()
	ss := &stallStore{Store: st, stalled: make(chan struct{}), release: make(chan struct{})}
	a := keyedAgent(t, dir, ss, st, b, clk, time.Hour, 1000)
	ctx := context.Background()
	k := region.IdempotencyKey{Key: "react-1"}
	ss.mu.Lock()
	ss.armed, ss.after = true, true
	ss.mu.Unlock()
	done := make(chan error, 1)
	go func() {
		_, _, err := a.ReactOnce(ctx, k, "u", "c", engagement.ActionDislike)
		done <- err
	}()
	<-ss.stalled
	time.Sleep(40 * time.Millisecond) // flushes carry the keyed intent over truncations
	a.Crash()
	ss.mu.Lock()
	ss.dead = true
	ss.mu.Unlock()
	close(ss.release)
	if err := <-done; err == nil {
		t.Fatal("the reaction whose agent was killed was acknowledged")
	}
	a = keyedAgent(t, dir, st, st, b, clk, time.Hour, 1000)
	got, replayed, err := a.ReactOnce(ctx, k, "u", "c", engagement.ActionDislike)
	want := region.ReactResult{Previous: engagement.ActionNone, Action: engagement.ActionDislike, Version: 1, Changed: true}
	if err != nil || !replayed || got != want {
		t.Fatalf("retry = %+v, replayed %v, %v; want %+v replayed", got, replayed, err, want)
	}
	counted(t, b, "c/dislike/us", 1)
}

// TestSameKeyInFlightWaits: a request whose key is in flight waits for the
// first and gets its answer; the write is applied once.
func TestSameKeyInFlightWaits(t *testing.T) {
	st := embeddedtest.Open(t, embedded.Config{Timeout: time.Second})
	b := newBroker(t)
	ss := &stallStore{Store: st, stalled: make(chan struct{}), release: make(chan struct{})}
	a := keyedAgent(t, t.TempDir(), ss, st, b, newClock(), time.Hour, 1000)
	ctx := context.Background()
	k := region.IdempotencyKey{Key: "both"}
	ss.mu.Lock()
	ss.armed, ss.after = true, true
	ss.mu.Unlock()
	type result struct {
		res      region.ReactResult
		replayed bool
		err      error
	}
	results := make(chan result, 4)
	go func() {
		r, rp, err := a.ReactOnce(ctx, k, "u", "c", engagement.ActionLike)
		results <- result{r, rp, err}
	}()
	<-ss.stalled
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, rp, err := a.ReactOnce(ctx, k, "u", "c", engagement.ActionLike)
			results <- result{r, rp, err}
		}()
	}
	testenv.Eventually(t, 5*time.Second, "3 requests waiting", func() (string, bool) {
		n := a.IdempotencyStats().Waits.Load()
		return fmt.Sprint(n, " waiting"), n == 3
	})
	// Another body with the key in flight is refused at once.
	if _, _, err := a.ReactOnce(ctx, k, "u", "c", engagement.ActionDislike); !errors.Is(err, region.ErrKeyConflict) {
		t.Fatalf("other body while in flight: %v, want ErrKeyConflict", err)
	}
	close(ss.release)
	wg.Wait()
	var firsts int
	for range 4 {
		r := <-results
		if r.err != nil || !r.res.Changed || r.res.Version != 1 {
			t.Fatalf("answer %+v, %v; want changed, version 1", r.res, r.err)
		}
		if !r.replayed {
			firsts++
		}
	}
	if firsts != 1 {
		t.Fatalf("%d requests applied the write, want 1", firsts)
	}
	counted(t, b, "c/like/us", 1)
}

// TestMaxKeysEvictsTheOldest: at MaxKeys the oldest key goes first; a
// retry with it is applied again, one with a newer key is not.
func TestMaxKeysEvictsTheOldest(t *testing.T) {
	st := embeddedtest.Open(t, embedded.Config{Timeout: time.Second})
	b := newBroker(t)
	dir := t.TempDir()
	clk := newClock()
	a := keyedAgent(t, dir, st, st, b, clk, time.Hour, 10)
	for i := range 15 {
		clk.add(time.Millisecond)
		once(t, a, region.IdempotencyKey{Key: fmt.Sprint("k", i)}, incs("v", 1), false)
	}
	s := a.IdempotencyStats()
	if s.Keys.Load() != 10 || s.Evicted.Load() != 5 {
		t.Fatalf("keys %d evicted %d, want 10 5", s.Keys.Load(), s.Evicted.Load())
	}
	if s.Bytes.Load() <= 0 {
		t.Errorf("key bytes %d, want > 0", s.Bytes.Load())
	}
	counted(t, b, "v/view/us", 15)
	// After a restart the bound holds as well.
	a.Crash()
	a = keyedAgent(t, dir, st, st, b, clk, time.Hour, 10)
	if got := a.IdempotencyStats().Keys.Load(); got != 10 {
		t.Errorf("keys after a restart %d, want 10", got)
	}
	once(t, a, region.IdempotencyKey{Key: "k14"}, incs("v", 1), true)
	once(t, a, region.IdempotencyKey{Key: "k0"}, incs("v", 1), false)
	counted(t, b, "v/view/us", 16)
}

func TestIdempotencyConfigValidate(t *testing.T) {
	for _, c := range []struct {
		cfg region.IdempotencyConfig
		ok  bool
	}{
		{region.DefaultIdempotencyConfig(), true},
		{region.IdempotencyConfig{Window: time.Second, MaxKeys: 1}, true},
		{region.IdempotencyConfig{Window: time.Millisecond, MaxKeys: 1}, false},
		{region.IdempotencyConfig{Window: time.Hour, MaxKeys: 0}, false},
		{region.IdempotencyConfig{Window: 31 * 24 * time.Hour, MaxKeys: 10}, false},
	} {
		if err := c.cfg.Validate(); (err == nil) != c.ok {
			t.Errorf("%+v: Validate() = %v, want ok %v", c.cfg, err, c.ok)
		}
	}
}

func TestValidIdempotencyKey(t *testing.T) {
	for _, c := range []struct {
		k  string
		ok bool
	}{
		{"a", true}, {"0f3c-9a1e-4b7d", true}, {"with space", true}, {string(make([]byte, 128)), false},
		{"", false}, {"é", false}, {"tab\t", false}, {"\x7f", false},
	} {
		if got := region.ValidIdempotencyKey(c.k); got != c.ok {
			t.Errorf("ValidIdempotencyKey(%q) = %v, want %v", c.k, got, c.ok)
		}
	}
	long := make([]byte, 129)
	for i := range long {
		long[i] = 'a'
	}
	if region.ValidIdempotencyKey(string(long[:128])) != true || region.ValidIdempotencyKey(string(long)) != false {
		t.Errorf("the bound is not 128 bytes")
	}
}
