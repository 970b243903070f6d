package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/region"
	"github.com/edgecount/edgecount/store"
)

var t0 = time.Date(2025, 1, 2, 3, 4, 5, 6_000_000, time.UTC)

// seed fills the fake with reactions and stats rows.
func seed(f *fakeService) {
	f.reactions[[2]string{"u1", "c1"}] = engagement.Reaction{UserID: "u1", ContentID: "c1", Action: engagement.ActionLike,
		Region: "eu", Version: 3, Incarnation: 77, UpdatedAt: t0}
	f.reactions[[2]string{"u1", "c3"}] = engagement.Reaction{UserID: "u1", ContentID: "c3", Action: engagement.ActionDislike,
		Region: "us", Version: 1, Incarnation: 78, UpdatedAt: t0.Add(time.Second).In(time.FixedZone("x", 3600))}
	f.reactions[[2]string{`a"b\c`, "."}] = engagement.Reaction{Action: engagement.ActionLike, Version: 9, UpdatedAt: t0}
	f.stats["c1"] = []engagement.Stats{
		{ContentID: "c1", Scope: "global", Likes: 10, Dislikes: 2, Counters: map[string]int64{"view": 100, "share": 5}, UpdatedAt: t0, LastSeq: 4},
		{ContentID: "c1", Scope: "eu", Likes: 7, Dislikes: 2, Counters: map[string]int64{"view": 60}, UpdatedAt: t0},
		{ContentID: "c1", Scope: "us", Likes: 3, UpdatedAt: t0},
	}
	f.stats["c2"] = []engagement.Stats{{ContentID: "c2", Scope: "global", Likes: 1, UpdatedAt: t0}}
	f.trending = engagement.Trending{AsOf: t0, Items: []engagement.TrendingItem{
		{ContentID: "c1", Count: 90, Error: 3}, {ContentID: `q"1`, Count: 40}, {ContentID: "c2", Count: 7, Error: 7},
	}}
}

