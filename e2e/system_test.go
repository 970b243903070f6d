package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/edgecount/edgecount/internal/testenv"
)

// systemOptions shapes one fault row's system.
type systemOptions struct {
	// nats and redis are the servers' addresses; empty means the shared
	// ones (EDGECOUNT_NATS, EDGECOUNT_REDIS).
	nats, redis string
	// agents and rollups are how many of each run (default 2 and 2).
	agents, rollups int
	// data returns agent i's --data directory; nil means a directory of
	// the test's own.
	data func(i int) string
	// rollupEnv returns what rollup i adds to its environment (nil: nothing).
	rollupEnv func(i int) []string
}

// faultSystem is a fault row's system: edge agents and rollups as separate
// processes (start, process_test.go) on a region file with a keyspace,
// stream and durable of the row's own (faultConfig). Agents keep their
// HTTP address, id and data directory across restarts, as they would
// behind a load balancer; rollups share every partition
// (natsjs.GroupConsumer). Only the test's goroutine may call its methods.
type faultSystem struct {
	t                   *testing.T
	cfgFile, run        string
	agentBin, rollupBin string
	agents              []*agentNode
	rollups             []*proc // nil: killed and not restarted
	rollupEnv           func(i int) []string
}

// agentNode is one agent's identity, which survives its restarts.
type agentNode struct {
	id, data, addr string
	p              *proc // nil while it does not run
}

// base is the agent's URL.
func (a *agentNode) base() string { return "http://" + a.addr }

func newFaultSystem(t *testing.T, o systemOptions) *faultSystem {
	t.Helper()
	natsAddr, redisAddr, cassAddr := faultServers(t, o.redis == "")
	if o.nats != "" {
		natsAddr = o.nats
	}
	if o.redis != "" {
		redisAddr = o.redis
	}
	if o.agents == 0 {
		o.agents = 2
	}
	if o.rollups == 0 {
		o.rollups = 2
	}
	s := &faultSystem{t: t, rollupEnv: o.rollupEnv}
	s.agentBin, s.rollupBin = binaries(t)
	s.cfgFile, s.run = faultConfig(t, natsAddr, redisAddr, cassAddr)
	for i := range o.rollups {
		s.rollups = append(s.rollups, nil)
		s.startRollup(i)
	}
	for i := range o.agents {
		a := &agentNode{id: fmt.Sprintf("us-east-%s-%d", s.run, i), addr: "127.0.0.1:" + strconv.Itoa(freePort(t))}
		if o.data != nil {
			a.data = o.data(i)
		} else {
			a.data = filepath.Join(t.TempDir(), "agent")
		}
		if err := os.MkdirAll(a.data, 0o750); err != nil {
			t.Fatal(err)
		}
		s.agents = append(s.agents, a)
		s.startAgent(i)
	}
	for _, a := range s.agents {
		s.waitReady(a.base())
	}
	return s
}

// urls returns the agents' base URLs.
func (s *faultSystem) urls() []string {
	var u []string
	for _, a := range s.agents {
		u = append(u, a.base())
	}
	return u
}

// startAgent starts agent i on its address, id and data directory.
func (s *faultSystem) startAgent(i int) {
	s.t.Helper()
	a := s.agents[i]
	if a.p != nil {
		s.t.Fatalf("agent %d already runs", i)
	}
	a.p = start(s.t, fmt.Sprintf("edge-agent-%d", i), s.agentBin, "--config", s.cfgFile,
		"--http", a.addr, "--agent-id", a.id, "--data", a.data)
}

// killAgent SIGKILLs agent i and waits until it is gone.
func (s *faultSystem) killAgent(i int) {
	s.t.Helper()
	a := s.agents[i]
	if a.p == nil {
		s.t.Fatalf("agent %d does not run", i)
	}
	kill(s.t, a.p)
	a.p = nil
}

// exited reports whether agent i ended on its own, with how.
func (s *faultSystem) exited(i int) (bool, error) {
	a := s.agents[i]
	if a.p == nil {
		return false, nil
	}
	select {
	case err := <-a.p.done:
		// Received: the process state is now safe to read, and stop
		// (at cleanup) sees it and does nothing.
		a.p = nil
		return true, err
	default:
		return false, nil
	}
}

// pauseAgent freezes agent i (SIGSTOP) and returns the function that
// resumes it (SIGCONT); the resume also runs when the test ends, before
// the agent is stopped.
func (s *faultSystem) pauseAgent(i int) (resume func()) {
	s.t.Helper()
	pid := s.agents[i].p.cmd.Process.Pid
	done := false
	resume = func() {
		if !done {
			done = true
			if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
				s.t.Errorf("cannot resume agent %d (pid %d): %v", i, pid, err)
			}
		}
	}
	s.t.Cleanup(resume)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		s.t.Fatalf("cannot pause agent %d (pid %d): %v", i, pid, err)
	}
	return resume
}

// startRollup starts rollup i (a new group member each time).
func (s *faultSystem) startRollup(i int) {
	s.t.Helper()
	if s.rollups[i] != nil {
		s.t.Fatalf("rollup %d already runs", i)
	}
	var env []string
	if s.rollupEnv != nil {
		env = s.rollupEnv(i)
	}
	s.rollups[i] = startEnv(s.t, fmt.Sprintf("rollup-%d", i), env, s.rollupBin, "--config", s.cfgFile, "--http", "127.0.0.1:0")
}

// killRollup SIGKILLs rollup i and waits until it is gone.
func (s *faultSystem) killRollup(i int) {
	s.t.Helper()
	if s.rollups[i] == nil {
		s.t.Fatalf("rollup %d does not run", i)
	}
	kill(s.t, s.rollups[i])
	s.rollups[i] = nil
}

// waitReady waits until base/readyz answers 200 (degraded included).
func (s *faultSystem) waitReady(base string) {
	s.t.Helper()
	c := newClient(base, 5*time.Second)
	testenv.Eventually(s.t, 60*time.Second, base+"/readyz = 200", func() (string, bool) {
		err := c.Ready(context.Background())
		if err != nil {
			return err.Error(), false
		}
		return "200", true
	})
}

// logs returns the tail of every process's stderr, for a failed row.
func (s *faultSystem) logs(n int) string {
	var out string
	for i, a := range s.agents {
		if a.p != nil {
			out += fmt.Sprintf("--- edge-agent-%d (tail)\n%s\n", i, tail(a.p.stderr.String(), n))
		}
	}
	for i, r := range s.rollups {
		if r != nil {
			out += fmt.Sprintf("--- rollup-%d (tail)\n%s\n", i, tail(r.stderr.String(), n))
		}
	}
	return out
}

// kill SIGKILLs p and waits for it to exit. Receiving its exit makes its
// process state safe to read, so that stop (at cleanup) does nothing.
func kill(t *testing.T, p *proc) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Logf("SIGKILL %s: %v", p.name, err)
	}
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s still runs 30s after SIGKILL", p.name)
	}
}
