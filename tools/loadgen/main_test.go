package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/edgecount/edgecount/client"
	"github.com/edgecount/edgecount/internal/testenv"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		if binBuilt.Load() {
			if bin, err := agentBinary(); err == nil {
				os.RemoveAll(filepath.Dir(bin))
			}
		}
		os.Exit(code)
	}))
}

// binBuilt is set once agentBinary has built (so that the cleanup does
// not build it only to remove it).
var binBuilt atomic.Bool

func TestParseFlags(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		wantErr string // "" means valid
		check   func(*options) string
	}{
		{args: nil, check: func(o *options) string {
			if o.mix.String() != "incr100" || o.conns != 32 || o.items != 10000 || o.zipf != 0 || o.rate != 0 || o.pipeline != 1 {
				return "defaults: " + o.mix.String()
			}
			return ""
		}},
		{args: []string{"-mode", "get16"}, check: func(o *options) string { return want(o.mix.String(), "get16") }},
		{args: []string{"-mix", "incr=70,react=10,get=20"}, check: func(o *options) string {
			return want(o.mix.String(), "incr1=70,get1=20,react=10")
		}},
		{args: []string{"-addr", "[::1]:80"}},
		{args: []string{"-addr", "localhost:80"}},
		{args: []string{"-addr", "127.9.0.1:80", "-zipf", "1.0", "-items", "1000000", "-rate", "5000"}},
		{args: []string{"-addr", "10.0.0.1:80"}, wantErr: "addr"},
		{args: []string{"-addr", "example.com:80"}, wantErr: "loopback"},
		{args: []string{"-addr", "127.0.0.1"}, wantErr: "addr"},
		{args: []string{"-duration", "6m"}, wantErr: "duration"},
		{args: []string{"-duration", "0s"}, wantErr: "duration"},
		{args: []string{"-conns", "0"}, wantErr: "conns"},
		{args: []string{"-items", "0"}, wantErr: "items"},
		{args: []string{"-items", "10000001"}, wantErr: "items"},
		{args: []string{"-zipf", "-1"}, wantErr: "zipf"},
		{args: []string{"-zipf", "NaN"}, wantErr: "zipf"},
		{args: []string{"-rate", "-5"}, wantErr: "rate"},
		{args: []string{"-rate", "0.01"}, wantErr: "rate"},
		{args: []string{"-mix", "incr=70,bogus=30"}, wantErr: `unknown op "bogus"`},
		{args: []string{"-mix", "incr=x"}, wantErr: "weight of incr"},
		{args: []string{"-mix", "incr=0"}, wantErr: "every weight is 0"},
		{args: []string{"-mix", "incr=1,incr1=2"}, wantErr: "given twice"},
		{args: []string{"-mode", "incr1,get1"}, wantErr: "mode"},
		{args: []string{"-mode", "get1", "-mix", "get1"}, wantErr: "give one"},
		{args: []string{"-report", "xml"}, wantErr: "report"},
		{args: []string{"-pool", "-1"}, wantErr: "pool"},
		{args: []string{"-client"}, check: func(o *options) string { return want(strconv.FormatBool(o.client), "true") }},
		{args: []string{"-client", "-pipeline", "8"}, wantErr: "does not pipeline"},
		{args: []string{"-client", "-body", "protobuf"}, wantErr: "sends JSON"},
		{args: []string{"-token-file", "/no/such/file"}, wantErr: "token-file"},
		{args: []string{"-wait-ready", "-1s"}, wantErr: "wait-ready"},
		{args: []string{"stray"}, wantErr: "unexpected arguments"},
		// Every problem is named at once.
		{args: []string{"-conns", "0", "-items", "0"}, wantErr: "conns 0: want 1..1024; items 0"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			o, err := parseFlags(tc.args, io.Discard, false)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("parseFlags = %v, want no error", err)
				}
				if tc.check != nil {
					if msg := tc.check(o); msg != "" {
						t.Error(msg)
					}
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("parseFlags = %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}

func want(got, want string) string {
	if got != want {
		return "got " + got + ", want " + want
	}
	return ""
}

// TestMixRatio: ops are drawn in the ratio of their weights.
func TestMixRatio(t *testing.T) {
	m, err := parseMix("incr=70,react=10,get=15,get16=5")
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	var n [numOps]int
	const draws = 200_000
	for range draws {
		n[m.next(r)]++
	}
	for o, w := range map[op]float64{opIncr1: 0.70, opReact: 0.10, opGet1: 0.15, opGet16: 0.05, opIncr100: 0} {
		got := float64(n[o]) / draws
		if math.Abs(got-w) > 0.005 {
			t.Errorf("%s drawn %.4f of the time, want %.2f", o, got, w)
		}
	}
}

// TestZipfShape: the frequency of each rank follows k^-s / H(n, s), checked
// rank by rank at the head and as a chi-square over the first 200 ranks
// plus the tail; s = 0 is uniform.
func TestZipfShape(t *testing.T) {
	const n, draws = 1000, 400_000
	for _, s := range []float64{0, 0.8, 1.0, 1.2, 2.0} {
		k, err := newKeys(n, s)
		if err != nil {
			t.Fatal(err)
		}
		r := rand.New(rand.NewPCG(7, uint64(s*10)))
		counts := make([]int, n)
		for range draws {
			id := k.next(r)
			if id < 0 || id >= n {
				t.Fatalf("s=%v: id %d out of [0, %d)", s, id, n)
			}
			counts[id]++
		}
		p := make([]float64, n)
		var h float64
		for i := range p {
			p[i] = math.Pow(float64(i+1), -s)
			h += p[i]
		}
		for i := range p {
			p[i] /= h
		}
		for _, rank := range []int{1, 2, 10} {
			got, exp := float64(counts[rank-1])/draws, p[rank-1]
			if math.Abs(got-exp) > 4*math.Sqrt(exp*(1-exp)/draws)+1e-4 {
				t.Errorf("s=%v: rank %d drawn %.5f of the time, want %.5f", s, rank, got, exp)
			}
		}
		// Chi-square over ranks 1..200 and one bin for the rest: 200
		// degrees of freedom, mean 200, sd 20; 300 is 5 sd out.
		var chi, tailGot, tailExp float64
		for i := range n {
			if i < 200 {
				e := p[i] * draws
				chi += (float64(counts[i]) - e) * (float64(counts[i]) - e) / e
			} else {
				tailGot += float64(counts[i])
				tailExp += p[i] * draws
			}
		}
		chi += (tailGot - tailExp) * (tailGot - tailExp) / tailExp
		if chi > 300 {
			t.Errorf("s=%v: chi-square %.0f over 201 bins, want < 300 (the draws do not follow k^-s)", s, chi)
		}
	}
}

func TestHistQuantiles(t *testing.T) {
	var h hist
	for i := 1; i <= 10000; i++ {
		h.record(time.Duration(i) * time.Microsecond)
	}
	var s snapshot
	s.add(&h)
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 5000 * time.Microsecond}, {0.99, 9900 * time.Microsecond}, {0.999, 9990 * time.Microsecond}} {
		got := s.quantile(tc.q)
		if math.Abs(float64(got-tc.want)) > 0.016*float64(tc.want) {
			t.Errorf("quantile(%v) = %v, want %v within 1.6%%", tc.q, got, tc.want)
		}
	}
	if got := s.maximum(); math.Abs(float64(got-10*time.Millisecond)) > 0.016*float64(10*time.Millisecond) {
		t.Errorf("maximum = %v, want 10ms", got)
	}
	for _, ns := range []int64{0, 1, 127, 128, 129, 1 << 20, 1<<40 + 12345} {
		if v := histValue(histIndex(ns)); math.Abs(float64(v-ns)) > float64(ns)/64+1 {
			t.Errorf("bucket of %d ns holds %d", ns, v)
		}
	}
}

// TestRequestsAllocateNothing: building a request appends into reused
// buffers, so the generator allocates nothing per request.
func TestRequestsAllocateNothing(t *testing.T) {
	for o := range numOps {
		opts, err := parseFlags([]string{"-mode", opNames[o], "-zipf", "1.1", "-items", "100000"}, io.Discard, false)
		if err != nil {
			t.Fatal(err)
		}
		g := newGen(opts, 1)
		buf := make([]byte, 0, 64<<10)
		g.appendNext(buf)
		if n := testing.AllocsPerRun(200, func() { buf, _ = g.appendNext(buf[:0]) }); n != 0 {
			t.Errorf("%s: %v allocations a request, want 0", opNames[o], n)
		}
	}
}

// TestRequestsParse: every op's request is valid HTTP/1.1 that net/http
// reads back with the body and parameters the API expects.
func TestRequestsParse(t *testing.T) {
	opts, err := parseFlags([]string{"-mix", "incr1,incr100,get1,get16,react", "-items", "50"}, io.Discard, false)
	if err != nil {
		t.Fatal(err)
	}
	g := newGen(opts, 3)
	seen := map[op]bool{}
	for range 200 {
		raw, o := g.appendNext(nil)
		seen[o] = true
		req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(raw)))
		if err != nil {
			t.Fatalf("%s: %v\n%s", o, err, raw)
		}
		body, _ := io.ReadAll(req.Body)
		switch o {
		case opIncr1, opIncr100:
			var v struct {
				Increments []struct {
					ContentID string `json:"content_id"`
					Counter   string `json:"counter"`
					Delta     int    `json:"delta"`
				} `json:"increments"`
			}
			if err := json.Unmarshal(body, &v); err != nil || len(v.Increments) != opUnits[o] || req.Method != "POST" || req.URL.Path != "/v1/increments" {
				t.Fatalf("%s: %s %s %s (%v)", o, req.Method, req.URL, body, err)
			}
			for _, inc := range v.Increments {
				if !strings.HasPrefix(inc.ContentID, "item-") || inc.Counter != "view" || inc.Delta != 1 {
					t.Fatalf("%s: increment %+v", o, inc)
				}
			}
		case opGet1:
			if req.Method != "GET" || !strings.HasPrefix(req.URL.Path, "/v1/counts/item-") {
				t.Fatalf("%s: %s %s", o, req.Method, req.URL)
			}
		case opGet16:
			if ids := req.URL.Query()["content_id"]; req.URL.Path != "/v1/counts" || len(ids) != 16 {
				t.Fatalf("%s: %s %s", o, req.Method, req.URL)
			}
		case opReact:
			var v map[string]string
			if err := json.Unmarshal(body, &v); err != nil || !strings.HasPrefix(v["user_id"], "user-") || !strings.HasPrefix(v["content_id"], "item-") {
				t.Fatalf("%s: %s (%v)", o, body, err)
			}
			if a := v["action"]; a != "like" && a != "dislike" && a != "none" {
				t.Fatalf("%s: action %q", o, a)
			}
		}
	}
	if len(seen) != int(numOps) {
		t.Errorf("ops seen %v, want all %d", seen, numOps)
	}
}