// TestHappyPaths checks the exact answer of every endpoint and the calls the
// service saw.
func TestHappyPaths(t *testing.T) {
	batch100 := manyIDs(100)
	for i := range batch100 {
		batch100[i] = "b" + batch100[i]
	}
	var want100 []string
	for _, id := range batch100 {
		want100 = append(want100, `{"content_id":"`+id+`","region":"global","likes":0,"dislikes":0,"counters":{},"updated_at":null,"as_of":"2025-01-02T03:04:06.006Z","staleness_ms":1500}`)
	}
	for _, c := range []struct {
		name, method, target, ctype, body string
		wantStatus                        int
		wantBody                          string
		wantCalls                         []string
	}{
		{
			name: "react", method: "POST", target: "/v1/reactions", ctype: "application/json",
			body:       `{"user_id":"u1","content_id":"c1","action":"like"}`,
			wantStatus: 200, wantBody: `{"user_id":"u1","content_id":"c1","action":"like","previous":"none","version":1,"changed":true}`,
			wantCalls: []string{"React u1 c1 like"},
		},
		{
			name: "react with white space, escapes, key order, charset", method: "POST", target: "/v1/reactions",
			ctype:      "application/json; charset=UTF-8",
			body:       " {\n\t\"action\" : \"none\" , \"content_id\":\"\\u0063\\u007e2\", \"user_id\":\"u\\\"1\"}\r\n",
			wantStatus: 200, wantBody: `{"user_id":"u\"1","content_id":"c~2","action":"like","previous":"none","version":1,"changed":true}`,
			wantCalls: []string{"React u\"1 c~2 none"},
		},
		{
			name: "react, no Content-Type", method: "POST", target: "/v1/reactions",
			body:       `{"user_id":"` + strings.Repeat("u", 128) + `","content_id":"~!","action":"dislike"}`,
			wantStatus: 200, wantBody: `{"user_id":"` + strings.Repeat("u", 128) + `","content_id":"~!","action":"like","previous":"none","version":1,"changed":true}`,
			wantCalls: []string{"React " + strings.Repeat("u", 128) + " ~! dislike"},
		},
		{
			name: "increments with curl's default form Content-Type", method: "POST", target: "/v1/increments",
			ctype:      "application/x-www-form-urlencoded",
			body:       `{"increments":[{"content_id":"c1","counter":"view","delta":2}]}`,
			wantStatus: 202, wantBody: `{"accepted":1}`,
			wantCalls: []string{"Increment 1"},
		},
		{
			name: "get reaction", method: "GET", target: "/v1/reactions/u1/c1",
			wantStatus: 200, wantBody: `{"user_id":"u1","content_id":"c1","action":"like","version":3,"updated_at":"2025-01-02T03:04:05.006Z"}`,
			wantCalls: []string{"GetReaction u1 c1"},
		},
		{
			name: "get reaction, no row", method: "GET", target: "/v1/reactions/u1/c9",
			wantStatus: 200, wantBody: `{"user_id":"u1","content_id":"c9","action":"none","version":0,"updated_at":null}`,
			wantCalls: []string{"GetReaction u1 c9"},
		},
		{
			name: "get reaction, escaped ids in path", method: "GET", target: "/v1/reactions/" + url.PathEscape(`a"b\c`) + "/%2E",
			wantStatus: 200, wantBody: `{"user_id":"a\"b\\c","content_id":".","action":"like","version":9,"updated_at":"2025-01-02T03:04:05.006Z"}`,
			wantCalls: []string{`GetReaction a"b\c .`},
		},
		{
			name: "batch reactions in order asked, repeats and missing", method: "GET", target: "/v1/reactions/u1?content_id=c3&content_id=c9&content_id=c1&content_id=c3",
			wantStatus: 200, wantBody: `{"reactions":[` +
				`{"user_id":"u1","content_id":"c3","action":"dislike","version":1,"updated_at":"2025-01-02T03:04:06.006Z"},` +
				`{"user_id":"u1","content_id":"c9","action":"none","version":0,"updated_at":null},` +
				`{"user_id":"u1","content_id":"c1","action":"like","version":3,"updated_at":"2025-01-02T03:04:05.006Z"},` +
				`{"user_id":"u1","content_id":"c3","action":"dislike","version":1,"updated_at":"2025-01-02T03:04:06.006Z"}]}`,
			wantCalls: []string{"GetReactions u1 [c3 c9 c1 c3]"},
		},
		{
			name: "increments", method: "POST", target: "/v1/increments", ctype: "application/json",
			body:       `{"increments":[{"content_id":"c1","counter":"view","delta":1},{"delta":1000000,"counter":"s\u0068are_2","content_id":"c2"}]}`,
			wantStatus: 202, wantBody: `{"accepted":2}`,
			wantCalls: []string{"Increment 2"},
		},
		{
			name: "get count, global by default", method: "GET", target: "/v1/counts/c1",
			wantStatus: 200, wantBody: `{"content_id":"c1","region":"global","likes":10,"dislikes":2,"counters":{"share":5,"view":100},"updated_at":"2025-01-02T03:04:05.006Z","as_of":"2025-01-02T03:04:06.006Z","staleness_ms":1500}`,
			wantCalls: []string{"Counts [c1]"},
		},
		{
			name: "get count, region", method: "GET", target: "/v1/counts/c1?region=us",
			wantStatus: 200, wantBody: `{"content_id":"c1","region":"us","likes":3,"dislikes":0,"counters":{},"updated_at":"2025-01-02T03:04:05.006Z","as_of":"2025-01-02T03:04:06.006Z","staleness_ms":1500}`,
			wantCalls: []string{"Counts [c1]"},
		},
		{
			name: "get count, region without a row", method: "GET", target: "/v1/counts/c1?region=ap",
			wantStatus: 200, wantBody: `{"content_id":"c1","region":"ap","likes":0,"dislikes":0,"counters":{},"updated_at":null,"as_of":"2025-01-02T03:04:06.006Z","staleness_ms":1500}`,
			wantCalls: []string{"Counts [c1]"},
		},
		{
			name: "get count, explicit global", method: "GET", target: "/v1/counts/c2?region=global",
			wantStatus: 200, wantBody: `{"content_id":"c2","region":"global","likes":1,"dislikes":0,"counters":{},"updated_at":"2025-01-02T03:04:05.006Z","as_of":"2025-01-02T03:04:06.006Z","staleness_ms":1500}`,
			wantCalls: []string{"Counts [c2]"},
		},
		{
			name: "batch counts in order asked", method: "GET", target: "/v1/counts?content_id=c2&content_id=c9&region=eu&content_id=c1",
			wantStatus: 200, wantBody: `{"counts":[` +
				`{"content_id":"c2","region":"eu","likes":0,"dislikes":0,"counters":{},"updated_at":null,"as_of":"2025-01-02T03:04:06.006Z","staleness_ms":1500},` +
				`{"content_id":"c9","region":"eu","likes":0,"dislikes":0,"counters":{},"updated_at":null,"as_of":"2025-01-02T03:04:06.006Z","staleness_ms":1500},` +
				`{"content_id":"c1","region":"eu","likes":7,"dislikes":2,"counters":{"view":60},"updated_at":"2025-01-02T03:04:05.006Z","as_of":"2025-01-02T03:04:06.006Z","staleness_ms":1500}]}`,
			wantCalls: []string{"Counts [c2 c9 c1]"},
		},
		{
			name: "get count, eventual explicitly", method: "GET", target: "/v1/counts/c2?consistency=eventual",
			wantStatus: 200, wantBody: `{"content_id":"c2","region":"global","likes":1,"dislikes":0,"counters":{},"updated_at":"2025-01-02T03:04:05.006Z","as_of":"2025-01-02T03:04:06.006Z","staleness_ms":1500}`,
			wantCalls: []string{"Counts [c2]"},
		},
		{
			name: "get count, fresh", method: "GET", target: "/v1/counts/c2?consistency=fresh&region=global",
			wantStatus: 200, wantBody: `{"content_id":"c2","region":"global","likes":1,"dislikes":0,"counters":{},"updated_at":"2025-01-02T03:04:05.006Z","as_of":"2025-01-02T03:04:07.506Z","staleness_ms":1500,"consistency":"fresh"}`,
			wantCalls: []string{"Counts fresh [c2]"},
		},
		{
			name: "batch counts, fresh", method: "GET", target: "/v1/counts?consistency=fresh&content_id=c9",
			wantStatus: 200, wantBody: `{"counts":[{"content_id":"c9","region":"global","likes":0,"dislikes":0,"counters":{},"updated_at":null,"as_of":"2025-01-02T03:04:07.506Z","staleness_ms":1500,"consistency":"fresh"}]}`,
			wantCalls: []string{"Counts fresh [c9]"},
		},
		{
			name: "batch counts, 100 ids", method: "GET", target: "/v1/counts?" + idsQuery(batch100...),
			wantStatus: 200, wantBody: `{"counts":[` + strings.Join(want100, ",") + `]}`,
			wantCalls: []string{fmt.Sprint("Counts ", batch100)},
		},
		{
			name: "trending, defaults", method: "GET", target: "/v1/trending",
			wantStatus: 200, wantBody: `{"region":"global","counter":"like","window":"5m","as_of":"2025-01-02T03:04:05.006Z","items":[` +
				`{"content_id":"c1","count":90,"error":3},{"content_id":"q\"1","count":40,"error":0},{"content_id":"c2","count":7,"error":7}]}`,
			wantCalls: []string{"Trending global like 5m 10"},
		},
		{
			name: "trending, every parameter", method: "GET", target: "/v1/trending?k=2&window=24h&region=us&counter=view",
			wantStatus: 200, wantBody: `{"region":"us","counter":"view","window":"24h","as_of":"2025-01-02T03:04:05.006Z","items":[` +
				`{"content_id":"c1","count":90,"error":3},{"content_id":"q\"1","count":40,"error":0}]}`,
			wantCalls: []string{"Trending us view 24h 2"},
		},
		{
			name: "trending, k bounds and own region", method: "GET", target: "/v1/trending?region=eu&k=1000&window=1h",
			wantStatus: 200, wantBody: `{"region":"eu","counter":"like","window":"1h","as_of":"2025-01-02T03:04:05.006Z","items":[` +
				`{"content_id":"c1","count":90,"error":3},{"content_id":"q\"1","count":40,"error":0},{"content_id":"c2","count":7,"error":7}]}`,
			wantCalls: []string{"Trending eu like 1h 1000"},
		},
		{
			name: "trending, k 1", method: "GET", target: "/v1/trending?k=1",
			wantStatus: 200, wantBody: `{"region":"global","counter":"like","window":"5m","as_of":"2025-01-02T03:04:05.006Z","items":[` +
				`{"content_id":"c1","count":90,"error":3}]}`,
			wantCalls: []string{"Trending global like 5m 1"},
		},
		{
			name: "healthz", method: "GET", target: "/healthz",
			wantStatus: 200, wantBody: `{"status":"ok"}`,
		},
		{
			name: "readyz", method: "GET", target: "/readyz",
			wantStatus: 200, wantBody: `{"status":"ready"}`,
			wantCalls: []string{"Ready"},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			ta := newTestAPI(t, testConfig())
			seed(ta.fake)
			ta.fake.result = region.ReactResult{Previous: engagement.ActionNone, Action: engagement.ActionLike, Version: 1, Changed: true}
			rec := ta.do(t, c.method, c.target, c.ctype, c.body)
			if rec.Code != c.wantStatus || rec.Body.String() != c.wantBody {
				t.Errorf("answer = %d %s\nwant     %d %s", rec.Code, rec.Body, c.wantStatus, c.wantBody)
			}
			if got := rec.Header().Get("Content-Type"); got != "application/json" {
				t.Errorf("Content-Type = %q, want application/json", got)
			}
			if got, want := rec.Header().Get("Content-Length"), fmt.Sprint(len(c.wantBody)); got != want {
				t.Errorf("Content-Length = %q, want %q", got, want)
			}
			if got := ta.fake.Calls(); !slices.Equal(got, c.wantCalls) {
				t.Errorf("service calls = %q, want %q", got, c.wantCalls)
			}
		})
	}
}

