package rollup_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/internal/testenv"
	"github.com/edgecount/edgecount/natsjs"
	"github.com/edgecount/edgecount/natsjs/natsjstest"
	"github.com/edgecount/edgecount/partial"
	"github.com/edgecount/edgecount/rollup"
	"github.com/edgecount/edgecount/store/embedded"
)

func openStore(t *testing.T, path string) *embedded.Store {
	t.Helper()
	st, err := embedded.Open(embedded.Config{Path: path, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// globalViews returns the global views of id and whether its regional
// rows add up to them.
func globalViews(t *testing.T, st *embedded.Store, id string) (views int64, regionsAddUp bool) {
	t.Helper()
	rows, err := st.ReadStats(t.Context(), []string{id})
	if err != nil {
		t.Fatal(err)
	}
	var regions int64
	for _, r := range rows[id] {
		if r.Scope == engagement.GlobalScope {
			views = r.Counters["view"]
		} else {
			regions += r.Counters["view"]
		}
	}
	return views, regions == views
}

func viewsMsg(agent string, epoch, seq uint64, p uint32, id string, n int64) []byte {
	return partial.Append(nil, &partial.Batch{Agent: agent, Region: "us", Epoch: epoch, Seq: seq, Partition: p,
		FlushedAt: time.Now(), Sums: []partial.Sum{{ContentID: id, Counter: "view", Region: "us", Delta: n}}})
}

// TestReplayOnEmbeddedStore: against the real embedded store, a copy of
// an applied message under a new broker sequence is dropped, also by a
// new Rollup after the store was closed and opened again (a rollup
// restart), and the marks are kept per (partition, agent, epoch).
func TestReplayOnEmbeddedStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	st := openStore(t, path)
	ctx := t.Context()
	r := rollup.New(st, nil, nil)
	acked := map[string]int64{}
	var msgs [][]byte
	seq := uint64(0)
	for i := range 12 {
		agent := []string{"a", "b"}[i%2]
		p := uint32(i % 3)
		id := fmt.Sprintf("v%d", p)
		n := int64(i + 1)
		msgs = append(msgs, viewsMsg(agent, 7, uint64(i/2+1), p, id, n))
		acked[id] += n
	}
	for _, m := range msgs {
		seq++
		if err := r.Handle(ctx, seq, m); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range msgs { // every message re-published once
		seq++
		if err := r.Handle(ctx, seq, m); err != nil {
			t.Fatal(err)
		}
	}
	if got := r.Stats().DuplicatesDropped.Load(); got != uint64(len(msgs)) {
		t.Fatalf("duplicates dropped = %d, want %d", got, len(msgs))
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	st = openStore(t, path)
	t.Cleanup(func() { st.Close() })
	r2 := rollup.New(st, nil, nil)
	for _, m := range msgs { // and again, to the restarted rollup
		seq++
		if err := r2.Handle(ctx, seq, m); err != nil {
			t.Fatal(err)
		}
	}
	if got := r2.Stats().DuplicatesDropped.Load(); got != uint64(len(msgs)) {
		t.Fatalf("duplicates dropped after the restart = %d, want %d", got, len(msgs))
	}
	for id, want := range acked {
		if got, ok := globalViews(t, st, id); got != want || !ok {
			t.Errorf("%s: counted %d (regions add up: %v), acknowledged %d", id, got, ok, want)
		}
	}
	// The agents' next messages still count.
	seq++
	if err := r2.Handle(ctx, seq, viewsMsg("a", 8, 1, 0, "v0", 100)); err != nil {
		t.Fatal(err)
	}
	if got, _ := globalViews(t, st, "v0"); got != acked["v0"]+100 {
		t.Fatalf("v0 after a new epoch's message = %d, want %d", got, acked["v0"]+100)
	}
	marks, err := st.ReadMarks(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	// One per run: a's two runs, b's one.
	if len(marks) != 3 || marks[0].Agent != "a" || marks[0].Epoch != 7 || marks[1].Agent != "a" || marks[1].Epoch != 8 ||
		marks[1].Seq != 1 || marks[2].Agent != "b" || marks[2].Epoch != 7 {
		t.Fatalf("marks of partition 0 = %+v; want a's at epochs 7 and 8 (seq 1), b's at epoch 7", marks)
	}
}

// TestReplayThroughNATS: through a real JetStream stream, a message is
// applied, then the same payload is published again under another
// Nats-Msg-Id, as when the agent re-publishes it after the broker's
// de-duplication window has passed: the broker stores the copy, the
// rollup drops it, and the item counts it once.
func TestReplayThroughNATS(t *testing.T) {
	scfg := natsjs.DefaultServerConfig(t.TempDir())
	scfg.SyncAlways = false
	stream := natsjs.DefaultStreamConfig()
	stream.Partitions = 2
	bus := natsjstest.Stream(t, scfg, "rollup-replay-test", stream)
	st := openStore(t, filepath.Join(t.TempDir(), "db"))
	t.Cleanup(func() { st.Close() })
	r := rollup.New(st, nil, nil)
	ccfg := natsjs.DefaultConsumerConfig()
	ccfg.Stream = stream
	ccfg.RetryMin, ccfg.RetryMax = 10*time.Millisecond, 50*time.Millisecond
	cons := bus.Consumer(ccfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cons.Run(ctx, []uint32{0, 1}, r.Handle) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("consumer: %v", err)
		}
	})

	pub := bus.Publisher(stream)
	const id = "v"
	p := partial.PartitionOf(id, stream.Partitions)
	publish := func(b *partial.Batch, msgID string) {
		t.Helper()
		if err := pub.Publish(t.Context(), p, msgID, partial.Append(nil, b)); err != nil {
			t.Fatal(err)
		}
	}
	batch := func(seq uint64, n int64) *partial.Batch {
		return &partial.Batch{Agent: "edge-1", Region: "us", Epoch: 42, Seq: seq, Partition: p, FlushedAt: time.Now(),
			Sums: []partial.Sum{{ContentID: id, Counter: "view", Region: "us", Delta: n}}}
	}
	waitViews := func(want int64) {
		t.Helper()
		testenv.Eventually(t, 20*time.Second, "views of "+id, func() (string, bool) {
			got, ok := globalViews(t, st, id)
			return fmt.Sprintf("%d (regions add up: %v)", got, ok), got == want && ok
		})
	}

	first := batch(1, 5)
	publish(first, first.MsgID())
	waitViews(5)
	// Within the window the broker itself drops a retry with the same id;
	// past it, the copy is stored under a new sequence. A different id
	// makes the broker store it now.
	publish(first, first.MsgID())
	publish(first, first.MsgID()+"/after-the-window")
	// The agent's next message: once it counts, the copy before it has
	// been handled.
	next := batch(2, 1)
	publish(next, next.MsgID())
	waitViews(6)
	if got := r.Stats().DuplicatesDropped.Load(); got != 1 {
		t.Fatalf("duplicates dropped = %d, want 1 (the copy reached the rollup once)", got)
	}
	// Counted right after the rows are written, which the test may see first.
	testenv.Eventually(t, 10*time.Second, "messages applied", func() (string, bool) {
		got := r.Stats().Messages.Load()
		return fmt.Sprint(got), got == 2
	})
	testenv.Eventually(t, 10*time.Second, "an empty backlog", func() (string, bool) {
		n, err := cons.Pending(t.Context(), []uint32{p})
		return fmt.Sprintf("%d pending (%v)", n, err), err == nil && n == 0
	})
}

// TestReplayAcrossHandover: a shared partition goes from rollup A to
// rollup B and back (natsjs.GroupConsumer, one store). A forgets the
// partition when it hands it over (OnRelease calls ForgetPartition, as a
// rollup process must), so when it gets the partition back it reads the
// marks again and drops a copy of what B applied meanwhile.
func TestReplayAcrossHandover(t *testing.T) {
	scfg := natsjs.DefaultServerConfig(t.TempDir())
	scfg.SyncAlways = false
	stream := natsjs.DefaultStreamConfig()
	stream.Partitions = 1
	bus := natsjstest.Stream(t, scfg, "rollup-handover-test", stream)
	st := openStore(t, filepath.Join(t.TempDir(), "db"))
	t.Cleanup(func() { st.Close() })

	// member runs a group member for ru until the returned stop is called.
	member := func(id string, ru *rollup.Rollup) (stop func()) {
		t.Helper()
		gcfg := natsjs.DefaultGroupConfig()
		gcfg.Consumer.Stream = stream
		gcfg.Consumer.RetryMin, gcfg.Consumer.RetryMax = 10*time.Millisecond, 50*time.Millisecond
		gcfg.MemberTTL = time.Second
		gcfg.MemberID = id
		gcfg.OnRelease = func(p uint32, _ bool) { ru.ForgetPartition(p) }
		g := bus.GroupConsumer(gcfg)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- g.Run(ctx, ru.Handle) }()
		var once bool
		stop = func() {
			if once {
				return
			}
			once = true
			cancel()
			if err := <-done; err != nil {
				t.Errorf("member %s: %v", id, err)
			}
		}
		t.Cleanup(stop)
		return stop
	}
	pub := bus.Publisher(stream)
	const id = "v"
	publish := func(b *partial.Batch, msgID string) {
		t.Helper()
		if err := pub.Publish(t.Context(), 0, msgID, partial.Append(nil, b)); err != nil {
			t.Fatal(err)
		}
	}
	batch := func(seq uint64, n int64) *partial.Batch {
		return &partial.Batch{Agent: "edge-1", Region: "us", Epoch: 42, Seq: seq, FlushedAt: time.Now(),
			Sums: []partial.Sum{{ContentID: id, Counter: "view", Region: "us", Delta: n}}}
	}
	waitViews := func(want int64) {
		t.Helper()
		testenv.Eventually(t, 30*time.Second, "views of "+id, func() (string, bool) {
			got, ok := globalViews(t, st, id)
			return fmt.Sprintf("%d (regions add up: %v)", got, ok), got == want && ok
		})
	}

	ra, rb := rollup.New(st, nil, nil), rollup.New(st, nil, nil)
	stopA := member("a", ra)
	publish(batch(1, 1), batch(1, 1).MsgID())
	waitViews(1) // A holds the partition and its marks
	stopA()      // hands it back

	stopB := member("b", rb)
	second := batch(2, 10)
	publish(second, second.MsgID())
	waitViews(11)
	stopB()

	member("a2", ra) // A again, with the same Rollup
	publish(second, second.MsgID()+"/after-the-window")
	third := batch(3, 100)
	publish(third, third.MsgID())
	waitViews(111)
	if got := ra.Stats().DuplicatesDropped.Load(); got != 1 {
		t.Fatalf("duplicates dropped by A = %d, want 1", got)
	}
}
