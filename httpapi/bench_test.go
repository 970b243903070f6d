package httpapi

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/httpserver"
	"github.com/edgecount/edgecount/httpserver/httpservertest"
	"github.com/edgecount/edgecount/region"
)

// benchBody returns an increments body of n increments shaped like real
// traffic: distinct content ids, a few counter names, small deltas.
func benchBody(n int) []byte {
	counters := []string{"view", "share", "view", "view", "watch_time_s"}
	items := make([]string, n)
	for i := range items {
		items[i] = fmt.Sprintf(`{"content_id":"video-%08d","counter":%q,"delta":%d}`, i*7919%1000003, counters[i%len(counters)], 1+i%3)
	}
	return []byte(`{"increments":[` + strings.Join(items, ",") + `]}`)
}

// BenchmarkDecodeIncrements100 measures decode + validate of one
// 100-increment body, including the one copy of the body into a string.
func BenchmarkDecodeIncrements100(b *testing.B) {
	body := benchBody(100)
	dst := make([]region.Increment, 0, 128)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		incs, e := decodeIncrements(string(body), DefaultMaxIncrements, dst[:0])
		if e != nil || len(incs) != 100 {
			b.Fatalf("decode: %d increments, %v", len(incs), e)
		}
	}
	b.ReportMetric(float64(b.N)*100/b.Elapsed().Seconds(), "increments/s")
}

// BenchmarkDecodeIncrements100StdJSON is the same with encoding/json and
// the same validation, for comparison.
func BenchmarkDecodeIncrements100StdJSON(b *testing.B) {
	body := benchBody(100)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		var req struct {
			Increments []struct {
				ContentID string `json:"content_id"`
				Counter   string `json:"counter"`
				Delta     int64  `json:"delta"`
			} `json:"increments"`
		}
		if err := json.Unmarshal(body, &req); err != nil {
			b.Fatal(err)
		}
		for _, inc := range req.Increments {
			if !engagement.ValidID(inc.ContentID) || !engagement.ValidCounter(inc.Counter) || inc.Delta < 1 || inc.Delta > MaxDelta {
				b.Fatal("invalid")
			}
		}
	}
	b.ReportMetric(float64(b.N)*100/b.Elapsed().Seconds(), "increments/s")
}

// discardWriter is a reusable ResponseWriter for handler benchmarks.
type discardWriter struct {
	h    http.Header
	code int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) WriteHeader(code int)        { w.code = code }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }

// benchServe serves req repeatedly through a fresh API whose service
// records nothing, and reports items/s.
func benchServe(b *testing.B, method, target string, body []byte, items int, wantStatus int) {
	ta := newTestAPI(b, testConfig())
	ta.fake.noRecord = true
	seed(ta.fake)
	req := httptest.NewRequest(method, target, nil)
	w := &discardWriter{h: make(http.Header)}
	rd := &rewindReader{}
	b.ReportAllocs()
	for b.Loop() {
		clear(w.h)
		w.code = 0
		if body != nil {
			rd.Reset(body)
			req.Body = rd
			req.ContentLength = int64(len(body))
		}
		ta.h.ServeHTTP(w, req)
		if w.code != wantStatus {
			b.Fatalf("status = %d, want %d", w.code, wantStatus)
		}
	}
	b.ReportMetric(float64(b.N)*float64(items)/b.Elapsed().Seconds(), "items/s")
}

// rewindReader is an io.ReadCloser over a byte slice that can be reset.
type rewindReader struct {
	b []byte
	i int
}

func (r *rewindReader) Reset(b []byte) { r.b, r.i = b, 0 }
func (r *rewindReader) Close() error   { return nil }
func (r *rewindReader) Read(p []byte) (int, error) {
	if r.i >= len(r.b) {
		return 0, io.EOF
	}
	n := copy(p, r.b[r.i:])
	r.i += n
	return n, nil
}

