package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/edgecount/edgecount/internal/testenv"
)

// cassTimeout is cassandra.timeout of the fault tests. The store settles a
// reaction whose answer did not come in time by a serial read once Timeout
// has passed since the request was sent, assuming the server has given up
// on it by then, so Timeout must exceed cas_contention_timeout plus
// write_request_timeout: 3 s + 2 s on the node scripts/cassandra.sh runs
// (scripts/cassandra/cassandra.yaml.in). A shorter value (say 2 s) would
// make the settle read run while the server may still apply the
// transaction; 6 s is the store's default and keeps that margin.
const cassTimeout = 6 * time.Second

// faultPartitions is the partition count of faultConfig's region file.
const faultPartitions = 4

// faultServers returns the NATS, Redis and Cassandra addresses, failing
// (under CI) or skipping when one of needed is not reachable.
func faultServers(t *testing.T, redis bool) (natsAddr, redisAddr, cassAddr string) {
	t.Helper()
	natsAddr = testenv.Addr("EDGECOUNT_NATS", "127.0.0.1:4222")
	redisAddr = testenv.Addr("EDGECOUNT_REDIS", "127.0.0.1:6379")
	cassAddr = testenv.Addr("EDGECOUNT_CASSANDRA", "127.0.0.1:9042")
	testenv.NeedService(t, "NATS", natsAddr, "./scripts/nats.sh start")
	if redis {
		testenv.NeedService(t, "Redis", redisAddr, "./scripts/redis.sh start")
	}
	testenv.NeedService(t, "Cassandra", cassAddr, "./scripts/cassandra.sh install && ./scripts/cassandra.sh start")
	return natsAddr, redisAddr, cassAddr
}

// faultConfig writes a us-east region file with a keyspace, stream and
// durable of this run's own and returns its path and the run name.
func faultConfig(t *testing.T, natsAddr, redisAddr, cassAddr string) (file, run string) {
	t.Helper()
	run = fmt.Sprintf("e2e%d", rand.Uint32())
	host, port, err := net.SplitHostPort(cassAddr)
	if err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`region: us-east
regions: [us-east, eu-west]
partitions: %d
agent:
  flush_interval: 200ms
nats:
  url: nats://%s
  stream: %s
  subject_prefix: %s.sums
  durable: %s
redis:
  addr: %s
cassandra:
  hosts: [%s]
  port: %s
  keyspace: %s
  replication_factor: 1
  timeout: %s
`, faultPartitions, natsAddr, strings.ToUpper(run), run, run, redisAddr, host, port, run, cassTimeout)
	file = filepath.Join(t.TempDir(), "us-east.yaml")
	if err := os.WriteFile(file, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return file, run
}

// deadAddr returns a loopback address where nothing listens: a port the
// kernel handed out and that was closed again.
func deadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// reply is an HTTP answer.
type reply struct {
	status     int
	retryAfter string
	body       string
	took       time.Duration
}

// send posts body as JSON with client and returns the answer; it does not
// touch t, so goroutines may call it.
func send(client *http.Client, url string, body any) (reply, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return reply{}, err
	}
	begin := time.Now()
	resp, err := client.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		return reply{took: time.Since(begin)}, err
	}
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return reply{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), body: string(data), took: time.Since(begin)}, err
}

// get returns the status and body of a GET.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode, string(data)
}

// metric returns the sum of a metric's samples at base/metrics.
func metric(t *testing.T, base, name string) float64 {
	t.Helper()
	status, body := get(t, base+"/metrics")
	if status != http.StatusOK {
		t.Fatalf("GET %s/metrics = %d %s", base, status, body)
	}
	var sum float64
	found := false
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, name)
		if !ok || rest == "" || (rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		sum += v
		found = true
	}
	if !found {
		t.Fatalf("%s/metrics has no %s", base, name)
	}
	return sum
}

// reaction is one POST /v1/reactions body.
type reaction struct {
	User    string `json:"user_id"`
	Content string `json:"content_id"`
	Action  string `json:"action"`
}

