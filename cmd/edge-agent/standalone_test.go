package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
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

// startTestNode starts a standalone node on a random port under dir.
func startTestNode(t testing.TB, dir string, flush time.Duration) *node {
	t.Helper()
	return startNodeArgs(t, "--http", "127.0.0.1:0", "--data", dir, "--region", "local", "--flush-interval", flush.String())
}

// startNodeArgs starts a node configured by flags alone.
func startNodeArgs(t testing.TB, args ...string) *node {
	t.Helper()
	cfg, err := loadConfig(args, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	n, err := startNode(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func shutdown(t *testing.T, n *node) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := n.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}

func call(t *testing.T, method, url string, body any, wantStatus int, out any) {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != wantStatus {
		t.Fatalf("%s %s = %d %s, want %d", method, url, resp.StatusCode, data, wantStatus)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: cannot decode %s: %v", method, url, data, err)
		}
	}
}

type countsJSON struct {
	ContentID string           `json:"content_id"`
	Region    string           `json:"region"`
	Likes     int64            `json:"likes"`
	Dislikes  int64            `json:"dislikes"`
	Counters  map[string]int64 `json:"counters"`
}

func (c countsJSON) String() string {
	return fmt.Sprintf("likes=%d dislikes=%d counters=%v", c.Likes, c.Dislikes, c.Counters)
}

// waitCounts polls until the item's totals in region equal want.
func waitCounts(t *testing.T, base, id, region string, want countsJSON) {
	t.Helper()
	testenv.Eventually(t, 20*time.Second, fmt.Sprintf("counts of %s in %s = %v", id, region, want), func() (string, bool) {
		var got countsJSON
		call(t, "GET", base+"/v1/counts/"+id+"?region="+region, nil, 200, &got)
		return fmt.Sprintf("counts %v", got), got.String() == want.String()
	})
}

type reactionJSON struct {
	UserID    string `json:"user_id"`
	ContentID string `json:"content_id"`
	Action    string `json:"action"`
	Previous  string `json:"previous"`
	Version   int64  `json:"version"`
	Changed   bool   `json:"changed"`
}

// TestStandaloneEndToEnd drives a whole standalone node (agent, real
// embedded NATS JetStream, rollup, embedded store) over HTTP, restarts it
// on the same data directory, and checks that totals and reactions
// survive.
func TestStandaloneEndToEnd(t *testing.T) {
	dir := t.TempDir()
	n := startTestNode(t, dir, 50*time.Millisecond)
	base := "http://" + n.Addr()

	for _, u := range []string{"alice", "bob", "carol"} {
		call(t, "POST", base+"/v1/reactions", map[string]string{"user_id": u, "content_id": "video-1", "action": "like"}, 200, nil)
	}
	var r reactionJSON
	call(t, "POST", base+"/v1/reactions", map[string]string{"user_id": "carol", "content_id": "video-1", "action": "dislike"}, 200, &r)
	if r.Previous != "like" || r.Action != "dislike" || r.Version != 2 || !r.Changed {
		t.Fatalf("switch = %+v", r)
	}
	call(t, "POST", base+"/v1/reactions", map[string]string{"user_id": "bob", "content_id": "video-1", "action": "none"}, 200, nil)
	call(t, "POST", base+"/v1/increments", map[string]any{"increments": []map[string]any{
		{"content_id": "video-1", "counter": "view", "delta": 10},
		{"content_id": "video-1", "counter": "view", "delta": 5},
		{"content_id": "video-2", "counter": "share", "delta": 1},
	}}, 202, nil)

	want1 := countsJSON{Likes: 1, Dislikes: 1, Counters: map[string]int64{"view": 15}}
	waitCounts(t, base, "video-1", "global", want1)
	waitCounts(t, base, "video-1", "local", want1)
	waitCounts(t, base, "video-2", "global", countsJSON{Counters: map[string]int64{"share": 1}})

	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`edgecount_agent_increments_total{region="local"} 3`,
		`edgecount_agent_reactions_changed_total{region="local"} 5`,
		`edgecount_agent_outbox_messages{region="local"} 0`,
		`edgecount_rollup_poison_messages_total 0`,
		`edgecount_http_requests_total{code="202",route="POST /v1/increments"} 1`,
		`edgecount_agent_log_records{region="local"}`,
		`edgecount_agent_outbox_log_records{region="local"} 0`,
		`edgecount_agent_log_records_replayed_total{region="local"} 0`,
		`edgecount_agent_intents_ambiguous_total{region="local"} 0`,
		`edgecount_agent_intents_pending{region="local"} 0`,
		`edgecount_agent_log_fsync_seconds_count{region="local"}`,
	} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	shutdown(t, n)
	n = startTestNode(t, dir, 50*time.Millisecond)
	defer shutdown(t, n)
	base = "http://" + n.Addr()
	waitCounts(t, base, "video-1", "global", want1)
	var got struct {
		Action  string `json:"action"`
		Version int64  `json:"version"`
	}
	call(t, "GET", base+"/v1/reactions/carol/video-1", nil, 200, &got)
	if got.Action != "dislike" || got.Version != 2 {
		t.Fatalf("carol's reaction after restart = %+v, want dislike v2", got)
	}
	call(t, "GET", base+"/v1/reactions/bob/video-1", nil, 200, &got)
	if got.Action != "none" {
		t.Fatalf("bob's reaction after restart = %+v, want none", got)
	}
}

