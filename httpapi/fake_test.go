package httpapi

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/httpserver/httpservertest"
	"github.com/edgecount/edgecount/internal/testenv"
	"github.com/edgecount/edgecount/region"
)

// fakeService is an in-memory Service that records every call. It is the
// unit-test double of the agent: this package tests the HTTP layer only.
type fakeService struct {
	mu         sync.Mutex
	calls      []string             // one line per call, e.g. "React u c like"
	increments [][]region.Increment // copies of every Increment call
	reactions  map[[2]string]engagement.Reaction
	stats      map[string][]engagement.Stats
	// memos hand out one region.Memo per state of an item, as the agent's
	// read cache does, so that the API's encoded answers are kept and
	// reused: a state is a stats slice (a new slice is a new state).
	memos    map[string]fakeMemo
	result   region.ReactResult
	err      error               // returned by every method but Ready
	readyErr error               // returned by Ready
	degraded []string            // returned by Degraded
	panicOn  string              // method name that panics
	noRecord bool                // benchmarks: record nothing
	trending engagement.Trending // answered by Trending (items cut to k)
	// missingPeers are the peers a fresh read reports silent.
	missingPeers []string
}

func newFake() *fakeService {
	return &fakeService{
		reactions: make(map[[2]string]engagement.Reaction),
		stats:     make(map[string][]engagement.Stats),
	}
}

func (f *fakeService) record(method string, args ...any) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.noRecord {
		return f.err
	}
	f.calls = append(f.calls, strings.TrimSpace(method+" "+fmt.Sprint(args...)))
	if f.panicOn == method {
		panic("fake " + method + " panics")
	}
	return f.err
}

// Calls returns the calls recorded so far.
func (f *fakeService) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func (f *fakeService) reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = nil
	f.increments = nil
}

func (f *fakeService) React(ctx context.Context, userID, contentID string, action engagement.Action) (region.ReactResult, error) {
	if err := f.record("React", userID, " ", contentID, " ", action); err != nil {
		return region.ReactResult{}, err
	}
	return f.result, nil
}

func (f *fakeService) GetReaction(ctx context.Context, userID, contentID string) (engagement.Reaction, bool, error) {
	if err := f.record("GetReaction", userID, " ", contentID); err != nil {
		return engagement.Reaction{}, false, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	rx, ok := f.reactions[[2]string{userID, contentID}]
	return rx, ok, nil
}

func (f *fakeService) GetReactions(ctx context.Context, userID string, contentIDs []string) (map[string]engagement.Reaction, error) {
	if err := f.record("GetReactions", userID, " ", contentIDs); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]engagement.Reaction)
	for _, id := range contentIDs {
		if rx, ok := f.reactions[[2]string{userID, id}]; ok {
			out[id] = rx
		}
	}
	return out, nil
}

func (f *fakeService) Increment(ctx context.Context, incs []region.Increment) error {
	if err := f.record("Increment", len(incs)); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.noRecord {
		cp := make([]region.Increment, len(incs))
		for i, inc := range incs {
			cp[i] = region.Increment{ContentID: strings.Clone(inc.ContentID), Counter: strings.Clone(inc.Counter), Delta: inc.Delta}
		}
		f.increments = append(f.increments, cp)
	}
	return nil
}

// fakeStored and fakeNow are the times the fake's count reads report:
// stored totals known current at fakeStored, answered at fakeNow.
var (
	fakeStored = time.Date(2025, 1, 2, 3, 4, 6, 6e6, time.UTC)
	fakeNow    = fakeStored.Add(1500 * time.Millisecond)
)

func (f *fakeService) ReadCounts(ctx context.Context, contentIDs []string, mode region.Consistency, dst []region.CountRead) (region.ReadInfo, error) {
	call := "Counts"
	if mode == region.Fresh {
		call = "Counts fresh"
	}
	if err := f.record(call, contentIDs); err != nil {
		return region.ReadInfo{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, id := range contentIDs {
		dst[i] = region.CountRead{Rows: f.stats[id], Stored: fakeStored, AsOf: fakeStored}
		if mode == region.Fresh {
			dst[i].AsOf = fakeNow
			continue
		}
		fm, ok := f.memos[id]
		if rows := f.stats[id]; !ok || len(fm.rows) != len(rows) || (len(rows) > 0 && &fm.rows[0] != &rows[0]) {
			fm = fakeMemo{rows: rows, memo: new(region.Memo)}
			if f.memos == nil {
				f.memos = make(map[string]fakeMemo)
			}
			f.memos[strings.Clone(id)] = fm
		}
		dst[i].Memo = fm.memo
	}
	info := region.ReadInfo{Now: fakeNow}
	if mode == region.Fresh {
		info.Missing = f.missingPeers
	}
	return info, nil
}

// fakeMemo is the memo of one state of an item.
type fakeMemo struct {
	rows []engagement.Stats
	memo *region.Memo
}

func (f *fakeService) Ready(ctx context.Context) error {
	f.record("Ready") //nolint:errcheck // Ready answers readyErr
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.readyErr
}

func (f *fakeService) Trending(ctx context.Context, scope, counter, window string, k int) (engagement.Trending, error) {
	if err := f.record("Trending", scope, " ", counter, " ", window, " ", k); err != nil {
		return engagement.Trending{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.trending
	t.Scope, t.Counter, t.Window = scope, counter, window
	t.Items = t.Items[:min(k, len(t.Items))]
	return t, nil
}

// testAPI is an API over a fake service, with its registry and log. do
// sends requests through srv, a Server on a real loopback connection; h is
// the handler itself, for the tests of what no connection can carry (a
// cancelled request context, a panic mid-answer).
type testAPI struct {
	h    http.Handler
	srv  http.Handler
	fake *fakeService
	reg  *prometheus.Registry
	log  *testenv.Buffer
}

// metricsBody is what the /metrics handler of testAPI answers.
const metricsBody = "# fake metrics\nup 1\n"

func testConfig() Config {
	return Config{Region: "eu", Regions: []string{"eu", "us", "ap"}, TrendingCounters: []string{"like", "view"}}
}

func newTestAPI(t testing.TB, cfg Config) *testAPI {
	t.Helper()
	ta := &testAPI{fake: newFake(), reg: prometheus.NewRegistry(), log: &testenv.Buffer{}}
	metrics := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		io.WriteString(w, metricsBody) //nolint:errcheck // test handler
	})
	logger := slog.New(slog.NewJSONHandler(ta.log, nil))
	h, err := New(ta.fake, cfg, metrics, ta.reg, logger)
	if err != nil {
		t.Fatalf("New() error = %v", err)
	}
	ta.h = h
	ta.srv = httpservertest.Via(t, h)
	return ta
}

// do serves one request. ctype "" sends no Content-Type.
func (ta *testAPI) do(t testing.TB, method, target, ctype, body string) *httptest.ResponseRecorder {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, target, rd)
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	rec := httptest.NewRecorder()
	ta.srv.ServeHTTP(rec, req)
	return rec
}

func newRecorder() *httptest.ResponseRecorder { return httptest.NewRecorder() }

func mustRequest(t testing.TB, method, target string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, target, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func (f *fakeService) Degraded(context.Context) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.degraded
}
