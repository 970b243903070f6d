package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgecount/edgecount/gossip"
	"github.com/edgecount/edgecount/httpserver"
	"github.com/edgecount/edgecount/httpserver/httpservertest"
	"github.com/edgecount/edgecount/rollup"
)

// fakeCluster is a gossip node's view, fixed.
type fakeCluster struct{ view gossip.ClusterView }

func (f fakeCluster) Cluster() gossip.ClusterView { return f.view }

// fakeRecounter knows no id: every one is unknown.
type fakeRecounter struct{}

func (fakeRecounter) Recount(_ context.Context, ids []string, _ rollup.RecountOptions) ([]rollup.ItemResult, error) {
	out := make([]rollup.ItemResult, len(ids))
	for i, id := range ids {
		out[i] = rollup.ItemResult{ContentID: id, Status: rollup.ItemUnknown, Reason: "no totals and no reactions"}
	}
	return out, nil
}

// newRoutedAPI is the API of newTestAPI with opts.
func newRoutedAPI(t *testing.T, opts ...Option) http.Handler {
	t.Helper()
	metrics := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, metricsBody) //nolint:errcheck // test handler
	})
	h, err := New(newFake(), testConfig(), metrics, prometheus.NewRegistry(), nil, opts...)
	if err != nil {
		t.Fatalf("New() error = %v", err)
	}
	return httpservertest.Via(t, h)
}

// serve answers one request of h.
func serve(h http.Handler, method, target string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, target, nil))
	return rec
}

// TestRoutes: next to the API's own answers (a non-canonical path is its
// JSON 400, not a redirect), the agent's handler serves the admin routes
// it is given and answers /v1/cluster without gossip with a JSON 404 (405
// for other methods); without WithAdmin, /admin/… is the API's 404.
func TestRoutes(t *testing.T) {
	withAdmin := newRoutedAPI(t, WithAdmin(fakeRecounter{}))
	bare := newRoutedAPI(t)
	tests := []struct {
		h            http.Handler
		method, path string
		status       int
		body         string // a part of the JSON answer
		allow        string
	}{
		{withAdmin, "GET", "/v1/counts//x", 400, `"field":"path"`, ""},
		{withAdmin, "GET", "/v1/counts/../v1/counts/x", 400, `"field":"path"`, ""},
		{withAdmin, "GET", "/v1/cluster", 404, `"error":"this agent runs no gossip`, ""},
		{withAdmin, "HEAD", "/v1/cluster", 404, ``, ""},
		{withAdmin, "POST", "/v1/cluster", 405, `"error":"method POST is not allowed"`, "GET, HEAD"},
		{withAdmin, "DELETE", "/v1/cluster", 405, `"error":"method DELETE is not allowed"`, "GET, HEAD"},
		{withAdmin, "POST", "/admin/recount?id=nothing-here", 200, `"status":"unknown"`, ""},
		{withAdmin, "GET", "/admin/recount?id=nothing-here", 405, `"field":"method"`, "POST"},
		{withAdmin, "POST", "/admin/other", 404, `"error":"no such admin route: /admin/other"`, ""},
		{withAdmin, "GET", "/v1/nothing", 404, `"error"`, ""},
		{bare, "POST", "/admin/recount?id=nothing-here", 404, `"error":"no route for path /admin/recount"`, ""},
		{bare, "GET", "/v1/cluster", 404, `"error":"this agent runs no gossip (set gossip.bind)"}`, ""},
	}
	for _, tt := range tests {
		rec := serve(tt.h, tt.method, tt.path)
		if rec.Code != tt.status || !strings.Contains(rec.Body.String(), tt.body) ||
			rec.Header().Get("Content-Type") != "application/json" || rec.Header().Get("Allow") != tt.allow {
			t.Errorf("%s %s = %d %q (%s, Allow %q); want %d with %s in JSON, Allow %q", tt.method, tt.path, rec.Code, rec.Body,
				rec.Header().Get("Content-Type"), rec.Header().Get("Allow"), tt.status, tt.body, tt.allow)
		}
	}
}

