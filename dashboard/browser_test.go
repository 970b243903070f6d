package dashboard_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/edgecount/edgecount/client"
	"github.com/edgecount/edgecount/dashboard"
	"github.com/edgecount/edgecount/gossip"
	"github.com/edgecount/edgecount/internal/testenv"
)

// Tokens of the agent under test: the page gets the read one.
const (
	readToken  = "dash-read-0123456789abcdef"
	writeToken = "dash-write-0123456789abcdef"
)

// The routes whose requests the page counts as writes and reads (app.js).
var (
	writeRoutes = []string{"POST /v1/increments", "POST /v1/reactions"}
	readRoutes  = []string{"GET /v1/counts", "GET /v1/counts/{content_id}", "POST /v1/counts",
		"GET /v1/reactions/{user_id}", "GET /v1/reactions/{user_id}/{content_id}"}
)

// repoRoot is the directory of go.mod.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// agent is a standalone cmd/edge-agent process with a token file.
type agent struct {
	base string
	cmd  *exec.Cmd
	out  bytes.Buffer
}

// startAgent builds cmd/edge-agent and runs it standalone (embedded broker
// and store) on a free loopback port, with bearer tokens, a 200 ms flush
// and trending lists stored every 500 ms.
func startAgent(t *testing.T) *agent {
	t.Helper()
	root := repoRoot(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "edge-agent")
	if out, err := exec.Command("go", "build", "-o", bin, filepath.Join(root, "cmd", "edge-agent")).CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/edge-agent: %v\n%s", err, out)
	}
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte(readToken+" read dashboard\n"+writeToken+" write loader\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "agent.yaml")
	if err := os.WriteFile(cfg, []byte("agent:\n  flush_interval: 200ms\ntrending:\n  interval: 500ms\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	a := &agent{base: "http://" + addr}
	a.cmd = exec.Command(bin, "--http", addr, "--data", filepath.Join(dir, "data"), "--config", cfg, "--auth-tokens", tokens)
	for _, kv := range os.Environ() { // the test's own service addresses would leave standalone mode
		if !strings.HasPrefix(kv, "EDGECOUNT_") {
			a.cmd.Env = append(a.cmd.Env, kv)
		}
	}
	a.cmd.Stdout, a.cmd.Stderr = &a.out, &a.out
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		a.cmd.Process.Signal(syscall.SIGTERM) //nolint:errcheck // Wait reports
		done := make(chan error, 1)
		go func() { done <- a.cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("edge-agent did not stop cleanly: %v\n%s", err, a.out.String())
			}
		case <-time.After(30 * time.Second):
			a.cmd.Process.Kill() //nolint:errcheck // it is stuck
			t.Errorf("edge-agent did not stop within 30s of SIGTERM\n%s", a.out.String())
		}
	})
	testenv.Eventually(t, 60*time.Second, "edge-agent ready on "+addr, func() (string, bool) {
		resp, err := http.Get(a.base + "/readyz")
		if err != nil {
			return err.Error(), false
		}
		resp.Body.Close()
		return resp.Status, resp.StatusCode == http.StatusOK
	})
	return a
}

// apiView is what the API answers, for the figures the page shows.
type apiView struct {
	metrics  map[string]float64 // the page's figures, by element id
	trending map[string][]client.TrendingItem
	cluster  string // the answer of GET /v1/cluster: its error message
}

// read fetches the metrics, the trending lists of counter and the cluster
// view as the page does, with the read token.
func read(t *testing.T, ctx context.Context, a *agent, c *client.Client, counter string) apiView {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, a.base+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+readToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics with the read token = %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	sum := func(name string, routes []string) float64 {
		s := 0.0
		f := fams[name]
		if f == nil {
			return math.NaN()
		}
		for _, m := range f.GetMetric() {
			keep := routes == nil
			for _, l := range m.GetLabel() {
				if l.GetName() == "route" {
					for _, r := range routes {
						keep = keep || l.GetValue() == r
					}
				}
			}
			if !keep {
				continue
			}
			switch {
			case m.GetCounter() != nil:
				s += m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				s += m.GetGauge().GetValue()
			}
		}
		return s
	}
	v := apiView{metrics: map[string]float64{
		"writes-total":    sum("edgecount_http_requests_total", writeRoutes),
		"reads-total":     sum("edgecount_http_requests_total", readRoutes),
		"incs-total":      sum("edgecount_agent_increments_total", nil),
		"flushes-total":   sum("edgecount_agent_flushes_total", nil),
		"rollup-lag":      sum("edgecount_rollup_lag_seconds", nil),
		"log-bytes":       sum("edgecount_agent_log_bytes", nil),
		"log-oldest":      sum("edgecount_agent_log_oldest_unacknowledged_seconds", nil),
		"outbox-bytes":    sum("edgecount_agent_outbox_log_bytes", nil),
		"outbox-oldest":   sum("edgecount_agent_outbox_log_oldest_unacknowledged_seconds", nil),
		"outbox-messages": sum("edgecount_agent_outbox_messages", nil),
		"refused-total":   sum("edgecount_agent_log_writes_refused_total", nil),
	}, trending: map[string][]client.TrendingItem{}}
	for _, scope := range []string{"local", "global"} {
		for _, w := range []string{"5m", "1h", "24h"} {
			l, err := c.Trending(ctx, client.TrendingQuery{Region: scope, Counter: counter, Window: w, K: 10})
			if err != nil {
				t.Fatal(err)
			}
			v.trending[scope+" "+w] = l.Items
		}
	}
	_, err = c.Cluster(ctx)
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Status != http.StatusNotFound {
		t.Fatalf("GET /v1/cluster of a standalone agent: %v; want its 404", err)
	}
	v.cluster = ce.Message
	return v
}

