package redis

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/edgecount/edgecount/internal/testenv"
)

func TestMain(m *testing.M) {
	// go-redis logs every failed dial; the tests that stop Redis cause many.
	SetClientLogger(slog.New(slog.DiscardHandler))
	goleak.VerifyTestMain(m)
}

// redisAddr returns the address of the shared test Redis (EDGECOUNT_REDIS,
// default 127.0.0.1:6379). When it does not answer the test fails under CI
// and is skipped otherwise (testenv.NeedService).
func redisAddr(t testing.TB) string {
	t.Helper()
	addr := testenv.Addr("EDGECOUNT_REDIS", DefaultAddr)
	testenv.NeedService(t, "Redis", addr, "./scripts/redis.sh start (or point EDGECOUNT_REDIS at one)")
	return addr
}

func rawClient(addr string) *goredis.Client {
	return goredis.NewClient(&goredis.Options{
		Addr: addr, DialTimeout: time.Second, DialerRetries: 1, MaxRetries: -1, DisableIdentity: true,
	})
}

// testRegion returns a region name no other test or run uses, and deletes
// its keys when the test ends.
func testRegion(t testing.TB, addr string) string {
	t.Helper()
	region := fmt.Sprintf("test-%d-%x", os.Getpid(), rand.Uint64())
	t.Cleanup(func() {
		c := rawClient(addr)
		defer c.Close()
		ctx := context.Background()
		iter := c.Scan(ctx, 0, "ec:{"+region+"}:*", 100).Iterator()
		var doomed []string
		for iter.Next(ctx) {
			doomed = append(doomed, iter.Val())
		}
		if err := iter.Err(); err != nil {
			t.Logf("cannot list the test's keys: %v", err)
			return
		}
		if len(doomed) > 0 {
			if err := c.Del(ctx, doomed...).Err(); err != nil {
				t.Logf("cannot delete the test's keys: %v", err)
			}
		}
	})
	return region
}

// testConfig is DefaultConfig for region on addr with a fast heartbeat and
// timeouts generous enough for a loaded shared machine.
func testConfig(addr, region string) Config {
	cfg := DefaultConfig()
	cfg.Addr = addr
	cfg.Region = region
	cfg.PingInterval = 100 * time.Millisecond
	cfg.ReadTimeout = 5 * time.Second
	cfg.WriteTimeout = 5 * time.Second
	return cfg
}

// open starts a Directory that the test closes when it ends, with an
// OnChange that records into the returned log.
func open(t testing.TB, cfg Config, hooks ...goredis.Hook) (*Directory, *changeLog) {
	t.Helper()
	d, err := newDirectory(context.Background(), cfg, nil, hooks...)
	if err != nil {
		t.Fatalf("newDirectory: %v", err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	log := &changeLog{}
	d.SetOnChange(log.record)
	return d, log
}

// waitReady waits until d is subscribed and has done its first resync, so
// that no background command interleaves with what a test counts.
func waitReady(t testing.TB, d *Directory) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, "the directory to subscribe and resync", testenv.Until(func() bool {
		return d.Healthy() && d.Stats().Resyncs >= 1
	}))
}

// waitIdle waits until no miss is queued or being fetched.
func waitIdle(t testing.TB, d *Directory) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, "the fetch queue to drain", testenv.Until(func() bool {
		d.pmu.Lock()
		defer d.pmu.Unlock()
		return len(d.pending) == 0
	}))
}

// fetchErrors is a condition for testenv.Eventually: d has counted a
// failed fetch.
func fetchErrors(d *Directory) func() (string, bool) {
	return func() (string, bool) {
		n := d.Stats().FetchErrors
		return fmt.Sprintf("%d failed fetches", n), n >= 1
	}
}

// seed writes an entry the way Set does but without publishing it, as an
// operator's tool or a message lost in transit would leave it.
func seed(t testing.TB, addr, region, contentID, counter string, shards int) {
	t.Helper()
	c := rawClient(addr)
	defer c.Close()
	k := newKeys(region)
	ctx := context.Background()
	_, err := c.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		p.SAdd(ctx, k.contentKey(contentID), counter)
		p.HSet(ctx, k.counterKey(contentID, counter), fieldShards, shards)
		return nil
	})
	if err != nil {
		t.Fatalf("cannot seed %s/%s: %v", contentID, counter, err)
	}
}

type change struct {
	contentID, counter string
	shards             int
}

