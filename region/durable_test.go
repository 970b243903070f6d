package region_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/partial"
	"github.com/edgecount/edgecount/region"
	"github.com/edgecount/edgecount/store/embedded"
	"github.com/edgecount/edgecount/store/embedded/embeddedtest"
	"github.com/edgecount/edgecount/wal"
)

// broker stands in for JetStream and the rollup together: it de-duplicates
// by message id, applies a message only if its (epoch, seq) is above the
// highest applied for its (agent, partition) (the rollup's high-water
// mark), and can fail publishes or store a message and lose the ack.
type broker struct {
	t        *testing.T
	mu       sync.Mutex
	ids      map[string]bool
	hwm      map[string][2]uint64 // agent/partition → epoch, seq
	totals   map[string]int64     // content/counter/region
	failRate float64              // publishes that fail before storing
	loseRate float64              // publishes stored whose ack is lost
	down     bool
	dups     int // re-published copies dropped
}

func newBroker(t *testing.T) *broker {
	return &broker{t: t, ids: map[string]bool{}, hwm: map[string][2]uint64{}, totals: map[string]int64{}}
}

func (b *broker) Publish(ctx context.Context, partition uint32, msgID string, data []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.down || rand.Float64() < b.failRate {
		return errors.New("broker down")
	}
	var m partial.Batch
	if err := partial.Decode(data, &m); err != nil {
		b.t.Errorf("message %s does not decode: %v", msgID, err)
		return nil
	}
	if m.MsgID() != msgID {
		b.t.Errorf("message id %q, batch says %q", msgID, m.MsgID())
	}
	if b.ids[msgID] {
		b.dups++
	} else {
		b.ids[msgID] = true
		key := fmt.Sprintf("%s/%d", m.Agent, m.Partition)
		h := b.hwm[key]
		if m.Epoch < h[0] || m.Epoch == h[0] && m.Seq <= h[1] {
			// A new message at or below the mark would be dropped by the
			// rollup: the agent broke the order it promises.
			b.t.Errorf("message %s arrived after %v of %s: out of order", msgID, h, key)
		} else {
			b.hwm[key] = [2]uint64{m.Epoch, m.Seq}
			for _, s := range m.Sums {
				b.totals[s.ContentID+"/"+s.Counter+"/"+s.Region] += s.Delta
			}
		}
	}
	if rand.Float64() < b.loseRate {
		return errors.New("ack lost")
	}
	return nil
}

func (b *broker) set(fail, lose float64, down bool) {
	b.mu.Lock()
	b.failRate, b.loseRate, b.down = fail, lose, down
	b.mu.Unlock()
}

func (b *broker) total(key string) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.totals[key]
}

// durableAgent builds an agent with a log under dir, recovered and
// started; its identity (and epoch) comes from dir/agent.json.
func durableAgent(t *testing.T, dir string, st region.ReactionStore, stats region.StatsReader, pub region.Publisher, tweak func(*region.Config)) *region.Agent {
	t.Helper()
	id, err := region.LoadIdentity(dir, "", "us-test", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cfg := region.DefaultConfig("us", id.ID)
	cfg.FlushInterval = 10 * time.Millisecond
	cfg.PublishRetryMin = time.Millisecond
	cfg.PublishRetryMax = 5 * time.Millisecond
	cfg.Log = region.LogConfig{Durability: wal.Fsync, Dir: filepath.Join(dir, "log"), MaxBytes: 64 << 20, SyncInterval: 5 * time.Millisecond}
	if tweak != nil {
		tweak(&cfg)
	}
	a, err := region.New(cfg, region.Deps{Reactions: st, Stats: stats, Publisher: pub, Epoch: id.Epoch})
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

// ledger records what writers attempted and what the agent acknowledged.
type ledger struct {
	mu                 sync.Mutex
	attempted, acked   map[string]int64
	reactionsAcked     int
	reactionsAttempted int
}

func newLedger() *ledger { return &ledger{attempted: map[string]int64{}, acked: map[string]int64{}} }

// load runs increments and reactions against a until stop is closed.
func (l *ledger) load(a *region.Agent, stop <-chan struct{}, wg *sync.WaitGroup, writers, reactors int) {
	ctx := context.Background()
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				n := 1 + rand.IntN(20)
				incs := make([]region.Increment, n)
				for i := range incs {
					incs[i] = region.Increment{ContentID: fmt.Sprintf("v%d", rand.IntN(40)), Counter: "view", Delta: 1 + rand.Int64N(5)}
				}
				l.mu.Lock()
				for _, in := range incs {
					l.attempted[in.ContentID+"/view/us"] += in.Delta
				}
				l.mu.Unlock()
				if err := a.Increment(ctx, incs); err != nil {
					if errors.Is(err, region.ErrStopping) {
						return
					}
					continue
				}
				l.mu.Lock()
				for _, in := range incs {
					l.acked[in.ContentID+"/view/us"] += in.Delta
				}
				l.mu.Unlock()
			}
		}()
	}
	actions := []engagement.Action{engagement.ActionLike, engagement.ActionDislike, engagement.ActionNone}
	for w := 0; w < reactors; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				l.mu.Lock()
				l.reactionsAttempted++
				l.mu.Unlock()
				_, err := a.React(ctx, fmt.Sprintf("u%d", rand.IntN(30)), fmt.Sprintf("r%d", rand.IntN(5)), actions[rand.IntN(3)])
				if errors.Is(err, region.ErrStopping) {
					return
				}
				if err == nil {
					l.mu.Lock()
					l.reactionsAcked++
					l.mu.Unlock()
				}
			}
		}()
	}
}

