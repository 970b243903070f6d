package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/edgecount/edgecount/internal/testenv"
)

// This file runs servers of a test's own (nats-server, redis-server) as
// child processes, so that a fault row can stop and start them without
// touching the shared servers other tests use.

// freePort returns a loopback port the kernel handed out and that was
// closed again.
func freePort(t *testing.T) int {
	t.Helper()
	// Below the kernel's ephemeral range: a free port in that range can be
	// handed to any outgoing connection (a client of Cassandra, NATS, an
	// agent) before the server the test starts binds it, which failed CI
	// with "address already in use" (see freeBase). Each port is handed out
	// once per test binary.
	lo := ephemeralLow()
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 1000 {
		p := portsFloor + rand.IntN(max(1, lo-portsFloor))
		if portsGiven[p] {
			continue
		}
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		ln.Close()
		portsGiven[p] = true
		return p
	}
	t.Fatalf("no free port between %d and the ephemeral range (%d)", portsFloor, lo)
	return 0
}

// portsFloor is the lowest port freePort hands out. (freeBase's ranges for
// local.sh lie between 10000 and the ephemeral range too; both check that a
// port is free before they hand it out, and the tests that use them run one
// at a time.)
const portsFloor = 20000

var (
	portsMu    sync.Mutex
	portsGiven = map[int]bool{}
)

var (
	natsBinOnce sync.Once
	natsBin     string
	natsBinErr  error
)

// natsServerBinary returns a nats-server binary: the one scripts/nats.sh
// install builds (.cache/bin/nats-server), else one built here from the
// version go.mod requires.
func natsServerBinary(t *testing.T) string {
	t.Helper()
	natsBinOnce.Do(func() {
		if p, err := filepath.Abs(filepath.Join("..", ".cache", "bin", "nats-server")); err == nil {
			if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
				natsBin = p
				return
			}
		}
		dir, err := os.MkdirTemp("", "edgecount-e2e-nats")
		if err != nil {
			natsBinErr = err
			return
		}
		natsBin = filepath.Join(dir, "nats-server")
		out, err := exec.Command("go", "build", "-o", natsBin, "github.com/nats-io/nats-server/v2").CombinedOutput()
		if err != nil {
			natsBinErr = fmt.Errorf("go build nats-server: %v\n%s", err, out)
		}
	})
	if natsBinErr != nil {
		t.Fatal(natsBinErr)
	}
	return natsBin
}

// server is a child server process that a test stops and starts again on
// the same address (and, for nats-server, the same store).
type server struct {
	t     *testing.T
	name  string
	addr  string   // host:port clients use
	argv  []string // command line
	ready func() error

	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{}
	stderr *testenv.Buffer
}

// startServer starts argv and waits until ready succeeds; the server is
// stopped when the test ends.
func startServer(t *testing.T, name, addr string, argv []string, ready func() error) *server {
	t.Helper()
	s := &server{t: t, name: name, addr: addr, argv: argv, ready: ready}
	s.start()
	t.Cleanup(s.stop)
	return s
}

// start runs the server (again) and waits up to 30 s until it is ready.
func (s *server) start() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		s.t.Fatalf("%s already runs", s.name)
	}
	cmd := exec.Command(s.argv[0], s.argv[1:]...)
	stderr := new(testenv.Buffer)
	cmd.Stdout, cmd.Stderr = stderr, stderr
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("cannot start %s: %v", s.name, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	s.cmd, s.done, s.stderr = cmd, done, stderr
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := s.ready()
		if err == nil {
			return
		}
		select {
		case <-done:
			s.cmd = nil
			s.t.Fatalf("%s exited while starting: %v\n%s", s.name, cmd.ProcessState, tail(stderr.String(), 4000))
		default:
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("%s not ready after 30s: %v\n%s", s.name, err, tail(stderr.String(), 4000))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop ends the server with SIGTERM (SIGKILL after 30 s) and waits for it;
// stopping a stopped server does nothing.
func (s *server) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		s.cmd.Process.Kill()
		<-s.done
		s.t.Errorf("%s did not stop within 30s of SIGTERM; killed", s.name)
	}
	s.cmd = nil
}

// startNATSServer runs a nats-server of the test's own on a free loopback
// port: JetStream in a directory of the test's, every write synced to disk
// before it is acknowledged, as scripts/nats/nats.conf.in configures the
// shared one. A restart (stop, start) keeps the store.
func startNATSServer(t *testing.T) *server {
	t.Helper()
	bin := natsServerBinary(t)
	dir := t.TempDir()
	port, httpPort := freePort(t), freePort(t)
	conf := filepath.Join(dir, "nats.conf")
	err := os.WriteFile(conf, fmt.Appendf(nil, `server_name: "e2e-%d"
listen: "127.0.0.1:%d"
http: "127.0.0.1:%d"
jetstream {
	store_dir: %q
	sync_interval: always
}
`, port, port, httpPort, filepath.Join(dir, "jetstream")), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	healthz := fmt.Sprintf("http://127.0.0.1:%d/healthz", httpPort)
	client := &http.Client{Timeout: 2 * time.Second}
	return startServer(t, "nats-server", fmt.Sprintf("127.0.0.1:%d", port), []string{bin, "--config", conf}, func() error {
		// The full health check: JetStream has recovered every stream.
		resp, err := client.Get(healthz)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s = %d", healthz, resp.StatusCode)
		}
		return nil
	})
}

// startRedisServer runs a redis-server of the test's own on a free
// loopback port, keeping nothing on disk (as scripts/redis.sh does).
func startRedisServer(t *testing.T) *server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		testenv.Unavailable(t, "no redis-server on PATH; install it with ./scripts/redis.sh install")
	}
	port := freePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	return startServer(t, "redis-server", addr,
		[]string{bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", t.TempDir()},
		func() error { return redisPing(addr) })
}

// redisPing sends PING to addr and wants +PONG.
func redisPing(addr string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	buf := make([]byte, 16)
	n, err := c.Read(buf)
	if err != nil {
		return err
	}
	if string(buf[:n]) != "+PONG\r\n" {
		return fmt.Errorf("PING answered %q", buf[:n])
	}
	return nil
}