// TestIncrementsPassed checks that exactly the decoded increments reach the
// service, in order, at the edges of every rule.
func TestIncrementsPassed(t *testing.T) {
	ta := newTestAPI(t, testConfig())
	long := strings.Repeat("x", 128)
	counter32 := "c" + strings.Repeat("_", 30) + "9"
	body := incBody(
		item(q(long), q(counter32), "1"),
		item(`"c\u0031"`, `"view"`, "1000000"),
		item(`"!\"#$%&'()*+,-.:;<=>?@[\\]^_{|}~"`, `"v"`, "42"),
	)
	rec := ta.do(t, "POST", "/v1/increments", "", body)
	if rec.Code != 202 || rec.Body.String() != `{"accepted":3}` {
		t.Fatalf("answer = %d %s, want 202 {\"accepted\":3}", rec.Code, rec.Body)
	}
	want := []region.Increment{
		{ContentID: long, Counter: counter32, Delta: 1},
		{ContentID: "c1", Counter: "view", Delta: 1000000},
		{ContentID: `!"#$%&'()*+,-.:;<=>?@[\]^_{|}~`, Counter: "v", Delta: 42},
	}
	if len(ta.fake.increments) != 1 || !slices.Equal(ta.fake.increments[0], want) {
		t.Errorf("increments = %+v, want %+v", ta.fake.increments, want)
	}

	// 10,000 increments is the limit, not over it.
	ta.fake.reset()
	rec = ta.do(t, "POST", "/v1/increments", "application/json", incBody(nItems(10000)...))
	if rec.Code != 202 || rec.Body.String() != `{"accepted":10000}` {
		t.Fatalf("10000 increments: answer = %d %s, want 202", rec.Code, rec.Body)
	}
	if got := ta.fake.increments[0]; len(got) != 10000 || got[9999].ContentID != "c9999" {
		t.Errorf("10000 increments: service got %d, last %+v", len(got), got[len(got)-1])
	}
}