// figure is one figure on the page: its text and the data attributes.
type figure struct {
	Text  string  `json:"text"`
	Value *string `json:"value"`
	Prev  *string `json:"prev"`
	Cur   *string `json:"cur"`
	Span  *string `json:"span"`
}

func (f figure) num(t *testing.T, id string, s *string) float64 {
	t.Helper()
	if s == nil {
		t.Fatalf("#%s (%q) has no value", id, f.Text)
	}
	v, err := strconv.ParseFloat(*s, 64)
	if err != nil {
		t.Fatalf("#%s: value %q: %v", id, *s, err)
	}
	return v
}

// pageView is what the page shows, read in one go (between two of its
// refreshes).
type pageView struct {
	N       int               `json:"n"`
	Error   string            `json:"error"`
	Figures map[string]figure `json:"figures"`
	Tables  []struct {
		Scope   string `json:"scope"`
		Window  string `json:"window"`
		Counter string `json:"counter"`
		Items   []struct {
			ID        string `json:"id"`
			Count     int64  `json:"count"`
			Error     int64  `json:"error"`
			CountText string `json:"countText"`
		} `json:"items"`
	} `json:"tables"`
	Cluster string `json:"cluster"`
}

const snapshotJS = `(() => {
  const figs = {};
  for (const el of document.querySelectorAll(".stat [id]")) {
    const d = el.dataset;
    figs[el.id] = {text: el.textContent, value: d.value ?? null, prev: d.prev ?? null, cur: d.cur ?? null, span: d.span ?? null};
  }
  const tables = [...document.querySelectorAll("table[data-scope]")].map((t) => ({
    scope: t.dataset.scope, window: t.dataset.window, counter: t.dataset.counter,
    items: [...t.querySelectorAll("tr[data-id]")].map((r) => ({
      id: r.dataset.id, count: Number(r.dataset.count), error: Number(r.dataset.error), countText: r.children[2].textContent})),
  }));
  return {n: Number(document.getElementById("refreshes").dataset.n), error: document.getElementById("error").textContent,
    figures: figs, tables: tables, cluster: document.getElementById("cluster").textContent};
})()`

func snapshot(t *testing.T, ctx context.Context) pageView {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[pageView](snapshotJS))
	if err != nil {
		t.Fatalf("reading the page: %v", err)
	}
	return v
}

// afterRefreshes returns the page as it is once it has refreshed twice
// more: its figures were all fetched after the call began.
func afterRefreshes(t *testing.T, ctx context.Context) pageView {
	t.Helper()
	n0 := snapshot(t, ctx).N
	var v pageView
	testenv.Eventually(t, 30*time.Second, fmt.Sprintf("refresh %d", n0+2), func() (string, bool) {
		v = snapshot(t, ctx)
		return fmt.Sprintf("refresh %d", v.N), v.N >= n0+2
	})
	return v
}

// likePattern spreads the likes of traffic over five items, unevenly.
const likePattern = "111112222333445"

