package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgecount/edgecount/natsjs"
	"github.com/edgecount/edgecount/partial"
	"github.com/edgecount/edgecount/store/embedded"
)

// TestRollupProcess runs the rollup command against a real NATS server
// over TCP: it consumes what an agent published, serves health and
// metrics, stops on cancel, and leaves the totals in its store.
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
		done <- run(rctx, []string{"--nats", srv.ClientURL(), "--data", data, "--http", "127.0.0.1:0"}, func(string) string { return "" }, pw, io.Discard)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("no start line: %v", err)
	}
	go io.Copy(io.Discard, pr)
	base := strings.Fields(line[strings.Index(line, "http://"):])[0]

	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(get(t, base+"/metrics"), "edgecount_rollup_messages_total 2") {
		if time.Now().After(deadline) {
			t.Fatalf("rollup did not apply 2 messages:\n%s", get(t, base+"/metrics"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := get(t, base+"/readyz"); !strings.Contains(got, "ready") {
		t.Fatalf("readyz = %s", got)
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