// recount reads every user's row of contentID and counts likes and
// dislikes: the totals the rollup must converge to.
func recount(t *testing.T, base, contentID string, users []string) counts {
	t.Helper()
	c := counts{Counters: map[string]int64{}}
	for _, u := range users {
		status, body := get(t, base+"/v1/reactions/"+u+"/"+contentID)
		if status != http.StatusOK {
			t.Fatalf("GET reaction of %s = %d %s", u, status, body)
		}
		var row struct {
			Action string `json:"action"`
		}
		if err := json.Unmarshal([]byte(body), &row); err != nil {
			t.Fatalf("reaction of %s: %v in %s", u, err, body)
		}
		switch row.Action {
		case "like":
			c.Likes++
		case "dislike":
			c.Dislikes++
		case "none":
		default:
			t.Fatalf("reaction of %s has action %q", u, row.Action)
		}
	}
	return c
}

// TestRedisDownNeverStopsWrites runs the agent with its shard directory
// pointing at a port where nothing listens: it starts, takes every write,
// reports itself degraded but ready, and the totals converge.
func TestRedisDownNeverStopsWrites(t *testing.T) {
	natsAddr, _, cassAddr := faultServers(t, false)
	agentBin, rollupBin := binaries(t)
	cfgFile, run := faultConfig(t, natsAddr, deadAddr(t), cassAddr)
	ru := start(t, "rollup", rollupBin, "--config", cfgFile, "--http", "127.0.0.1:0")
	ag := start(t, "edge-agent", agentBin, "--config", cfgFile, "--http", "127.0.0.1:0", "--agent-id", "us-east-"+run, "--data", t.TempDir())
	client := &http.Client{Timeout: 30 * time.Second}

	want := counts{Counters: map[string]int64{}}
	writes := []struct {
		r     reaction
		likes int64
		dis   int64
	}{
		{reaction{"ann", "clip", "like"}, 1, 0},
		{reaction{"bob", "clip", "like"}, 1, 0},
		{reaction{"cat", "clip", "dislike"}, 0, 1},
		{reaction{"bob", "clip", "dislike"}, -1, 1},
		{reaction{"ann", "clip", "none"}, -1, 0},
		{reaction{"dan", "clip", "like"}, 1, 0},
		{reaction{"dan", "clip", "like"}, 0, 0}, // repeated: unchanged
	}
	for i, w := range writes {
		got, err := send(client, ag.base+"/v1/reactions", w.r)
		if err != nil || got.status != http.StatusOK {
			t.Fatalf("reaction %d %+v = %d %s (%v), want 200", i, w.r, got.status, got.body, err)
		}
		want.Likes += w.likes
		want.Dislikes += w.dis
	}
	for i := 1; i <= 5; i++ {
		got, err := send(client, ag.base+"/v1/increments", map[string]any{"increments": []map[string]any{
			{"content_id": "clip", "counter": "view", "delta": i},
		}})
		if err != nil || got.status != http.StatusAccepted {
			t.Fatalf("increment %d = %d %s (%v), want 202", i, got.status, got.body, err)
		}
		want.Counters["view"] += int64(i)
	}

	status, body := get(t, ag.base+"/readyz")
	var ready struct {
		Status   string   `json:"status"`
		Degraded []string `json:"degraded"`
	}
	if err := json.Unmarshal([]byte(body), &ready); err != nil {
		t.Fatalf("/readyz body %q: %v", body, err)
	}
	if status != http.StatusOK || ready.Status != "degraded" || len(ready.Degraded) != 1 || !strings.HasPrefix(ready.Degraded[0], "redis: ") {
		t.Fatalf("/readyz = %d %s, want 200 degraded [redis: …]", status, body)
	}
	if got := metric(t, ag.base, "edgecount_directory_redis_up"); got != 0 {
		t.Fatalf("edgecount_directory_redis_up = %v, want 0", got)
	}

	waitCounts(t, ag.base, "clip", "global", want)
	waitCounts(t, ag.base, "clip", "us-east", want)
	waitCounts(t, ag.base, "clip", "eu-west", counts{Counters: map[string]int64{}})
	if got := recount(t, ag.base, "clip", []string{"ann", "bob", "cat", "dan"}); got.Likes != want.Likes || got.Dislikes != want.Dislikes {
		t.Fatalf("rows recount %v, want %v", got, want)
	}
	if status, body := get(t, ru.base+"/readyz"); status != http.StatusOK {
		t.Fatalf("rollup /readyz = %d %s", status, body)
	}
}

