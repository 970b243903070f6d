package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/edgecount/edgecount/internal/testenv"
)

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// binaries builds edge-agent and rollup once per test binary run.
func binaries(t *testing.T) (agent, rollup string) {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "edgecount-e2e-bin")
		if buildErr != nil {
			return
		}
		for _, name := range []string{"edge-agent", "rollup"} {
			out, err := exec.Command("go", "build", "-race", "-o", filepath.Join(binDir, name), "../cmd/"+name).CombinedOutput()
			if err != nil {
				buildErr = fmt.Errorf("go build %s: %v\n%s", name, err, out)
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(binDir, "edge-agent"), filepath.Join(binDir, "rollup")
}

// proc is a running edgecount process.
type proc struct {
	t      *testing.T
	name   string
	cmd    *exec.Cmd
	base   string // http://host:port from its start line
	stderr *testenv.Buffer
	done   chan error
}

// tail returns the last n bytes of s.
func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func start(t *testing.T, name, bin string, args ...string) *proc {
	t.Helper()
	return startEnv(t, name, nil, bin, args...)
}

// startEnv is start with env added to the process's environment.
func startEnv(t *testing.T, name string, env []string, bin string, args ...string) *proc {
	t.Helper()
	p, err := launch(t, name, env, bin, args...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// launch starts bin and waits for its start line, which names its HTTP
// address. It fails no test itself, so it may run on any goroutine.
func launch(t *testing.T, name string, env []string, bin string, args ...string) (*proc, error) {
	cmd := exec.Command(bin, args...)
	// Info: shown only when a test fails, and then the more the better.
	cmd.Env = append(append(os.Environ(), "EDGECOUNT_LOG_LEVEL=info"), env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	p := &proc{t: t, name: name, cmd: cmd, stderr: new(testenv.Buffer), done: make(chan error, 1)}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	i := strings.Index(line, "http://")
	if err != nil || i < 0 {
		cmd.Process.Kill()
		cmd.Wait()
		if err != nil {
			return nil, fmt.Errorf("%s: no start line: %v\n%s", name, err, p.stderr)
		}
		return nil, fmt.Errorf("%s: start line %q has no address", name, line)
	}
	go io.Copy(io.Discard, stdout)
	go func() { p.done <- cmd.Wait() }()
	p.base = strings.Fields(line[i:])[0]
	t.Cleanup(func() { p.stop() })
	return p, nil
}

// stop sends SIGTERM and requires a clean exit 0.
func (p *proc) stop() {
	p.t.Helper()
	if p.cmd.ProcessState != nil {
		return
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		if err != nil {
			p.t.Errorf("%s exited with %v after SIGTERM\n%s", p.name, err, p.stderr)
		}
	case <-time.After(60 * time.Second):
		p.cmd.Process.Kill()
		p.t.Errorf("%s did not stop within 60s\n%s", p.name, p.stderr)
	}
}

func post(t *testing.T, url string, body any) {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("POST %s = %d %s", url, resp.StatusCode, data)
	}
}

type counts struct {
	Likes    int64            `json:"likes"`
	Dislikes int64            `json:"dislikes"`
	Counters map[string]int64 `json:"counters"`
}

func (c counts) String() string {
	return fmt.Sprintf("likes=%d dislikes=%d view=%d", c.Likes, c.Dislikes, c.Counters["view"])
}

func waitCounts(t *testing.T, base, id, region string, want counts) {
	t.Helper()
	var got counts
	testenv.Eventually(t, 60*time.Second, fmt.Sprintf("counts of %s in %s %v", id, region, want), func() (string, bool) {
		resp, err := http.Get(base + "/v1/counts/" + id + "?region=" + region)
		if err != nil {
			return fmt.Sprintf("%v (last counts %v)", err, got), false
		}
		json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
		return got.String(), got.String() == want.String()
	})
}

// TestAgentAndRollupProcesses runs edge-agent and rollup as separate
// processes against real NATS, Redis and Cassandra, restarting each in
// between, and checks that the converged totals count every acknowledged
// write exactly once.
func TestAgentAndRollupProcesses(t *testing.T) {
	natsAddr, redisAddr, cassAddr := faultServers(t, true)
	agentBin, rollupBin := binaries(t)
	// A keyspace, stream and consumer names of this run's own, so runs
	// against the same servers never see each other's data.
	cfgFile, run := faultConfig(t, natsAddr, redisAddr, cassAddr)
	startRollup := func() *proc {
		return start(t, "rollup", rollupBin, "--config", cfgFile, "--http", "127.0.0.1:0")
	}
	agentData := t.TempDir() // kept across the agent's restarts, as its log must be
	startAgent := func() *proc {
		return start(t, "edge-agent", agentBin, "--config", cfgFile, "--http", "127.0.0.1:0", "--agent-id", "us-east-"+run, "--data", agentData)
	}
	ru := startRollup()
	ag := startAgent()

	want := counts{Counters: map[string]int64{}}
	writes := func(round int) {
		for i := 0; i < 5; i++ {
			post(t, ag.base+"/v1/reactions", map[string]string{"user_id": fmt.Sprintf("u%d-%d", round, i), "content_id": "clip", "action": "like"})
			want.Likes++
		}
		post(t, ag.base+"/v1/reactions", map[string]string{"user_id": fmt.Sprintf("u%d-0", round), "content_id": "clip", "action": "dislike"})
		want.Likes--
		want.Dislikes++
		post(t, ag.base+"/v1/increments", map[string]any{"increments": []map[string]any{
			{"content_id": "clip", "counter": "view", "delta": 10 + round},
		}})
		want.Counters["view"] += int64(10 + round)
	}

	writes(0)
	waitCounts(t, ag.base, "clip", "global", want)

	// Restart the agent: its SIGTERM flush carries what it held.
	writes(1)
	ag.stop()
	ag = startAgent()
	writes(2)
	waitCounts(t, ag.base, "clip", "global", want)

	// Restart the rollup while writes are pending: nothing is lost or
	// applied twice.
	ru.stop()
	writes(3)
	time.Sleep(500 * time.Millisecond) // let the agent publish while no rollup runs
	ru = startRollup()
	writes(4)
	waitCounts(t, ag.base, "clip", "global", want)
	waitCounts(t, ag.base, "clip", "us-east", want)
	waitCounts(t, ag.base, "clip", "eu-west", counts{Counters: map[string]int64{}})

	resp, err := http.Get(ru.base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("rollup /readyz = %d", resp.StatusCode)
	}
}