func TestMdReport(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"-report", "md-header"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	header := out.String()
	r := &result{Mode: "get16", Conns: 32, RequestsPS: 23456, UnitsPS: 375296, P50Micros: 812.5, P99Micros: 2400, Items: 10000, Zipf: 1, Rate: 25000, Saturated: true}
	row := mdRow(r)
	wantRow := "| get16 | Zipf 1 over 10.0 k | 32 | 25.0 k/s (saturated) | 23.5 k | 375 k | 812 µs | 2.40 ms | 0 |\n"
	if row != wantRow {
		t.Errorf("mdRow = %q, want %q", row, wantRow)
	}
	cols := func(s string) int { return strings.Count(strings.SplitN(s, "\n", 2)[0], "|") }
	if cols(header) != cols(row) {
		t.Errorf("header has %d columns, row %d:\n%s%s", cols(header), cols(row), header, row)
	}
}

// stallServer answers every request with a fixed 200 after reading its
// head (and body), but stalls once for stall before answering the request
// numbered stallAt. It is the test's own server: the code under test is
// loadgen's scheduler.
func stallServer(t *testing.T, stallAt int, stall time.Duration) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	var mu sync.Mutex
	n := 0
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					io.Copy(io.Discard, req.Body)
					mu.Lock()
					n++
					stallNow := n == stallAt
					mu.Unlock()
					if stallNow {
						time.Sleep(stall)
					}
					if _, err := c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// TestRateAndCoordinatedOmission: at -rate 200 on one connection loadgen
