package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgecount/edgecount/internal/testenv"
)

// served is an http.Handler that answers each request by sending it over a
// real loopback connection to a Server serving h, so that the tests written
// against handlers (httptest.NewRequest, ResponseRecorder) drive the
// server path the agent runs. Requests go one at a time over one kept-alive
// connection, reconnecting after an answer that closes it.
type served struct {
	t    testing.TB
	h    http.Handler // served directly only for a URI no client can send
	addr string
	mu   sync.Mutex
	conn net.Conn
	br   *bufio.Reader
}

// startServer serves h on a loopback port until the test ends and returns
// the address.
func startServer(t testing.TB, h http.Handler, cfg ServerConfig) string {
	t.Helper()
	_, addr := serveForTest(t, h, cfg)
	return addr
}

// serveForTest serves h with cfg on a loopback port until the test ends
// (then Shutdown, and Serve must return http.ErrServerClosed) and returns
// the Server and its address.
func serveForTest(t testing.TB, h http.Handler, cfg ServerConfig) (*Server, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(h, cfg)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve = %v, want http.ErrServerClosed", err)
		}
	})
	return srv, ln.Addr().String()
}

// viaServer returns h served by a Server on a loopback port.
func viaServer(t testing.TB, h http.Handler) *served {
	t.Helper()
	s := &served{t: t, h: h, addr: startServer(t, h, ServerConfig{})}
	t.Cleanup(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.conn != nil {
			s.conn.Close()
		}
	})
	return s
}

// wireURI returns the request URI r is sent with, and false when it holds a
// byte no request line can carry (a fuzzed query with a space or a control
// character): such a request never reaches a server.
func wireURI(r *http.Request) (string, bool) {
	uri := r.URL.EscapedPath()
	if r.URL.RawQuery != "" || r.URL.ForceQuery {
		uri += "?" + r.URL.RawQuery
	}
	for i := 0; i < len(uri); i++ {
		if c := uri[i]; c <= ' ' || c == 0x7f {
			return uri, false
		}
	}
	return uri, true
}

func (s *served) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	uri, ok := wireURI(r)
	if !ok {
		s.h.ServeHTTP(w, r)
		return
	}
	var body []byte
	if r.Body != nil {
		var err error
		if body, err = io.ReadAll(r.Body); err != nil {
			s.t.Fatalf("read test request body: %v", err)
		}
	}
	var req bytes.Buffer
	req.WriteString(r.Method + " " + uri + " HTTP/1.1\r\nHost: " + s.addr + "\r\n")
	for k, vs := range r.Header {
		for _, v := range vs {
			req.WriteString(k + ": " + v + "\r\n")
		}
	}
	if len(body) > 0 || r.Method == http.MethodPost {
		req.WriteString("Content-Length: " + strconv.Itoa(len(body)) + "\r\n")
	}
	req.WriteString("\r\n")
	req.Write(body)

	s.mu.Lock()
	defer s.mu.Unlock()
	resp, err := s.roundTrip(req.Bytes(), r.Method)
	if err != nil {
		// A kept-alive connection the server closed: once more, fresh.
		s.drop()
		if resp, err = s.roundTrip(req.Bytes(), r.Method); err != nil {
			s.t.Fatalf("%s %s over a real connection: %v", r.Method, uri, err)
		}
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatalf("read answer of %s %s: %v", r.Method, uri, err)
	}
	if resp.Close {
		s.drop()
	}
	if r.Method == http.MethodHead {
		// No answer to HEAD carries a body on the wire; the tests check the
		// body the handler writes, so it is recorded from the handler
		// itself, once the server's status is known to agree.
		direct := httptest.NewRecorder()
		s.h.ServeHTTP(direct, r)
		if direct.Code != resp.StatusCode || len(got) != 0 {
			s.t.Fatalf("HEAD %s: the server answered %d with %d body bytes, the handler %d", uri, resp.StatusCode, len(got), direct.Code)
		}
		got = direct.Body.Bytes()
	}
	for k, vs := range resp.Header {
		if k == "Date" {
			continue
		}
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	w.Write(got) //nolint:errcheck // a recorder
}

