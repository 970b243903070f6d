package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgecount/edgecount/client"
	"github.com/edgecount/edgecount/internal/testenv"
)

var (
	agentOnce sync.Once
	agentBin  string
	agentErr  error
)

// startAgent builds edge-agent once and runs a standalone agent (embedded
// store and broker, no services) for the test, returning its base URL.
func startAgent(t *testing.T) string {
	t.Helper()
	agentOnce.Do(func() {
		dir, err := os.MkdirTemp("", "edgecount-client-test")
		if err != nil {
			agentErr = err
			return
		}
		agentBin = filepath.Join(dir, "edge-agent")
		if out, err := exec.Command("go", "build", "-o", agentBin, "../cmd/edge-agent").CombinedOutput(); err != nil {
			agentErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if agentErr != nil {
		t.Fatal(agentErr)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	stderr := &testenv.Buffer{}
	cmd := exec.Command(agentBin, "--data", t.TempDir(), "--http", addr, "--log-level", "warn")
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("agent stderr:\n%s", stderr.String())
		}
	})
	base := "http://" + addr
	c, _ := client.New(base, client.WithRetries(1, 0, 0))
	testenv.Eventually(t, 30*time.Second, "agent ready", func() (string, bool) {
		err := c.Ready(t.Context())
		return fmt.Sprint(err), err == nil
	})
	return base
}

// TestEveryRouteAgainstAnAgent drives every call against a real agent.
func TestEveryRouteAgainstAnAgent(t *testing.T) {
	c, err := client.New(startAgent(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	n, err := c.Increments(ctx, []client.Increment{{ContentID: "v1", Counter: "view", Delta: 3}, {ContentID: "v2", Counter: "share", Delta: 1}})
	if err != nil || n != 2 {
		t.Fatalf("Increments = %d, %v; want 2 accepted", n, err)
	}
	res, err := c.React(ctx, "u1", "v1", client.Like)
	if err != nil || !res.Changed || res.Previous != client.None || res.Action != client.Like || res.Version != 1 {
		t.Fatalf("React = %+v, %v", res, err)
	}
	again, err := c.React(ctx, "u1", "v1", client.Like)
	if err != nil || again.Changed {
		t.Fatalf("React again = %+v, %v; want unchanged", again, err)
	}
	r, err := c.Reaction(ctx, "u1", "v1")
	if err != nil || r.Action != client.Like || r.UpdatedAt == nil {
		t.Fatalf("Reaction = %+v, %v", r, err)
	}
	rs, err := c.Reactions(ctx, "u1", "v1", "v2")
	if err != nil || len(rs) != 2 || rs[0].Action != client.Like || rs[1].Action != client.None || rs[1].UpdatedAt != nil {
		t.Fatalf("Reactions = %+v, %v", rs, err)
	}
	testenv.Eventually(t, 30*time.Second, "counts of v1 flushed", func() (string, bool) {
		got, err := c.Count(ctx, "v1", "")
		return fmt.Sprintf("%+v %v", got, err), err == nil && got.Likes == 1 && got.Counters["view"] == 3
	})
	counts, err := c.Counts(ctx, "", "v1", "v2", "v1")
	if err != nil || len(counts) != 3 || counts[1].Counters["share"] != 1 || counts[2].ContentID != "v1" {
		t.Fatalf("Counts = %+v, %v", counts, err)
	}
	if counts[0].AsOf == nil || counts[0].StalenessMs == nil || counts[0].Consistency != "" {
		t.Errorf("eventual count = %+v; want as_of and staleness_ms", counts[0])
	}
	// Fresh, once everything is applied: the same totals, never doubled.
	fresh, err := c.CountsWith(ctx, client.ReadOptions{Consistency: client.Fresh}, "v1")
	if err != nil || len(fresh) != 1 || fresh[0].Consistency != client.Fresh || fresh[0].AsOf == nil ||
		fresh[0].Likes != 1 || fresh[0].Counters["view"] != 3 {
		t.Fatalf("fresh Counts = %+v, %v; want 1 like, 3 views", fresh, err)
	}
	var ce *client.Error
	if _, err := c.CountWith(ctx, "v1", client.ReadOptions{Consistency: "strong"}); !errors.As(err, &ce) ||
		ce.Status != http.StatusBadRequest || ce.Field != "consistency" {
		t.Fatalf("CountWith consistency strong = %v; want a 400 naming consistency", err)
	}
	testenv.Eventually(t, 30*time.Second, "v1 trending", func() (string, bool) {
		tr, err := c.Trending(ctx, client.TrendingQuery{Counter: "view", K: 5})
		return fmt.Sprintf("%+v %v", tr, err), err == nil && len(tr.Items) > 0 && tr.Items[0].ContentID == "v1"
	})
	results, err := c.Recount(ctx, false, "v1")
	if err != nil || len(results) != 1 || results[0].ContentID != "v1" || results[0].Status == "" {
		t.Fatalf("Recount = %+v, %v", results, err)
	}
	// A standalone agent runs no gossip: a 404 Error.
	var ae *client.Error
	if _, err := c.Cluster(ctx); !errors.As(err, &ae) || ae.Status != http.StatusNotFound {
		t.Fatalf("Cluster = %v; want a 404 Error", err)
	}
	// Bad input: a 400 naming the field, not retried.
	_, err = c.Increments(ctx, []client.Increment{{ContentID: "v1", Counter: "like", Delta: 1}})
	if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || ae.Field != "increments[0].counter" || ae.Retryable() {
		t.Fatalf("Increments of a reaction counter = %v; want a 400 naming increments[0].counter", err)
	}
}

// TestBatcherCoalescesAndCountsExactly adds increments from several
// goroutines through a Batcher and checks the agent's totals.
func TestBatcherCoalescesAndCountsExactly(t *testing.T) {
	c, err := client.New(startAgent(t))
	if err != nil {
		t.Fatal(err)
	}
	var failed atomic.Int64
	b := client.NewBatcher(c, client.BatchOptions{MaxIncrements: 10, MaxDelay: 20 * time.Millisecond,
		OnError: func(err error, incs []client.Increment) {
			failed.Add(int64(len(incs)))
			t.Errorf("batch failed: %v", err)
		}})
	var wg sync.WaitGroup
	const writers, perWriter = 4, 500
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				if err := b.Add(fmt.Sprintf("b%d", i%25), "view", int64(1+w)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.Close()
	if err := b.Add("b0", "view", 1); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("Add after Close = %v; want ErrClosed", err)
	}
	st := b.Stats()
	want := int64(perWriter * (1 + 2 + 3 + 4))
	if st.Added != want || st.Sent != want || st.Failed != 0 {
		t.Fatalf("stats %+v; want %d added and sent", st, want)
	}
	if st.Batches >= writers*perWriter/10 {
		t.Errorf("%d batches for %d adds over 25 items: nothing was coalesced", st.Batches, writers*perWriter)
	}
	ids := make([]string, 25)
	for i := range ids {
		ids[i] = fmt.Sprintf("b%d", i)
	}
	testenv.Eventually(t, 30*time.Second, "batched totals", func() (string, bool) {
		counts, err := c.Counts(t.Context(), "", ids...)
		if err != nil {
			return err.Error(), false
		}
		var sum int64
		for _, x := range counts {
			sum += x.Counters["view"]
		}
		return fmt.Sprintf("sum %d, want %d", sum, want), sum == want
	})
}

// TestRetryHonoursRetryAfter: a 503 with Retry-After is retried after the
// wait it names, with the same Idempotency-Key.
func TestRetryHonoursRetryAfter(t *testing.T) {
	var calls atomic.Int32
	var keys sync.Map
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		keys.Store(r.Header.Get("Idempotency-Key"), true)
		if calls.Add(1) < 3 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `{"error":"agent log full"}`)
			return
		}
		fmt.Fprint(w, `{"accepted":1}`)
	}))
	defer srv.Close()
	c, _ := client.New(srv.URL, client.WithRetries(4, time.Millisecond, 5*time.Second))
	start := time.Now()
	n, err := c.Increments(t.Context(), []client.Increment{{ContentID: "a", Counter: "view", Delta: 1}})
	if err != nil || n != 1 || calls.Load() != 3 {
		t.Fatalf("Increments = %d, %v after %d calls; want 1 accepted on the 3rd", n, err, calls.Load())
	}
	if waited := time.Since(start); waited < 2*time.Second {
		t.Errorf("retried after %v; the server asked for 1 s twice", waited)
	}
	count := 0
	keys.Range(func(k, _ any) bool { count++; return k.(string) != "" })
	if count != 1 {
		t.Errorf("%d distinct Idempotency-Keys over the retries; want 1", count)
	}
	// Out of attempts: the last Error, retryable.
	calls.Store(-10)
	c, _ = client.New(srv.URL, client.WithRetries(2, time.Millisecond, 10*time.Millisecond))
	var ae *client.Error
	if _, err := c.Increments(t.Context(), []client.Increment{{ContentID: "a", Counter: "view", Delta: 1}}); !errors.As(err, &ae) ||
		ae.Status != 503 || ae.RetryAfter != time.Second || ae.Message != "agent log full" || !ae.Retryable() {
		t.Fatalf("err = %v; want the 503 Error", err)
	}
}

