package httpapi

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgecount/edgecount/httpserver"
	"github.com/edgecount/edgecount/httpserver/httpservertest"
)

// TestPipelining: requests written back to back on one connection are
// answered in order, each whole, the bad ones among them included.
func TestPipelining(t *testing.T) {
	ta := newTestAPI(t, testConfig())
	seed(ta.fake)
	addr := httpservertest.Start(t, ta.h, httpserver.Config{})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	incr := `{"increments":[{"content_id":"c1","counter":"view","delta":2}]}`
	reqs := []struct{ raw, wantBody string }{
		{"GET /v1/counts/c2 HTTP/1.1\r\nHost: x\r\n\r\n", `{"content_id":"c2","region":"global","likes":1,"dislikes":0,"counters":{},"updated_at":"2025-01-02T03:04:05.006Z","as_of":"2025-01-02T03:04:06.006Z","staleness_ms":1500}`},
		{"POST /v1/increments HTTP/1.1\r\nHost: x\r\nContent-Length: " + strconv.Itoa(len(incr)) + "\r\n\r\n" + incr, `{"accepted":1}`},
		{"GET /v1/counts/c1?x=1 HTTP/1.1\r\nHost: x\r\n\r\n", `{"error":"x is not a known query parameter","field":"x"}`},
		{"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", `{"status":"ok"}`},
	}
	var all strings.Builder
	for range 50 {
		for _, r := range reqs {
			all.WriteString(r.raw)
		}
	}
	if _, err := io.WriteString(c, all.String()); err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second)) //nolint:errcheck // a fresh conn
	br := bufio.NewReader(c)
	for i := range 50 * len(reqs) {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
		got, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		if want := reqs[i%len(reqs)].wantBody; string(got) != want {
			t.Fatalf("answer %d = %s, want %s", i, got, want)
		}
		httpservertest.CheckDate(t, resp)
	}
	if n := len(ta.fake.Calls()); n != 50*2 {
		t.Errorf("service calls = %d, want %d (a count read and an increment a round)", n, 50*2)
	}
}
