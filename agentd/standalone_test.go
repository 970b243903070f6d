package agentd

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgecount/edgecount/agentd/agentdtest"
	"github.com/edgecount/edgecount/buildinfo"
	"github.com/edgecount/edgecount/client"
	"github.com/edgecount/edgecount/config"
)

// testConfig is the configuration of a standalone node on a random
// loopback port under dir, flushing every flush (0: the default), as the
// command makes it of --http 127.0.0.1:0 --data dir --flush-interval flush
// and no environment; edit changes it before it is finished.
func testConfig(t testing.TB, dir string, flush time.Duration, edit ...func(*config.Config)) config.Config {
	t.Helper()
	cfg := config.Default()
	cfg.Agent.HTTP, cfg.Agent.Data = "127.0.0.1:0", dir
	if flush != 0 {
		cfg.Agent.FlushInterval = flush
	}
	for _, f := range edit {
		f(&cfg)
	}
	if err := cfg.Finish(config.RoleAgent); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// startTestNode starts a standalone node on a random port under dir.
func startTestNode(t testing.TB, dir string, flush time.Duration) *Node {
	t.Helper()
	return startConfig(t, testConfig(t, dir, flush))
}

// startConfig starts a node configured by cfg.
func startConfig(t testing.TB, cfg config.Config) *Node {
	t.Helper()
	n, err := Start(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func shutdown(t *testing.T, n *Node) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := n.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
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
		agentdtest.Call(t, "POST", base+"/v1/reactions", map[string]string{"user_id": u, "content_id": "video-1", "action": "like"}, 200, nil)
	}
	var r client.ReactResult
	agentdtest.Call(t, "POST", base+"/v1/reactions", map[string]string{"user_id": "carol", "content_id": "video-1", "action": "dislike"}, 200, &r)
	if r.Previous != "like" || r.Action != "dislike" || r.Version != 2 || !r.Changed {
		t.Fatalf("switch = %+v", r)
	}
	agentdtest.Call(t, "POST", base+"/v1/reactions", map[string]string{"user_id": "bob", "content_id": "video-1", "action": "none"}, 200, nil)
	agentdtest.Call(t, "POST", base+"/v1/increments", map[string]any{"increments": []map[string]any{
		{"content_id": "video-1", "counter": "view", "delta": 10},
		{"content_id": "video-1", "counter": "view", "delta": 5},
		{"content_id": "video-2", "counter": "share", "delta": 1},
	}}, 202, nil)

	want1 := agentdtest.Counts{Likes: 1, Dislikes: 1, Counters: map[string]int64{"view": 15}}
	agentdtest.WaitCounts(t, base, "video-1", "global", want1)
	agentdtest.WaitCounts(t, base, "video-1", "local", want1)
	agentdtest.WaitCounts(t, base, "video-2", "global", agentdtest.Counts{Counters: map[string]int64{"share": 1}})

	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	build := buildinfo.Read()
	for _, want := range []string{
		`edgecount_build_info{goversion="` + build.GoVersion + `",revision="`, `",version="` + build.Version + `"} 1`,
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
	agentdtest.WaitCounts(t, base, "video-1", "global", want1)
	var got struct {
		Action  string `json:"action"`
		Version int64  `json:"version"`
	}
	agentdtest.Call(t, "GET", base+"/v1/reactions/carol/video-1", nil, 200, &got)
	if got.Action != "dislike" || got.Version != 2 {
		t.Fatalf("carol's reaction after restart = %+v, want dislike v2", got)
	}
	agentdtest.Call(t, "GET", base+"/v1/reactions/bob/video-1", nil, 200, &got)
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
	agentdtest.Call(t, "GET", base+"/v1/reactions/u/hot", nil, 200, &final)
	want := agentdtest.Counts{Counters: map[string]int64{}}
	switch final.Action {
	case "like":
		want.Likes = 1
	case "dislike":
		want.Dislikes = 1
	}
	agentdtest.WaitCounts(t, base, "hot", "global", want)
	agentdtest.WaitCounts(t, base, "hot", "local", want)
}

// TestStartFailureReleasesEverything: a port already taken fails the start
// with a clear error, and what had been opened is closed again (the data
// directory can be opened right away by another node).
func TestStartFailureReleasesEverything(t *testing.T) {
	dir := t.TempDir()
	first := startTestNode(t, t.TempDir(), time.Second)
	defer shutdown(t, first)
	cfg := testConfig(t, dir, 0, func(cfg *config.Config) { cfg.Agent.HTTP = first.Addr() })
	if _, err := Start(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil))); err == nil || !strings.Contains(err.Error(), "cannot listen") {
		t.Fatalf("start on a taken port: err = %v, want cannot listen", err)
	}
	n := startTestNode(t, dir, time.Second) // store and broker were released
	shutdown(t, n)
}

// TestStandaloneRoutes: the process's routes in front of the API leave the
// API's own answers alone (a non-canonical path is its JSON 400, not a
// redirect), serve the admin routes of the in-process rollup, and answer
// /v1/cluster without gossip with a JSON 404 (405 for other methods);
// without debug.pprof, /debug/pprof/ is the API's 404.
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
		{"GET", "/debug/pprof/", 404, `"error"`},
		{"GET", "/debug/pprof/cmdline", 404, `"error"`},
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