// TestClusterRoute: GET /v1/cluster answers the gossip node's view as one
// line of JSON, not to be cached, with the field names of gossip's types.
func TestClusterRoute(t *testing.T) {
	since := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	view := gossip.ClusterView{Region: "us-east", Self: "a", KeyFingerprints: []string{},
		Members: []gossip.ClusterMember{
			{Member: gossip.Member{Name: "a", Addr: "127.0.0.1:7946", Region: "us-east", AgentID: "agent-a", State: gossip.StateAlive, Since: since, Self: true},
				Published: []gossip.PublishedKey{{Key: "view", Bytes: 3, Version: 1, Published: since}}},
			{Member: gossip.Member{Name: "b", Addr: "127.0.0.1:7947", Region: "us-east", AgentID: "agent-b", HTTPAddr: "b.test:8080", State: gossip.StateAlive, Since: since},
				Published: []gossip.PublishedKey{{Key: "like", Bytes: 5, Version: 2, Published: since}}},
		}}
	h := newRoutedAPI(t, WithCluster(fakeCluster{view}))
	want, err := json.Marshal(view)
	if err != nil {
		t.Fatal(err)
	}
	for _, method := range []string{"GET", "HEAD"} {
		rec := serve(h, method, "/v1/cluster")
		if rec.Code != 200 || rec.Body.String() != string(want)+"\n" {
			t.Errorf("%s /v1/cluster = %d %s; want 200 %s", method, rec.Code, rec.Body, want)
		}
		if ct, cc := rec.Header().Get("Content-Type"), rec.Header().Get("Cache-Control"); ct != "application/json" || cc != "no-store" {
			t.Errorf("%s /v1/cluster: Content-Type %q, Cache-Control %q; want application/json, no-store", method, ct, cc)
		}
	}
	var got struct {
		Region  string `json:"region"`
		Self    string `json:"self"`
		Members []struct {
			Name      string `json:"name"`
			HTTPAddr  string `json:"http_addr"`
			State     string `json:"state"`
			Published []struct {
				Key   string `json:"key"`
				Bytes int    `json:"bytes"`
			} `json:"published"`
		} `json:"members"`
	}
	body := serve(h, "GET", "/v1/cluster").Body.Bytes()
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("body %s: %v", body, err)
	}
	if got.Region != "us-east" || got.Self != "a" || len(got.Members) != 2 || got.Members[1].State != "alive" ||
		got.Members[1].HTTPAddr != "b.test:8080" || got.Members[1].Published[0].Key != "like" || got.Members[1].Published[0].Bytes != 5 {
		t.Errorf("view = %s; want region us-east, self a, b alive at b.test:8080 with 5 bytes of like", body)
	}
}

// TestFastRouteAgreesWithMux: the hot routes answered without the mux
// answer exactly as through it, around every edge of the shortcut.
func TestFastRouteAgreesWithMux(t *testing.T) {
	fast, slow := newTestAPI(t, testConfig()), newTestAPI(t, testConfig())
	slow.h.(*api).muxOnly = true
	seed(fast.fake)
	seed(slow.fake)
	inc := `{"increments":[{"content_id":"c1","counter":"view","delta":1}]}`
	for _, c := range []struct{ method, target, ctype, body string }{
		{"GET", "/v1/counts/c1", "", ""},
		{"GET", "/v1/counts/c1?region=eu", "", ""},
		{"GET", "/v1/counts/c1?region=mars", "", ""},
		{"GET", "/v1/counts/%2E", "", ""},
		{"GET", "/v1/counts/.", "", ""},
		{"GET", "/v1/counts/..", "", ""},
		{"GET", "/v1/counts/a%2Fb", "", ""},
		{"GET", "/v1/counts//x", "", ""},
		{"GET", "/v1/counts/x/", "", ""},
		{"GET", "/v1/counts/", "", ""},
		{"GET", "/v1/counts/" + strings.Repeat("x", 129), "", ""},
		{"GET", "/v1/counts/a:b@c", "", ""},
		{"HEAD", "/v1/counts/c1", "", ""},
		{"GET", "/v1/counts", "", ""},
		{"GET", "/v1/counts?content_id=c1&content_id=c2", "", ""},
		{"GET", "/v1/counts/?content_id=c1", "", ""},
		{"POST", "/v1/counts", "application/json", `{}`},
		{"POST", "/v1/increments", "application/json", inc},
		{"POST", "/v1/increments", "text/plain", inc},
		{"PUT", "/v1/increments", "application/json", inc},
		{"POST", "/v1/increments/", "application/json", inc},
	} {
		got := fast.do(t, c.method, c.target, c.ctype, c.body)
		want := slow.do(t, c.method, c.target, c.ctype, c.body)
		if got.Code != want.Code || got.Body.String() != want.Body.String() || got.Header().Get("Allow") != want.Header().Get("Allow") {
			t.Errorf("%s %s = %d %s, through the mux %d %s", c.method, c.target, got.Code, got.Body, want.Code, want.Body)
		}
		if f, s := fast.fake.Calls(), slow.fake.Calls(); !slices.Equal(f, s) {
			t.Errorf("%s %s: calls %q, through the mux %q", c.method, c.target, f, s)
		}
		fast.fake.reset()
		slow.fake.reset()
	}
	for _, route := range []string{"GET /v1/counts/{content_id}", "GET /v1/counts", "POST /v1/increments", "POST /v1/counts", "unmatched"} {
		for _, code := range []string{"200", "202", "400", "404", "405", "415"} {
			const name = "edgecount_http_requests_total"
			if f, s := counterValue(t, fast.reg, name, route, code), counterValue(t, slow.reg, name, route, code); f != s {
				t.Errorf("requests %s %s = %v, through the mux %v", route, code, f, s)
			}
		}
	}
}

