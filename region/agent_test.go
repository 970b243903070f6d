package region_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/partial"
	"github.com/edgecount/edgecount/region"
	"github.com/edgecount/edgecount/store"
	"github.com/edgecount/edgecount/store/embedded"
	"github.com/edgecount/edgecount/store/embedded/embeddedtest"
)

// recorder is a Publisher that keeps what it was given, decoded. It can be
// told to fail or to block, standing in for a broker that is down.
type recorder struct {
	t       *testing.T
	mu      sync.Mutex
	ids     map[string]bool
	batches []partial.Batch
	calls   int
	failN   int           // fail this many calls first
	gate    chan struct{} // when non-nil, Publish waits for it
}

func newRecorder(t *testing.T) *recorder { return &recorder{t: t, ids: make(map[string]bool)} }

func (r *recorder) Publish(ctx context.Context, partition uint32, msgID string, data []byte) error {
	r.mu.Lock()
	gate := r.gate
	r.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	if r.failN > 0 {
		r.failN--
		return errors.New("broker down")
	}
	var b partial.Batch
	if err := partial.Decode(data, &b); err != nil {
		r.t.Errorf("published message does not decode: %v", err)
		return nil
	}
	if b.MsgID() != msgID || b.Partition != partition {
		r.t.Errorf("msg id %q partition %d, batch says %q %d", msgID, partition, b.MsgID(), b.Partition)
	}
	if r.ids[msgID] {
		r.t.Errorf("message %s published twice after success", msgID)
	}
	r.ids[msgID] = true
	for _, s := range b.Sums {
		if p := partial.PartitionOf(s.ContentID, 16); p != partition {
			r.t.Errorf("sum for %q in partition %d, want %d", s.ContentID, partition, p)
		}
	}
	r.batches = append(r.batches, b)
	return nil
}

// totals adds up everything published, by content/counter/region.
func (r *recorder) totals() map[string]int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]int64)
	for _, b := range r.batches {
		for _, s := range b.Sums {
			out[s.ContentID+"/"+s.Counter+"/"+s.Region] += s.Delta
		}
	}
	return out
}

func (r *recorder) seqs() []uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []uint64
	for _, b := range r.batches {
		out = append(out, b.Seq)
	}
	return out
}

func newAgent(t *testing.T, st *embedded.Store, pub region.Publisher, tweak func(*region.Config)) *region.Agent {
	t.Helper()
	cfg := region.DefaultConfig("us", "us-a1")
	cfg.FlushInterval = 20 * time.Millisecond
	cfg.PublishRetryMin = time.Millisecond
	cfg.PublishRetryMax = 5 * time.Millisecond
	if tweak != nil {
		tweak(&cfg)
	}
	a, err := region.New(cfg, region.Deps{Reactions: st, Stats: st, Publisher: pub})
	if err != nil {
		t.Fatal(err)
	}
	a.Start()
	t.Cleanup(func() { a.Stop(context.Background()) })
	return a
}

func stop(t *testing.T, a *region.Agent) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
}

