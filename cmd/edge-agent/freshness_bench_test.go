package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// BenchmarkFreshness measures G12: the lag from an acknowledged increment
// to a total that shows it, through the whole standalone pipeline (flush,
// JetStream with sync on every write, rollup, store, read cache), as a
// fraction of the flush interval. Each iteration writes one view of a
// fresh item at a random moment of the flush cycle and polls its count
// every millisecond. Goal (docs/design.md): p50 ≤ 0.6, p99 ≤ 1.1.
//
//	go test -run '^$' -bench Freshness -benchtime 60x ./cmd/edge-agent/
func BenchmarkFreshness(b *testing.B) {
	const flush = time.Second
	n := startTestNode(b, b.TempDir(), flush)
	b.Cleanup(func() { n.Shutdown(b.Context()) })
	base := "http://" + n.Addr()
	client := &http.Client{Timeout: 10 * time.Second}
	lags := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		id := fmt.Sprintf("fresh-%d-%d", time.Now().UnixNano(), i)
		// A random phase of the flush cycle.
		time.Sleep(time.Duration(i*7919%1000) * time.Millisecond)
		body := `{"increments":[{"content_id":"` + id + `","counter":"view","delta":1}]}`
		resp, err := client.Post(base+"/v1/increments", "application/json", strings.NewReader(body))
		if err != nil || resp.StatusCode != http.StatusAccepted {
			b.Fatalf("POST increments: %v %v", resp, err)
		}
		resp.Body.Close()
		acked := time.Now()
		for {
			var c struct {
				Counters map[string]int64 `json:"counters"`
			}
			resp, err := client.Get(base + "/v1/counts/" + id)
			if err != nil {
				b.Fatal(err)
			}
			err = json.NewDecoder(resp.Body).Decode(&c)
			resp.Body.Close()
			if err != nil {
				b.Fatal(err)
			}
			if c.Counters["view"] == 1 {
				lags = append(lags, time.Since(acked))
				break
			}
			if time.Since(acked) > 30*flush {
				b.Fatalf("%s not visible after %v", id, 30*flush)
			}
			time.Sleep(time.Millisecond)
		}
	}
	b.StopTimer()
	slices.Sort(lags)
	q := func(p float64) float64 { return float64(lags[int(p*float64(len(lags)-1))]) / float64(flush) }
	b.ReportMetric(q(0.5), "p50/flush")
	b.ReportMetric(q(0.99), "p99/flush")
	b.ReportMetric(0, "ns/op")
}
