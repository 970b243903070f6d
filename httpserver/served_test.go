package httpserver_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgecount/edgecount/httpserver"
	"github.com/edgecount/edgecount/httpserver/httpservertest"
	"github.com/edgecount/edgecount/internal/testenv"
)

// TestServerRejectsUnreadable: what the server refuses before any handler
// runs is answered in the API's error shape and closes the connection.
func TestServerRejectsUnreadable(t *testing.T) {
	var calls atomic.Int64 // requests that reached the handler
	h := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { calls.Add(1) })
	var logged testenv.Buffer
	t.Cleanup(func() { // after the server's shutdown: every connection logged
		if strings.Contains(logged.String(), "canary") {
			t.Errorf("the server's log quotes a request's token:\n%s", logged.String())
		}
	})
	addr := httpservertest.Start(t, h, httpserver.Config{MaxBodyBytes: 100, Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	for _, c := range []struct {
		name, raw  string
		wantStatus int
		wantField  string
	}{
		{"body over the server's limit", "POST /v1/increments HTTP/1.1\r\nHost: x\r\nContent-Length: 101\r\n\r\n" + strings.Repeat(" ", 101), 413, `"field":"body"`},
		{"head over 64 KiB", "GET /v1/counts?content_id=" + strings.Repeat("a", 70<<10) + " HTTP/1.1\r\nHost: x\r\n\r\n", 431, `"field":"header"`},
		{"bad request line", "GET\r\n\r\n", 400, `"field":"request"`},
		{"bad Content-Length", "POST /v1/increments HTTP/1.1\r\nHost: x\r\nContent-Length: x\r\n\r\n", 400, `"field":"request"`},
		// The answer never quotes the request: it may hold a token.
		{"bad header after a token", "POST /v1/increments HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer canary-0123456789abcdef\r\nContent-Length: x\r\n\r\n", 400, `"field":"request"`},
		{"bad line after a token", "GET /v1/counts/a HTTP/1.1\r\nAuthorization: Bearer canary-0123456789abcdef\r\nno colon here\r\n\r\n", 400, `"field":"request"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(10 * time.Second)) //nolint:errcheck // a fresh conn
			go io.WriteString(conn, c.raw)                     //nolint:errcheck // the server may close first
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			if strings.Contains(string(got), "canary") {
				t.Errorf("answer %s quotes the request's token", got)
			}
			if resp.StatusCode != c.wantStatus || !strings.Contains(string(got), c.wantField) ||
				resp.Header.Get("Content-Type") != "application/json" || !resp.Close {
				t.Errorf("answer %d %s %q (close %v), want %d naming %s, closing", resp.StatusCode, got,
					resp.Header.Get("Content-Type"), resp.Close, c.wantStatus, c.wantField)
			}
			httpservertest.CheckDate(t, resp)
		})
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("handler calls = %d, want none", n)
	}
}

// TestShutdown: Serve returns http.ErrServerClosed, a request in progress
// finishes, and one still running when Shutdown's context ends sees its
// own context done and its connection closed; a Serve after Shutdown
// returns at once.
func TestShutdown(t *testing.T) {
	started := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-r.Context().Done()
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := httpserver.New(h, httpserver.Config{})
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	answered := make(chan error, 1)
	go func() {
		resp, err := http.Get("http://" + ln.Addr().String() + "/slow")
		if err == nil {
			resp.Body.Close()
		}
		answered <- err
	}()
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	// The handler ends only when its context is done, so Shutdown returns
	// nil (every connection closed) or the deadline, never before it.
	if err := srv.Shutdown(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Shutdown = %v, want nil or the context's deadline", err)
	}
	if ctx.Err() == nil {
		t.Error("Shutdown returned while a request was still running")
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		t.Errorf("Serve = %v, want http.ErrServerClosed", err)
	}
	select {
	case <-answered:
	case <-time.After(10 * time.Second):
		t.Fatal("the request's context was never done")
	}
	// The connection Shutdown left open is closed, not kept alive.
	testenv.Eventually(t, 5*time.Second, "every connection closed after Shutdown", func() (string, bool) {
		n := srv.OpenConns()
		return fmt.Sprintf("%d open", n), n == 0
	})
	ln2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln2.Close()
	if err := srv.Serve(ln2); !errors.Is(err, http.ErrServerClosed) {
		t.Errorf("Serve after Shutdown = %v, want http.ErrServerClosed", err)
	}
}

// headerProbe records the headers of each request; it skips them for
// paths under /skip.
type headerProbe struct {
	mu   sync.Mutex
	seen map[string]http.Header
}

func (p *headerProbe) HeadersRead(_ string, uri []byte) httpserver.HeaderUse {
	switch {
	case bytes.HasPrefix(uri, []byte("/skip")):
		return httpserver.ReadsNoHeader
	case bytes.HasPrefix(uri, []byte("/ctype")):
		return httpserver.ReadsContentType
	}
	return httpserver.ReadsAllHeaders
}

func (p *headerProbe) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	p.seen[r.URL.Path] = r.Header.Clone()
	p.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain")
	io.WriteString(w, r.URL.RawQuery) //nolint:errcheck // test handler
}

// TestServerSkipsHeadersOnlyWhenAsked checks that a handler offering
// HeadersRead gets no header for the requests it names, Content-Type alone
// for those it says so of, and every header for the others, on one
// connection in turn (the exchange is reused), and that a handler that
// wraps it (as httpapi.Authenticate does) gets every header.
func TestServerSkipsHeadersOnlyWhenAsked(t *testing.T) {
	p := &headerProbe{seen: map[string]http.Header{}}
	wrapped := http.HandlerFunc(p.ServeHTTP)
	for _, h := range []http.Handler{p, wrapped} {
		clear(p.seen)
		s := httpservertest.Via(t, h)
		for _, path := range []string{"/skip/a", "/keep/a", "/ctype/a", "/skip/b", "/ctype/b", "/keep/b", "/ctype/none"} {
			req := httptest.NewRequest(http.MethodGet, path+"?q=1", nil)
			req.Header.Set("Authorization", "Bearer t")
			if path != "/ctype/none" {
				req.Header.Set("Content-Type", "text/x-"+path[len(path)-1:])
			}
			rec := httptest.NewRecorder()
			s.ServeHTTP(rec, req)
			if rec.Code != http.StatusOK || rec.Body.String() != "q=1" {
				t.Fatalf("GET %s = %d %q", path, rec.Code, rec.Body)
			}
		}
		for path, hdr := range p.seen {
			probed := h == http.Handler(p)
			want := http.Header{"Authorization": {"Bearer t"}, "Content-Type": {"text/x-" + path[len(path)-1:]}}
			switch {
			case probed && strings.HasPrefix(path, "/skip"):
				want = http.Header{}
			case probed && path == "/ctype/none":
				want = http.Header{}
			case probed && strings.HasPrefix(path, "/ctype"):
				delete(want, "Authorization")
			case path == "/ctype/none":
				delete(want, "Content-Type")
			}
			hdr.Del("Host") // net/http's client sends it; not the point here
			hdr.Del("User-Agent")
			hdr.Del("Accept-Encoding")
			if !reflect.DeepEqual(hdr, want) {
				t.Errorf("handler %T, %s: headers %v, want %v", h, path, hdr, want)
			}
		}
	}
}
