package httpapi

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/edgecount/edgecount/httpserver"
	"github.com/edgecount/edgecount/httpserver/httpservertest"
	"github.com/edgecount/edgecount/internal/testcert"
)

// BenchmarkTLSLoopback serves the API over kept-alive loopback connections,
// plain and over TLS (the same Server, handler and fake service, ECDSA
// P-256 certificate, TLS 1.3), and reports requests/s of each: the ratio
// tls/plain is what TLS costs on the server path once the handshake is
// done. Client and server share the process and its cores.
//
//	go test ./httpapi -run '^$' -bench TLSLoopback -benchtime 3s -count 3
func BenchmarkTLSLoopback(b *testing.B) {
	body := benchBody(1)
	incr := fmt.Sprintf("POST /v1/increments HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	ca := testcert.NewCA(b, "bench")
	pair := ca.Server(b, "srv")
	certs, err := httpserver.LoadCerts(pair.CertFile, pair.KeyFile)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		raw   string
		depth int
	}{
		{"get1", "GET /v1/counts/c1 HTTP/1.1\r\nHost: x\r\n\r\n", 1},
		{"incr1", incr, 1},
		{"get1-pipeline16", "GET /v1/counts/c1 HTTP/1.1\r\nHost: x\r\n\r\n", 16},
	} {
		for _, mode := range []string{"plain", "tls"} {
			b.Run(c.name+"/"+mode, func(b *testing.B) {
				ta := newTestAPI(b, testConfig())
				ta.fake.noRecord = true
				seed(ta.fake)
				cfg := httpserver.Config{}
				if mode == "tls" {
					cfg.TLS = certs
				}
				addr := httpservertest.Start(b, ta.h, cfg)
				round := []byte(strings.Repeat(c.raw, c.depth))
				b.SetParallelism(8)
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					var conn net.Conn
					var err error
					if mode == "tls" {
						conn, err = tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.Pool})
					} else {
						conn, err = net.Dial("tcp", addr)
					}
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
