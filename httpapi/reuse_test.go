package httpapi

import (
	"strconv"
	"strings"
	"testing"
)

// TestAnswersOnReusedWriters sends, through one API, sequences of requests
// whose answers leave different state in the pooled response writer (a
// mux 404 that replaces the body, a recovered panic, short and long
// bodies), and checks every answer whole.
func TestAnswersOnReusedWriters(t *testing.T) {
	ta := newTestAPI(t, testConfig())
	seed(ta.fake)
	ids := make([]string, 100)
	for i := range ids {
		ids[i] = "absent-" + strings.Repeat("x", 20) + strconv.Itoa(i)
	}
	big := "/v1/counts?" + idsQuery(ids...)
	steps := []struct {
		target       string
		panicOn      string
		wantStatus   int
		wantContains string
	}{
		{target: "/v1/nope", wantStatus: 404, wantContains: `"field":"path"`},
		{target: "/v1/counts/c2", wantStatus: 200, wantContains: `"likes":1,`},
		{target: "/v1/counts/c2", panicOn: "Counts", wantStatus: 500, wantContains: `{"error":"internal error"}`},
		{target: "/v1/counts/c1?region=eu", wantStatus: 200, wantContains: `"counters":{"view":60}`},
		{target: big, wantStatus: 200, wantContains: `"content_id":"absent-` + strings.Repeat("x", 20) + `99"`},
		{target: "/v1/counts//c1", wantStatus: 400, wantContains: `"field":"path"`},
		{target: "/v1/counts/c1", wantStatus: 200, wantContains: `"counters":{"share":5,"view":100}`},
	}
	for round := range 3 {
		for i, s := range steps {
			ta.fake.mu.Lock()
			ta.fake.panicOn = s.panicOn
			ta.fake.mu.Unlock()
			rec := ta.do(t, "GET", s.target, "", "")
			body := rec.Body.String()
			if rec.Code != s.wantStatus || !strings.Contains(body, s.wantContains) {
				t.Errorf("round %d step %d %s: answer = %d %s, want %d containing %s", round, i, s.target, rec.Code, body, s.wantStatus, s.wantContains)
			}
			if got, want := rec.Header().Get("Content-Length"), strconv.Itoa(len(body)); got != want {
				t.Errorf("round %d step %d %s: Content-Length = %q, want %q", round, i, s.target, got, want)
			}
			if got := rec.Header().Get("Content-Type"); got != "application/json" {
				t.Errorf("round %d step %d %s: Content-Type = %q, want application/json", round, i, s.target, got)
			}
		}
	}
}
