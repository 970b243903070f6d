package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgecount/edgecount/agentd"
	"github.com/edgecount/edgecount/httpapi"
	"github.com/edgecount/edgecount/region"
	"github.com/edgecount/edgecount/store/embedded"
	"github.com/edgecount/edgecount/wal"
)

// BenchmarkDurableIngest measures G13's throughput ratio: increments/s
// through POST /v1/increments of a standalone node with durability fsync
// (and interval) against the same node with durability none, in the same
// run, for batches of 100 and for single increments, with ingestClients keep-alive
// clients. It also reports the ack latency p50/p99 of each mode. Goal
// (docs/design.md): durable ÷ none ≥ 0.8.
//
//	go test -run '^$' -bench DurableIngest -benchtime 3s -count 3 ./cmd/edge-agent/
func BenchmarkDurableIngest(b *testing.B) {
	for _, size := range []int{100, 1} {
		for _, mode := range []string{"none", "fsync", "interval"} {
			b.Run(fmt.Sprintf("batch=%d/durability=%s", size, mode), func(b *testing.B) {
				clients := ingestClients
				if v, err := strconv.Atoi(os.Getenv("EDGECOUNT_BENCH_CLIENTS")); err == nil && v > 0 {
					clients = v
				}
				benchIngest(b, mode, size, clients)
			})
		}
	}
}

func benchIngest(b *testing.B, mode string, size, clients int) {
	n := startNodeArgs(b, "--http", "127.0.0.1:0", "--data", b.TempDir(), "--region", "local",
		"--flush-interval", "1s", "--durability", mode)
	b.Cleanup(func() { n.Shutdown(b.Context()) })
	driveIngest(b, "http://"+n.Addr()+"/v1/increments", size, clients)
}

// BenchmarkAgentIngest is BenchmarkDurableIngest for the agent alone: the
// HTTP API and the agent with its log, publishing to a broker that takes
// every message at once, with no in-process broker, rollup or store
// writing to the same disk (as in a region, where they run elsewhere).
// This is G13's ratio: durable ingest ÷ durability none, same run.
//
//	go test -run '^$' -bench AgentIngest -benchtime 3s -count 3 ./cmd/edge-agent/
func BenchmarkAgentIngest(b *testing.B) {
	for _, size := range []int{100, 1} {
		for _, mode := range []wal.Durability{wal.None, wal.Fsync, wal.Interval} {
			b.Run(fmt.Sprintf("batch=%d/durability=%s", size, mode), func(b *testing.B) {
				clients := ingestClients
				if v, err := strconv.Atoi(os.Getenv("EDGECOUNT_BENCH_CLIENTS")); err == nil && v > 0 {
					clients = v
				}
				st, err := embedded.OpenDir(b.TempDir())
				if err != nil {
					b.Fatal(err)
				}
				defer st.Close()
				cfg := region.DefaultConfig("local", "local-bench")
				cfg.Log = region.LogConfig{Durability: mode, Dir: filepath.Join(b.TempDir(), "log"), MaxBytes: 1 << 30, SyncInterval: 10 * time.Millisecond}
				a, err := region.New(cfg, region.Deps{Reactions: st, Stats: st, Publisher: nopPublisher{}})
				if err != nil {
					b.Fatal(err)
				}
				if err := a.Recover(b.Context()); err != nil {
					b.Fatal(err)
				}
				a.Start()
				defer a.Stop(context.Background())
				reg := prometheus.NewRegistry()
				h, err := httpapi.New(a, httpapi.DefaultConfig(), http.NotFoundHandler(), reg, slog.New(slog.DiscardHandler))
				if err != nil {
					b.Fatal(err)
				}
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					b.Fatal(err)
				}
				srv := &http.Server{Handler: h}
				go srv.Serve(ln)
				defer srv.Close()
				driveIngest(b, "http://"+ln.Addr().String()+"/v1/increments", size, clients)
			})
		}
	}
}

type nopPublisher struct{}

func (nopPublisher) Publish(context.Context, uint32, string, []byte) error { return nil }