func TestReactLifecycle(t *testing.T) {
	st := embeddedtest.Open(t, embedded.Config{Timeout: time.Second})
	rec := newRecorder(t)
	a := newAgent(t, st, rec, nil)
	ctx := context.Background()
	steps := []struct {
		action        engagement.Action
		prev          engagement.Action
		version       int64
		changed       bool
		likes, dislik int64 // published totals after this step
	}{
		{engagement.ActionLike, engagement.ActionNone, 1, true, 1, 0},
		{engagement.ActionLike, engagement.ActionLike, 1, false, 1, 0},
		{engagement.ActionDislike, engagement.ActionLike, 2, true, 0, 1},
		{engagement.ActionNone, engagement.ActionDislike, 0, true, 0, 0},
		{engagement.ActionNone, engagement.ActionNone, 0, false, 0, 0},
		{engagement.ActionDislike, engagement.ActionNone, 1, true, 0, 1},
	}
	var lastInc uint64
	for i, s := range steps {
		res, err := a.React(ctx, "u1", "v1", s.action)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		want := region.ReactResult{Previous: s.prev, Action: s.action, Version: s.version, Changed: s.changed}
		if res != want {
			t.Fatalf("step %d: React = %+v, want %+v", i, res, want)
		}
		row, found, err := st.GetReaction(ctx, "u1", "v1")
		if err != nil {
			t.Fatal(err)
		}
		if found != (s.action != engagement.ActionNone) || found && (row.Action != s.action || row.Version != s.version || row.Region != "us") {
			t.Fatalf("step %d: row = %+v found=%v", i, row, found)
		}
		if found && s.version == 1 && s.changed {
			if row.Incarnation == lastInc {
				t.Fatalf("step %d: re-created row reused incarnation %d", i, lastInc)
			}
			lastInc = row.Incarnation
		}
	}
	stop(t, a)
	got := rec.totals()
	if got["v1/like/us"] != 0 || got["v1/dislike/us"] != 1 {
		t.Fatalf("published totals = %v, want like 0, dislike 1", got)
	}
}

// TestUndoSubtractsFromRecordingRegion: a like recorded in eu and undone by
// an agent in us is subtracted from eu, so no regional total goes negative.
func TestUndoSubtractsFromRecordingRegion(t *testing.T) {
	st := embeddedtest.Open(t, embedded.Config{Timeout: time.Second})
	recEU, recUS := newRecorder(t), newRecorder(t)
	eu := newAgent(t, st, recEU, func(c *region.Config) { c.Region, c.AgentID = "eu", "eu-a1" })
	us := newAgent(t, st, recUS, nil)
	ctx := context.Background()
	if _, err := eu.React(ctx, "u", "v", engagement.ActionLike); err != nil {
		t.Fatal(err)
	}
	if _, err := us.React(ctx, "u", "v", engagement.ActionDislike); err != nil {
		t.Fatal(err)
	}
	stop(t, eu)
	stop(t, us)
	got := recEU.totals()
	for k, v := range recUS.totals() {
		got[k] += v
	}
	want := map[string]int64{"v/like/eu": 0, "v/dislike/us": 1}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %d, want %d (all: %v)", k, got[k], v, got)
		}
	}
	if got["v/like/us"] != 0 {
		t.Errorf("like was subtracted from us: %v", got)
	}
}

// TestConcurrentTogglesMatchFinalState: 50 goroutines toggle one user's
// reaction on one item; the published deltas add up to the final row.
func TestConcurrentTogglesMatchFinalState(t *testing.T) {
	st := embeddedtest.Open(t, embedded.Config{Timeout: time.Second})
	rec := newRecorder(t)
	a := newAgent(t, st, rec, func(c *region.Config) { c.ReactionAttempts = 1000 })
	ctx := context.Background()
	var wg sync.WaitGroup
	var changed atomic.Int64
	for g := 0; g < 50; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				action := engagement.Action(rand.IntN(3))
				res, err := a.React(ctx, "user", "item", action)
				if err != nil {
					t.Errorf("React: %v", err)
					return
				}
				if res.Changed {
					changed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	stop(t, a)
	row, found, err := st.GetReaction(ctx, "user", "item")
	if err != nil {
		t.Fatal(err)
	}
	var wantLikes, wantDislikes int64
	if found && row.Action == engagement.ActionLike {
		wantLikes = 1
	}
	if found && row.Action == engagement.ActionDislike {
		wantDislikes = 1
	}
	got := rec.totals()
	if got["item/like/us"] != wantLikes || got["item/dislike/us"] != wantDislikes {
		t.Fatalf("after %d changes: published likes %d dislikes %d, final row %+v (found %v)",
			changed.Load(), got["item/like/us"], got["item/dislike/us"], row, found)
	}
	if changed.Load() < 2 {
		t.Fatalf("only %d changes applied; the test did not exercise conflicts", changed.Load())
	}
}

// TestPublishRetriesInOrder: a broker that fails keeps the messages in the
// outbox; once it is back every sum arrives exactly once and in order.
func TestPublishRetriesInOrder(t *testing.T) {
	st := embeddedtest.Open(t, embedded.Config{Timeout: time.Second})
	rec := newRecorder(t)
	rec.failN = 25
	a := newAgent(t, st, rec, nil)
	ctx := context.Background()
	want := make(map[string]int64)
	for i := 0; i < 200; i++ {
		id := fmt.Sprintf("v%d", i%37)
		if err := a.Increment(ctx, []region.Increment{{ContentID: id, Counter: "view", Delta: int64(i + 1)}}); err != nil {
			t.Fatal(err)
		}
		want[id+"/view/us"] += int64(i + 1)
		if i%50 == 0 {
			time.Sleep(25 * time.Millisecond) // spread over several flushes
		}
	}
	stop(t, a)
	got := rec.totals()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %d, want %d", k, got[k], v)
		}
	}
	seqs := rec.seqs()
	for i := 1; i < len(seqs); i++ {
		if seqs[i] <= seqs[i-1] {
			t.Fatalf("published out of order: seqs %v", seqs)
		}
	}
	if errs := a.Stats().PublishErrors.Load(); errs != 25 {
		t.Fatalf("publish errors = %d, want 25", errs)
	}
}