// TestServiceErrors checks how every kind of service error is answered.
func TestServiceErrors(t *testing.T) {
	endpoints := []struct{ method, target, body string }{
		{"POST", "/v1/reactions", `{"user_id":"u1","content_id":"c1","action":"like"}`},
		{"GET", "/v1/reactions/u1/c1", ""},
		{"GET", "/v1/reactions/u1?content_id=c1", ""},
		{"POST", "/v1/increments", incBody(item(`"c1"`, `"view"`, "1"))},
		{"GET", "/v1/counts/c1", ""},
		{"GET", "/v1/counts?content_id=c1", ""},
		{"GET", "/v1/trending", ""},
	}
	secret := errors.New("dial tcp 10.0.0.7:9042: secret detail")
	for _, c := range []struct {
		name       string
		err        error
		wantStatus int
		wantError  string
		wantRetry  string
		wantLogged bool
	}{
		{"unavailable", fmt.Errorf("cannot read stats: %w", store.ErrUnavailable), 503, "store unavailable; retry later", "2", false},
		{"contended", fmt.Errorf("cannot react: %w", region.ErrContended), 409, "too many concurrent changes to this reaction; nothing was applied, retry", "2", false},
		{"contention timeout", fmt.Errorf("%w: %w", region.ErrContended, fmt.Errorf("cannot write reaction: %w: %w", store.ErrContention, store.ErrUnavailable)), 409, "the store timed out deciding this reaction (concurrent changes of it, or a slow replica); the agent settles its outcome and counts it once, retry", "2", false},
		{"too frequent", region.ErrTooFrequent, 429, "this reaction changed too often in the last 10 minutes; nothing was applied, retry later", "60", false},
		{"stopping", region.ErrStopping, 503, "agent is stopping; retry, possibly on another agent", "2", false},
		{"deadline", fmt.Errorf("cannot read: %w", context.DeadlineExceeded), 503, "timed out; retry later", "2", false},
		{"log full", fmt.Errorf("cannot log increments: %w", region.ErrLogFull), 503, "agent log full (size budget or disk); nothing was written, retry later or on another agent", "2", false},
		{"backlog", fmt.Errorf("cannot log increments: %w", region.ErrBacklog), 503, "agent log full: the broker has been unreachable longer than the log's budget covers; nothing was written, retry later or on another agent", "2", false},
		{"log failed", fmt.Errorf("cannot log: %w: %w", region.ErrLogFailed, secret), 503, "agent log failed; nothing was written, retry on another agent", "2", true},
		{"recovering", region.ErrRecovering, 503, "agent is replaying its log; retry shortly", "2", false},
		{"other", secret, 500, "internal error", "", true},
	} {
		for _, ep := range endpoints {
			t.Run(c.name+" "+ep.method+" "+ep.target, func(t *testing.T) {
				cfg := testConfig()
				cfg.RetryAfter = 1500 * time.Millisecond
				ta := newTestAPI(t, cfg)
				ta.fake.err = c.err
				rec := ta.do(t, ep.method, ep.target, "", ep.body)
				if rec.Code != c.wantStatus {
					t.Errorf("status = %d, want %d", rec.Code, c.wantStatus)
				}
				eb := decodeError(t, rec)
				if eb.Error != c.wantError || eb.Field != "" {
					t.Errorf("error = %q field %q, want %q and no field", eb.Error, eb.Field, c.wantError)
				}
				if got := rec.Header().Get("Retry-After"); got != c.wantRetry {
					t.Errorf("Retry-After = %q, want %q", got, c.wantRetry)
				}
				logged := strings.Count(ta.log.String(), "secret detail")
				if c.wantLogged && logged != 1 || !c.wantLogged && logged != 0 {
					t.Errorf("error logged %d times, want logged=%v; log:\n%s", logged, c.wantLogged, ta.log)
				}
				if strings.Contains(rec.Body.String(), "10.0.0.7") {
					t.Errorf("answer %s leaks the internal error", rec.Body)
				}
			})
		}
	}
}