func (s *served) roundTrip(req []byte, method string) (*http.Response, error) {
	if s.conn == nil {
		c, err := net.DialTimeout("tcp", s.addr, 5*time.Second)
		if err != nil {
			return nil, err
		}
		s.conn, s.br = c, bufio.NewReader(c)
	}
	s.conn.SetDeadline(time.Now().Add(30 * time.Second)) //nolint:errcheck // a fresh conn
	if _, err := s.conn.Write(req); err != nil {
		return nil, err
	}
	return http.ReadResponse(s.br, &http.Request{Method: method})
}

func (s *served) drop() {
	if s.conn != nil {
		s.conn.Close()
		s.conn = nil
	}
}

// TestPipelining: requests written back to back on one connection are
// answered in order, each whole, the bad ones among them included.
func TestPipelining(t *testing.T) {
	ta := newTestAPI(t, testConfig())
	seed(ta.fake)
	addr := startServer(t, ta.h, ServerConfig{})
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
		checkDate(t, resp)
	}
	if n := len(ta.fake.Calls()); n != 50*2 {
		t.Errorf("service calls = %d, want %d (a count read and an increment a round)", n, 50*2)
	}
}

// checkDate fails the test unless resp carries one Date header, the time
// it was answered (RFC 9110 section 6.6.1: a server with a clock sends it
// with every 2xx, 3xx and 4xx answer).
func checkDate(t *testing.T, resp *http.Response) {
	t.Helper()
	vs := resp.Header.Values("Date")
	if len(vs) != 1 {
		t.Fatalf("answer %d has Date %q, want one", resp.StatusCode, vs)
	}
	d, err := http.ParseTime(vs[0])
	if err != nil {
		t.Fatalf("answer %d: Date %q: %v", resp.StatusCode, vs[0], err)
	}
	if since := time.Since(d); since < -2*time.Second || since > 5*time.Second {
		t.Fatalf("answer %d: Date %q is %v from now", resp.StatusCode, vs[0], -since)
	}
}

// TestServerRejectsUnreadable: what the server refuses before any handler
// runs is answered in the API's error shape and closes the connection.
func TestServerRejectsUnreadable(t *testing.T) {
	ta := newTestAPI(t, testConfig())
	var logged testenv.Buffer
	t.Cleanup(func() { // after the server's shutdown: every connection logged
		if strings.Contains(logged.String(), "canary") {
			t.Errorf("the server's log quotes a request's token:\n%s", logged.String())
		}
	})
	addr := startServer(t, ta.h, ServerConfig{MaxBodyBytes: 100, Logger: slog.New(slog.NewTextHandler(&logged, nil))})
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
			checkDate(t, resp)
		})
	}
	if calls := ta.fake.Calls(); len(calls) != 0 {
		t.Errorf("service calls = %q, want none", calls)
	}
}

// TestShutdown: Serve returns http.ErrServerClosed, a request in progress
// finishes, and one still running when Shutdown's context ends sees its
// own context done; a Serve after Shutdown returns at once.
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
	srv := NewServer(h, ServerConfig{})
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

func (p *headerProbe) headersRead(_ string, uri []byte) headerUse {
	switch {
	case bytes.HasPrefix(uri, []byte("/skip")):
		return readsNoHeader
	case bytes.HasPrefix(uri, []byte("/ctype")):
		return readsContentType
	}
	return readsAllHeaders
}

func (p *headerProbe) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	p.seen[r.URL.Path] = r.Header.Clone()
	p.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain")
	io.WriteString(w, r.URL.RawQuery) //nolint:errcheck // test handler
}

// TestServerSkipsHeadersOnlyWhenAsked checks that a handler offering
// headersRead gets no header for the requests it names, Content-Type alone
// for those it says so of, and every header for the others, on one
// connection in turn (the exchange is reused), and that a handler that
// wraps it (as Authenticate does) gets every header.
func TestServerSkipsHeadersOnlyWhenAsked(t *testing.T) {
	p := &headerProbe{seen: map[string]http.Header{}}
	wrapped := http.HandlerFunc(p.ServeHTTP)
	for _, h := range []http.Handler{p, wrapped} {
		clear(p.seen)
		s := viaServer(t, h)
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
