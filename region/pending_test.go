package region_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/internal/testenv"
	"github.com/edgecount/edgecount/region"
	"github.com/edgecount/edgecount/store"
	"github.com/edgecount/edgecount/store/embedded"
	"github.com/edgecount/edgecount/store/embedded/embeddedtest"
)

// paxosStore passes reactions to a store and plays what a two-DC
// Cassandra does around a data centre's outage. The armed write is
// accepted but not committed: it changes nothing yet and answers an error
// that leaves its outcome open. While down every write fails, changing
// nothing (SERIAL cannot reach both DCs). Once up, the next write first
// completes the accepted one (Paxos repair), then runs itself.
type paxosStore struct {
	writesThrough
	mu       sync.Mutex
	armed    bool
	down     bool
	accepted func() // the accepted write, until a later write completes it
	// refuse: every write is refused before it runs (store.ErrRefused),
	// as Cassandra's Paxos v2 refuses one for want of live replicas.
	refuse bool
	reads  int // GetReaction calls
	// slowRead, when set, delays every read (a settle that takes long).
	slowRead time.Duration
}

var errCASTimeout = errors.New("test: CAS write timeout (outcome unknown)")

func (s *paxosStore) write(do func() (bool, error)) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.refuse:
		return false, fmt.Errorf("test: cannot achieve consistency level SERIAL: %w: %w", store.ErrRefused, store.ErrUnavailable)
	case s.armed:
		s.armed = false
		s.accepted = func() { _, _ = do() }
		return false, errCASTimeout
	case s.down:
		return false, errors.New("test: cannot achieve consistency level SERIAL")
	}
	if s.accepted != nil {
		s.accepted()
		s.accepted = nil
	}
	return do()
}

func (s *paxosStore) GetReaction(ctx context.Context, userID, contentID string) (engagement.Reaction, bool, error) {
	s.mu.Lock()
	slow := s.slowRead
	s.reads++
	s.mu.Unlock()
	time.Sleep(slow)
	return s.Store.GetReaction(ctx, userID, contentID)
}

// paxosAgent is a durable agent whose reactions go through a paxosStore
// over a real embedded store st, publishing to b.
func paxosAgent(t *testing.T) (st *embedded.Store, b *broker, ps *paxosStore, a *region.Agent) {
	st = embeddedtest.Open(t, embedded.Config{Timeout: time.Second})
	b = newBroker(t)
	ps = &paxosStore{}
	ps.writesThrough = writesThrough{Store: st, through: ps.write}
	return st, b, ps, durableAgent(t, t.TempDir(), ps, st, b, nil)
}

