package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/edgecount/edgecount/buildinfo"
	"github.com/edgecount/edgecount/internal/testenv"
	"github.com/edgecount/edgecount/natsjs"
	"github.com/edgecount/edgecount/partial"
	"github.com/edgecount/edgecount/store/embedded"
)

// TestRollupProcess runs the rollup command against a real NATS server
// over TCP: it consumes what an agent published, serves health, metrics
// and (--debug-pprof, open on loopback) the profiles, stops on cancel, and
// leaves the totals in its store.
func TestRollupProcess(t *testing.T) {
	srv, err := natsjs.StartServer(natsjs.ServerConfig{StoreDir: t.TempDir(), Host: "127.0.0.1", Port: -1, SyncAlways: true})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	client, err := natsjs.Dial(natsjs.ConnConfig{URL: srv.ClientURL(), Name: "test-agent"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx := context.Background()
	stream := natsjs.DefaultStreamConfig()
	if err := client.EnsureStream(ctx, stream); err != nil {
		t.Fatal(err)
	}
	pub := client.Publisher(stream)
	for seq, sums := range [][]partial.Sum{
		{{ContentID: "v1", Counter: "view", Region: "us", Delta: 5}},
		{{ContentID: "v1", Counter: "like", Region: "us", Delta: 2}, {ContentID: "v1", Counter: "like", Region: "eu", Delta: 1}},
	} {
		b := &partial.Batch{Agent: "us-a1", Region: "us", Epoch: 1, Seq: uint64(seq + 1), Partition: partial.PartitionOf("v1", stream.Partitions), Sums: sums}
		if err := pub.Publish(ctx, b.Partition, b.MsgID(), partial.Append(nil, b)); err != nil {
			t.Fatal(err)
		}
	}

	data := t.TempDir()
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(rctx, []string{"--nats", srv.ClientURL(), "--data", data, "--http", "127.0.0.1:0", "--debug-pprof"}, func(string) string { return "" }, pw, io.Discard)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("no start line: %v", err)
	}
	go io.Copy(io.Discard, pr)
	base := strings.Fields(line[strings.Index(line, "http://"):])[0]

	testenv.Eventually(t, 20*time.Second, "edgecount_rollup_messages_total 2 (the rollup applied 2 messages)", func() (string, bool) {
		m := get(t, base+"/metrics")
		return "metrics:\n" + m, strings.Contains(m, "edgecount_rollup_messages_total 2")
	})
	if got := get(t, base+"/readyz"); !strings.Contains(got, "ready") {
		t.Fatalf("readyz = %s", got)
	}
	build := buildinfo.Read()
	for _, want := range []string{
		"edgecount_recount_drift_repaired_total 0",
		`edgecount_build_info{goversion="` + build.GoVersion + `",revision="`, `",version="` + build.Version + `"} 1`,
	} {
		if got := get(t, base+"/metrics"); !strings.Contains(got, want) {
			t.Fatalf("metrics lack %s:\n%s", want, got)
		}
	}
	for path, want := range map[string]string{"/debug/pprof/": "Types of profiles available", "/debug/pprof/goroutine?debug=1": "goroutine profile:"} {
		if got := get(t, base+path); !strings.Contains(got, want) {
			t.Fatalf("GET %s = %.300q; want the profile (%s)", path, got, want)
		}
	}
	// The admin route: a malformed id is refused, an unknown one reported.
	for _, c := range []struct {
		query  string
		status int
		want   string
	}{
		{"id=v1&id=bad%20id", http.StatusBadRequest, `"field":"id[1]"`},
		{"id=v9", http.StatusOK, `"status":"unknown"`},
	} {
		resp, err := http.Post(base+"/admin/recount?"+c.query, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || !strings.Contains(string(b), c.want) {
			t.Fatalf("POST /admin/recount?%s = %d %s; want %d with %s", c.query, resp.StatusCode, b, c.status, c.want)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	st, err := embedded.Open(embedded.Config{Path: filepath.Join(data, "edgecount.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rows, err := st.ReadStats(ctx, []string{"v1"})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range rows["v1"] {
		got[r.Scope] = fmt.Sprintf("%d %d", r.Likes, r.Counters["view"])
	}
	want := map[string]string{"global": "3 5", "us": "2 5", "eu": "1 0"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s likes/views = %q, want %q", k, got[k], v)
		}
	}
}

// TestFailedComponentFailsTheProcess: a component that stops on its own
// stops the others, and run's error reports it, so the process exits
// non-zero.
func TestFailedComponentFailsTheProcess(t *testing.T) {
	tests := []struct {
		name    string
		fail    func(p *process)
		wantErr string
	}{
		{"http listener", func(p *process) { p.ln.Close() }, "http:"},
		{"consumer", func(p *process) { p.bus.Close() }, "rollup consumer:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, err := natsjs.StartServer(natsjs.ServerConfig{StoreDir: t.TempDir(), Host: "127.0.0.1", Port: -1})
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Shutdown()
			cfg, err := loadConfig([]string{"--nats", srv.ClientURL(), "--data", t.TempDir(), "--http", "127.0.0.1:0", "--owned", "0,1"},
				func(string) string { return "" }, io.Discard, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			p, err := start(t.Context(), cfg, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			tt.fail(p)
			err = testenv.Within(t, 30*time.Second, "the rollup to stop after its "+tt.name+" failed", func() error {
				return p.run(context.Background())
			})
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("run = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

// TestSignalDuringStartUp: a signal while the rollup starts ends the
// start-up at once, cleanly, without serving.
func TestSignalDuringStartUp(t *testing.T) {
	srv, err := natsjs.StartServer(natsjs.ServerConfig{StoreDir: t.TempDir(), Host: "127.0.0.1", Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var stdout strings.Builder
	begin := time.Now()
	err = run(ctx, []string{"--nats", srv.ClientURL(), "--data", t.TempDir(), "--http", "127.0.0.1:0"}, func(string) string { return "" }, &stdout, io.Discard)
	if err != nil {
		t.Fatalf("run = %v, want nil (a requested stop)", err)
	}
	if took := time.Since(begin); took > 10*time.Second {
		t.Errorf("run took %v after the signal, want a prompt return", took)
	}
	if stdout.Len() > 0 {
		t.Errorf("run started serving after the signal: %q", stdout.String())
	}
}

// TestReadyzFollowsTheBroker: while the broker is down the rollup is not
// ready (its readiness pings the broker); when the broker is back it is
// ready again and consumes what is published, without a restart, and its
// metrics count the reconnect.
func TestReadyzFollowsTheBroker(t *testing.T) {
	if testing.Short() {
		t.Skip("restarts a broker; -short")
	}
	dir := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	startBroker := func() *natsjs.Server {
		t.Helper()
		srv, err := natsjs.StartServer(natsjs.ServerConfig{StoreDir: dir, Host: "127.0.0.1", Port: port, SyncAlways: true})
		if err != nil {
			t.Fatal(err)
		}
		return srv
	}
	srv := startBroker()
	defer func() { srv.Shutdown() }()
	url := srv.ClientURL()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	var logs testenv.Buffer
	defer func() {
		if t.Failed() {
			t.Logf("rollup log:\n%s", logs.String())
		}
	}()
	go func() {
		done <- run(ctx, []string{"--nats", url, "--data", t.TempDir(), "--http", "127.0.0.1:0"}, func(string) string { return "" }, pw, &logs)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("no start line: %v", err)
	}
	go io.Copy(io.Discard, pr)
	base := strings.Fields(line[strings.Index(line, "http://"):])[0]
	status := func() int {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	waitStatus := func(want int) time.Duration {
		t.Helper()
		begin := time.Now()
		testenv.Eventually(t, 30*time.Second, fmt.Sprintf("/readyz %d", want), func() (string, bool) {
			got := status()
			return fmt.Sprintf("/readyz %d", got), got == want
		})
		return time.Since(begin)
	}
	waitStatus(http.StatusOK)

	srv.Shutdown()
	down := waitStatus(http.StatusServiceUnavailable)
	srv = startBroker()
	up := waitStatus(http.StatusOK)
	t.Logf("/readyz 503 %v after the broker stopped, 200 again %v after it started", down.Round(time.Millisecond), up.Round(time.Millisecond))

	client, err := natsjs.Dial(natsjs.ConnConfig{URL: url, Name: "test-agent"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	stream := natsjs.DefaultStreamConfig()
	b := &partial.Batch{Agent: "us-a1", Region: "us", Epoch: 1, Seq: 1, Partition: partial.PartitionOf("v1", stream.Partitions),
		Sums: []partial.Sum{{ContentID: "v1", Counter: "view", Region: "us", Delta: 5}}}
	if err := client.Publisher(stream).Publish(ctx, b.Partition, b.MsgID(), partial.Append(nil, b)); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the message published after the restart applied, and the reconnect counted", func() (string, bool) {
		m := get(t, base+"/metrics")
		return "metrics without them", strings.Contains(m, "edgecount_rollup_messages_total 1") &&
			strings.Contains(m, "edgecount_nats_reconnects_total 1") && strings.Contains(m, "edgecount_nats_connected 1")
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestRecountConfig checks the recount settings: environment overrides and
// the errors of bad values.
func TestRecountConfig(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		wantErr string
	}{
		{"defaults", nil, ""},
		{"overrides", map[string]string{"EDGECOUNT_RECOUNT_INTERVAL": "0s", "EDGECOUNT_RECOUNT_STALE_AFTER": "1h",
			"EDGECOUNT_RECOUNT_SAMPLE": "5", "EDGECOUNT_RECOUNT_QUIET": "30s", "EDGECOUNT_RECOUNT_BATCH": "200"}, ""},
		{"quiet below flush", map[string]string{"EDGECOUNT_RECOUNT_QUIET": "500ms"}, "rollup.recount.quiet 500ms: must exceed agent.flush_interval"},
		{"batch zero", map[string]string{"EDGECOUNT_RECOUNT_BATCH": "0"}, "batch 0"},
		{"batch not a number", map[string]string{"EDGECOUNT_RECOUNT_BATCH": "many"}, "EDGECOUNT_RECOUNT_BATCH"},
		{"negative interval", map[string]string{"EDGECOUNT_RECOUNT_INTERVAL": "-1s"}, "interval -1s"},
		{"negative sample", map[string]string{"EDGECOUNT_RECOUNT_SAMPLE": "-1"}, "sample -1"},
		{"zero stale_after", map[string]string{"EDGECOUNT_RECOUNT_STALE_AFTER": "0s"}, "stale_after 0s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := func(k string) string { return tt.env[k] }
			cfg, err := loadConfig([]string{"--nats", "nats://127.0.0.1:4222", "--data", t.TempDir()}, env, io.Discard, io.Discard)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("loadConfig error = %v; want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("loadConfig: %v", err)
			}
			rc := cfg.RecountConfig()
			if err := rc.Validate(); err != nil {
				t.Fatalf("RecountConfig().Validate() = %v", err)
			}
			if tt.name == "overrides" && (rc.Interval != 0 || rc.StaleAfter != time.Hour || rc.Sample != 5 || rc.Quiet != 30*time.Second || rc.Batch != 200) {
				t.Fatalf("overrides not applied: %+v", rc)
			}
		})
	}
}

// TestMain checks that the tests leave no goroutine behind but fasthttp's
// Date clock (testenv.FasthttpDate).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testenv.FasthttpDate) }

// TestStartWithoutCassandra: a rollup whose Cassandra does not answer
// fails its start with the store's error when the start-up ends, and
// closes what it opened (a nemesis run saw it panic instead: the failed
// Open left a nil *cassandra.Store in the store interface, and the clean-up
// called its Close).
func TestStartWithoutCassandra(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now: every connect is refused
	env := map[string]string{"EDGECOUNT_CASSANDRA_HOSTS": addr}
	cfg, err := loadConfig([]string{"--nats", "nats://127.0.0.1:1", "--data", t.TempDir(), "--http", "127.0.0.1:0"},
		func(k string) string { return env[k] }, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	p, err := start(ctx, cfg, slog.New(slog.DiscardHandler))
	if err == nil {
		p.close()
		t.Fatal("start succeeded without Cassandra")
	}
	if !strings.Contains(err.Error(), "cannot open cassandra store at "+addr) {
		t.Fatalf("start = %v; want the store's error naming %s", err, addr)
	}
}
