package natsjs

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgecount/edgecount/internal/testenv"
)

// batchRecorder is a BatchHandler that records the batches it applied.
type batchRecorder struct {
	mu      sync.Mutex
	batches [][]record
	poison  string // body to mark permanent
}

func (r *batchRecorder) handle(_ context.Context, msgs []BatchMsg) error {
	b := make([]record, 0, len(msgs))
	for i, m := range msgs {
		if string(m.Data) == r.poison {
			msgs[i].Err = Permanent(errors.New("poison"))
			continue
		}
		b = append(b, record{m.Seq, string(m.Data)})
	}
	r.mu.Lock()
	r.batches = append(r.batches, b)
	r.mu.Unlock()
	return nil
}

func (r *batchRecorder) all() (recs []record, batches int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, b := range r.batches {
		recs = append(recs, b...)
	}
	return recs, len(r.batches)
}

// checkInOrder fails unless recs are want bodies, in stream order, once each.
func checkInOrder(t *testing.T, recs []record, want []string) {
	t.Helper()
	if len(recs) != len(want) {
		t.Fatalf("applied %d messages %v, want %d", len(recs), recs, len(want))
	}
	for i, r := range recs {
		if r.data != want[i] || (i > 0 && r.seq <= recs[i-1].seq) {
			t.Fatalf("message %d applied = %+v (after %+v), want %q in stream order: %v", i, r, recs[max(i-1, 0)], want[i], recs)
		}
	}
}

// TestBatchTakesWhatIsReady: with Batch 16 a backlog is handed over in
// batches of up to 16, in stream order, each message once, all
// acknowledged; a message the handler marks permanent is terminated.
func TestBatchTakesWhatIsReady(t *testing.T) {
	_, js, cfg := setup(t, 1)
	pub := NewPublisher(js, cfg)
	var want []string
	for i := range 50 {
		publish(t, pub, 0, msgID(0, i), fmt.Sprintf("m%d", i))
		if i != 7 {
			want = append(want, fmt.Sprintf("m%d", i))
		}
	}
	ccfg := testConsumerConfig(t, cfg)
	ccfg.Batch = 16
	c := NewConsumer(js, ccfg)
	rec := &batchRecorder{poison: "m7"}
	startFunc(t, func(ctx context.Context) error { return c.RunBatch(ctx, []uint32{0}, rec.handle) })
	testenv.Eventually(t, 30*time.Second, "every message applied and acknowledged", testenv.Until(func() bool {
		recs, _ := rec.all()
		return len(recs) == len(want) && pending(t, c, []uint32{0}) == 0
	}))
	recs, batches := rec.all()
	checkInOrder(t, recs, want)
	if batches > 10 {
		t.Errorf("%d batches for 50 messages, want at most 10 (16 at a time)", batches)
	}
	st := c.Stats()
	if st.Applied != 49 || st.Terminated != 1 || st.Batches != uint64(batches) {
		t.Errorf("Stats() = %+v, want Applied 49, Terminated 1, Batches %d", st, batches)
	}
}

// TestBatchTakeoverWaitsForUnacknowledged: a consumer dies holding a batch
// it has not acknowledged; messages published after reach its successor
// first (the broker delivers up to Batch unacknowledged messages). The
// successor holds them back until the dead one's messages come again and
// applies everything in stream order: a row that took the later messages
// first would skip the earlier ones by their sequence.
func TestBatchTakeoverWaitsForUnacknowledged(t *testing.T) {
	s, js, cfg := setup(t, 1)
	pub := NewPublisher(js, cfg)
	var want []string
	for i := range 3 {
		publish(t, pub, 0, msgID(0, i), fmt.Sprintf("m%d", i))
		want = append(want, fmt.Sprintf("m%d", i))
	}
	ccfg := testConsumerConfig(t, cfg)
	ccfg.Batch = 8
	ccfg.AckWait = time.Second

	nc1, err := s.Connect("rollup-1")
	if err != nil {
		t.Fatal(err)
	}
	js1 := jsFor(t, nc1)
	entered, release := make(chan int, 1), make(chan struct{})
	c1 := NewConsumer(js1, ccfg)
	r1 := startFunc(t, func(ctx context.Context) error {
		return c1.RunBatch(ctx, []uint32{0}, func(_ context.Context, msgs []BatchMsg) error {
			entered <- len(msgs)
			<-release
			return nil
		})
	})
	if n := <-entered; n != 3 {
		t.Fatalf("first consumer's batch has %d messages, want 3", n)
	}
	nc1.Close() // a crash: no ack, no nak
	close(release)
	r1.wait(t)

	for i := 3; i < 6; i++ {
		publish(t, pub, 0, msgID(0, i), fmt.Sprintf("m%d", i))
		want = append(want, fmt.Sprintf("m%d", i))
	}
	c2 := NewConsumer(js, ccfg)
	rec := &batchRecorder{}
	startFunc(t, func(ctx context.Context) error { return c2.RunBatch(ctx, []uint32{0}, rec.handle) })
	testenv.Eventually(t, 30*time.Second, "every message applied", testenv.Until(func() bool {
		recs, _ := rec.all()
		return len(recs) >= len(want)
	}))
	recs, _ := rec.all()
	checkInOrder(t, recs, want)
	if got := c2.Stats().HeldBack; got != 1 {
		t.Errorf("HeldBack = %d, want 1", got)
	}
	testenv.Eventually(t, 10*time.Second, "nothing pending", testenv.Until(func() bool { return pending(t, c2, []uint32{0}) == 0 }))
}