// TestRepairedWriteCountedSoon: a reaction whose compare-and-set was
// accepted but left open while a DC went down (its answer a 503, its
// settle unable to decide) applies when the DC returns and the row's next
// write completes it. Its delta must follow within seconds, well inside
// the recount's Quiet (docs/recount.md, assumption A): a repair of the item
// in between would count it twice. It is counted once.
func TestRepairedWriteCountedSoon(t *testing.T) {
	st, b, ps, a := paxosAgent(t)
	ctx := context.Background()
	ps.mu.Lock()
	ps.armed, ps.down = true, true
	ps.mu.Unlock()
	if _, err := a.React(ctx, "u", "c", engagement.ActionLike); err == nil {
		t.Fatal("a reaction whose compare-and-set failed was acknowledged")
	}
	if _, found, _ := st.GetReaction(ctx, "u", "c"); found {
		t.Fatal("the accepted write applied while the DC was down")
	}
	ps.mu.Lock()
	ps.down = false // the DC is back: the next write completes the accepted one
	ps.mu.Unlock()
	testenv.Eventually(t, 20*time.Second, "the repaired like is counted", func() (string, bool) {
		l := b.total("c/like/us")
		return fmt.Sprint("likes ", l), l == 1
	})
	if row, found, err := st.GetReaction(ctx, "u", "c"); err != nil || !found || row.Action != engagement.ActionLike {
		t.Fatalf("row = %+v, %v, %v; want the repaired like", row, found, err)
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := a.Stop(sctx); err != nil {
		t.Fatal(err)
	}
	if l, d := b.total("c/like/us"), b.total("c/dislike/us"); l != 1 || d != 0 {
		t.Errorf("counted likes %d dislikes %d, want 1 0 (the row's)", l, d)
	}
}

// TestSlowSettleCountedOnce: while a reaction's own settle of its lost
// answer is still running, the flusher leaves the intent to it (two
// settles could each count the change); the change is counted once.
func TestSlowSettleCountedOnce(t *testing.T) {
	st, b, ps, a := paxosAgent(t)
	ctx := context.Background()
	for range 3 {
		// The reaction's write is left open; its settle reads slowly (many
		// flushes long), finds the row unchanged and sends the write again,
		// which completes the open one and loses to it; it reads again,
		// finds its token and counts the like (the answer is still the
		// error).
		ps.mu.Lock()
		ps.armed, ps.slowRead = true, 300*time.Millisecond
		ps.mu.Unlock()
		_, _ = a.React(ctx, "u", "c", engagement.ActionLike) // its answer is the write's error
		if row, found, err := st.GetReaction(ctx, "u", "c"); err != nil || !found || row.Action != engagement.ActionLike {
			t.Fatalf("row = %+v, %v, %v; want the like", row, found, err)
		}
		ps.mu.Lock()
		ps.slowRead = 0
		ps.mu.Unlock()
		if _, err := a.React(ctx, "u", "c", engagement.ActionNone); err != nil {
			t.Fatal(err)
		}
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := a.Stop(sctx); err != nil {
		t.Fatal(err)
	}
	if l, d := b.total("c/like/us"), b.total("c/dislike/us"); l != 0 || d != 0 {
		t.Errorf("counted likes %d dislikes %d, want 0 0 (three likes, each undone)", l, d)
	}
}

// TestRefusedWriteDecidedAtOnce: a reaction whose compare-and-set the
// store refused before running it (store.ErrRefused) answers the error and
// is decided "not applied" at once: no intent is left open, no settle reads
// the row and nothing sends the write again later, so an outage that
// refuses every write leaves no backlog of intents whose settles would
// find the rows moved on.
func TestRefusedWriteDecidedAtOnce(t *testing.T) {
	st, b, ps, a := paxosAgent(t)
	ctx := context.Background()
	ps.mu.Lock()
	ps.refuse = true
	ps.mu.Unlock()
	const n = 5
	for i := range n {
		_, err := a.React(ctx, "u", "c", engagement.ActionLike)
		if !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("reaction %d: err = %v, want the store's ErrUnavailable (a 503)", i, err)
		}
		if p := a.LogStats().IntentsPending.Load(); p != 0 {
			t.Fatalf("reaction %d: %d intents pending, want 0 (decided at once)", i, p)
		}
	}
	if got := a.LogStats().IntentsRefused.Load(); got != n {
		t.Errorf("intents refused = %d, want %d", got, n)
	}
	ps.mu.Lock()
	ps.refuse = false
	readsBefore := ps.reads
	ps.mu.Unlock()
	// Several flushes: the flusher's settler would pick an open intent up.
	time.Sleep(3 * time.Second)
	ps.mu.Lock()
	reads := ps.reads - readsBefore
	ps.mu.Unlock()
	if reads != 0 {
		t.Errorf("%d reads of the row after the refusals, want 0 (nothing left to settle)", reads)
	}
	if _, found, _ := st.GetReaction(ctx, "u", "c"); found {
		t.Error("a refused like was written later")
	}
	if s := a.LogStats(); s.IntentsSettled.Load() != 0 || s.IntentsAmbiguous.Load() != 0 {
		t.Errorf("intents settled %d, ambiguous %d; want 0 and 0", s.IntentsSettled.Load(), s.IntentsAmbiguous.Load())
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := a.Stop(sctx); err != nil {
		t.Fatal(err)
	}
	if l := b.total("c/like/us"); l != 0 {
		t.Errorf("counted likes %d, want 0", l)
	}
}
