package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgecount/edgecount/internal/testenv"
	"github.com/edgecount/edgecount/natsjs"
	"github.com/edgecount/edgecount/natsjs/natsjstest"
	"github.com/edgecount/edgecount/partial"
	"github.com/edgecount/edgecount/store/embedded"
)

// metric returns the value of the sample named exactly name (with its
// labels) in a /metrics page, or -1.
func metric(page, name string) float64 {
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindStringSubmatch(page)
	if m == nil {
		return -1
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

// TestRollupOnHub runs the rollup command on a real 3-server hub whose
// stream sources two regions' own servers: it makes the R3 hub stream,
// applies what the regions' agents published, exports each source's
// activity, and counts once what the hub sources again (the origin's
// consumer made anew after the hub's duplicate window, so every message
// reaches the rollup a second time under a new hub sequence).
func TestRollupOnHub(t *testing.T) {
	hub := natsjstest.StartHub(t, 3)
	regions := []string{"r1", "r2"}
	ctx := t.Context()
	const window = time.Second // the hub's duplicate window: short, so the re-sourced copies pass it
	var origins []*natsjs.Client
	for _, d := range regions {
		r := natsjstest.StartRegion(t, hub, d)
		c, err := natsjs.Dial(natsjs.ConnConfig{URL: r.URL(), Name: "agent-" + d, Domain: d}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		origins = append(origins, c)
	}
	origin := func(d string) natsjs.StreamConfig {
		sc := natsjs.DefaultStreamConfig()
		sc.Domain, sc.MaxAge, sc.MaxBytes, sc.DuplicateWindow = d, time.Hour, 64<<20, window
		return sc
	}
	const perRegion = 20
	for i, d := range regions {
		if err := origins[i].EnsureStream(ctx, origin(d)); err != nil {
			t.Fatal(err)
		}
		pub := origins[i].Publisher(origin(d))
		for seq := 1; seq <= perRegion; seq++ {
			b := &partial.Batch{Agent: d + "-a1", Region: d, Epoch: 1, Seq: uint64(seq), Partition: partial.PartitionOf("v1", 16),
				Sums: []partial.Sum{{ContentID: "v1", Counter: "view", Region: d, Delta: 1}}}
			if err := pub.Publish(ctx, b.Partition, b.MsgID(), partial.Append(nil, b)); err != nil {
				t.Fatal(err)
			}
		}
	}

	data := t.TempDir()
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	env := map[string]string{"EDGECOUNT_NATS_DUPLICATE_WINDOW": window.String()}
	go func() {
		done <- run(rctx, []string{"--nats", hub.URLs(), "--nats-hub-sources", "r1=r1,r2=r2", "--nats-hub-replicas", "3",
			"--data", data, "--http", "127.0.0.1:0"}, func(k string) string { return env[k] }, pw, io.Discard)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("no start line: %v (run: %v)", err, <-done)
	}
	go io.Copy(io.Discard, pr)
	base := strings.Fields(line[strings.Index(line, "http://"):])[0]
	testenv.Eventually(t, 30*time.Second, fmt.Sprintf("edgecount_rollup_messages_total %d", 2*perRegion), func() (string, bool) {
		m := get(t, base+"/metrics")
		return "metrics:\n" + m, metric(m, "edgecount_rollup_messages_total") == 2*perRegion
	})
	page := get(t, base+"/metrics")
	for _, d := range regions {
		if v := metric(page, `edgecount_hub_source_active_seconds{region="`+d+`"}`); v < 0 || v > 30 {
			t.Errorf("edgecount_hub_source_active_seconds of %s = %v, want a recent activity", d, v)
		}
		if v := metric(page, `edgecount_hub_source_lag{region="`+d+`"}`); v != 0 {
			t.Errorf("edgecount_hub_source_lag of %s = %v, want 0", d, v)
		}
	}

	// Source r1 again: once the hub's window has passed, drop the origin's
	// hub consumer and make it again as the agent does at start; it
	// delivers r1's whole stream (limits retention keeps it) once more.
	time.Sleep(2 * window)
	nc, err := nats.Connect(strings.Split(hub.URLs(), ",")[0])
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.NewWithDomain(nc, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteConsumer(ctx, "EDGECOUNT_SUMS", natsjs.HubConsumer); err != nil {
		t.Fatal(err)
	}
	if err := origins[0].EnsureStream(ctx, origin("r1")); err != nil {
		t.Fatal(err)
	}
	// Sourcing goes on through the new consumer: a new flush arrives.
	// The copies of r1's stream the new consumer delivered either stopped
	// at the hub (its source had those origin sequences) or reached the
	// rollup and were dropped by r1-a1's mark; none is counted.
	pub := origins[0].Publisher(origin("r1"))
	publish := func(seq int) {
		b := &partial.Batch{Agent: "r1-a1", Region: "r1", Epoch: 1, Seq: uint64(seq), Partition: partial.PartitionOf("v1", 16),
			Sums: []partial.Sum{{ContentID: "v1", Counter: "view", Region: "r1", Delta: 1}}}
		if err := pub.Publish(ctx, b.Partition, b.MsgID(), partial.Append(nil, b)); err != nil {
			t.Fatal(err)
		}
	}
	publish(perRegion + 1)
	testenv.Eventually(t, 30*time.Second, "the flush after the consumer's re-creation applied", func() (string, bool) {
		m := get(t, base+"/metrics")
		return "metrics:\n" + m, metric(m, "edgecount_rollup_messages_total") >= 2*perRegion+1
	})
	page = get(t, base+"/metrics")
	resourced := metric(page, "edgecount_rollup_duplicates_dropped_total")
	// An agent that re-publishes its flushes after every window (a log
	// replayed late): r1's server stores them again, the hub sources them
	// under new sequences and passes them on; the marks drop them.
	time.Sleep(2 * window)
	for seq := 1; seq <= perRegion; seq++ {
		publish(seq)
	}
	testenv.Eventually(t, 30*time.Second, fmt.Sprintf("%d more duplicates dropped", perRegion), func() (string, bool) {
		m := get(t, base+"/metrics")
		dup := metric(m, "edgecount_rollup_duplicates_dropped_total")
		return fmt.Sprintf("dropped %v", dup), dup >= resourced+perRegion
	})
	t.Logf("re-sourcing r1's stream: %v copies reached the rollup (the rest stopped at the hub); %d re-published flushes sourced again, all dropped by the marks", resourced, perRegion)

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
	got := map[string]int64{}
	for _, r := range rows["v1"] {
		got[r.Scope] = r.Counters["view"]
	}
	if got["global"] != 2*perRegion+1 || got["r1"] != perRegion+1 || got["r2"] != perRegion {
		t.Errorf("views %v, want global %d, r1 %d, r2 %d (each flush counted once)", got, 2*perRegion+1, perRegion+1, perRegion)
	}
}
