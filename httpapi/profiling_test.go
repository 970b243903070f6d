package httpapi

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgecount/edgecount/auth"
	"github.com/edgecount/edgecount/httpserver"
	"github.com/edgecount/edgecount/httpserver/httpservertest"
)

// processHandlers returns the agent's handler (New's) and the rollup's
// (NewRollup's), each passed through wrap, as a process serves them.
func processHandlers(t *testing.T, wrap func(http.Handler) http.Handler) map[string]http.Handler {
	t.Helper()
	metrics := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, metricsBody) //nolint:errcheck // test handler
	})
	agent, err := New(newFake(), testConfig(), metrics, prometheus.NewRegistry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	rollup, err := NewRollup(func(context.Context) error { return nil }, metrics, fakeRecounter{}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return map[string]http.Handler{"agent": wrap(agent), "rollup": wrap(rollup)}
}

// getAs answers GET target of h with token as the bearer token, when not
// empty.
func getAs(h http.Handler, target, token string) (int, http.Header, []byte) {
	req := httptest.NewRequest(http.MethodGet, target, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Header(), rec.Body.Bytes()
}

// TestProfilingOff: without Profiling, /debug/pprof/ is a path like any
// unknown one: the agent's JSON 404, the rollup's plain one.
func TestProfilingOff(t *testing.T) {
	for name, h := range processHandlers(t, func(h http.Handler) http.Handler { return httpservertest.Via(t, h) }) {
		for _, path := range []string{"/debug/pprof/", "/debug/pprof/cmdline", "/debug/pprof/heap"} {
			if status, _, body := getAs(h, path, ""); status != http.StatusNotFound || bytes.Contains(body, []byte("profile")) {
				t.Errorf("%s without profiling: GET %s = %d %q; want its 404", name, path, status, body)
			}
		}
	}
}

// TestProfilingOpen: with Profiling and no token file, the profiles are
// served (index, command line, a named profile, symbols, a CPU profile of
// a second, through the real server), /debug/pprof redirects to the
// index, and the other routes are answered as before.
func TestProfilingOpen(t *testing.T) {
	handlers := processHandlers(t, func(h http.Handler) http.Handler { return httpservertest.Via(t, Profiling(h)) })
	for name, h := range handlers {
		for _, tt := range []struct {
			path   string
			status int
			body   string // a part of the answer
		}{
			{"/debug/pprof/", 200, "Types of profiles available"},
			{"/debug/pprof/cmdline", 200, os.Args[0]},
			{"/debug/pprof/goroutine?debug=1", 200, "goroutine profile:"},
			{"/debug/pprof/heap?debug=1", 200, "heap profile:"},
			{"/debug/pprof/symbol", 200, "num_symbols:"},
			{"/debug/pprof/nonesuch", 404, "Unknown profile"},
			{"/healthz", 200, `"status"`},
			{"/metrics", 200, metricsBody},
		} {
			status, _, body := getAs(h, tt.path, "")
			if status != tt.status || !bytes.Contains(body, []byte(tt.body)) {
				t.Errorf("%s: GET %s = %d %.200q; want %d with %q", name, tt.path, status, body, tt.status, tt.body)
			}
		}
		if status, hdr, _ := getAs(h, "/debug/pprof", ""); status/100 != 3 || hdr.Get("Location") != "/debug/pprof/" {
			t.Errorf("%s: GET /debug/pprof = %d to %q; want a redirect to /debug/pprof/", name, status, hdr.Get("Location"))
		}
	}
	// One CPU profile (they cannot overlap): a gzipped protobuf.
	status, _, body := getAs(handlers["agent"], "/debug/pprof/profile?seconds=1", "")
	if status != 200 || !bytes.HasPrefix(body, []byte{0x1f, 0x8b}) {
		t.Errorf("GET /debug/pprof/profile?seconds=1 = %d %.100q; want 200 with a gzipped profile", status, body)
	}
	// The API's answers are its own, fast paths included.
	if status, _, body := getAs(handlers["agent"], "/v1/counts/x", ""); status != 200 || !bytes.Contains(body, []byte(`"content_id":"x"`)) {
		t.Errorf("GET /v1/counts/x behind Profiling = %d %q; want the API's 200", status, body)
	}
}

// TestProfilingKeepsTheHeaderSkipper: the API's handler, behind Profiling,
// still tells the server which requests need no headers; the profiling
// routes get them all.
func TestProfilingKeepsTheHeaderSkipper(t *testing.T) {
	agent, err := New(newFake(), testConfig(), http.NotFoundHandler(), prometheus.NewRegistry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	skip, ok := Profiling(agent).(httpserver.HeaderSkipper)
	if !ok {
		t.Fatal("Profiling(New(…)) is not an httpserver.HeaderSkipper")
	}
	for _, tt := range []struct {
		method, uri string
		want        httpserver.HeaderUse
	}{
		{"GET", "/v1/counts/x", httpserver.ReadsNoHeader},
		{"POST", "/v1/counts", httpserver.ReadsContentType},
		{"GET", "/debug/pprof/heap", httpserver.ReadsAllHeaders},
		{"GET", "/debug/pprof", httpserver.ReadsAllHeaders},
	} {
		if got := skip.HeadersRead(tt.method, []byte(tt.uri)); got != tt.want {
			t.Errorf("HeadersRead(%s %s) = %v; want %v", tt.method, tt.uri, got, tt.want)
		}
	}
	if _, ok := Profiling(http.NotFoundHandler()).(httpserver.HeaderSkipper); ok {
		t.Error("Profiling of a plain handler claims to skip headers")
	}
}

// TestProfilingNeedsAdmin: with a token file, Authenticate asks the admin
// scope for every profiling route, as for the admin routes: 401 without a
// token (or with an unknown one), 403 with a token without admin, the
// profile with an admin token.
func TestProfilingNeedsAdmin(t *testing.T) {
	const reader, admin = "reader-token-0123456789", "admin-token-01234567890"
	file := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(file, []byte(reader+" read,write timeline\n"+admin+" admin ops\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	keeper, err := auth.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	handlers := processHandlers(t, func(h http.Handler) http.Handler {
		w, err := Authenticate(Profiling(h), auth.Policy{Keeper: keeper}, prometheus.NewRegistry())
		if err != nil {
			t.Fatal(err)
		}
		return httpservertest.Via(t, w)
	})
	for name, h := range handlers {
		for _, path := range []string{"/debug/pprof/", "/debug/pprof/cmdline", "/debug/pprof/heap", "/debug/pprof"} {
			for _, tt := range []struct {
				token  string
				status int
			}{
				{"", 401}, {"unknown-token-0123456789", 401}, {reader, 403}, {admin, 200},
			} {
				status, hdr, body := getAs(h, path, tt.token)
				if path == "/debug/pprof" && tt.status == 200 && status/100 == 3 {
					status = 200 // the redirect to the index: served
				}
				if status != tt.status {
					t.Errorf("%s: GET %s with %q = %d %.100q; want %d", name, path, tt.token, status, body, tt.status)
					continue
				}
				if status == 401 || status == 403 {
					if !strings.Contains(string(body), `"field":"Authorization"`) || strings.Contains(string(body), "token-0123") {
						t.Errorf("%s: GET %s with %q: body %q; want the API's error naming Authorization, quoting no token", name, path, tt.token, body)
					}
					if (status == 401) != strings.HasPrefix(hdr.Get("WWW-Authenticate"), "Bearer") {
						t.Errorf("%s: GET %s with %q: %d with WWW-Authenticate %q", name, path, tt.token, status, hdr.Get("WWW-Authenticate"))
					}
				}
			}
		}
	}
}