// TestStandaloneConcurrentToggles: 50 clients toggle one user's reaction on
// one item at once; the converged totals equal the final reaction.
func TestStandaloneConcurrentToggles(t *testing.T) {
	n := startTestNode(t, t.TempDir(), 50*time.Millisecond)
	defer shutdown(t, n)
	base := "http://" + n.Addr()
	actions := []string{"like", "dislike", "none"}
	var wg sync.WaitGroup
	for g := 0; g < 50; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 10; i++ {
				body, _ := json.Marshal(map[string]string{"user_id": "u", "content_id": "hot", "action": actions[rand.IntN(3)]})
				resp, err := http.Post(base+"/v1/reactions", "application/json", bytes.NewReader(body))
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 && resp.StatusCode != 503 {
					t.Errorf("status %d", resp.StatusCode)
				}
			}
		}()
	}
	wg.Wait()
	var final struct {
		Action string `json:"action"`
	}
	call(t, "GET", base+"/v1/reactions/u/hot", nil, 200, &final)
	want := countsJSON{Counters: map[string]int64{}}
	switch final.Action {
	case "like":
		want.Likes = 1
	case "dislike":
		want.Dislikes = 1
	}
	waitCounts(t, base, "hot", "global", want)
	waitCounts(t, base, "hot", "local", want)
}

// TestSIGTERMFlushesBeforeExit runs the real binary with a flush interval
// far longer than the test, so only the shutdown flush can carry the
// increments; after SIGTERM it must exit 0 and a restart must show them.
func TestSIGTERMFlushesBeforeExit(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "edge-agent")
	if out, err := exec.Command("go", "build", "-race", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	dir := t.TempDir()
	start := func(flush string) (*exec.Cmd, string, *bytes.Buffer) {
		t.Helper()
		cmd := exec.Command(bin, "--http", "127.0.0.1:0", "--data", dir, "--flush-interval", flush)
		cmd.Env = append(os.Environ(), "EDGECOUNT_LOG_LEVEL=warn")
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err != nil {
			cmd.Process.Kill()
			t.Fatalf("no start line: %v\n%s", err, stderr.String())
		}
		i := strings.Index(line, "http://")
		if i < 0 {
			t.Fatalf("start line %q has no address", line)
		}
		return cmd, strings.Fields(line[i:])[0], &stderr
	}
	cmd, base, stderr := start("1h")
	call(t, "POST", base+"/v1/increments", map[string]any{"increments": []map[string]any{
		{"content_id": "clip", "counter": "view", "delta": 7},
	}}, 202, nil)
	call(t, "POST", base+"/v1/reactions", map[string]string{"user_id": "u", "content_id": "clip", "action": "like"}, 200, nil)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, stderr.String())
	}

	cmd, base, stderr = start("1h")
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		if err := cmd.Wait(); err != nil {
			t.Errorf("second run exit: %v\n%s", err, stderr.String())
		}
	}()
	var got countsJSON
	call(t, "GET", base+"/v1/counts/clip", nil, 200, &got)
	if got.Likes != 1 || got.Counters["view"] != 7 {
		t.Fatalf("after SIGTERM and restart: %v, want likes=1 view=7", got)
	}
}

// TestStartFailureReleasesEverything: a port already taken fails the start
// with a clear error, and what had been opened is closed again (the data
// directory can be opened right away by another node).
func TestStartFailureReleasesEverything(t *testing.T) {
	dir := t.TempDir()
	first := startTestNode(t, t.TempDir(), time.Second)
	defer shutdown(t, first)
	cfg, err := loadConfig([]string{"--http", first.Addr(), "--data", dir}, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := startNode(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil))); err == nil || !strings.Contains(err.Error(), "cannot listen") {
		t.Fatalf("start on a taken port: err = %v, want cannot listen", err)
	}
	n := startTestNode(t, dir, time.Second) // store and broker were released
	shutdown(t, n)
}

// TestStandaloneRoutes: the process's routes in front of the API leave the
// API's own answers alone (a non-canonical path is its JSON 400, not a
// redirect), serve the admin routes of the in-process rollup, and answer
// /v1/cluster without gossip with a JSON 404 (405 for other methods).
func TestStandaloneRoutes(t *testing.T) {
	n := startTestNode(t, t.TempDir(), time.Second)
	defer shutdown(t, n)
	base := "http://" + n.Addr()
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	tests := []struct {
		method, path string
		status       int
		body         string // a part of the JSON answer
	}{
		{"GET", "/v1/counts//x", 400, `"field":"path"`},
		{"GET", "/v1/counts/../v1/counts/x", 400, `"field":"path"`},
		{"GET", "/v1/cluster", 404, `"error":"this agent runs no gossip`},
		{"POST", "/v1/cluster", 405, `"error":"method POST is not allowed"`},
		{"POST", "/admin/recount?id=nothing-here", 200, `"status":"unknown"`},
		{"GET", "/v1/nothing", 404, `"error"`},
	}
	for _, tt := range tests {
		req, err := http.NewRequest(tt.method, base+tt.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tt.status || !strings.Contains(string(body), tt.body) ||
			resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%s %s = %d %q (%s); want %d with %s in JSON", tt.method, tt.path, resp.StatusCode, body,
				resp.Header.Get("Content-Type"), tt.status, tt.body)
		}
	}
}
