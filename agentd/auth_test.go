package agentd

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edgecount/edgecount/config"
	"github.com/edgecount/edgecount/internal/testenv"
)

const (
	writeToken = "writer-CANARY-0123456789"
	readToken  = "reader-CANARY-0123456789"
	adminToken = "admin-CANARY-01234567890"
)

// TestAuthTokens runs a standalone agent with a token file and
// debug.pprof: every /v1, /admin and /debug/pprof route needs a token with
// its scope (401 without, 403 with the wrong one, both in the API's error
// shape naming Authorization), health stays open, /metrics needs read,
// SIGHUP reloads the file, and no token ever reaches the log.
func TestAuthTokens(t *testing.T) {
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	writeFile := func(body string) {
		if err := os.WriteFile(tokens, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeFile("# test tokens\n" + writeToken + " write lb\n" + readToken + " read timeline\n" + adminToken + " admin ops\n")
	cfg := testConfig(t, filepath.Join(dir, "data"), 0, func(cfg *config.Config) {
		cfg.Auth.TokensFile, cfg.Debug.Pprof = tokens, true
	})
	logs := &testenv.Buffer{}
	n, err := Start(context.Background(), cfg, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatal(err)
	}
	defer shutdown(t, n)
	base := "http://" + n.Addr()

	do := func(method, path, token, body string) (int, map[string]string, http.Header) {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		var m map[string]string
		_ = json.Unmarshal(raw, &m)
		return resp.StatusCode, m, resp.Header
	}
	incr := `{"increments":[{"content_id":"a","counter":"view","delta":1}]}`
	tests := []struct {
		method, path, token, body string
		want                      int
	}{
		{"POST", "/v1/increments", "", incr, 401},
		{"POST", "/v1/increments", "wrong-CANARY-0123456789", incr, 401},
		{"POST", "/v1/increments", readToken, incr, 403},
		{"POST", "/v1/increments", writeToken, incr, 202},
		{"GET", "/v1/counts/a", "", "", 401},
		{"GET", "/v1/counts/a", writeToken, "", 403},
		{"GET", "/v1/counts/a", readToken, "", 200},
		{"GET", "/v1/counts/a", adminToken, "", 200}, // admin implies read
		{"POST", "/admin/recount", readToken, `{"ids":["a"]}`, 403},
		{"POST", "/admin/recount", adminToken, `{"ids":["a"]}`, 200},
		{"GET", "/healthz", "", "", 200},
		{"GET", "/readyz", "", "", 200},
		{"GET", "/metrics", "", "", 401},
		{"GET", "/metrics", readToken, "", 200},
		{"GET", "/debug/pprof/", "", "", 401},
		{"GET", "/debug/pprof/", readToken, "", 403},
		{"GET", "/debug/pprof/", writeToken, "", 403},
		{"GET", "/debug/pprof/", adminToken, "", 200},
		{"GET", "/debug/pprof/cmdline", readToken, "", 403},
		{"GET", "/debug/pprof/cmdline", adminToken, "", 200},
	}
	for _, tt := range tests {
		status, body, h := do(tt.method, tt.path, tt.token, tt.body)
		if status != tt.want {
			t.Errorf("%s %s with %q = %d; want %d", tt.method, tt.path, tt.token, status, tt.want)
			continue
		}
		if status == 401 || status == 403 {
			if body["field"] != "Authorization" || body["error"] == "" || strings.Contains(body["error"], "CANARY") {
				t.Errorf("%s %s: body %v; want an error naming Authorization that quotes no token", tt.method, tt.path, body)
			}
			if status == 401 && !strings.HasPrefix(h.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("%s %s: 401 without WWW-Authenticate: Bearer", tt.method, tt.path)
			}
		}
	}
	// A refused write changed nothing: only the one authorised increment
	// is counted.
	testenv.Eventually(t, 20*time.Second, "the authorised increment counted", func() (string, bool) {
		_, _, _ = do("GET", "/v1/counts/a", readToken, "")
		req, _ := http.NewRequest("GET", base+"/v1/counts/a", nil)
		req.Header.Set("Authorization", "Bearer "+readToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err.Error(), false
		}
		defer resp.Body.Close()
		var c struct {
			Counters map[string]int64 `json:"counters"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&c)
		return "views " + strings.Repeat("|", int(c.Counters["view"])), c.Counters["view"] == 1
	})

	// SIGHUP: a bad file is refused (the tokens stay), a good one replaces
	// them.
	writeFile("not a token file")
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "the bad reload logged", func() (string, bool) {
		return "", strings.Contains(logs.String(), "token file reload failed")
	})
	if status, _, _ := do("POST", "/v1/increments", writeToken, incr); status != 202 {
		t.Fatalf("after a refused reload the writer got %d; want 202", status)
	}
	writeFile(readToken + " read,write timeline\n")
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "the writer's token removed", func() (string, bool) {
		status, _, _ := do("POST", "/v1/increments", writeToken, incr)
		return http.StatusText(status), status == 401
	})
	if status, _, _ := do("POST", "/v1/increments", readToken, incr); status != 202 {
		t.Fatalf("the reloaded read,write token got %d; want 202", status)
	}
	if strings.Contains(logs.String(), "CANARY") {
		t.Fatalf("a token reached the log:\n%s", logs.String())
	}
}