// changeLog records OnChange calls.
type changeLog struct {
	mu  sync.Mutex
	got []change
}

func (l *changeLog) record(contentID, counter string, shards int) {
	l.mu.Lock()
	l.got = append(l.got, change{contentID, counter, shards})
	l.mu.Unlock()
}

func (l *changeLog) all() []change {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.got)
}

func (l *changeLog) has(c change) bool { return slices.Contains(l.all(), c) }

// recorder is a go-redis hook that records every command sent through the
// client (one entry per round trip) and can hold round trips until
// released.
type recorder struct {
	mu    sync.Mutex
	trips [][]string // command names of each round trip
	// hold, when not nil, is waited on by every round trip after it is
	// recorded; entered receives one value per held round trip.
	hold    chan struct{}
	entered chan struct{}
}

func (r *recorder) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (r *recorder) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		r.trip(ctx, []goredis.Cmder{cmd})
		return next(ctx, cmd)
	}
}

func (r *recorder) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		r.trip(ctx, cmds)
		return next(ctx, cmds)
	}
}

func (r *recorder) trip(ctx context.Context, cmds []goredis.Cmder) {
	names := make([]string, len(cmds))
	for i, c := range cmds {
		names[i] = c.Name()
	}
	r.mu.Lock()
	r.trips = append(r.trips, names)
	hold, entered := r.hold, r.entered
	r.mu.Unlock()
	if hold == nil {
		return
	}
	entered <- struct{}{}
	select {
	case <-hold:
	case <-ctx.Done():
	}
}

// holdAll makes every following round trip wait until the returned
// release is called; entered tells when one starts waiting.
func (r *recorder) holdAll() (entered <-chan struct{}, release func()) {
	hold := make(chan struct{})
	ent := make(chan struct{}, 16)
	r.mu.Lock()
	r.hold, r.entered = hold, ent
	r.mu.Unlock()
	var once sync.Once
	return ent, func() {
		once.Do(func() {
			r.mu.Lock()
			r.hold, r.entered = nil, nil
			r.mu.Unlock()
			close(hold)
		})
	}
}

// since returns the round trips recorded after the first n.
func (r *recorder) since(n int) [][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.trips[n:])
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.trips)
}

// server is a redis-server process of the test's own, on its own port.
type server struct {
	t    testing.TB
	bin  string
	port int
	dir  string
	cmd  *exec.Cmd
}

func (s *server) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// startServer starts a redis-server on a free loopback port, keeping its
// files in a temporary directory; it is killed when the test ends.
func startServer(t testing.TB) *server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		testenv.Unavailable(t, "redis-server not on PATH; install it with ./scripts/redis.sh install")
	}
	s := &server{t: t, bin: bin, port: freePort(t), dir: t.TempDir()}
	s.start()
	t.Cleanup(func() {
		if s.cmd != nil {
			_ = s.cmd.Process.Kill()
			_ = s.cmd.Wait()
		}
	})
	return s
}

// start runs the server (again) on its port and directory, loading the
// dump a SHUTDOWN SAVE left there, and waits until it answers.
func (s *server) start() {
	s.t.Helper()
	s.cmd = exec.Command(s.bin,
		"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no",
		"--dir", s.dir, "--dbfilename", "dump.rdb",
		"--logfile", filepath.Join(s.dir, "redis.log"))
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("cannot start %s: %v", s.bin, err)
	}
	c := rawClient(s.addr())
	defer c.Close()
	testenv.Eventually(s.t, 10*time.Second, "redis-server on "+s.addr()+" to answer", testenv.Until(func() bool {
		return c.Ping(context.Background()).Err() == nil
	}))
}

// shutdown stops the server with SHUTDOWN SAVE, so that the next start
// finds the data, and waits for the process to exit.
func (s *server) shutdown() {
	s.t.Helper()
	c := rawClient(s.addr())
	defer c.Close()
	// The server closes the connection instead of answering.
	if err := c.ShutdownSave(context.Background()).Err(); err != nil && !isClosedConn(err) {
		s.t.Fatalf("SHUTDOWN SAVE: %v", err)
	}
	if err := s.cmd.Wait(); err != nil {
		s.t.Fatalf("redis-server exited with %v", err)
	}
	s.cmd = nil
}

func isClosedConn(err error) bool {
	var ne net.Error
	return errors.Is(err, io.EOF) || errors.As(err, &ne)
}

// freePort returns a loopback TCP port nobody listens on at the moment.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("cannot find a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