// cassandraPID returns the pid of the Cassandra JVM.
func cassandraPID(t *testing.T) int {
	t.Helper()
	out, err := exec.Command("pgrep", "-af", "org.apache.cassandra.service.CassandraDaemon").Output()
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if err != nil || len(lines) == 0 || lines[0] == "" {
		testenv.Unavailable(t, fmt.Sprintf("no Cassandra JVM on this machine to pause (pgrep: %v); start one with ./scripts/cassandra.sh install && ./scripts/cassandra.sh start", err))
	}
	if len(lines) > 1 {
		// scripts/cassandra.sh's node keeps its data in .cache/cassandra/run;
		// the two-DC cluster's nodes (scripts/cassandra-cluster.sh, same
		// jars) elsewhere.
		var shared []string
		for _, l := range lines {
			if strings.Contains(l, "-Dcassandra.storagedir=") && strings.Contains(l, "/.cache/cassandra/run ") {
				shared = append(shared, l)
			}
		}
		if len(shared) != 1 {
			t.Fatalf("several Cassandra JVMs and %d of them scripts/cassandra.sh's; cannot tell which to pause:\n%s", len(shared), out)
		}
		lines = shared
	}
	pid, err := strconv.Atoi(strings.Fields(lines[0])[0])
	if err != nil {
		t.Fatalf("pgrep printed %q: %v", out, err)
	}
	return pid
}

// resumer returns a function that resumes the Cassandra JVM pid (SIGCONT)
// the first time it is called; it also runs when the test ends, so that a
// paused JVM is resumed whatever happens.
func resumer(t *testing.T, pid int) (resume func()) {
	var once sync.Once
	resume = func() {
		once.Do(func() {
			if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
				t.Errorf("cannot resume Cassandra pid %d: %v", pid, err)
			}
		})
	}
	t.Cleanup(resume)
	return resume
}

// procState returns the state letter of a process (R, S, T, …) from
// /proc/<pid>/stat.
func procState(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatalf("cannot read state of pid %d: %v", pid, err)
	}
	// pid (comm) state …; comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:]))
	if i < 0 || len(f) == 0 {
		t.Fatalf("/proc/%d/stat is %q", pid, b)
	}
	return f[0]
}