// TestUnansweredBatchNotRetried: a batch that got no answer may have been
// applied, so it is sent once, unless WithRetryUnanswered; a reaction is
// retried (it is idempotent).
func TestUnansweredBatchNotRetried(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		hj, _ := w.(http.Hijacker)
		conn, _, _ := hj.Hijack()
		conn.Close() // no answer
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	c, _ := client.New(srv.URL, client.WithRetries(3, time.Millisecond, time.Millisecond))
	if _, err := c.Increments(ctx, []client.Increment{{ContentID: "a", Counter: "view", Delta: 1}}); err == nil || calls.Load() != 1 {
		t.Fatalf("Increments = %v after %d calls; want an error after 1", err, calls.Load())
	}
	calls.Store(0)
	c, _ = client.New(srv.URL, client.WithRetries(3, time.Millisecond, time.Millisecond), client.WithRetryUnanswered(true))
	if _, err := c.Increments(ctx, []client.Increment{{ContentID: "a", Counter: "view", Delta: 1}}); err == nil || calls.Load() != 3 {
		t.Fatalf("Increments with WithRetryUnanswered = %v after %d calls; want an error after 3", err, calls.Load())
	}
	calls.Store(0)
	if _, err := c.React(ctx, "u", "a", client.Like); err == nil || calls.Load() != 3 {
		t.Fatalf("React = %v after %d calls; want an error after 3", err, calls.Load())
	}
}