// checkTotals compares the broker's totals with the ledger (increments:
// acked ≤ counted ≤ attempted) and with the rows (reactions: the totals
// equal a recount of the store).
func checkTotals(t *testing.T, b *broker, l *ledger, st *embedded.Store) {
	t.Helper()
	var lost, doubled, acked int64
	for k, att := range l.attempted {
		got := b.total(k)
		acked += l.acked[k]
		if d := l.acked[k] - got; d > 0 {
			lost += d
			t.Errorf("%s: counted %d, acknowledged %d: %d lost", k, got, l.acked[k], d)
		}
		if d := got - att; d > 0 {
			doubled += d
			t.Errorf("%s: counted %d, attempted %d: %d doubled", k, got, att, d)
		}
	}
	ctx := context.Background()
	for c := 0; c < 5; c++ {
		id := fmt.Sprintf("r%d", c)
		var likes, dislikes int64
		for u := 0; u < 30; u++ {
			row, found, err := st.GetReaction(ctx, fmt.Sprintf("u%d", u), id)
			if err != nil {
				t.Fatal(err)
			}
			if found && row.Action == engagement.ActionLike {
				likes++
			}
			if found && row.Action == engagement.ActionDislike {
				dislikes++
			}
		}
		if got := b.total(id + "/like/us"); got != likes {
			t.Errorf("%s: likes counted %d, rows say %d", id, got, likes)
		}
		if got := b.total(id + "/dislike/us"); got != dislikes {
			t.Errorf("%s: dislikes counted %d, rows say %d", id, got, dislikes)
		}
	}
	t.Logf("increments acknowledged %d, lost %d, doubled %d; reactions acknowledged %d of %d attempted; duplicate publishes dropped %d",
		acked, lost, doubled, l.reactionsAcked, l.reactionsAttempted, b.dups)
}

// TestCrashLosesNoAcknowledgedWrite kills (abandons) an agent at random
// moments under increments and reactions, with a broker that fails
// publishes and loses acks, and reopens it on the same directory each
// time: every acknowledged increment is counted exactly once, and the
// like/dislike totals equal the rows.
func TestCrashLosesNoAcknowledgedWrite(t *testing.T) {
	for _, mode := range []wal.Durability{wal.Fsync, wal.Interval} {
		t.Run(string(mode), func(t *testing.T) { testCrash(t, mode) })
	}
}

