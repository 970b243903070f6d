package natsjs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edgecount/edgecount/internal/testenv"
)

func TestConsumerConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(*ConsumerConfig)
		wantErr string
	}{
		{"default", func(*ConsumerConfig) {}, ""},
		{"zero takes defaults", func(c *ConsumerConfig) { *c = ConsumerConfig{} }, ""},
		{"bad durable", func(c *ConsumerConfig) { c.Durable = "a.b" }, `durable prefix "a.b" is not a valid name`},
		{"short ack wait", func(c *ConsumerConfig) { c.AckWait = time.Millisecond }, "ack wait 1ms is shorter than 100ms"},
		{"inverted backoff", func(c *ConsumerConfig) { c.RetryMin, c.RetryMax = time.Second, time.Millisecond }, "retry backoff 1s..1ms is not a range"},
		{"bad stream", func(c *ConsumerConfig) { c.Stream.Partitions = -1 }, "partitions -1 is out of range"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConsumerConfig()
			tt.edit(&cfg)
			checkErr(t, cfg.Validate(), tt.wantErr)
		})
	}
}

func TestPermanent(t *testing.T) {
	base := errors.New("bad message")
	err := fmt.Errorf("cannot apply: %w", Permanent(base))
	if !IsPermanent(err) {
		t.Errorf("IsPermanent(%v) = false, want true", err)
	}
	if !errors.Is(err, base) {
		t.Errorf("errors.Is(%v, base) = false, want true", err)
	}
	if IsPermanent(base) {
		t.Errorf("IsPermanent(plain error) = true, want false")
	}
	if Permanent(nil) != nil {
		t.Errorf("Permanent(nil) != nil")
	}
	// An error type of the handler's own says so itself, however deep in
	// the chain; one that says false is not permanent.
	for _, tt := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("seq 7: %w", ownPermanent(true)), true},
		{errors.Join(base, fmt.Errorf("wrapped: %w", ownPermanent(true))), true},
		{fmt.Errorf("seq 7: %w", ownPermanent(false)), false},
		{fmt.Errorf("outer: %w", fmt.Errorf("%w: %w", ownPermanent(false), ownPermanent(true))), true},
	} {
		if got := IsPermanent(tt.err); got != tt.want {
			t.Errorf("IsPermanent(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

// ownPermanent is a handler's own error type that reports whether it is
// permanent.
type ownPermanent bool

func (e ownPermanent) Error() string   { return fmt.Sprintf("own error (permanent %v)", bool(e)) }
func (e ownPermanent) Permanent() bool { return bool(e) }

func TestRunRejectsBadArguments(t *testing.T) {
	_, js, cfg := setup(t, 4)
	missing := cfg
	missing.Name = "MISSING"
	rec := &recorder{}
	tests := []struct {
		name       string
		cfg        StreamConfig
		partitions []uint32
		h          Handler
		wantErr    string
	}{
		{"partition out of range", cfg, []uint32{4}, rec.handle, "partition 4 of 4: partition out of range"},
		{"partition twice", cfg, []uint32{1, 2, 1}, rec.handle, "partition 1 listed twice"},
		{"nil handler", cfg, []uint32{0}, nil, "handler is nil"},
		{"stream missing", missing, []uint32{0}, rec.handle, "cannot create consumer test-p0 on stream MISSING"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewConsumer(js, testConsumerConfig(t, tt.cfg))
			err := c.Run(context.Background(), tt.partitions, tt.h)
			checkErr(t, err, tt.wantErr)
		})
	}
}

func TestConsumeInOrderAcrossPartitions(t *testing.T) {
	const parts, perPart = 4, 25
	_, js, cfg := setup(t, parts)
	pub := NewPublisher(js, cfg)
	// Interleave partitions so that stream order differs from partition order.
	for i := range perPart {
		for p := range uint32(parts) {
			publish(t, pub, p, msgID(p, i), fmt.Sprintf("%d/%d", p, i))
		}
	}

	var mu sync.Mutex
	got := make(map[uint32][]record)
	c := NewConsumer(js, testConsumerConfig(t, cfg))
	all := []uint32{0, 1, 2, 3}
	if n := pending(t, c, all); n != parts*perPart {
		t.Errorf("Pending before Run = %d, want %d", n, parts*perPart)
	}
	r := start(t, c, all, func(_ context.Context, seq uint64, data []byte) error {
		var p uint32
		if _, err := fmt.Sscanf(string(data), "%d/", &p); err != nil {
			return Permanent(err)
		}
		mu.Lock()
		got[p] = append(got[p], record{seq, string(data)})
		mu.Unlock()
		return nil
	})
	testenv.Eventually(t, 30*time.Second, "backlog to drain", testenv.Until(func() bool { return pending(t, c, all) == 0 }))
	if err := r.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}

	for p := range uint32(parts) {
		recs := got[p]
		if len(recs) != perPart {
			t.Errorf("partition %d: handled %d messages, want %d", p, len(recs), perPart)
			continue
		}
		for i, rec := range recs {
			if want := fmt.Sprintf("%d/%d", p, i); rec.data != want {
				t.Errorf("partition %d message %d: got %q, want %q", p, i, rec.data, want)
			}
			if i > 0 && rec.seq <= recs[i-1].seq {
				t.Errorf("partition %d message %d: stream seq %d after %d, want increasing", p, i, rec.seq, recs[i-1].seq)
			}
		}
	}
	if got, want := c.Stats(), (ConsumerStats{Applied: parts * perPart}); got != want {
		t.Errorf("Stats() = %+v, want %+v", got, want)
	}
}

// flaky fails a chosen message a number of times, then succeeds, and logs
// every call.
type flaky struct {
	mu       sync.Mutex
	failData string
	failures int // remaining failures
	calls    []string
}

func (f *flaky) handle(_ context.Context, _ uint64, data []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	d := string(data)
	if d == f.failData && f.failures > 0 {
		f.failures--
		f.calls = append(f.calls, d+":fail")
		return errors.New("store unavailable")
	}
	f.calls = append(f.calls, d+":ok")
	return nil
}

func (f *flaky) snapshot() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func TestTransientFailureIsRetriedInOrder(t *testing.T) {
	_, js, cfg := setup(t, 1)
	pub := NewPublisher(js, cfg)
	for i, d := range []string{"m0", "m1", "m2"} {
		publish(t, pub, 0, msgID(0, i), d)
	}
	f := &flaky{failData: "m1", failures: 3}
	c := NewConsumer(js, testConsumerConfig(t, cfg))
	start(t, c, []uint32{0}, f.handle)
	testenv.Eventually(t, 30*time.Second, "backlog to drain", testenv.Until(func() bool { return pending(t, c, []uint32{0}) == 0 }))

	got := strings.Join(f.snapshot(), " ")
	if want := "m0:ok m1:fail m1:fail m1:fail m1:ok m2:ok"; got != want {
		t.Errorf("handler calls = %q, want %q", got, want)
	}
	if got, want := c.Stats(), (ConsumerStats{Applied: 3, Retries: 3}); got != want {
		t.Errorf("Stats() = %+v, want %+v", got, want)
	}
}

func TestPermanentErrorTerminatesAndMovesOn(t *testing.T) {
	_, js, cfg := setup(t, 1)
	pub := NewPublisher(js, cfg)
	for i, d := range []string{"m0", "poison", "m2"} {
		publish(t, pub, 0, msgID(0, i), d)
	}
	var mu sync.Mutex
	var calls []string
	c := NewConsumer(js, testConsumerConfig(t, cfg))
	start(t, c, []uint32{0}, func(_ context.Context, _ uint64, data []byte) error {
		mu.Lock()
		calls = append(calls, string(data))
		mu.Unlock()
		if string(data) == "poison" {
			return Permanent(errors.New("cannot decode"))
		}
		return nil
	})
	testenv.Eventually(t, 30*time.Second, "backlog to drain", testenv.Until(func() bool { return pending(t, c, []uint32{0}) == 0 }))

	mu.Lock()
	got := strings.Join(calls, " ")
	mu.Unlock()
	if want := "m0 poison m2"; got != want {
		t.Errorf("handler calls = %q, want %q (poison handled once)", got, want)
	}
	if got, want := c.Stats(), (ConsumerStats{Applied: 2, Terminated: 1}); got != want {
		t.Errorf("Stats() = %+v, want %+v", got, want)
	}
	if got := streamInfo(t, js, cfg.Name).State.Msgs; got != 0 {
		t.Errorf("stream holds %d messages, want 0 (work queue removes acked and terminated)", got)
	}
}

// gate is a handler that records each call, signals it on entered, and
// blocks until released; released calls return nil.
type gate struct {
	entered chan record
	release chan struct{}
}

func newGate() *gate {
	return &gate{entered: make(chan record, 16), release: make(chan struct{})}
}

func (g *gate) handle(ctx context.Context, seq uint64, data []byte) error {
	g.entered <- record{seq, string(data)}
	select {
	case <-g.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func TestCrashBeforeAckRedeliversSameSequence(t *testing.T) {
	s, js, cfg := setup(t, 1)
	pub := NewPublisher(js, cfg)
	publish(t, pub, 0, msgID(0, 0), "m0")
	publish(t, pub, 0, msgID(0, 1), "m1")

	ccfg := testConsumerConfig(t, cfg)
	ccfg.AckWait = time.Second // how long the broker waits for the dead process

	// First incarnation: apply m0, then "die" before the ack. Closing the
	// connection is what a crash looks like to the broker: no ack, no nak.
	nc1, err := s.Connect("rollup-1")
	if err != nil {
		t.Fatal(err)
	}
	js1 := jsFor(t, nc1)
	g := newGate()
	c1 := NewConsumer(js1, ccfg)
	r1 := start(t, c1, []uint32{0}, g.handle)
	applied := <-g.entered
	nc1.Close()
	close(g.release) // the handler "wrote its row" and returns success
	if err := r1.wait(t); !errors.Is(err, nats.ErrConnectionClosed) {
		t.Fatalf("Run after the connection closed: got %v, want ErrConnectionClosed", err)
	}
	if got := c1.Stats(); got.Applied != 1 || got.AckErrors != 1 {
		t.Errorf("first incarnation Stats() = %+v, want Applied 1 and AckErrors 1", got)
	}

	// Second incarnation: m0 comes again with the same stream sequence, then m1.
	rec := &recorder{}
	c2 := NewConsumer(js, ccfg)
	start(t, c2, []uint32{0}, rec.handle)
	testenv.Eventually(t, 30*time.Second, "redelivery and next message", testenv.Until(func() bool { return rec.len() >= 2 }))
	got := rec.snapshot()
	if got[0] != applied {
		t.Errorf("first delivery after restart = %+v, want the unacked %+v", got[0], applied)
	}
	if got[1].data != "m1" || got[1].seq <= applied.seq {
		t.Errorf("second delivery after restart = %+v, want m1 after seq %d", got[1], applied.seq)
	}
	if got := c2.Stats().Redelivered; got != 1 {
		t.Errorf("Redelivered = %d, want 1", got)
	}
}

func TestStopWhileRetryingHandsMessageBack(t *testing.T) {
	_, js, cfg := setup(t, 1)
	pub := NewPublisher(js, cfg)
	publish(t, pub, 0, msgID(0, 0), "m0")
	ccfg := testConsumerConfig(t, cfg)
	ccfg.AckWait = time.Hour // a redelivery can only come from the nak

	failed := make(chan struct{}, 1000)
	c1 := NewConsumer(js, ccfg)
	r1 := start(t, c1, []uint32{0}, func(context.Context, uint64, []byte) error {
		select {
		case failed <- struct{}{}:
		default:
		}
		return errors.New("store unavailable")
	})
	<-failed
	<-failed // it failed and was retried
	if err := r1.stop(); err != nil {
		t.Fatalf("Run: got %v, want nil on cancel", err)
	}

	rec := &recorder{}
	c2 := NewConsumer(js, ccfg)
	start(t, c2, []uint32{0}, rec.handle)
	testenv.Eventually(t, 30*time.Second, "the message again", testenv.Until(func() bool { return rec.len() >= 1 }))
	if got := rec.snapshot()[0].data; got != "m0" {
		t.Errorf("got %q, want m0", got)
	}
	if got := c2.Stats().Redelivered; got != 1 {
		t.Errorf("Redelivered = %d, want 1", got)
	}
}

// TestSlowHandlerKeepsMessage runs two consumers on one partition, which the
// server serves one message at a time (MaxAckPending 1). While one handler
// keeps failing on m0 for several AckWaits, its progress signals must stop
// the server from handing m0 to the other consumer, and the other must not
// get m1 before m0 is done.
func TestSlowHandlerKeepsMessage(t *testing.T) {
	_, js, cfg := setup(t, 1)
	pub := NewPublisher(js, cfg)
	for i := range 3 {
		publish(t, pub, 0, msgID(0, i), fmt.Sprintf("m%d", i))
	}
	ccfg := testConsumerConfig(t, cfg)
	ccfg.AckWait = time.Second
	ccfg.RetryMin, ccfg.RetryMax = 100*time.Millisecond, 500*time.Millisecond

	var mu sync.Mutex
	seen := make(map[uint64]int)
	var order []uint64
	failUntil := time.Now().Add(3 * ccfg.AckWait)
	h := func(_ context.Context, seq uint64, data []byte) error {
		mu.Lock()
		defer mu.Unlock()
		if string(data) == "m0" && time.Now().Before(failUntil) {
			return errors.New("store slow")
		}
		seen[seq]++
		order = append(order, seq)
		return nil
	}
	a := NewConsumer(js, ccfg)
	b := NewConsumer(js, ccfg)
	start(t, a, []uint32{0}, h)
	start(t, b, []uint32{0}, h)
	testenv.Eventually(t, 30*time.Second, "backlog to drain", testenv.Until(func() bool { return pending(t, a, []uint32{0}) == 0 }))

	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 3 {
		t.Errorf("applied %d distinct messages, want 3", len(seen))
	}
	for seq, n := range seen {
		if n != 1 {
			t.Errorf("seq %d applied %d times, want once", seq, n)
		}
	}
	if !slices.IsSorted(order) {
		t.Errorf("applied in order %v, want stream order (no message before an earlier one)", order)
	}
	if got := a.Stats().Redelivered + b.Stats().Redelivered; got != 0 {
		t.Errorf("Redelivered = %d, want 0", got)
	}
}

func TestBrokerRestartKeepsMessagesAndPosition(t *testing.T) {
	dir := t.TempDir()
	cfg := testStreamConfig(2)
	ctx := context.Background()

	s1 := startServer(t, dir, 0)
	nc1, err := s1.Connect("before")
	if err != nil {
		t.Fatal(err)
	}
	js1 := jsFor(t, nc1)
	if err := EnsureStream(ctx, js1, cfg); err != nil {
		t.Fatal(err)
	}
	pub := NewPublisher(js1, cfg)
	for i := range 10 {
		publish(t, pub, 1, msgID(1, i), fmt.Sprintf("m%d", i))
	}
	// Consume and ack the first 4 before the restart.
	ccfg := testConsumerConfig(t, cfg)
	// The server does not keep the nak of m4 across its restart: m4 stays
	// delivered-unacked and comes again after AckWait.
	ccfg.AckWait = time.Second
	rec := &recorder{}
	var cut sync.WaitGroup
	cut.Add(1)
	c1 := NewConsumer(js1, ccfg)
	r1 := start(t, c1, []uint32{1}, func(ctx context.Context, seq uint64, data []byte) error {
		if rec.len() == 4 {
			cut.Done()
			<-ctx.Done() // stop here; the nak hands m4 back
			return ctx.Err()
		}
		return rec.handle(ctx, seq, data)
	})
	cut.Wait()
	if err := r1.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	nc1.Close()
	s1.Shutdown()

	s2 := startServer(t, dir, 0)
	_, js2 := connect(t, s2)
	c2 := NewConsumer(js2, ccfg)
	if got := pending(t, c2, []uint32{1}); got != 6 {
		t.Errorf("Pending after restart = %d, want 6", got)
	}
	start(t, c2, []uint32{1}, rec.handle)
	testenv.Eventually(t, 30*time.Second, "backlog to drain", testenv.Until(func() bool { return pending(t, c2, []uint32{1}) == 0 }))

	got := rec.snapshot()
	if len(got) != 10 {
		t.Fatalf("handled %d messages over both servers, want 10: %+v", len(got), got)
	}
	for i, r := range got {
		if want := fmt.Sprintf("m%d", i); r.data != want {
			t.Errorf("message %d = %q, want %q", i, r.data, want)
		}
	}
}

func TestPendingReportsBacklog(t *testing.T) {
	_, js, cfg := setup(t, 2)
	pub := NewPublisher(js, cfg)
	for i := range 3 {
		publish(t, pub, 0, msgID(0, i), "a")
		publish(t, pub, 1, msgID(1, i), "b")
	}
	publish(t, pub, 1, msgID(1, 3), "b")
	c := NewConsumer(js, testConsumerConfig(t, cfg))
	both := []uint32{0, 1}
	if got := pending(t, c, both); got != 7 {
		t.Errorf("Pending before consumers exist = %d, want 7", got)
	}

	g := newGate()
	start(t, c, []uint32{1}, g.handle)
	<-g.entered // one of partition 1 is delivered and not acked
	if got := pending(t, c, []uint32{1}); got != 4 {
		t.Errorf("Pending(1) with one message in the handler = %d, want 4", got)
	}
	if got := pending(t, c, both); got != 7 {
		t.Errorf("Pending(0, 1) = %d, want 7", got)
	}
	close(g.release)
	testenv.Eventually(t, 30*time.Second, "partition 1 to drain", testenv.Until(func() bool { return pending(t, c, []uint32{1}) == 0 }))
	if got := pending(t, c, both); got != 3 {
		t.Errorf("Pending(0, 1) after partition 1 drained = %d, want 3", got)
	}
	if _, err := c.Pending(context.Background(), []uint32{2}); !errors.Is(err, ErrBadPartition) {
		t.Errorf("Pending(2): got %v, want ErrBadPartition", err)
	}
}

// TestConsumerSurvivesBrokerRestart keeps one Run going over a TCP
// connection while the broker restarts on the same port and store.
func TestConsumerSurvivesBrokerRestart(t *testing.T) {
	port := freePort(t)
	dir := t.TempDir()
	s1 := startServer(t, dir, port)
	nc, err := Connect(ConnConfig{
		URL:          s1.ClientURL(),
		Name:         "rollup",
		ReconnectMin: 5 * time.Millisecond,
		ReconnectMax: 50 * time.Millisecond,
	}, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	js := jsFor(t, nc)
	cfg := testStreamConfig(1)
	if err := EnsureStream(context.Background(), js, cfg); err != nil {
		t.Fatal(err)
	}
	pub := NewPublisher(js, cfg)
	rec := &recorder{}
	ccfg := testConsumerConfig(t, cfg)
	ccfg.AckWait = time.Second // an ack lost with the old server costs this
	c := NewConsumer(js, ccfg)
	r := start(t, c, []uint32{0}, rec.handle)

	publish(t, pub, 0, msgID(0, 0), "m0")
	testenv.Eventually(t, 30*time.Second, "m0", testenv.Until(func() bool { return rec.len() == 1 }))
	s1.Shutdown()
	startServer(t, dir, port)
	testenv.Eventually(t, 30*time.Second, "reconnect", testenv.Until(func() bool { return nc.Status() == nats.CONNECTED && nc.Stats().Reconnects == 1 }))
	publish(t, pub, 0, msgID(0, 1), "m1")
	// m1 arrives after the restart. If the ack of m0 was lost with the old
	// server (it can be, when the server goes before the ack reaches it),
	// m0 comes first again with its own sequence, which the rollup skips.
	testenv.Eventually(t, 30*time.Second, "m1 after the restart", testenv.Until(func() bool {
		recs := rec.snapshot()
		return recs[len(recs)-1].data == "m1"
	}))
	if err := r.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	got := rec.snapshot()
	for i := 1; i < len(got); i++ {
		if got[i].seq < got[i-1].seq {
			t.Errorf("handled %+v: sequence went backwards", got)
		}
	}
	if first, last := got[0], got[len(got)-1]; first.data != "m0" || last.seq <= first.seq {
		t.Errorf("handled %+v, want m0 (maybe twice) then m1 with a higher sequence", got)
	}
	if len(got) > 2 && (got[1] != got[0] || c.Stats().Redelivered != 1) {
		t.Errorf("handled %+v with Stats %+v, want only a redelivery of m0 between m0 and m1", got, c.Stats())
	}
}

func TestConsumerRecreatedAfterDelete(t *testing.T) {
	_, js, cfg := setup(t, 1)
	pub := NewPublisher(js, cfg)
	rec := &recorder{}
	c := NewConsumer(js, testConsumerConfig(t, cfg))
	start(t, c, []uint32{0}, rec.handle)
	publish(t, pub, 0, msgID(0, 0), "m0")
	testenv.Eventually(t, 30*time.Second, "m0 acked", testenv.Until(func() bool { return rec.len() == 1 && pending(t, c, []uint32{0}) == 0 }))
	if err := js.DeleteConsumer(context.Background(), cfg.Name, c.Name(0)); err != nil {
		t.Fatalf("DeleteConsumer: %v", err)
	}
	publish(t, pub, 0, msgID(0, 1), "m1")
	testenv.Eventually(t, 30*time.Second, "m1", testenv.Until(func() bool { return rec.len() == 2 }))
	if got := rec.snapshot()[1].data; got != "m1" {
		t.Errorf("after the consumer was deleted got %q, want m1", got)
	}
	if _, err := js.Consumer(context.Background(), cfg.Name, c.Name(0)); err != nil {
		t.Errorf("consumer after re-creation: %v", err)
	}
}