// BenchmarkPostIncrements100 measures the whole handler for 100-increment
// bodies, minus the network and the agent (G1's HTTP share).
func BenchmarkPostIncrements100(b *testing.B) {
	benchServe(b, http.MethodPost, "/v1/increments", benchBody(100), 100, http.StatusAccepted)
}

// BenchmarkPostIncrements1 is the same for single increments (G2).
func BenchmarkPostIncrements1(b *testing.B) {
	benchServe(b, http.MethodPost, "/v1/increments", benchBody(1), 1, http.StatusAccepted)
}

// BenchmarkGetCount is one count read (G5's HTTP share).
func BenchmarkGetCount(b *testing.B) {
	benchServe(b, http.MethodGet, "/v1/counts/c1?region=eu", nil, 1, http.StatusOK)
}

// BenchmarkGetCounts16 is a 16-id batch count read (G6's HTTP share).
func BenchmarkGetCounts16(b *testing.B) {
	ids := manyIDs(16)
	benchServe(b, http.MethodGet, "/v1/counts?"+idsQuery(ids...), nil, 16, http.StatusOK)
}

// benchServer serves a raw request repeatedly through httpserver's adapter
// (fasthttp's request and response, the pooled *http.Request, the API
// handler), minus the connection: what the server path adds to the
// handler benchmarks above.
func benchServer(b *testing.B, raw string, items, wantStatus int) {
	ta := newTestAPI(b, testConfig())
	ta.fake.noRecord = true
	seed(ta.fake)
	s := httpserver.New(ta.h, httpserver.Config{})
	var ctx fasthttp.RequestCtx
	br := bufio.NewReader(strings.NewReader(""))
	rd := strings.NewReader(raw)
	b.ReportAllocs()
	for b.Loop() {
		rd.Reset(raw)
		br.Reset(rd)
		ctx.Request.Reset()
		ctx.Response.Reset()
		if err := ctx.Request.Read(br); err != nil {
			b.Fatal(err)
		}
		s.ServeFastHTTP(&ctx)
		if ctx.Response.StatusCode() != wantStatus {
			b.Fatalf("status = %d, want %d: %s", ctx.Response.StatusCode(), wantStatus, ctx.Response.Body())
		}
	}
	b.ReportMetric(float64(b.N)*float64(items)/b.Elapsed().Seconds(), "items/s")
}

func BenchmarkServerGetCount(b *testing.B) {
	benchServer(b, "GET /v1/counts/c1?region=eu HTTP/1.1\r\nHost: x\r\n\r\n", 1, http.StatusOK)
}

func BenchmarkServerGetCounts16(b *testing.B) {
	benchServer(b, "GET /v1/counts?"+idsQuery(manyIDs(16)...)+" HTTP/1.1\r\nHost: x\r\n\r\n", 16, http.StatusOK)
}