// TestOutboxIsBounded: while the broker is stuck the outbox stops growing
// and flushes are deferred; nothing is lost when it recovers.
func TestOutboxIsBounded(t *testing.T) {
	st := embeddedtest.Open(t, embedded.Config{Timeout: time.Second})
	rec := newRecorder(t)
	rec.gate = make(chan struct{})
	a := newAgent(t, st, rec, func(c *region.Config) {
		c.MaxMessageBytes = 4 << 10
		c.OutboxBytes = 16 << 10
	})
	ctx := context.Background()
	var total int64
	deadline := time.Now().Add(10 * time.Second)
	for a.Stats().FlushesDeferred.Load() < 3 {
		if time.Now().After(deadline) {
			t.Fatal("flushes were never deferred")
		}
		batch := make([]region.Increment, 100)
		for i := range batch {
			batch[i] = region.Increment{ContentID: fmt.Sprintf("item-%d", rand.IntN(5000)), Counter: "view", Delta: 1}
		}
		if err := a.Increment(ctx, batch); err != nil {
			t.Fatal(err)
		}
		total += 100
		time.Sleep(2 * time.Millisecond)
	}
	// One flush may overshoot the bound before the next one is deferred.
	if got, limit := a.Stats().OutboxBytes.Load(), int64(16<<10)+int64(5000*64); got > limit {
		t.Fatalf("outbox holds %d bytes, bound %d", got, limit)
	}
	close(rec.gate)
	stop(t, a)
	var sum int64
	for _, v := range rec.totals() {
		sum += v
	}
	if sum != total {
		t.Fatalf("published %d increments, want %d", sum, total)
	}
	if got := a.Stats().OutboxBytes.Load(); got != 0 {
		t.Fatalf("outbox bytes after stop = %d, want 0", got)
	}
}

func TestStoppedAgentRefusesWrites(t *testing.T) {
	st := embeddedtest.Open(t, embedded.Config{Timeout: time.Second})
	a := newAgent(t, st, newRecorder(t), nil)
	stop(t, a)
	if err := a.Increment(context.Background(), []region.Increment{{ContentID: "v", Counter: "view", Delta: 1}}); !errors.Is(err, region.ErrStopping) {
		t.Fatalf("Increment after Stop = %v, want ErrStopping", err)
	}
	if _, err := a.React(context.Background(), "u", "v", engagement.ActionLike); !errors.Is(err, region.ErrStopping) {
		t.Fatalf("React after Stop = %v, want ErrStopping", err)
	}
}

