package natsjs

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/edgecount/edgecount/internal/testenv"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		// An embedded server's goroutines (its file stores' flush loops,
		// the access-time service) can take seconds to end after its
		// Shutdown on a loaded machine: goleak's own retries (about 2 s)
		// failed CI with them twice. A leak stays a leak after 15 s.
		var err error
		for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(250 * time.Millisecond) {
			err = goleak.Find(
				// nats-server's setup of a stream source waits for the
				// source consumer's answer on a timer of its own (up to
				// 10 s), which a server's Shutdown does not end: a test
				// that shuts down a hub with a source being set up
				// leaves it behind until the timer fires. It is the
				// server's, not this package's, and ends by itself.
				goleak.IgnoreAnyFunction("github.com/nats-io/nats-server/v2/server.(*stream).trySetupSourceConsumer.func3"))
			if err == nil || time.Now().After(deadline) {
				break
			}
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "goleak: errors on a successful test run: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

func testLogger(t testing.TB) *slog.Logger {
	t.Helper()
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// startServer starts an embedded server on dir; port as in ServerConfig.
// It is shut down when the test ends.
func startServer(t testing.TB, dir string, port int) *Server {
	t.Helper()
	cfg := DefaultServerConfig(dir)
	cfg.Port = port
	cfg.Logger = testLogger(t)
	s, err := StartServer(cfg)
	if err != nil {
		t.Fatalf("StartServer: %v", err)
	}
	t.Cleanup(s.Shutdown)
	return s
}

// connect opens an in-process connection, closed when the test ends (before
// the server, whose cleanup was registered earlier).
func connect(t testing.TB, s *Server) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := s.Connect(t.Name())
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream.New: %v", err)
	}
	return nc, js
}

// jsFor returns a JetStream context on nc; the test closes nc itself.
func jsFor(t testing.TB, nc *nats.Conn) jetstream.JetStream {
	t.Helper()
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream.New: %v", err)
	}
	return js
}

func testStreamConfig(partitions int) StreamConfig {
	return StreamConfig{
		Name:            "TEST_SUMS",
		SubjectPrefix:   "test.sums",
		Partitions:      partitions,
		Replicas:        1,
		MaxAge:          time.Hour,
		DuplicateWindow: time.Minute,
	}
}

// setup starts a server with a stream of n partitions and returns a
// JetStream context on an in-process connection.
func setup(t testing.TB, partitions int) (*Server, jetstream.JetStream, StreamConfig) {
	t.Helper()
	s := startServer(t, t.TempDir(), 0)
	_, js := connect(t, s)
	cfg := testStreamConfig(partitions)
	if err := EnsureStream(context.Background(), js, cfg); err != nil {
		t.Fatalf("EnsureStream: %v", err)
	}
	return s, js, cfg
}

func testConsumerConfig(t testing.TB, stream StreamConfig) ConsumerConfig {
	return ConsumerConfig{
		Stream:   stream,
		Durable:  "test",
		AckWait:  5 * time.Second,
		RetryMin: 5 * time.Millisecond,
		RetryMax: 50 * time.Millisecond,
		Logger:   testLogger(t),
	}
}

// running is a Consumer.Run in the background.
type running struct {
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

// start runs c.Run in a goroutine; stop cancels it and waits. The test's
// cleanup stops it too.
func start(t testing.TB, c *Consumer, partitions []uint32, h Handler) *running {
	t.Helper()
	return startFunc(t, func(ctx context.Context) error { return c.Run(ctx, partitions, h) })
}

// startFunc runs run in a goroutine until stop; the test's cleanup stops it
// too.
func startFunc(t testing.TB, run func(ctx context.Context) error) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.err = run(ctx)
	}()
	t.Cleanup(func() { r.stop() })
	return r
}

func (r *running) stop() error {
	r.cancel()
	<-r.done
	return r.err
}

// wait returns Run's result once it has returned by itself.
func (r *running) wait(t testing.TB) error {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, "Run to return", testenv.Until(func() bool {
		select {
		case <-r.done:
			return true
		default:
			return false
		}
	}))

	return r.err
}

// record is one handler call.
type record struct {
	seq  uint64
	data string
}

// recorder is a handler that records what it applied.
type recorder struct {
	mu   sync.Mutex
	recs []record
}

func (r *recorder) handle(_ context.Context, seq uint64, data []byte) error {
	r.mu.Lock()
	r.recs = append(r.recs, record{seq, string(data)})
	r.mu.Unlock()
	return nil
}

func (r *recorder) snapshot() []record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]record(nil), r.recs...)
}

func (r *recorder) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.recs)
}

func publish(t testing.TB, p *Publisher, partition uint32, id, data string) {
	t.Helper()
	if err := p.Publish(context.Background(), partition, id, []byte(data)); err != nil {
		t.Fatalf("Publish(%d, %q): %v", partition, id, err)
	}
}

func msgID(partition uint32, i int) string {
	return fmt.Sprintf("agent-a/1/%d/%d", i, partition)
}

func pending(t testing.TB, c *Consumer, partitions []uint32) uint64 {
	t.Helper()
	n, err := c.Pending(context.Background(), partitions)
	if err != nil {
		t.Fatalf("Pending: %v", err)
	}
	return n
}