// TestClientGone checks that a request whose client went away is recorded
// as 499 and not logged as a failure.
func TestClientGone(t *testing.T) {
	ta := newTestAPI(t, testConfig())
	ta.fake.err = context.Canceled
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", "/v1/counts/c1", nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	ta.h.ServeHTTP(rec, req)
	if rec.Code != StatusClientClosedRequest {
		t.Errorf("status = %d, want %d", rec.Code, StatusClientClosedRequest)
	}
	if ta.log.String() != "" {
		t.Errorf("log = %q, want nothing", ta.log)
	}
	if got := counterValue(t, ta.reg, "edgecount_http_requests_total", "GET /v1/counts/{content_id}", "499"); got != 1 {
		t.Errorf("requests{code=499} = %v, want 1", got)
	}
}

func TestReadyz(t *testing.T) {
	ta := newTestAPI(t, testConfig())
	ta.fake.readyErr = fmt.Errorf("cannot reach nats: %w", errors.New(`connection "refused"`))
	rec := ta.do(t, "GET", "/readyz", "", "")
	if want := `{"status":"not ready","error":"cannot reach nats: connection \"refused\""}`; rec.Code != 503 || rec.Body.String() != want {
		t.Errorf("answer = %d %s, want 503 %s", rec.Code, rec.Body, want)
	}
	// An optional dependency down: still ready (200), and said so.
	ta.fake.readyErr = nil
	ta.fake.degraded = []string{`redis: dial tcp 127.0.0.1:6379: connection "refused"`}
	rec = ta.do(t, "GET", "/readyz", "", "")
	if want := `{"status":"degraded","degraded":["redis: dial tcp 127.0.0.1:6379: connection \"refused\""]}`; rec.Code != 200 || rec.Body.String() != want {
		t.Errorf("answer = %d %s, want 200 %s", rec.Code, rec.Body, want)
	}
	ta.fake.degraded = nil
	// /healthz does not ask the service.
	ta.fake.reset()
	if rec := ta.do(t, "GET", "/healthz", "", ""); rec.Code != 200 || len(ta.fake.Calls()) != 0 {
		t.Errorf("healthz = %d with calls %q, want 200 and none", rec.Code, ta.fake.Calls())
	}
}

