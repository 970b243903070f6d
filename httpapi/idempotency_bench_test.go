package httpapi

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgecount/edgecount/httpserver"
	"github.com/edgecount/edgecount/httpserver/httpservertest"
	"github.com/edgecount/edgecount/region"
	"github.com/edgecount/edgecount/store/embedded"
	"github.com/edgecount/edgecount/store/embedded/embeddedtest"
	"github.com/edgecount/edgecount/wal"
)

// BenchmarkKeyedIncrements measures an Idempotency-Key's cost through the
// whole server path (Server, handler, a real agent with its fsync log):
// the same POST /v1/increments from 64 keep-alive connections, without a
// key and with a new key per request, in the same run. Report the ratio
// keyed ÷ plain of incs/s:
//
//	go test -run '^$' -bench KeyedIncrements -benchtime 2s -count 3 ./httpapi/
func BenchmarkKeyedIncrements(b *testing.B) {
	st := embeddedtest.Open(b, embedded.Config{Timeout: time.Second})
	for _, size := range []int{1, 100} {
		for _, keyed := range []bool{false, true} {
			b.Run(fmt.Sprintf("batch=%d/keyed=%v", size, keyed), func(b *testing.B) {
				cfg := region.DefaultConfig("us", "us-bench")
				cfg.Log = region.LogConfig{Durability: wal.Fsync, Dir: filepath.Join(b.TempDir(), "log"), MaxBytes: 1 << 30}
				cfg.Idempotency.MaxKeys = 100_000
				a, err := region.New(cfg, region.Deps{Reactions: st, Stats: st, Publisher: dropPublisher{}})
				if err != nil {
					b.Fatal(err)
				}
				if err := a.Recover(context.Background()); err != nil {
					b.Fatal(err)
				}
				a.Start()
				defer a.Stop(context.Background())
				h, err := New(a, Config{Region: "us", Regions: []string{"us"}}, http.NotFoundHandler(), prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
				if err != nil {
					b.Fatal(err)
				}
				url := "http://" + httpservertest.Start(b, h, httpserver.Config{}) + "/v1/increments"
				var sb strings.Builder
				sb.WriteString(`{"increments":[`)
				for j := 0; j < size; j++ {
					if j > 0 {
						sb.WriteByte(',')
					}
					fmt.Fprintf(&sb, `{"content_id":"item-%d","counter":"view","delta":1}`, j)
				}
				sb.WriteString(`]}`)
				body := []byte(sb.String())
				const clients = 64
				tr := &http.Transport{MaxIdleConnsPerHost: clients, MaxConnsPerHost: clients}
				defer tr.CloseIdleConnections()
				hc := &http.Client{Transport: tr, Timeout: 30 * time.Second}
				var next atomic.Int64
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
							req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
							req.Header.Set("Content-Type", "application/json")
							if keyed {
								req.Header.Set(headerIdempotencyKey, "0f3c9a1e-4b7d-4c2a-8e1f-"+strconv.FormatInt(i, 16))
							}
							resp, err := hc.Do(req)
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
						}
					}()
				}
				wg.Wait()
				b.ReportMetric(float64(b.N*size)/time.Since(start).Seconds(), "incs/s")
			})
		}
	}
}