func testCrash(t *testing.T, mode wal.Durability) {
	tweak := func(c *region.Config) { c.Log.Durability = mode }
	dir := t.TempDir()
	st := embeddedtest.Open(t, embedded.Config{Timeout: time.Second})
	b := newBroker(t)
	b.set(0.2, 0.2, false)
	l := newLedger()
	rounds := 25
	if testing.Short() {
		rounds = 8
	}
	var replayed, republished, intents uint64
	for round := 0; round < rounds; round++ {
		a := durableAgent(t, dir, st, st, b, tweak)
		replayed += a.LogStats().RecordsReplayed.Load()
		republished += a.LogStats().MessagesReplayed.Load()
		intents += a.LogStats().IntentsReplayed.Load()
		stop := make(chan struct{})
		var wg sync.WaitGroup
		l.load(a, stop, &wg, 4, 2)
		time.Sleep(time.Duration(rand.IntN(60)) * time.Millisecond)
		a.Crash()
		close(stop)
		wg.Wait()
	}
	b.set(0, 0, false)
	a := durableAgent(t, dir, st, st, b, tweak)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := a.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	checkTotals(t, b, l, st)
	t.Logf("over %d restarts: %d intake records replayed, %d messages re-published, %d intents settled", rounds, replayed, republished, intents)
	if replayed == 0 {
		t.Errorf("no start replayed a record: the test does not crash where it matters")
	}
}

// TestBrokerDownFillsLogThen503: with the broker down, the outbox reaches
// its bound, flushes are deferred, the intake log fills and writes answer
// ErrBacklog (Ready too); nothing acknowledged is lost once the broker is
// back, across a restart.
func TestBrokerDownFillsLogThen503(t *testing.T) {
	dir := t.TempDir()
	st := embeddedtest.Open(t, embedded.Config{Timeout: time.Second})
	b := newBroker(t)
	b.set(0, 0, true)
	tweak := func(c *region.Config) {
		c.MaxMessageBytes = 4 << 10
		c.OutboxBytes = 8 << 10
		c.Log.MaxBytes = 256 << 10
	}
	a := durableAgent(t, dir, st, st, b, tweak)
	l := newLedger()
	ctx := context.Background()
	var refused error
	for i := 0; i < 100_000 && refused == nil; i++ {
		incs := []region.Increment{{ContentID: fmt.Sprintf("v%d", i%500), Counter: "view", Delta: 1}}
		l.attempted[incs[0].ContentID+"/view/us"]++
		if err := a.Increment(ctx, incs); err != nil {
			refused = err
			break
		}
		l.acked[incs[0].ContentID+"/view/us"]++
	}
	if !errors.Is(refused, region.ErrBacklog) && !errors.Is(refused, region.ErrLogFull) {
		t.Fatalf("with the broker down, Increment = %v; want ErrBacklog or ErrLogFull", refused)
	}
	if err := a.Ready(ctx); err == nil {
		t.Errorf("Ready = nil with a full log; want an error")
	} else {
		t.Logf("refused: %v; ready: %v", refused, err)
	}
	a.Crash()
	b.set(0, 0, false)
	a = durableAgent(t, dir, st, st, b, tweak)
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := a.Stop(sctx); err != nil {
		t.Fatal(err)
	}
	checkTotals(t, b, l, st)
}