// TestBatchConfigValidate: the batch bounds.
func TestBatchConfigValidate(t *testing.T) {
	for _, tt := range []struct {
		batch   int
		wait    time.Duration
		wantErr string
	}{
		{1, 0, ""},
		{1000, time.Millisecond, ""},
		{0, 0, ""},
		{1001, 0, "batch 1001 is not in 0..1000"},
		{-1, 0, "batch -1 is not in 0..1000"},
		{4, -time.Millisecond, "batch wait -1ms is not in [0, 10s)"},
	} {
		cfg := DefaultConsumerConfig()
		cfg.Batch, cfg.BatchWait = tt.batch, tt.wait
		checkErr(t, cfg.Validate(), tt.wantErr)
	}
}

// TestBatchGapHoldsBack: a delivery of the partition's consumer that never
// reaches the running consumer — here a pull of someone else's that takes
// m1 and drops it, as a broker that dies with a delivery in flight does —
// leaves a gap in the consumer sequence. The consumer sees it at m2 and
// holds m2 back until m1 comes again (after AckWait), then applies both in
// stream order. Applying m2 first would move the rollup's marks past m1 and
// drop m1 as a copy.
func TestBatchGapHoldsBack(t *testing.T) {
	_, js, cfg := setup(t, 1)
	pub := NewPublisher(js, cfg)
	publish(t, pub, 0, msgID(0, 0), "m0")
	ccfg := testConsumerConfig(t, cfg)
	ccfg.Batch = 8
	ccfg.AckWait = time.Second
	c := NewConsumer(js, ccfg)
	rec := &batchRecorder{}
	entered, release := make(chan struct{}, 1), make(chan struct{})
	var once sync.Once
	startFunc(t, func(ctx context.Context) error {
		return c.RunBatch(ctx, []uint32{0}, func(ctx context.Context, msgs []BatchMsg) error {
			once.Do(func() {
				entered <- struct{}{}
				<-release
			})
			return rec.handle(ctx, msgs)
		})
	})
	<-entered // the consumer is in its handler with m0: it pulls nothing now

	// Someone else's pull on the same durable consumer takes m1, which
	// never reaches the consumer.
	cons, err := js.Consumer(t.Context(), cfg.Name, c.Name(0))
	if err != nil {
		t.Fatal(err)
	}
	stray, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	publish(t, pub, 0, msgID(0, 1), "m1")
	if m := <-stray.Messages(); m == nil || string(m.Data()) != "m1" {
		t.Fatalf("the stray pull got %v, want m1", m)
	}
	close(release)
	testenv.Eventually(t, 10*time.Second, "m0 applied", testenv.Until(func() bool {
		recs, _ := rec.all()
		return len(recs) == 1
	}))
	publish(t, pub, 0, msgID(0, 2), "m2")
	testenv.Eventually(t, 30*time.Second, "every message applied", testenv.Until(func() bool {
		recs, _ := rec.all()
		return len(recs) >= 3
	}))
	recs, _ := rec.all()
	checkInOrder(t, recs, []string{"m0", "m1", "m2"})
	if st := c.Stats(); st.Gaps != 1 || st.HeldBack != 1 {
		t.Errorf("Gaps %d, HeldBack %d; want 1 and 1", st.Gaps, st.HeldBack)
	}
	testenv.Eventually(t, 10*time.Second, "nothing pending", testenv.Until(func() bool { return pending(t, c, []uint32{0}) == 0 }))
}