func BenchmarkServerPostIncrements1(b *testing.B) {
	body := benchBody(1)
	benchServer(b, fmt.Sprintf("POST /v1/increments HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body), 1, http.StatusAccepted)
}

// BenchmarkLoopback serves the API over real loopback connections, once
// with net/http's server and once with Server, same handler and fake
// service, and reports requests/s of each (the ratio is the figure to
// read: client and server share the process and its cores). depth is the
// number of requests written before their answers are read.
//
//	go test ./httpapi -run '^$' -bench Loopback -benchtime 3s
func BenchmarkLoopback(b *testing.B) {
	body := benchBody(1)
	incr := fmt.Sprintf("POST /v1/increments HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	for _, srv := range []string{"nethttp", "server"} {
		for _, c := range []struct {
			name  string
			raw   string
			depth int
		}{
			{"get1", "GET /v1/counts/c1 HTTP/1.1\r\nHost: x\r\n\r\n", 1},
			{"get16", "GET /v1/counts?" + idsQuery(manyIDs(16)...) + " HTTP/1.1\r\nHost: x\r\n\r\n", 1},
			{"incr1", incr, 1},
			{"get1-pipeline16", "GET /v1/counts/c1 HTTP/1.1\r\nHost: x\r\n\r\n", 16},
		} {
			b.Run(srv+"/"+c.name, func(b *testing.B) {
				ta := newTestAPI(b, testConfig())
				ta.fake.noRecord = true
				seed(ta.fake)
				var addr string
				if srv == "server" {
					addr = httpservertest.Start(b, ta.h, httpserver.Config{})
				} else {
					ln, err := net.Listen("tcp", "127.0.0.1:0")
					if err != nil {
						b.Fatal(err)
					}
					hs := &http.Server{Handler: ta.h}
					go hs.Serve(ln) //nolint:errcheck // ends at Close
					b.Cleanup(func() { hs.Close() })
					addr = ln.Addr().String()
				}
				round := []byte(strings.Repeat(c.raw, c.depth))
				b.SetParallelism(8)
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					conn, err := net.Dial("tcp", addr)
					if err != nil {
						b.Error(err)
						return
					}
					defer conn.Close()
					br := bufio.NewReaderSize(conn, 64<<10)
					for pb.Next() {
						if _, err := conn.Write(round); err != nil {
							b.Error(err)
							return
						}
						for range c.depth {
							resp, err := http.ReadResponse(br, nil)
							if err != nil {
								b.Error(err)
								return
							}
							io.Copy(io.Discard, resp.Body) //nolint:errcheck // a loopback answer
							resp.Body.Close()
							if resp.StatusCode >= 300 {
								b.Errorf("status %d", resp.StatusCode)
								return
							}
						}
					}
				})
				b.ReportMetric(float64(b.N*c.depth)/b.Elapsed().Seconds(), "requests/s")
			})
		}
	}
}

func BenchmarkServerPostCounts16Protobuf(b *testing.B) {
	var body raw
	for _, id := range manyIDs(16) {
		body = body.str(1, id)
	}
	benchServer(b, fmt.Sprintf("POST /v1/counts HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\nContent-Length: %d\r\n\r\n%s", len(body), body), 16, http.StatusOK)
}

func BenchmarkServerPostIncrements100(b *testing.B) {
	body := benchBody(100)
	benchServer(b, fmt.Sprintf("POST /v1/increments HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body), 100, http.StatusAccepted)
}

func BenchmarkServerPostIncrements100Protobuf(b *testing.B) {
	var body raw
	counters := []string{"view", "share", "view", "view", "watch_time_s"}
	for i := range 100 {
		body = body.msg(1, raw(nil).str(1, fmt.Sprintf("video-%08d", i*7919%1000003)).str(2, counters[i%len(counters)]).varint(3, uint64(1+i%3)))
	}
	benchServer(b, fmt.Sprintf("POST /v1/increments HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\nContent-Length: %d\r\n\r\n%s", len(body), body), 100, http.StatusAccepted)
}

// BenchmarkDecodeIncrements100Protobuf is BenchmarkDecodeIncrements100
// for the same increments in protobuf.
func BenchmarkDecodeIncrements100Protobuf(b *testing.B) {
	var body raw
	counters := []string{"view", "share", "view", "view", "watch_time_s"}
	for i := range 100 {
		body = body.msg(1, raw(nil).str(1, fmt.Sprintf("video-%08d", i*7919%1000003)).str(2, counters[i%len(counters)]).varint(3, uint64(1+i%3)))
	}
	dst := make([]region.Increment, 0, 128)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		incs, e := decodeIncrementsProto(string(body), DefaultMaxIncrements, dst[:0])
		if e != nil || len(incs) != 100 {
			b.Fatalf("decode: %d increments, %v", len(incs), e)
		}
	}
	b.ReportMetric(float64(b.N)*100/b.Elapsed().Seconds(), "increments/s")
}