// TestIdentity: the id is made once and kept; a configured id that differs
// from the recorded one refuses; the epoch strictly increases even when the
// clock steps back.
func TestIdentity(t *testing.T) {
	dir := t.TempDir()
	now := time.Unix(1_700_000_000, 0)
	first, err := region.LoadIdentity(dir, "", "us-host", now)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(first.ID, "us-host-") || len(first.ID) != len("us-host-")+8 {
		t.Fatalf("default id = %q, want us-host-<8 hex>", first.ID)
	}
	second, err := region.LoadIdentity(dir, "", "us-host", now.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if second.ID != first.ID || second.Epoch <= first.Epoch {
		t.Fatalf("after a restart with the clock an hour back: %+v, first %+v; want the same id and a higher epoch", second, first)
	}
	third, err := region.LoadIdentity(dir, first.ID, "us-host", now.Add(time.Hour))
	if err != nil || third.Epoch != uint64(now.Add(time.Hour).UnixNano()) {
		t.Fatalf("configured same id: %+v, %v", third, err)
	}
	if _, err := region.LoadIdentity(dir, "someone-else", "us-host", now); !errors.Is(err, region.ErrIdentityMismatch) {
		t.Fatalf("configured other id: err = %v, want ErrIdentityMismatch", err)
	}
	other, err := region.LoadIdentity(t.TempDir(), "", "us-host", now)
	if err != nil || other.ID == first.ID {
		t.Fatalf("second data directory: %+v, %v; want another id", other, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "agent.json"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := region.LoadIdentity(dir, "", "us-host", now); err == nil {
		t.Fatal("a damaged agent.json was accepted")
	}
}

// stallStore passes reactions to a store, but its next write stalls,
// before or after it reaches the store, until release is closed: the agent
// is killed meanwhile, as between the compare-and-set and the ack.
type stallStore struct {
	*embedded.Store
	mu      sync.Mutex
	armed   bool
	dead    bool          // the agent was killed: no more writes
	after   bool          // stall after the write applied
	stalled chan struct{} // closed when a write stalls
	release chan struct{}
}

func (s *stallStore) stall(ctx context.Context, write func() (bool, error)) (bool, error) {
	s.mu.Lock()
	armed, dead := s.armed, s.dead
	s.armed = false
	s.mu.Unlock()
	if dead {
		return false, errors.New("the process was killed: it sends nothing more")
	}
	if !armed {
		return write()
	}
	var applied bool
	var err error
	if s.after {
		applied, err = write()
	}
	close(s.stalled)
	<-s.release
	if !s.after {
		return false, errors.New("connection lost")
	}
	return applied, err
}

func (s *stallStore) InsertReaction(ctx context.Context, r engagement.Reaction) (bool, error) {
	return s.stall(ctx, func() (bool, error) { return s.Store.InsertReaction(ctx, r) })
}

func (s *stallStore) UpdateReaction(ctx context.Context, prev, next engagement.Reaction) (bool, error) {
	return s.stall(ctx, func() (bool, error) { return s.Store.UpdateReaction(ctx, prev, next) })
}

func (s *stallStore) DeleteReaction(ctx context.Context, prev engagement.Reaction) (bool, error) {
	return s.stall(ctx, func() (bool, error) { return s.Store.DeleteReaction(ctx, prev) })
}

// TestReplaySettlesIntents: an agent killed while its compare-and-set is
// in flight (for longer than several flushes, so the intent is carried
// over truncations) settles the intent at the next start, for each way the
// row can be found.
func TestReplaySettlesIntents(t *testing.T) {
	tests := []struct {
		name     string
		before   engagement.Action // the user's reaction before (none: no row)
		action   engagement.Action
		after    bool // the write reached the store before the kill
		meddle   bool // another region's agent changes the row meanwhile
		same     bool // another agent of this region makes the same change meanwhile
		wantLike int64
		wantDis  int64
		wantRow  engagement.Action
		applied  uint64
		ambig    uint64
	}{
		{"insert applied", engagement.ActionNone, engagement.ActionLike, true, false, false, 1, 0, engagement.ActionLike, 1, 0},
		{"insert redone", engagement.ActionNone, engagement.ActionLike, false, false, false, 1, 0, engagement.ActionLike, 1, 0},
		{"update applied", engagement.ActionLike, engagement.ActionDislike, true, false, false, 0, 1, engagement.ActionDislike, 1, 0},
		{"update redone", engagement.ActionLike, engagement.ActionDislike, false, false, false, 0, 1, engagement.ActionDislike, 1, 0},
		{"undo applied", engagement.ActionLike, engagement.ActionNone, true, false, false, 0, 0, engagement.ActionNone, 1, 0},
		{"undo redone", engagement.ActionLike, engagement.ActionNone, false, false, false, 0, 0, engagement.ActionNone, 1, 0},
		// The row's writers lack the intent's token: another agent wrote
		// the row instead, and this agent counts nothing.
		{"insert overtaken", engagement.ActionNone, engagement.ActionLike, false, true, false, 0, 0, engagement.ActionDislike, 0, 0},
		{"update overtaken", engagement.ActionLike, engagement.ActionDislike, false, true, false, 1, 0, engagement.ActionNone, 0, 0},
		// The row then looks like the intended one but for its write time:
		// counting it would count the other agent's change twice.
		{"update made by another agent", engagement.ActionLike, engagement.ActionDislike, false, false, true, 1, 0, engagement.ActionDislike, 0, 0},
		// The user retried through another agent: the row is gone, but not
		// by this undo (counting it would subtract the like twice) ...
		{"undo made by another agent", engagement.ActionLike, engagement.ActionNone, false, true, false, 1, 0, engagement.ActionNone, 0, 0},
		// ... or this write applied and another agent changed the row
		// since: the token is kept among the writers, also across an undo.
		{"insert applied, then undone by another agent", engagement.ActionNone, engagement.ActionLike, true, true, false, 1, 0, engagement.ActionNone, 1, 0},
		{"undo applied, then re-created by another agent", engagement.ActionLike, engagement.ActionNone, true, true, false, 0, 0, engagement.ActionDislike, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			st := embeddedtest.Open(t, embedded.Config{Timeout: time.Second})
			b := newBroker(t)
			ss := &stallStore{Store: st, stalled: make(chan struct{}), release: make(chan struct{})}
			a := durableAgent(t, dir, ss, st, b, nil)
			ctx := context.Background()
			if tt.before != engagement.ActionNone {
				if _, err := a.React(ctx, "u", "c", tt.before); err != nil {
					t.Fatal(err)
				}
			}
			ss.mu.Lock()
			ss.armed, ss.after = true, tt.after
			ss.mu.Unlock()
			done := make(chan error, 1)
			go func() {
				_, err := a.React(ctx, "u", "c", tt.action)
				done <- err
			}()
			<-ss.stalled
			time.Sleep(60 * time.Millisecond) // several flushes carry the intent
			a.Crash()
			ss.mu.Lock()
			ss.dead = true // a killed process writes nothing more
			ss.mu.Unlock()
			close(ss.release)
			if err := <-done; err == nil {
				t.Fatal("the reaction whose agent was killed was acknowledged")
			}
			if tt.same {
				row, _, err := st.GetReaction(ctx, "u", "c")
				if err != nil {
					t.Fatal(err)
				}
				next := row
				next.Action, next.Version, next.UpdatedAt = tt.action, row.Version+1, time.Now().Add(time.Millisecond)
				if ok, err := st.UpdateReaction(ctx, row, next); err != nil || !ok {
					t.Fatalf("the other agent's update: %v %v", ok, err)
				}
			}
			if tt.meddle {
				// Another region's agent changes the row meanwhile.
				row, found, err := st.GetReaction(ctx, "u", "c")
				if err != nil {
					t.Fatal(err)
				}
				if !found {
					if _, err := st.InsertReaction(ctx, engagement.Reaction{UserID: "u", ContentID: "c", Action: engagement.ActionDislike, Region: "eu", Version: 1, Incarnation: 77, UpdatedAt: time.Now()}); err != nil {
						t.Fatal(err)
					}
				} else if _, err := st.DeleteReaction(ctx, row); err != nil {
					t.Fatal(err)
				}
			}
			a = durableAgent(t, dir, st, st, b, nil)
			sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			if err := a.Stop(sctx); err != nil {
				t.Fatal(err)
			}
			ls := a.LogStats()
			if got := ls.IntentsApplied.Load(); got != tt.applied {
				t.Errorf("intents settled as applied = %d, want %d", got, tt.applied)
			}
			if got := ls.IntentsAmbiguous.Load(); got != tt.ambig {
				t.Errorf("intents ambiguous = %d, want %d", got, tt.ambig)
			}
			row, found, err := st.GetReaction(ctx, "u", "c")
			if err != nil {
				t.Fatal(err)
			}
			gotRow := engagement.ActionNone
			if found {
				gotRow = row.Action
			}
			if gotRow != tt.wantRow {
				t.Errorf("row = %v, want %v", gotRow, tt.wantRow)
			}
			if l, d := b.total("c/like/us"), b.total("c/dislike/us"); l != tt.wantLike || d != tt.wantDis {
				t.Errorf("counted likes %d dislikes %d, want %d %d", l, d, tt.wantLike, tt.wantDis)
			}
		})
	}
}

// TestLostAnswerDuringARunIsRepeated: a compare-and-set whose answer is
// lost while the agent runs (the store could not settle it: as while
// Cassandra is frozen) and that had not applied is sent again by the
// settle, with the same token, so that a copy still queued in the store
// can never apply afterwards uncounted; the change is counted once, and
// the client, whose request is decided at once, gets its outcome rather
// than the store's error.
func TestLostAnswerDuringARunIsRepeated(t *testing.T) {
	st := embeddedtest.Open(t, embedded.Config{Timeout: time.Second})
	b := newBroker(t)
	ss := &stallStore{Store: st, stalled: make(chan struct{}), release: make(chan struct{})}
	a := durableAgent(t, t.TempDir(), ss, st, b, nil)
	ctx := context.Background()
	if _, err := a.React(ctx, "u", "c", engagement.ActionDislike); err != nil {
		t.Fatal(err)
	}
	ss.mu.Lock()
	ss.armed, ss.after = true, false // the write never reaches the store; its answer is an error
	ss.mu.Unlock()
	close(ss.release)
	res, err := a.React(ctx, "u", "c", engagement.ActionLike)
	if err != nil || !res.Changed || res.Previous != engagement.ActionDislike || res.Action != engagement.ActionLike {
		t.Fatalf("React = %+v, %v; want the like the settle applied, from a dislike", res, err)
	}
	row, found, err := st.GetReaction(ctx, "u", "c")
	if err != nil || !found || row.Action != engagement.ActionLike {
		t.Fatalf("row = %+v, %v, %v; want the like the settle sent again", row, found, err)
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

// TestDamagedLogIsReportedNotApplied: flipped bytes in the intake log and
// a segment copied from another agent's log are reported and counted; the
// agent starts, replays what it can trust and applies nothing twice.
func TestDamagedLogIsReportedNotApplied(t *testing.T) {
	st := embeddedtest.Open(t, embedded.Config{Timeout: time.Second})
	b := newBroker(t)
	hour := func(c *region.Config) { c.FlushInterval = time.Hour } // every write stays in the intake log
	write := func(dir string, n int) (*ledger, *region.Agent) {
		a := durableAgent(t, dir, st, st, b, hour)
		l := newLedger()
		for i := 0; i < n; i++ {
			k := fmt.Sprintf("v%d", i%7)
			l.attempted[k+"/view/us"]++
			if err := a.Increment(context.Background(), []region.Increment{{ContentID: k, Counter: "view", Delta: 1}}); err != nil {
				t.Fatal(err)
			}
			l.acked[k+"/view/us"]++
		}
		return l, a
	}
	dir, other := t.TempDir(), t.TempDir()
	l, a := write(dir, 300)
	a.Crash()
	_, oa := write(other, 10)
	oa.Crash()
	segs, _ := filepath.Glob(filepath.Join(dir, "log", "intake", "*.seg"))
	if len(segs) != 1 {
		t.Fatalf("segments %v", segs)
	}
	raw, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)/2] ^= 0xff
	if err := os.WriteFile(segs[0], raw, 0o644); err != nil {
		t.Fatal(err)
	}
	osegs, _ := filepath.Glob(filepath.Join(other, "log", "intake", "*.seg"))
	foreign, _ := os.ReadFile(osegs[0])
	if err := os.WriteFile(filepath.Join(dir, "log", "intake", "00000000000000900000.seg"), foreign, 0o644); err != nil {
		t.Fatal(err)
	}
	a = durableAgent(t, dir, st, st, b, nil)
	s, _ := a.IntakeLogStats()
	if s.CorruptRecords+s.TornTails == 0 || s.ForeignSegments != 1 {
		t.Errorf("damage counted: corrupt %d torn %d foreign %d; want a corrupt or torn record and one foreign segment", s.CorruptRecords, s.TornTails, s.ForeignSegments)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	var counted, acked int64
	for k, att := range l.attempted {
		got := b.total(k)
		counted += got
		acked += l.acked[k]
		if got > att {
			t.Errorf("%s: counted %d, attempted %d", k, got, att)
		}
	}
	if counted == 0 || counted >= acked {
		t.Errorf("counted %d of %d acknowledged: want the records before the damage and none after it", counted, acked)
	}
	t.Logf("damaged log: %d of %d acknowledged increments replayed", counted, acked)
}