// TestCassandraPauseGives503ThenConverges freezes the Cassandra JVM
// (SIGSTOP) under a running agent and rollup. While it is frozen, reactions
// answer 503 with Retry-After within a bounded time and increments still
// answer 202; the rollup keeps running and retries. Once it is resumed, the
// same reactions are retried until they apply, and the totals converge to
// exactly the recount of the users' rows plus every increment once.
func TestCassandraPauseGives503ThenConverges(t *testing.T) {
	natsAddr, redisAddr, cassAddr := faultServers(t, true)
	pid := cassandraPID(t)
	agentBin, rollupBin := binaries(t)
	cfgFile, run := faultConfig(t, natsAddr, redisAddr, cassAddr)
	ru := start(t, "rollup", rollupBin, "--config", cfgFile, "--http", "127.0.0.1:0")
	ag := start(t, "edge-agent", agentBin, "--config", cfgFile, "--http", "127.0.0.1:0", "--agent-id", "us-east-"+run, "--data", t.TempDir())
	client := &http.Client{Timeout: 30 * time.Second}

	mustPost := func(url string, body any, want int) {
		t.Helper()
		got, err := send(client, url, body)
		if err != nil || got.status != want {
			t.Fatalf("POST %s %v = %d %s (%v), want %d", url, body, got.status, got.body, err, want)
		}
	}
	views := int64(0)
	view := func(delta int64) {
		t.Helper()
		mustPost(ag.base+"/v1/increments", map[string]any{"increments": []map[string]any{
			{"content_id": "clip", "counter": "view", "delta": delta},
		}}, http.StatusAccepted)
		views += delta
	}

	// Before the pause: rows the paused writes will try to change.
	users := []string{"u0", "u1", "u2", "u3", "u4", "n0", "n1", "n2"}
	for _, u := range users[:5] {
		mustPost(ag.base+"/v1/reactions", reaction{u, "clip", "like"}, http.StatusOK)
	}
	view(7)
	waitCounts(t, ag.base, "clip", "global", counts{Likes: 5, Counters: map[string]int64{"view": views}})
	retriesBefore := metric(t, ru.base, "edgecount_consumer_retries_total")

	// Pause. Whatever happens, the JVM is resumed.
	resume := resumer(t, pid)
	defer resume()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("cannot pause Cassandra pid %d: %v", pid, err)
	}
	paused := time.Now()
	// Every thread of the JVM is stopped before the first write is sent.
	testenv.Eventually(t, 10*time.Second, fmt.Sprintf("Cassandra pid %d in state T after SIGSTOP", pid), func() (string, bool) {
		state := procState(t, pid)
		return "state " + state, state == "T"
	})

	// Updates, a delete and inserts, all sent while the store is frozen.
	changes := []reaction{
		{"u0", "clip", "dislike"}, {"u1", "clip", "dislike"}, {"u2", "clip", "dislike"},
		{"u3", "clip", "none"},
		{"n0", "clip", "like"}, {"n1", "clip", "dislike"}, {"n2", "clip", "like"},
	}
	// A reaction write returns within about five times the store's
	// Timeout (store/cassandra); anything slower is a hang.
	bound := 5*cassTimeout + 10*time.Second
	slow := &http.Client{Timeout: bound}
	replies := make([]reply, len(changes))
	errs := make([]error, len(changes))
	var wg sync.WaitGroup
	for i, c := range changes {
		wg.Go(func() { replies[i], errs[i] = send(slow, ag.base+"/v1/reactions", c) })
	}

	// Increments do not touch the store.
	for d := int64(1); d <= 3; d++ {
		view(d)
	}
	wg.Wait()
	for i, c := range changes {
		got := replies[i]
		if errs[i] != nil {
			t.Errorf("paused reaction %+v: no answer within %v: %v", c, bound, errs[i])
			continue
		}
		if secs, err := strconv.Atoi(got.retryAfter); got.status != http.StatusServiceUnavailable || err != nil || secs < 1 {
			t.Errorf("paused reaction %+v = %d Retry-After %q %s, want 503 with Retry-After", c, got.status, got.retryAfter, got.body)
		}
		t.Logf("paused reaction %s→%s: %d after %v", c.User, c.Action, got.status, got.took.Round(time.Millisecond))
	}
	view(4)

	// The rollup fails to apply what was flushed, keeps the message and
	// retries; it stays alive.
	testenv.Eventually(t, 3*cassTimeout, "a retry by the rollup while the store is frozen", func() (string, bool) {
		if metric(t, ru.base, "edgecount_consumer_retries_total") != retriesBefore {
			return "", true
		}
		return fmt.Sprintf("no retry after %v of frozen store; the rollup's log ends:\n%s",
			time.Since(paused).Round(time.Millisecond), tail(ru.stderr.String(), 4000)), false
	})
	if status, body := get(t, ru.base+"/healthz"); status != http.StatusOK {
		t.Fatalf("rollup /healthz while paused = %d %s", status, body)
	}
	if t.Failed() {
		t.FailNow()
	}
	resume()
	t.Logf("Cassandra paused for %v", time.Since(paused).Round(time.Millisecond))

	// The same reactions, retried until they apply. The answers while
	// paused wrote nothing, so each retry changes its row.
	deadline := time.Now().Add(60 * time.Second)
	for _, c := range changes {
		for {
			got, err := send(client, ag.base+"/v1/reactions", c)
			if err == nil && got.status == http.StatusOK {
				var res struct {
					Changed bool `json:"changed"`
				}
				if err := json.Unmarshal([]byte(got.body), &res); err != nil || !res.Changed {
					t.Fatalf("retried reaction %+v = %s (%v), want changed: the write answered 503 had applied", c, got.body, err)
				}
				break
			}
			if err == nil && got.status != http.StatusServiceUnavailable {
				t.Fatalf("retried reaction %+v = %d %s, want 200 or 503", c, got.status, got.body)
			}
			if time.Now().After(deadline) {
				t.Fatalf("retried reaction %+v still failing: %d %s (%v)", c, got.status, got.body, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	view(5)

	want := recount(t, ag.base, "clip", users)
	if want.Likes != 3 || want.Dislikes != 4 { // u4, n0, n2 like; u0, u1, u2, n1 dislike
		t.Fatalf("rows after the retries: %v, want likes=3 dislikes=4", want)
	}
	want.Counters["view"] = views
	waitCounts(t, ag.base, "clip", "global", want)
	waitCounts(t, ag.base, "clip", "us-east", want)
	waitCounts(t, ag.base, "clip", "eu-west", counts{Counters: map[string]int64{}})
	if status, body := get(t, ru.base+"/readyz"); status != http.StatusOK {
		t.Fatalf("rollup /readyz after resume = %d %s", status, body)
	}
}