// TestMetricsHandlerPassThrough checks that /metrics answers with the given
// handler, untouched.
func TestMetricsHandlerPassThrough(t *testing.T) {
	ta := newTestAPI(t, testConfig())
	rec := ta.do(t, "GET", "/metrics", "", "")
	if rec.Code != 200 || rec.Body.String() != metricsBody {
		t.Errorf("answer = %d %q, want 200 %q", rec.Code, rec.Body, metricsBody)
	}
	if got := rec.Header().Get("Content-Type"); got != "text/plain; version=0.0.4" {
		t.Errorf("Content-Type = %q, want the handler's own", got)
	}
}

// TestPanicRecovered checks that a panicking handler answers 500, is logged
// once and counted, and that the API keeps serving.
func TestPanicRecovered(t *testing.T) {
	ta := newTestAPI(t, testConfig())
	ta.fake.panicOn = "Counts"
	rec := ta.do(t, "GET", "/v1/counts/c1", "", "")
	if rec.Code != 500 || rec.Body.String() != `{"error":"internal error"}` {
		t.Errorf("answer = %d %s, want 500 internal error", rec.Code, rec.Body)
	}
	if n := strings.Count(ta.log.String(), "fake Counts panics"); n != 1 {
		t.Errorf("panic logged %d times, want 1; log:\n%s", n, ta.log)
	}
	if got := counterValue(t, ta.reg, "edgecount_http_panics_total", "", ""); got != 1 {
		t.Errorf("panics_total = %v, want 1", got)
	}
	if got := counterValue(t, ta.reg, "edgecount_http_requests_total", "GET /v1/counts/{content_id}", "500"); got != 1 {
		t.Errorf("requests{code=500} = %v, want 1", got)
	}
	ta.fake.panicOn = ""
	if rec := ta.do(t, "GET", "/v1/counts/c1", "", ""); rec.Code != 200 {
		t.Errorf("after a panic: status = %d, want 200", rec.Code)
	}
}

// TestPanicAfterAnswerStarted checks that a handler panicking after it began
// its answer aborts the connection (http.ErrAbortHandler) instead of
// appending an error to a partial answer.
func TestPanicAfterAnswerStarted(t *testing.T) {
	metrics := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("partial")) //nolint:errcheck // test handler
		panic("boom")
	})
	reg := prometheus.NewRegistry()
	h, err := New(newFake(), testConfig(), metrics, reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	func() {
		defer func() {
			if p := recover(); p != http.ErrAbortHandler {
				t.Errorf("panic = %v, want http.ErrAbortHandler", p)
			}
		}()
		h.ServeHTTP(rec, mustRequest(t, "GET", "/metrics"))
	}()
	if got := rec.Body.String(); got != "partial" {
		t.Errorf("body = %q, want only the partial answer", got)
	}
	if got := counterValue(t, reg, "edgecount_http_requests_total", "GET /metrics", "500"); got != 1 {
		t.Errorf("requests{code=500} = %v, want 1", got)
	}
}

// TestRequestMetrics checks requests by route and code, the latency
// histogram and accepted increments.
func TestRequestMetrics(t *testing.T) {
	ta := newTestAPI(t, testConfig())
	ta.do(t, "GET", "/healthz", "", "")
	ta.do(t, "GET", "/healthz", "", "")
	ta.do(t, "POST", "/v1/increments", "", `{}`)
	ta.do(t, "POST", "/v1/increments", "", incBody(nItems(7)...))
	ta.do(t, "GET", "/nope", "", "")
	ta.do(t, "DELETE", "/v1/counts", "", "")
	for _, c := range []struct {
		route, code string
		want        float64
	}{
		{"GET /healthz", "200", 2},
		{"POST /v1/increments", "400", 1},
		{"POST /v1/increments", "202", 1},
		{"unmatched", "404", 1},
		{"unmatched", "405", 1},
	} {
		if got := counterValue(t, ta.reg, "edgecount_http_requests_total", c.route, c.code); got != c.want {
			t.Errorf("requests{route=%q,code=%q} = %v, want %v", c.route, c.code, got, c.want)
		}
	}
	if got := counterValue(t, ta.reg, "edgecount_http_increments_accepted_total", "", ""); got != 7 {
		t.Errorf("increments_accepted_total = %v, want 7", got)
	}
	m := findMetric(t, ta.reg, "edgecount_http_request_duration_seconds", "GET /healthz", "")
	if got := m.GetHistogram().GetSampleCount(); got != 2 {
		t.Errorf("duration{route=GET /healthz} count = %d, want 2", got)
	}
}