// traffic writes and reads steadily until stop: increments of views,
// reactions and count reads.
func traffic(ctx context.Context, w, r *client.Client, stop <-chan struct{}, errs chan<- error) {
	for i := 0; ; i++ {
		select {
		case <-stop:
			errs <- nil
			return
		case <-time.After(50 * time.Millisecond):
		}
		incs := make([]client.Increment, 0, 5)
		for k := 1; k <= 5; k++ {
			incs = append(incs, client.Increment{ContentID: "dash-" + strconv.Itoa(k), Counter: "view", Delta: int64(k)})
		}
		if _, err := w.Increments(ctx, incs); err != nil {
			errs <- err
			return
		}
		if _, err := w.React(ctx, "user-"+strconv.Itoa(i), "dash-"+likePattern[i%len(likePattern):][:1], client.Like); err != nil {
			errs <- err
			return
		}
		if _, err := r.Count(ctx, "dash-1", ""); err != nil {
			errs <- err
			return
		}
	}
}

// TestDashboardInChromium loads the dashboard of a real standalone agent
// with auth on in headless Chromium: without a token it says it needs one;
// with the read token its figures match the API: counter totals between
// the API's answers before and after, rates that are the change of the
// totals over the page's interval (non-zero under traffic, zero without),
// gauges, trending lists and the cluster view equal to the API's once
// traffic stops. It saves a screenshot under $EDGECOUNT_TEST_OUTPUT
// (default test-output/) and at $EDGECOUNT_DASHBOARD_PNG when set
// (relative to the repository: docs/dashboard.png for the README).
func TestDashboardInChromium(t *testing.T) {
	browser := testenv.NeedCommand(t, "EDGECOUNT_CHROMIUM", []string{"chromium", "chromium-browser", "google-chrome"}, "scripts/chromium.sh install")
	a := startAgent(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	wc, err := client.New(a.base, client.WithToken(writeToken))
	if err != nil {
		t.Fatal(err)
	}
	rc, err := client.New(a.base, client.WithToken(readToken))
	if err != nil {
		t.Fatal(err)
	}

	// The page is served without a token; what it shows is not.
	resp, err := http.Get(a.base + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("GET / without a token = %s %q; want 200 text/html", resp.Status, resp.Header.Get("Content-Type"))
	}

	stop, errs := make(chan struct{}), make(chan error, 1)
	go traffic(ctx, wc, rc, stop, errs)
	var stopOnce sync.Once
	stopTraffic := func() {
		stopOnce.Do(func() {
			close(stop)
			if err := <-errs; err != nil {
				t.Errorf("traffic: %v", err)
			}
		})
	}
	defer stopTraffic()

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(browser),
		chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1400, 1500))
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	if err := chromedp.Do(bctx, chromedp.Navigate(a.base+"/"), chromedp.WaitVisible(chromedp.CSS("#refreshes"))); err != nil {
		t.Fatalf("loading the page in %s: %v", browser, err)
	}

	// Without a token every figure is refused.
	testenv.Eventually(t, 30*time.Second, "the page to ask for a token", func() (string, bool) {
		v := snapshot(t, bctx)
		return fmt.Sprintf("refresh %d, error %q", v.N, v.Error), v.N >= 1 && strings.Contains(v.Error, "token")
	})
	if err := chromedp.Do(bctx, chromedp.SendKeys(chromedp.CSS("#token"), readToken), chromedp.Click(chromedp.CSS("#save-token"))); err != nil {
		t.Fatal(err)
	}

	// Under traffic: totals within the API's answers around them, rates
	// the change of the totals over the page's interval, and not zero.
	testenv.Eventually(t, 60*time.Second, "trending lists on the page", func() (string, bool) {
		v := afterRefreshes(t, bctx)
		shortest := -1
		for _, tb := range v.Tables {
			if shortest < 0 || len(tb.Items) < shortest {
				shortest = len(tb.Items)
			}
		}
		return fmt.Sprintf("error %q, %d tables, the shortest with %d items", v.Error, len(v.Tables), shortest),
			v.Error == "" && len(v.Tables) == 6 && shortest == 5
	})
	before := read(t, ctx, a, rc, "like")
	v := afterRefreshes(t, bctx)
	after := read(t, ctx, a, rc, "like")
	for _, id := range []string{"writes-total", "reads-total", "incs-total", "flushes-total"} {
		f := v.Figures[id]
		got := f.num(t, id, f.Value)
		if got < before.metrics[id] || got > after.metrics[id] {
			t.Errorf("#%s = %v; the API answered %v before and %v after", id, got, before.metrics[id], after.metrics[id])
		}
		if f.Text != strconv.FormatFloat(got, 'f', 0, 64) {
			t.Errorf("#%s shows %q for %v", id, f.Text, got)
		}
	}
	rates := map[string]string{"write-rate": "writes-total", "read-rate": "reads-total", "inc-rate": "incs-total"}
	for id, totalID := range rates {
		f := v.Figures[id]
		rate, prev, cur, span := f.num(t, id, f.Value), f.num(t, id, f.Prev), f.num(t, id, f.Cur), f.num(t, id, f.Span)
		if cur != v.Figures[totalID].num(t, totalID, v.Figures[totalID].Value) || prev > cur || span <= 0 {
			t.Errorf("#%s from %v to %v over %vs; #%s is %s", id, prev, cur, span, totalID, *v.Figures[totalID].Value)
		}
		if math.Abs(rate-(cur-prev)/span) > 1e-9*math.Max(1, rate) || rate <= 0 {
			t.Errorf("#%s = %v/s under traffic; want (%v-%v)/%v > 0", id, rate, cur, prev, span)
		}
		if shown, err := strconv.ParseFloat(strings.TrimSuffix(f.Text, "/s"), 64); err != nil || math.Abs(shown-rate) > 0.05+1e-9 {
			t.Errorf("#%s shows %q for %v/s", id, f.Text, rate)
		}
	}
	if f := v.Figures["flush-time"]; f.Value != nil {
		if s := f.num(t, "flush-time", f.Value); s < 0 || s > 1 {
			t.Errorf("#flush-time = %vs per flush; want within [0, 1s]", s)
		}
	}
	shot := screenshot(t, bctx)

	// Without traffic every figure settles on the API's answer.
	stopTraffic()
	testenv.Eventually(t, 60*time.Second, "the page to show the API's figures", testenv.UntilEmpty(func() string {
		before := read(t, ctx, a, rc, "like")
		v := afterRefreshes(t, bctx)
		after := read(t, ctx, a, rc, "like")
		return compare(t, before, v, after)
	}))

	// Another counter's lists, picked in the page's selector.
	if _, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`(() => { const s = document.getElementById("counter");
		s.value = "view"; s.dispatchEvent(new Event("change")); return s.value === "view"; })()`)); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 60*time.Second, "the page to show the view lists of the API", testenv.UntilEmpty(func() string {
		before := read(t, ctx, a, rc, "view")
		v := afterRefreshes(t, bctx)
		after := read(t, ctx, a, rc, "view")
		for _, tb := range v.Tables {
			if tb.Counter != "view" {
				return fmt.Sprintf("trending %s %s is of %s", tb.Scope, tb.Window, tb.Counter)
			}
		}
		return compare(t, before, v, after)
	}))
	t.Logf("screenshot: %s", shot)
}