// sends ~200 requests a second; when the server stalls 300 ms once, the
// requests scheduled during the stall are measured from their intended
// send time, so p99 shows the stall (a closed-loop generator would record
// one slow request out of hundreds, and p99 would stay at the floor).
func TestRateAndCoordinatedOmission(t *testing.T) {
	addr := stallServer(t, 50, 300*time.Millisecond)
	var out bytes.Buffer
	if err := run(context.Background(), []string{"-addr", addr, "-mode", "get1", "-conns", "1", "-rate", "200", "-duration", "2s"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	var r result
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if r.Requests < 360 || r.Requests > 402 {
		t.Errorf("requests = %d in 2s at 200/s, want 360..402", r.Requests)
	}
	// ~60 requests fall inside the 300 ms stall: well over 1% of 400.
	if r.P99Micros < 100_000 {
		t.Errorf("p99 = %v µs, want ≥ 100 ms: the stall's queued requests were not measured from their intended times", r.P99Micros)
	}
	if r.P50Micros > 50_000 {
		t.Errorf("p50 = %v µs, want the unstalled latency (< 50 ms)", r.P50Micros)
	}
	if r.Errors != 0 || r.IOErrors != 0 || r.Saturated {
		t.Errorf("report %+v, want no errors and not saturated", r)
	}
}

// TestProgressLine: with -progress the status line goes to stderr once a
// second (one line each, stderr not being a terminal) and the report to
// stdout stays one JSON line.
func TestProgressLine(t *testing.T) {
	addr := stallServer(t, -1, 0)
	var out, errb bytes.Buffer
	if err := run(context.Background(), []string{"-addr", addr, "-mode", "incr1", "-conns", "2", "-duration", "2200ms", "-progress"}, &out, &errb); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(errb.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("progress lines %q, want 2 (one a second)", lines)
	}
	for _, l := range lines {
		for _, part := range []string{"s/2.2s", "req/s", "p50", "p99", "errors 0"} {
			if !strings.Contains(l, part) {
				t.Errorf("progress line %q lacks %q", l, part)
			}
		}
	}
	if strings.Count(out.String(), "\n") != 1 || !json.Valid(out.Bytes()) {
		t.Errorf("report %q, want one JSON line", out.String())
	}
}

// agentBinary builds cmd/edge-agent once for the tests that drive a real
// agent, in the service's own module (the repository root, two levels up
// from this package's directory), with that module's dependencies.
var agentBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "loadgen-test")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "edge-agent")
	binBuilt.Store(true)
	build := exec.Command("go", "build", "-o", bin, "./cmd/edge-agent")
	build.Dir = filepath.Join("..", "..")
	out, err := build.CombinedOutput()
	if err != nil {
		return "", &buildError{err, out}
	}
	return bin, nil
})