// driveIngest posts b.N increment requests of size increments each from
// clients keep-alive connections and reports increments/s and the
// latency quantiles.
func driveIngest(b *testing.B, url string, size, clients int) {
	bodies := make([][]byte, 64)
	for i := range bodies {
		var sb strings.Builder
		sb.WriteString(`{"increments":[`)
		for j := 0; j < size; j++ {
			if j > 0 {
				sb.WriteByte(',')
			}
			fmt.Fprintf(&sb, `{"content_id":"item-%d","counter":"view","delta":1}`, (i*size+j)%10_000)
		}
		sb.WriteString(`]}`)
		bodies[i] = []byte(sb.String())
	}
	tr := &http.Transport{MaxIdleConnsPerHost: clients, MaxConnsPerHost: clients}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	var next atomic.Int64
	lat := make([][]time.Duration, clients)
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				t0 := time.Now()
				resp, err := client.Post(url, "application/json", bytes.NewReader(bodies[i%int64(len(bodies))]))
				if err != nil {
					b.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusAccepted {
					b.Errorf("status %d", resp.StatusCode)
					return
				}
				lat[c] = append(lat[c], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	b.StopTimer()
	all := slices.Concat(lat...)
	slices.Sort(all)
	if len(all) == 0 {
		return
	}
	q := func(p float64) float64 { return float64(all[int(p*float64(len(all)-1))]) / 1e3 }
	b.ReportMetric(float64(b.N*size)/el.Seconds(), "incs/s")
	b.ReportMetric(q(0.5), "p50-µs")
	b.ReportMetric(q(0.99), "p99-µs")
}

// BenchmarkAckLatency measures G13's latency bound: one client sends
// single increments alternately to a node with durability fsync and to one
// with none, and in between does a bare write+fsync of the same size as
// the log record on the same disk, so that all three see the same disk.
// It reports each p99, the p99 the log adds (fsync − none) and its ratio
// to the bare fsync p99. Goal: added ≤ 2 × bare.
//
//	go test -run '^$' -bench AckLatency -benchtime 2000x -count 3 ./cmd/edge-agent/
func BenchmarkAckLatency(b *testing.B) {
	dir := b.TempDir()
	durable := startNodeArgs(b, "--http", "127.0.0.1:0", "--data", filepath.Join(dir, "d"), "--durability", "fsync")
	b.Cleanup(func() { durable.Shutdown(b.Context()) })
	mem := startNodeArgs(b, "--http", "127.0.0.1:0", "--data", filepath.Join(dir, "m"), "--durability", "none")
	b.Cleanup(func() { mem.Shutdown(b.Context()) })
	f, err := os.Create(filepath.Join(dir, "bare"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	body := []byte(`{"increments":[{"content_id":"item-1","counter":"view","delta":1}]}`)
	// The log record of that request: kind, region, count, id, counter,
	// delta, plus wal's 24-byte record header.
	rec := make([]byte, 1+6+1+7+5+1+24)
	client := &http.Client{Timeout: 30 * time.Second}
	post := func(n *agentd.Node) time.Duration {
		t0 := time.Now()
		resp, err := client.Post("http://"+n.Addr()+"/v1/increments", "application/json", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			b.Fatalf("status %d", resp.StatusCode)
		}
		return time.Since(t0)
	}
	var dl, ml, fl []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		dl = append(dl, post(durable))
		ml = append(ml, post(mem))
		t0 := time.Now()
		if _, err := f.Write(rec); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		fl = append(fl, time.Since(t0))
	}
	b.StopTimer()
	p99 := func(s []time.Duration) float64 {
		slices.Sort(s)
		return float64(s[int(0.99*float64(len(s)-1))]) / 1e3
	}
	d, m, fs := p99(dl), p99(ml), p99(fl)
	b.ReportMetric(d, "fsync-p99-µs")
	b.ReportMetric(m, "none-p99-µs")
	b.ReportMetric(fs, "bare-fsync-p99-µs")
	b.ReportMetric(d-m, "added-p99-µs")
	b.ReportMetric((d-m)/fs, "added/bare")
	b.ReportMetric(0, "ns/op")
}

// ingestClients is the number of concurrent clients of
// BenchmarkDurableIngest (EDGECOUNT_BENCH_CLIENTS overrides it): with a
// durable log, throughput is concurrency ÷ fsync latency until the CPU is
// the bound, as it is without a log.
const ingestClients = 64