// compare returns what differs between the page v and the API's answers
// before and after it ("" when nothing): with no traffic, the two answers
// and the page agree on every figure.
func compare(t *testing.T, before apiView, v pageView, after apiView) string {
	var diffs []string
	for id, want := range before.metrics {
		f, ok := v.Figures[id]
		switch {
		case !ok:
			t.Fatalf("the page has no #%s", id)
		case id == "flushes-total": // flushes go on without traffic
			got := f.num(t, id, f.Value)
			if got < want || got > after.metrics[id] {
				diffs = append(diffs, fmt.Sprintf("#%s %v not within [%v, %v]", id, got, want, after.metrics[id]))
			}
		case after.metrics[id] != want:
			diffs = append(diffs, fmt.Sprintf("%s moved from %v to %v", id, want, after.metrics[id]))
		case math.IsNaN(want):
			if f.Value != nil {
				diffs = append(diffs, fmt.Sprintf("#%s = %s; the API exports no such metric", id, *f.Value))
			}
		case f.Value == nil || f.num(t, id, f.Value) != want:
			diffs = append(diffs, fmt.Sprintf("#%s = %v (%q); API %v", id, f.Value, f.Text, want))
		}
	}
	for _, id := range []string{"write-rate", "read-rate", "inc-rate"} {
		if f := v.Figures[id]; f.Value == nil || f.num(t, id, f.Value) != 0 || f.Text != "0.0/s" {
			diffs = append(diffs, fmt.Sprintf("#%s = %q without traffic; want 0.0/s", id, f.Text))
		}
	}
	if len(v.Tables) != 6 {
		diffs = append(diffs, fmt.Sprintf("%d trending tables; want 6", len(v.Tables)))
	}
	for _, tb := range v.Tables {
		key := tb.Scope + " " + tb.Window
		want, again := before.trending[key], after.trending[key]
		if fmt.Sprint(want) != fmt.Sprint(again) {
			diffs = append(diffs, "trending "+key+" moved")
			continue
		}
		var got []client.TrendingItem
		for _, it := range tb.Items {
			got = append(got, client.TrendingItem{ContentID: it.ID, Count: it.Count, Error: it.Error})
			if it.CountText != strconv.FormatInt(it.Count, 10) {
				diffs = append(diffs, fmt.Sprintf("trending %s shows %q for %d", key, it.CountText, it.Count))
			}
		}
		if len(want) == 0 || fmt.Sprint(got) != fmt.Sprint(want) {
			diffs = append(diffs, fmt.Sprintf("trending %s: page %v; API %v", key, got, want))
		}
	}
	if !strings.Contains(v.Cluster, "runs no gossip") || !strings.Contains(before.cluster, "runs no gossip") {
		diffs = append(diffs, fmt.Sprintf("cluster: page %q; API %q", v.Cluster, before.cluster))
	}
	return strings.Join(diffs, "; ")
}