type buildError struct {
	err error
	out []byte
}

func (e *buildError) Error() string {
	return "cannot build edge-agent: " + e.err.Error() + "\n" + string(e.out)
}

// startAgent runs a standalone edge agent (embedded store and NATS) on a
// free loopback port and returns its address.
func startAgent(t *testing.T, args ...string) string {
	t.Helper()
	bin, err := agentBinary()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, append([]string{"--data", t.TempDir(), "--http", "127.0.0.1:0", "--durability", "none", "--flush-interval", "200ms"}, args...)...)
	cmd.Env = append(os.Environ(), "EDGECOUNT_LOG_LEVEL=warn")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &testenv.Buffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	i := strings.Index(line, "http://")
	if err != nil || i < 0 {
		t.Fatalf("no start line (%v): %q\n%s", err, line, stderr.String())
	}
	go io.Copy(io.Discard, stdout)
	return strings.TrimPrefix(strings.Fields(line[i:])[0], "http://")
}

func runJSON(t *testing.T, args ...string) result {
	t.Helper()
	var out bytes.Buffer
	if err := run(context.Background(), args, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	var r result
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	return r
}

// TestAgainstAgent drives a real standalone agent, over raw connections
// and through package client (-client): a mix is answered without errors
// in its ratio, and the increments loadgen reports as sent are exactly the
// totals the agent then serves.
func TestAgainstAgent(t *testing.T) {
	addr := startAgent(t)
	for _, via := range []string{"raw", "client"} {
		t.Run(via, func(t *testing.T) { againstAgent(t, addr, via == "client") })
	}
}

func againstAgent(t *testing.T, addr string, viaClient bool) {
	var extra []string
	if viaClient {
		extra = []string{"-client"}
	}
	r := runJSON(t, append([]string{"-addr", addr, "-mix", "incr=60,get=25,react=10,get16=5", "-zipf", "1.0", "-items", "100000", "-conns", "4", "-duration", "2s"}, extra...)...)
	if r.Client != viaClient {
		t.Errorf("report says client %v; want %v", r.Client, viaClient)
	}
	if r.Errors != 0 || r.IOErrors != 0 || r.Requests < 100 {
		t.Fatalf("mixed run %+v, want ≥ 100 requests and no errors (first: %s)", r, r.FirstStatus)
	}
	for name, w := range map[string]float64{"incr1": 0.60, "get1": 0.25, "react": 0.10, "get16": 0.05} {
		got := float64(r.Ops[name].Requests) / float64(r.Requests)
		if math.Abs(got-w) > 4*math.Sqrt(w*(1-w)/float64(r.Requests))+0.01 {
			t.Errorf("%s: %.3f of %d requests, want %.2f", name, got, r.Requests, w)
		}
	}
	if want := r.Ops["incr1"].Units + r.Ops["get1"].Units + r.Ops["react"].Units + r.Ops["get16"].Units; r.Units != want || r.Ops["get16"].Units != 16*r.Ops["get16"].Requests {
		t.Errorf("units %d, ops %+v", r.Units, r.Ops)
	}

	// Increments over 3 items: the agent's view totals must add up to the
	// units loadgen reports.
	// The mixed run's last flush may still be on its way: take the
	// baseline once it holds still for a second (five flush intervals).
	c, err := client.New("http://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	before := viewTotal(t, c, 3)
	testenv.Eventually(t, 20*time.Second, "the mixed run's totals to settle", func() (string, bool) {
		time.Sleep(time.Second)
		now := viewTotal(t, c, 3)
		settled := now == before
		before = now
		return "views still moving: " + itoa(now), settled
	})
	r = runJSON(t, append([]string{"-addr", addr, "-mode", "incr100", "-items", "3", "-conns", "2", "-duration", "1s"}, extra...)...)
	if r.Errors != 0 || r.Units != 100*r.Requests || r.Units == 0 {
		t.Fatalf("incr100 run %+v", r)
	}
	testenv.Eventually(t, 20*time.Second, "the agent's view totals to hold what loadgen sent", func() (string, bool) {
		got := viewTotal(t, c, 3) - before
		return "views " + itoa(got) + ", want " + itoa(r.Units), got == r.Units
	})
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// viewTotal sums the global view totals of item-0..item-(n-1); an item
// without totals counts 0.
func viewTotal(t *testing.T, c *client.Client, n int) int64 {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = itemID(i)
	}
	counts, err := c.Counts(context.Background(), "", ids...)
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, row := range counts {
		sum += row.Counters["view"]
	}
	return sum
}

// TestTokenFile: against an agent with a token file, requests without a
// token are all refused (401, counted as errors) and -token-file's token
// is accepted, over raw connections and through package client.
// -wait-ready finds a running agent ready, and gives up on a closed port
// naming it.
func TestTokenFile(t *testing.T) {
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte("# loadgen\nlg-0123456789abcdef write,read loadgen\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := startAgent(t, "--auth-tokens", tokens)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	err = run(context.Background(), []string{"-addr", closed, "-wait-ready", "300ms", "-duration", "1s"}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "not ready after 300ms") || !strings.Contains(err.Error(), closed) {
		t.Errorf("-wait-ready on a closed port: %v; want it not ready, naming %s", err, closed)
	}
	for _, via := range [][]string{nil, {"-client"}} {
		args := append([]string{"-addr", addr, "-mix", "incr100=1,get1=1", "-conns", "2", "-duration", "500ms"}, via...)
		r := runJSON(t, args...)
		if r.Requests == 0 || r.Errors != r.Requests || !strings.Contains(r.FirstStatus, "HTTP 401") {
			t.Errorf("%v without a token: %d requests, %d errors (first %q); want every one a 401", via, r.Requests, r.Errors, r.FirstStatus)
		}
		r = runJSON(t, append(args, "-token-file", tokens, "-wait-ready", "10s")...)
		if r.Requests == 0 || r.Errors != 0 || r.IOErrors != 0 {
			t.Errorf("%v with -token-file: %d requests, %d errors, %d broken (first %q); want none refused", via, r.Requests, r.Errors, r.IOErrors, r.FirstStatus)
		}
	}
}

// BenchmarkAppendNext is the generator's cost of building one request, per
// op (Zipf 1.0 over 10^6 items): it must stay small next to the agent's
// cost of answering it.
func BenchmarkAppendNext(b *testing.B) {
	for o := range numOps {
		b.Run(opNames[o], func(b *testing.B) {
			opts, err := parseFlags([]string{"-mode", opNames[o], "-zipf", "1.0", "-items", "1000000"}, io.Discard, false)
			if err != nil {
				b.Fatal(err)
			}
			g := newGen(opts, 1)
			buf := make([]byte, 0, 64<<10)
			b.ReportAllocs()
			for b.Loop() {
				buf, _ = g.appendNext(buf[:0])
			}
		})
	}
}