func TestCountsReadThroughCache(t *testing.T) {
	st := embeddedtest.Open(t, embedded.Config{Timeout: time.Second})
	a := newAgent(t, st, newRecorder(t), func(c *region.Config) { c.CacheTTL = time.Hour })
	ctx := context.Background()
	row := engagement.Stats{ContentID: "v", Scope: engagement.GlobalScope, Likes: 3, UpdatedAt: time.Now(), LastSeq: 1}
	if err := st.WriteStats(ctx, []engagement.Stats{row}); err != nil {
		t.Fatal(err)
	}
	got, err := a.Counts(ctx, []string{"v", "missing"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got["v"]) != 1 || got["v"][0].Likes != 3 || got["missing"] != nil {
		t.Fatalf("Counts = %+v", got)
	}
	row.Likes = 4
	if err := st.WriteStats(ctx, []engagement.Stats{row}); err != nil {
		t.Fatal(err)
	}
	got, _ = a.Counts(ctx, []string{"v"})
	if got["v"][0].Likes != 3 {
		t.Fatalf("cached read = %d likes, want 3 (cache TTL 1h)", got["v"][0].Likes)
	}
	if h := a.Stats().CacheHits.Load(); h != 1 {
		t.Fatalf("cache hits = %d, want 1", h)
	}
}

// indexBehind wraps a store whose writes apply but report a follow-up
// failure, as the Cassandra store does when its by-content index lags.
type indexBehind struct{ *embedded.Store }

var errIndex = errors.New("by-content index behind")

func (s indexBehind) InsertReaction(ctx context.Context, r engagement.Reaction) (bool, error) {
	ok, err := s.Store.InsertReaction(ctx, r)
	if err != nil {
		return ok, err
	}
	return ok, errIndex
}

// TestAppliedWithErrorIsCounted: a write that applied is counted even when
// the store also reports an error, so the totals never miss a reaction
// whose row changed.
func TestAppliedWithErrorIsCounted(t *testing.T) {
	st := embeddedtest.Open(t, embedded.Config{Timeout: time.Second})
	rec := newRecorder(t)
	cfg := region.DefaultConfig("us", "us-a1")
	a, err := region.New(cfg, region.Deps{Reactions: indexBehind{st}, Stats: st, Publisher: rec})
	if err != nil {
		t.Fatal(err)
	}
	a.Start()
	res, err := a.React(context.Background(), "u", "v", engagement.ActionLike)
	if err != nil || !res.Changed || res.Version != 1 {
		t.Fatalf("React = %+v, %v; want changed v1 without error", res, err)
	}
	stop(t, a)
	if got := rec.totals()["v/like/us"]; got != 1 {
		t.Fatalf("published likes = %d, want 1", got)
	}
}

// staleLocal is a store whose GetReaction answers a snapshot taken before
// the last change, as a Cassandra read of one data centre does while a
// transaction applied through another has not reached it; its serial read
// is the store's.
type staleLocal struct {
	*embedded.Store
	mu    sync.Mutex
	stale map[string]engagement.Reaction // user/content → the row as last seen locally
	found map[string]bool
}

func (s *staleLocal) GetReaction(ctx context.Context, userID, contentID string) (engagement.Reaction, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.stale[userID+"/"+contentID]; ok {
		return r, s.found[userID+"/"+contentID], nil
	}
	return s.Store.GetReaction(ctx, userID, contentID)
}

func (s *staleLocal) GetReactionSerial(ctx context.Context, userID, contentID string) (engagement.Reaction, bool, error) {
	return s.Store.GetReaction(ctx, userID, contentID)
}

// contendedSerial is a store whose serial reads time out in contention
// with the row's writers.
type contendedSerial struct{ *embedded.Store }

func (s contendedSerial) GetReactionSerial(ctx context.Context, userID, contentID string) (engagement.Reaction, bool, error) {
	return engagement.Reaction{}, false, fmt.Errorf("cannot get reaction (serial): %w: %w: CAS operation timed out", store.ErrContention, store.ErrUnavailable)
}

// TestContendedSerialReadIsAConflict: a repeat of the current action whose
// serial confirmation times out in contention is a conflict that applied
// nothing (ErrContended alone, which the API answers 409 "nothing was
// applied"), not an unavailable store (503) nor an outcome to settle.
func TestContendedSerialReadIsAConflict(t *testing.T) {
	st := embeddedtest.Open(t, embedded.Config{Timeout: time.Second})
	ctx := context.Background()
	liked := engagement.Reaction{UserID: "u", ContentID: "v", Action: engagement.ActionLike, Region: "us",
		Version: 1, Incarnation: 7, UpdatedAt: time.Now()}
	if ok, err := st.InsertReaction(ctx, liked); err != nil || !ok {
		t.Fatalf("insert: %v, %v", ok, err)
	}
	rec := newRecorder(t)
	a, err := region.New(region.DefaultConfig("us", "us-a1"), region.Deps{Reactions: contendedSerial{st}, Stats: st, Publisher: rec})
	if err != nil {
		t.Fatal(err)
	}
	a.Start()
	_, err = a.React(ctx, "u", "v", engagement.ActionLike)
	if !errors.Is(err, region.ErrContended) || errors.Is(err, store.ErrContention) || errors.Is(err, store.ErrUnavailable) {
		t.Errorf("React = %v; want ErrContended without store.ErrContention or store.ErrUnavailable", err)
	}
	if got := a.Stats().ReactionsContended.Load(); got != 1 {
		t.Errorf("ReactionsContended = %d, want 1", got)
	}
	// A change is not confirmed serially, so it goes through.
	if res, err := a.React(ctx, "u", "v", engagement.ActionDislike); err != nil || !res.Changed {
		t.Errorf("dislike = %+v, %v; want a change", res, err)
	}
	stop(t, a)
	if got := rec.totals(); got["v/like/us"] != -1 || got["v/dislike/us"] != 1 {
		t.Errorf("published %v; want the dislike's deltas alone", got)
	}
}

// TestUnchangedIsConfirmedSerially: a user likes through this agent after
// undoing the like through another region, and this agent's local read
// still shows the like. The agent must not answer "unchanged" from that
// stale row (the like would be acknowledged and never written): it
// confirms at serial consistency and writes.
func TestUnchangedIsConfirmedSerially(t *testing.T) {
	st := embeddedtest.Open(t, embedded.Config{Timeout: time.Second})
	ctx := context.Background()
	liked := engagement.Reaction{UserID: "u", ContentID: "v", Action: engagement.ActionLike, Region: "eu",
		Version: 1, Incarnation: 7, UpdatedAt: time.Now()}
	if ok, err := st.InsertReaction(ctx, liked); err != nil || !ok {
		t.Fatalf("insert: %v, %v", ok, err)
	}
	if ok, err := st.DeleteReaction(ctx, liked); err != nil || !ok { // the undo, through the other region
		t.Fatalf("delete: %v, %v", ok, err)
	}
	s := &staleLocal{Store: st, stale: map[string]engagement.Reaction{"u/v": liked}, found: map[string]bool{"u/v": true}}
	rec := newRecorder(t)
	a, err := region.New(region.DefaultConfig("us", "us-a1"), region.Deps{Reactions: s, Stats: st, Publisher: rec})
	if err != nil {
		t.Fatal(err)
	}
	a.Start()
	res, err := a.React(ctx, "u", "v", engagement.ActionLike)
	if err != nil || !res.Changed {
		t.Fatalf("React = %+v, %v; want a change (the stored row is undone)", res, err)
	}
	stop(t, a)
	row, found, err := st.GetReaction(ctx, "u", "v")
	if err != nil || !found || row.Action != engagement.ActionLike {
		t.Fatalf("row after the like: %+v, found %v, %v; want a like", row, found, err)
	}
	if got := rec.totals()["v/like/us"]; got != 1 {
		t.Fatalf("published likes = %d, want 1", got)
	}
}