// screenshot saves the page as a PNG under $EDGECOUNT_TEST_OUTPUT (default
// test-output/ in the repository) and at $EDGECOUNT_DASHBOARD_PNG when set,
// and returns the first path.
func screenshot(t *testing.T, ctx context.Context) string {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	root := repoRoot(t)
	dir := os.Getenv("EDGECOUNT_TEST_OUTPUT")
	if dir == "" {
		dir = filepath.Join(root, "test-output")
	}
	paths := []string{filepath.Join(dir, "dashboard.png")}
	if p := os.Getenv("EDGECOUNT_DASHBOARD_PNG"); p != "" {
		if !filepath.IsAbs(p) {
			p = filepath.Join(root, p)
		}
		paths = append(paths, p)
	}
	for _, p := range paths {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return paths[0]
}

// TestDashboardClusterInChromium: the page lists the members of a real
// gossip cluster (two nodes on loopback) as GET /v1/cluster answers them
// (the JSON of gossip.ClusterView, as httpapi encodes it), this agent
// marked, and says what it cannot show (no /metrics here).
func TestDashboardClusterInChromium(t *testing.T) {
	browser := testenv.NeedCommand(t, "EDGECOUNT_CHROMIUM", []string{"chromium", "chromium-browser", "google-chrome"}, "scripts/chromium.sh install")
	var nodes []*gossip.Node
	for _, name := range []string{"agent-a", "agent-b"} {
		cfg := gossip.DefaultConfig("eu-west", name)
		cfg.BindAddr, cfg.BindPort, cfg.Profile, cfg.AllowPlaintext = "127.0.0.1", 0, gossip.ProfileFast, true
		cfg.HTTPAddr, cfg.Version = name+".test:8080", "v-test"
		n, err := gossip.New(cfg, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		nodes = append(nodes, n)
	}
	if _, err := nodes[1].Join(t.Context(), []string{nodes[0].Addr()}); err != nil {
		t.Fatal(err)
	}
	page, err := dashboard.Handler(dashboard.Config{Region: "eu-west", TrendingCounters: []string{"like"}, Refresh: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /{$}", page)
	mux.HandleFunc("GET /v1/cluster", func(w http.ResponseWriter, r *http.Request) {
		body, err := json.Marshal(nodes[0].Cluster())
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(body) //nolint:errcheck // test server
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser), chromedp.NoSandbox, chromedp.DisableGPU)...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	if err := chromedp.Do(bctx, chromedp.Navigate(srv.URL+"/")); err != nil {
		t.Fatal(err)
	}
	type row struct{ Name, State, Text string }
	const membersJS = `[...document.querySelectorAll("#members tr[data-name]")].map((r) => ({Name: r.dataset.name, State: r.dataset.state, Text: r.children[0].textContent}))`
	testenv.Eventually(t, 60*time.Second, "the page to list both members as /v1/cluster does", testenv.UntilEmpty(func() string {
		want := nodes[0].Cluster()
		rows, err := chromedp.Run(bctx, chromedp.Evaluate[[]row](membersJS))
		if err != nil {
			return err.Error()
		}
		if len(rows) != 2 || len(want.Members) != 2 {
			return fmt.Sprintf("page %v; API %d members", rows, len(want.Members))
		}
		for i, m := range want.Members {
			text := m.Name
			if m.Name == want.Self {
				text += " (this agent)"
			}
			if rows[i].Name != m.Name || rows[i].State != string(m.State) || rows[i].Text != text {
				return fmt.Sprintf("row %d: page %+v; API %s %s", i, rows[i], m.Name, m.State)
			}
		}
		return ""
	}))
	v := snapshot(t, bctx)
	if !strings.Contains(v.Error, "/metrics: 404") {
		t.Errorf("error line %q; want it to say /metrics answered 404", v.Error)
	}
}
