package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/edgecount/edgecount/httpserver/httpservertest"
)

// TestRollupRoutes checks every route of the rollup's handler and
// http.ServeMux's plain answers around them.
func TestRollupRoutes(t *testing.T) {
	var readyErr error
	ready := func(context.Context) error { return readyErr }
	metrics := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		io.WriteString(w, metricsBody) //nolint:errcheck // test handler
	})
	h, err := NewRollup(ready, metrics, fakeRecounter{}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	h = httpservertest.Via(t, h)
	tests := []struct {
		method, path string
		readyErr     error
		status       int
		ctype, body  string
	}{
		{"GET", "/healthz", nil, 200, "application/json", `{"status":"ok"}` + "\n"},
		{"GET", "/readyz", nil, 200, "application/json", `{"status":"ready"}` + "\n"},
		{"GET", "/readyz", errors.New(`cannot reach nats: connection "refused"`), 503, "application/json",
			`{"status":"unavailable","error":"cannot reach nats: connection \"refused\""}` + "\n"},
		{"GET", "/metrics", nil, 200, "text/plain; version=0.0.4", metricsBody},
		{"POST", "/admin/recount?id=nothing-here", nil, 200, "application/json",
			`{"results":[{"content_id":"nothing-here","status":"unknown","partition":0,"checked":false,"repaired":false,"drift":0,"reason":"no totals and no reactions","rows":[]}]}` + "\n"},
		{"POST", "/admin/other", nil, 404, "application/json", `{"error":"no such admin route: /admin/other","field":"path"}` + "\n"},
		{"GET", "/nothing", nil, 404, "text/plain; charset=utf-8", "404 page not found\n"},
		{"POST", "/healthz", nil, 405, "text/plain; charset=utf-8", "Method Not Allowed\n"},
	}
	for _, tt := range tests {
		readyErr = tt.readyErr
		rec := serve(h, tt.method, tt.path)
		if rec.Code != tt.status || rec.Body.String() != tt.body || rec.Header().Get("Content-Type") != tt.ctype {
			t.Errorf("%s %s = %d %q (%s); want %d %q (%s)", tt.method, tt.path, rec.Code, rec.Body,
				rec.Header().Get("Content-Type"), tt.status, tt.body, tt.ctype)
		}
	}
}

// TestRollupReadyzErrorIsJSON: the rollup's 503 used to be written with
// %q, whose escapes (\a, \x01, \xff) are not JSON; encoding/json's answer
// decodes back to the error text.
func TestRollupReadyzErrorIsJSON(t *testing.T) {
	msg := "cannot ping store: \a\x01 \"quoted\" tab\there é"
	old := fmt.Sprintf("{\"status\":\"unavailable\",\"error\":%q}\n", msg)
	if json.Valid([]byte(old)) {
		t.Fatalf("the old answer %s is valid JSON; the test no longer shows the bug", old)
	}
	h, err := NewRollup(func(context.Context) error { return errors.New(msg) },
		http.NotFoundHandler(), fakeRecounter{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := serve(h, "GET", "/readyz")
	var got struct{ Status, Error string }
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatalf("answer %q is not JSON: %v", rec.Body, err)
	}
	if rec.Code != 503 || got.Status != "unavailable" || got.Error != msg {
		t.Errorf("answer = %d %+v; want 503 unavailable with error %q", rec.Code, got, msg)
	}
}

func TestNewRollupErrors(t *testing.T) {
	_, err := NewRollup(nil, nil, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "nil readiness check") ||
		!strings.Contains(err.Error(), "nil metrics handler") || !strings.Contains(err.Error(), "nil recounter") {
		t.Errorf("NewRollup(nil…) = %v, want every nil named", err)
	}
}