// TestRetryAfterDroppedConnectionCountedOnce: the connection of a batch is
// dropped after the agent applied it and before the answer reached the
// client; the client's retry carries the same Idempotency-Key, gets the
// first answer, and the agent counts the batch once.
func TestRetryAfterDroppedConnectionCountedOnce(t *testing.T) {
	base := startAgent(t)
	var calls atomic.Int32
	var keys sync.Map
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		keys.Store(r.Header.Get("Idempotency-Key"), true)
		out, err := http.NewRequestWithContext(r.Context(), r.Method, base+r.URL.RequestURI(), r.Body)
		if err != nil {
			t.Error(err)
			return
		}
		out.Header = r.Header.Clone()
		resp, err := http.DefaultTransport.RoundTrip(out)
		if err != nil {
			t.Error(err)
			return
		}
		defer resp.Body.Close()
		if n == 1 {
			// Applied by the agent; the answer is lost with the connection.
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
			return
		}
		for k, vs := range resp.Header {
			w.Header()[k] = vs
		}
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
	}))
	defer proxy.Close()
	c, _ := client.New(proxy.URL, client.WithRetries(3, time.Millisecond, 10*time.Millisecond), client.WithRetryUnanswered(true))
	n, err := c.Increments(t.Context(), []client.Increment{{ContentID: "dropped", Counter: "view", Delta: 7}})
	if err != nil || n != 1 || calls.Load() != 2 {
		t.Fatalf("Increments = %d, %v after %d calls; want 1 accepted on the 2nd", n, err, calls.Load())
	}
	count := 0
	keys.Range(func(k, _ any) bool { count++; return k.(string) != "" })
	if count != 1 {
		t.Fatalf("%d distinct Idempotency-Keys over the retry; want 1", count)
	}
	direct, _ := client.New(base)
	testenv.Eventually(t, 20*time.Second, "7 views", func() (string, bool) {
		got, err := direct.Count(t.Context(), "dropped", "")
		return fmt.Sprint(got.Counters["view"], err), err == nil && got.Counters["view"] >= 7
	})
	time.Sleep(2500 * time.Millisecond) // two flushes of the standalone agent
	if got, err := direct.Count(t.Context(), "dropped", ""); err != nil || got.Counters["view"] != 7 {
		t.Fatalf("views %d, %v; want 7 (the retry counted once)", got.Counters["view"], err)
	}
}