func TestConfig(t *testing.T) {
	for _, c := range []struct {
		name    string
		cfg     Config
		wantErr string // "" for valid
	}{
		{"default", DefaultConfig(), ""},
		{"region only", Config{Region: "eu"}, ""},
		{"no region", Config{}, `region "" is not a valid region name`},
		{"region global", Config{Region: "global"}, `region "global" is not a valid region name`},
		{"region not listed", Config{Region: "eu", Regions: []string{"us"}}, `do not contain the own region "eu"`},
		{"bad region listed", Config{Region: "eu", Regions: []string{"eu", "US"}}, `regions[1] "US" is not a valid region name`},
		{"region listed twice", Config{Region: "eu", Regions: []string{"eu", "eu"}}, `regions[1] "eu" is listed twice`},
		{"negative body", Config{Region: "eu", MaxBodyBytes: -1}, "max body bytes -1 is negative"},
		{"negative increments", Config{Region: "eu", MaxIncrements: -1}, "max increments -1 is negative"},
		{"negative batch", Config{Region: "eu", MaxBatchIDs: -1}, "max batch ids -1 is negative"},
		{"negative retry", Config{Region: "eu", RetryAfter: -time.Second}, "retry after -1s is negative"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.cfg.Validate()
			switch {
			case c.wantErr == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
				t.Errorf("Validate() = %v, want an error containing %q", err, c.wantErr)
			}
		})
	}
	// Every problem is reported at once.
	err := Config{Region: "X", MaxIncrements: -1}.Validate()
	if err == nil || !strings.Contains(err.Error(), "region") || !strings.Contains(err.Error(), "max increments") {
		t.Errorf("Validate() = %v, want both problems", err)
	}
}

func TestNewErrors(t *testing.T) {
	okMetrics := http.NotFoundHandler()
	if _, err := New(nil, testConfig(), nil, nil, nil); err == nil ||
		!strings.Contains(err.Error(), "nil service") || !strings.Contains(err.Error(), "nil metrics handler") ||
		!strings.Contains(err.Error(), "nil prometheus registerer") {
		t.Errorf("New(nil…) = %v, want every nil named", err)
	}
	if _, err := New(newFake(), Config{}, okMetrics, prometheus.NewRegistry(), nil); err == nil {
		t.Error("New with an invalid config: want an error")
	}
	reg := prometheus.NewRegistry()
	if _, err := New(newFake(), testConfig(), okMetrics, reg, nil); err != nil {
		t.Fatalf("New() = %v", err)
	}
	if _, err := New(newFake(), testConfig(), okMetrics, reg, nil); err == nil || !strings.Contains(err.Error(), "cannot register") {
		t.Errorf("second New on one registry = %v, want a registration error", err)
	}
}

// TestLimitsFromConfig checks that smaller limits in Config are applied.
func TestLimitsFromConfig(t *testing.T) {
	ta := newTestAPI(t, Config{Region: "eu", MaxBodyBytes: 200, MaxIncrements: 2, MaxBatchIDs: 3})
	for _, c := range []struct {
		method, target, body string
		wantStatus           int
		wantField            string
	}{
		{"POST", "/v1/increments", incBody(nItems(3)...), 400, "increments"},
		{"POST", "/v1/increments", incBody(item(`"c1"`, `"view"`, "1")) + strings.Repeat(" ", 200), 413, "body"},
		{"GET", "/v1/counts?" + idsQuery(manyIDs(4)...), "", 400, "content_id"},
		{"GET", "/v1/counts/c1?region=us", "", 400, "region"},
	} {
		rec := ta.do(t, c.method, c.target, "", c.body)
		if rec.Code != c.wantStatus {
			t.Errorf("%s %s: status = %d, want %d", c.method, c.target, rec.Code, c.wantStatus)
		}
		if eb := decodeError(t, rec); eb.Field != c.wantField {
			t.Errorf("%s %s: field = %q, want %q", c.method, c.target, eb.Field, c.wantField)
		}
	}
	if rec := ta.do(t, "GET", "/v1/counts?"+idsQuery(manyIDs(3)...)+"&region=eu", "", ""); rec.Code != 200 {
		t.Errorf("3 ids: status = %d, want 200", rec.Code)
	}
	if calls := ta.fake.Calls(); len(calls) != 1 {
		t.Errorf("service calls = %q, want only the last request's", calls)
	}
}