// TestCountReadsReadNoHeader holds HeadersRead to the count handlers:
// every request it names is answered through Server (which hands it no
// header, or Content-Type alone) exactly as the handler answers it
// directly with headers that would change the answer of a route that read
// them.
func TestCountReadsReadNoHeader(t *testing.T) {
	ta := newTestAPI(t, testConfig())
	seed(ta.fake)
	a := ta.h.(*api)
	headers := map[string]string{
		"Accept": "application/x-protobuf", "Content-Type": "application/x-protobuf",
		"Authorization": "Bearer nobody-knows-this-token", "Idempotency-Key": "k1",
		"Connection": "keep-alive", "X-Forwarded-For": "10.0.0.1",
	}
	for _, target := range []string{
		"/v1/counts/c1", "/v1/counts/c1?region=eu", "/v1/counts/c1?consistency=fresh",
		"/v1/counts/c1?region=mars", "/v1/counts/%2E", "/v1/counts/", "/v1/counts//x",
		"/v1/counts", "/v1/counts?content_id=c1&content_id=c2", "/v1/counts?content_id=c1;x",
		"/v1/counts?content_id=c1&bogus=1", "/v1/countsx", "/v1/counts/?content_id=c1",
	} {
		if got := a.HeadersRead(http.MethodGet, []byte(target)); got != httpserver.ReadsNoHeader {
			t.Fatalf("HeadersRead(GET %s) = %d, want none", target, got)
		}
		req := httptest.NewRequest(http.MethodGet, target, nil)
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		want := httptest.NewRecorder()
		ta.h.ServeHTTP(want, req) // the handler itself, every header seen
		got := ta.do(t, http.MethodGet, target, "", "")
		if got.Code != want.Code || got.Body.String() != want.Body.String() {
			t.Errorf("GET %s through Server = %d %s; with headers, directly %d %s", target, got.Code, got.Body, want.Code, want.Body)
		}
	}
	// POST /v1/counts reads Content-Type alone: each request, sent with
	// every header above but its own Content-Type, is answered through
	// Server as the handler answers it directly.
	body := string(appendStringField(appendStringField(nil, 1, "c1"), 1, "c2"))
	for _, c := range []struct{ target, ctype, body string }{
		{"/v1/counts", "application/x-protobuf", body},
		{"/v1/counts", "Application/X-Protobuf; charset=UTF-8", body},
		{"/v1/counts", "application/json", body},
		{"/v1/counts", "", body},
		{"/v1/counts", "application/x-protobuf", "\xff"},
		{"/v1/counts?region=eu", "application/x-protobuf", body},
	} {
		if got := a.HeadersRead(http.MethodPost, []byte(c.target)); got != httpserver.ReadsContentType {
			t.Fatalf("HeadersRead(POST %s) = %d, want Content-Type alone", c.target, got)
		}
		var answers [2]*httptest.ResponseRecorder
		for i, h := range []http.Handler{ta.h, ta.srv} {
			req := httptest.NewRequest(http.MethodPost, c.target, strings.NewReader(c.body))
			for k, v := range headers {
				req.Header.Set(k, v)
			}
			req.Header.Del("Content-Type")
			if c.ctype != "" {
				req.Header.Set("Content-Type", c.ctype)
			}
			answers[i] = httptest.NewRecorder()
			h.ServeHTTP(answers[i], req)
		}
		want, got := answers[0], answers[1]
		if got.Code != want.Code || got.Body.String() != want.Body.String() {
			t.Errorf("POST %s (%q) through Server = %d %q; directly %d %q", c.target, c.ctype, got.Code, got.Body, want.Code, want.Body)
		}
	}
	for _, c := range []struct{ method, uri string }{
		{"POST", "/v1/countsx"}, {"POST", "/v1/counts/c1"}, {"HEAD", "/v1/counts/c1"}, {"GET", "/v1/count"},
		{"GET", "/v1/trending"}, {"GET", "/v1/reactions/u/c1"}, {"GET", "/metrics"}, {"POST", "/v1/increments"},
		{"PUT", "/v1/counts"},
	} {
		if got := a.HeadersRead(c.method, []byte(c.uri)); got != httpserver.ReadsAllHeaders {
			t.Errorf("HeadersRead(%s %s) = %d, want every header", c.method, c.uri, got)
		}
	}
}
