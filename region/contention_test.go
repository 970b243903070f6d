package region_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/region"
	"github.com/edgecount/edgecount/store"
	"github.com/edgecount/edgecount/store/embedded"
	"github.com/edgecount/edgecount/store/embedded/embeddedtest"
)

// writesThrough is an embedded store whose three reaction writes each go
// through through(do), which decides whether, when and how do runs.
type writesThrough struct {
	*embedded.Store
	through func(do func() (bool, error)) (bool, error)
}

func (s writesThrough) InsertReaction(ctx context.Context, r engagement.Reaction) (bool, error) {
	return s.through(func() (bool, error) { return s.Store.InsertReaction(ctx, r) })
}

func (s writesThrough) UpdateReaction(ctx context.Context, prev, next engagement.Reaction) (bool, error) {
	return s.through(func() (bool, error) { return s.Store.UpdateReaction(ctx, prev, next) })
}

func (s writesThrough) DeleteReaction(ctx context.Context, prev engagement.Reaction) (bool, error) {
	return s.through(func() (bool, error) { return s.Store.DeleteReaction(ctx, prev) })
}

// contendedStore answers every compare-and-set with a Paxos contention
// timeout while contended is set, after applying it when apply is set: the
// outcome is open either way.
type contendedStore struct {
	writesThrough
	mu        sync.Mutex
	contended bool
	apply     bool
}

func (s *contendedStore) write(do func() (bool, error)) (bool, error) {
	s.mu.Lock()
	contended, apply := s.contended, s.apply
	s.mu.Unlock()
	if !contended {
		return do()
	}
	if apply {
		if _, err := do(); err != nil {
			return false, err
		}
	}
	return false, fmt.Errorf("%w: %w: CAS operation timed out after 3 contention retries", store.ErrContention, store.ErrUnavailable)
}

func (s *contendedStore) set(contended, apply bool) {
	s.mu.Lock()
	s.contended, s.apply = contended, apply
	s.mu.Unlock()
}

// TestContentionIsAConflictSettledLater: a compare-and-set that times out
// in contention is settled from the row at once when the row tells
// (applied: the client gets its answer); when its settle's redo times out
// too, it is answered as the client's race (region.ErrContended, with
// store.ErrContention), never as the store being down, its intent stays
// pending and is settled once the race is over. Either way it is counted
// exactly once.
func TestContentionIsAConflictSettledLater(t *testing.T) {
	for _, applied := range []bool{false, true} {
		t.Run(fmt.Sprintf("applied=%v", applied), func(t *testing.T) {
			st := embeddedtest.Open(t, embedded.Config{Timeout: time.Second})
			cs := &contendedStore{}
			cs.writesThrough = writesThrough{Store: st, through: cs.write}
			b := newBroker(t)
			a := durableAgent(t, t.TempDir(), cs, st, b, nil)
			ctx := context.Background()
			if _, err := a.React(ctx, "u", "c", engagement.ActionDislike); err != nil {
				t.Fatal(err)
			}
			cs.set(true, applied)
			res, err := a.React(ctx, "u", "c", engagement.ActionLike)
			switch {
			case applied:
				// The row names the write: settled at once, answered.
				if err != nil || !res.Changed || res.Previous != engagement.ActionDislike {
					t.Fatalf("React = %+v, %v; want the like, settled from the row", res, err)
				}
			case !errors.Is(err, region.ErrContended) || !errors.Is(err, store.ErrContention):
				t.Fatalf("React under contention = %+v, %v; want ErrContended and store.ErrContention", res, err)
			case a.Stats().ReactionsContended.Load() != 1:
				t.Errorf("reactions contended = %d, want 1", a.Stats().ReactionsContended.Load())
			}
			cs.set(false, false) // the race is over: the settler decides
			deadline := time.Now().Add(20 * time.Second)
			for a.LogStats().IntentsPending.Load() != 0 {
				if time.Now().After(deadline) {
					t.Fatalf("intent still pending after the race ended")
				}
				time.Sleep(50 * time.Millisecond)
			}
			sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			if err := a.Stop(sctx); err != nil {
				t.Fatal(err)
			}
			row, found, err := st.GetReaction(ctx, "u", "c")
			if err != nil || !found {
				t.Fatalf("row = %+v, %v, %v", row, found, err)
			}
			// Not applied: the settle sends the same compare-and-set again
			// (the first may still be queued in the store), so the like
			// lands either way, counted once.
			if row.Action != engagement.ActionLike {
				t.Errorf("row = %v, want like", row.Action)
			}
			if l, d := b.total("c/like/us"), b.total("c/dislike/us"); l != 1 || d != 0 {
				t.Errorf("counted likes %d dislikes %d, want 1 0 (the row's)", l, d)
			}
			if got := a.LogStats().IntentsAmbiguous.Load(); got != 0 {
				t.Errorf("intents ambiguous = %d, want 0", got)
			}
		})
	}
}

// TestTooFrequentIsRefused: a row that took engagement.MaxWritersKept − 1
// changes within engagement.WriterHistory takes no more (the writer history
// that settles lost answers would have to drop a token it may need), and
// the refusal changes nothing.
func TestTooFrequentIsRefused(t *testing.T) {
	st := embeddedtest.Open(t, embedded.Config{Timeout: time.Second})
	b := newBroker(t)
	a := durableAgent(t, t.TempDir(), st, st, b, nil)
	ctx := context.Background()
	actions := [2]engagement.Action{engagement.ActionLike, engagement.ActionDislike}
	for i := range engagement.MaxWritersKept - 1 {
		if _, err := a.React(ctx, "u", "c", actions[i%2]); err != nil {
			t.Fatalf("change %d: %v", i, err)
		}
	}
	before, _, _ := st.GetReaction(ctx, "u", "c")
	_, err := a.React(ctx, "u", "c", actions[(engagement.MaxWritersKept-1)%2])
	if !errors.Is(err, region.ErrTooFrequent) {
		t.Fatalf("change %d: %v; want ErrTooFrequent", engagement.MaxWritersKept, err)
	}
	after, _, _ := st.GetReaction(ctx, "u", "c")
	if after.Version != before.Version || after.Action != before.Action {
		t.Errorf("the refused change wrote: %+v, was %+v", after, before)
	}
	if len(after.Writers) != engagement.MaxWritersKept-1 {
		t.Errorf("writers = %d, want %d", len(after.Writers), engagement.MaxWritersKept-1)
	}
}