// findMetric returns the sample of name with the given route and code
// labels ("" for a metric without them).
func findMetric(t *testing.T, reg *prometheus.Registry, name, route, code string) *dto.Metric {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather() = %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "route" && lp.GetValue() != route || lp.GetName() == "code" && lp.GetValue() != code {
					continue next
				}
			}
			return m
		}
	}
	return nil
}

// counterValue returns the value of a counter sample, 0 when absent.
func counterValue(t *testing.T, reg *prometheus.Registry, name, route, code string) float64 {
	t.Helper()
	m := findMetric(t, reg, name, route, code)
	if m == nil {
		return 0
	}
	return m.GetCounter().GetValue()
}

// TestResponseController checks that a handler mounted here (the metrics
// handler) can reach the server's writer through http.ResponseController.
func TestResponseController(t *testing.T) {
	metrics := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		if err := rc.SetWriteDeadline(time.Now().Add(time.Minute)); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Write([]byte("a")) //nolint:errcheck // test handler
		if err := rc.Flush(); err != nil {
			panic(err)
		}
		w.Write([]byte("b")) //nolint:errcheck // test handler
	})
	h, err := New(newFake(), testConfig(), metrics, prometheus.NewRegistry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	resp, err := srv.Client().Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || string(body) != "ab" {
		t.Errorf("answer = %d %q, want 200 \"ab\"", resp.StatusCode, body)
	}
}

// TestTrendingUntrackedFromService: a counter the agent keeps no list for
// (its configuration differs from the API's) is a 400 naming the counter,
// and an empty list is answered with as_of null.
func TestTrendingUntrackedFromService(t *testing.T) {
	ta := newTestAPI(t, testConfig())
	ta.fake.err = fmt.Errorf("cannot rank: %w", region.ErrNotTracked)
	rec := ta.do(t, "GET", "/v1/trending?counter=view", "", "")
	if eb := decodeError(t, rec); rec.Code != 400 || eb.Field != "counter" || !strings.Contains(eb.Error, "kept for: like, view") {
		t.Fatalf("answer = %d %s; want 400 naming counter", rec.Code, rec.Body)
	}
	ta.fake.err = nil
	rec = ta.do(t, "GET", "/v1/trending?counter=view", "", "")
	if want := `{"region":"global","counter":"view","window":"5m","as_of":null,"items":[]}`; rec.Code != 200 || rec.Body.String() != want {
		t.Fatalf("empty list = %d %s; want 200 %s", rec.Code, rec.Body, want)
	}

	cfg := testConfig()
	cfg.TrendingCounters = nil
	off := newTestAPI(t, cfg)
	rec = off.do(t, "GET", "/v1/trending", "", "")
	if eb := decodeError(t, rec); rec.Code != 400 || eb.Field != "counter" || !strings.Contains(eb.Error, "trending is off") {
		t.Fatalf("trending off: answer = %d %s; want 400 naming counter", rec.Code, rec.Body)
	}
	if calls := off.fake.Calls(); len(calls) != 0 {
		t.Fatalf("service calls = %q; want none", calls)
	}
}

// TestFreshMissingPeers: a fresh answer names the peers that did not
// answer, in JSON as in protobuf (TestProtobufCounts).
func TestFreshMissingPeers(t *testing.T) {
	ta := newTestAPI(t, testConfig())
	seed(ta.fake)
	ta.fake.missingPeers = []string{"us-b", "us-c"}
	rec := ta.do(t, "GET", "/v1/counts/c2?consistency=fresh", "", "")
	want := `{"content_id":"c2","region":"global","likes":1,"dislikes":0,"counters":{},"updated_at":"2025-01-02T03:04:05.006Z",` +
		`"as_of":"2025-01-02T03:04:07.506Z","staleness_ms":1500,"consistency":"fresh","missing_peers":["us-b","us-c"]}`
	if rec.Code != 200 || rec.Body.String() != want {
		t.Errorf("answer = %d %s\nwant     200 %s", rec.Code, rec.Body, want)
	}
	// An eventual read never names peers.
	rec = ta.do(t, "GET", "/v1/counts/c2", "", "")
	if strings.Contains(rec.Body.String(), "missing_peers") || strings.Contains(rec.Body.String(), "consistency") {
		t.Errorf("eventual answer = %s", rec.Body)
	}
}
