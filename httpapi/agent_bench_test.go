package httpapi

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/httpserver"
	"github.com/edgecount/edgecount/region"
	"github.com/edgecount/edgecount/store/embedded"
	"github.com/edgecount/edgecount/store/embedded/embeddedtest"
)

type nopPublisher struct{}

func (nopPublisher) Publish(context.Context, uint32, string, []byte) error { return nil }

// BenchmarkServerAgentReads serves count reads of a real agent (its read
// cache warm with 10^4 items of three counters, a real embedded store
// behind it) through httpserver's handler (Server.ServeFastHTTP), in
// process, without the connection: what a warm read costs above fasthttp
// and the kernel, the share of issue 13's G5 and G6 budgets this code
// owns. The file builds against any tree that has package httpserver,
// for a same-run A/B (before it, httpapi.NewServer and s.serve):
//
//	taskset -c 1 go test ./httpapi -run '^$' -bench ServerAgentReads -count 3
func BenchmarkServerAgentReads(b *testing.B) {
	const items = 10_000
	st := embeddedtest.Open(b, embedded.Config{Timeout: time.Second})
	cfg := region.DefaultConfig("eu", "eu-a1")
	cfg.CacheTTL, cfg.CachePushedTTL, cfg.CacheEntries = time.Hour, time.Hour, 2*items
	a, err := region.New(cfg, region.Deps{Reactions: st, Stats: st, Publisher: nopPublisher{}})
	if err != nil {
		b.Fatal(err)
	}
	a.Start()
	defer a.Stop(context.Background())
	ids := make([]string, items)
	rows := make([]engagement.Stats, 0, 2*items)
	now := time.Now()
	for i := range ids {
		ids[i] = fmt.Sprintf("video-%05d", i)
		c := map[string]int64{"view": int64(1000 + i), "share": int64(i), "comment": 3}
		rows = append(rows,
			engagement.Stats{ContentID: ids[i], Scope: engagement.GlobalScope, Likes: int64(i), Dislikes: 2, Counters: c, LastSeq: 1, UpdatedAt: now},
			engagement.Stats{ContentID: ids[i], Scope: "eu", Likes: int64(i), Counters: c, LastSeq: 1, UpdatedAt: now})
	}
	for i := 0; i < items; i += 100 {
		if _, err := a.Counts(context.Background(), ids[i:i+100]); err != nil {
			b.Fatal(err)
		}
	}
	a.ApplyRows(now, rows)
	h, err := New(a, Config{Region: "eu", Regions: []string{"eu", "us"}}, http.NotFoundHandler(), prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	s := httpserver.New(h, httpserver.Config{})
	run := func(b *testing.B, perReq int, req func(i int) string) {
		var ctx fasthttp.RequestCtx
		br := bufio.NewReader(strings.NewReader(""))
		rd := strings.NewReader("")
		raws := make([]string, 512)
		for i := range raws {
			raws[i] = req(i * 17)
		}
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			rd.Reset(raws[i%len(raws)])
			br.Reset(rd)
			ctx.Request.Reset()
			ctx.Response.Reset()
			if err := ctx.Request.Read(br); err != nil {
				b.Fatal(err)
			}
			s.ServeFastHTTP(&ctx)
			if ctx.Response.StatusCode() != http.StatusOK {
				b.Fatalf("status = %d: %s", ctx.Response.StatusCode(), ctx.Response.Body())
			}
		}
		b.ReportMetric(float64(b.N*perReq)/b.Elapsed().Seconds(), "counts/s")
	}
	b.Run("get1", func(b *testing.B) {
		run(b, 1, func(i int) string {
			return "GET /v1/counts/" + ids[i%items] + " HTTP/1.1\r\nHost: x\r\n\r\n"
		})
	})
	b.Run("get16", func(b *testing.B) {
		run(b, 16, func(i int) string {
			var q strings.Builder
			for j := range 16 {
				if j > 0 {
					q.WriteByte('&')
				}
				q.WriteString("content_id=" + ids[(i+j*601)%items])
			}
			return "GET /v1/counts?" + q.String() + " HTTP/1.1\r\nHost: x\r\n\r\n"
		})
	})
	b.Run("get16-protobuf", func(b *testing.B) {
		run(b, 16, func(i int) string {
			var body []byte
			for j := range 16 {
				body = appendStringField(body, 1, ids[(i+j*601)%items])
			}
			return fmt.Sprintf("POST /v1/counts HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		})
	})
}
