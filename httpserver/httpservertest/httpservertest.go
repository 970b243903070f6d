package httpservertest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/edgecount/edgecount/httpserver"
)

// served is an http.Handler that answers each request by sending it over a
// real loopback connection to a Server serving h (Via).
type served struct {
	t    testing.TB
	h    http.Handler // served directly only for a URI no client can send
	addr string
	mu   sync.Mutex
	conn net.Conn
	br   *bufio.Reader
}

// Start serves h with cfg on a loopback port until the test ends (as
// Serve) and returns the address.
func Start(t testing.TB, h http.Handler, cfg httpserver.Config) string {
	t.Helper()
	_, addr := Serve(t, h, cfg)
	return addr
}

// Serve serves h with cfg on a loopback port until the test ends (then
// Shutdown, and Serve must return http.ErrServerClosed, or the test fails)
// and returns the Server and its address.
func Serve(t testing.TB, h http.Handler, cfg httpserver.Config) (*httpserver.Server, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := httpserver.New(h, cfg)
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

// Via returns an http.Handler that answers each request by sending it over
// a real loopback connection to a Server serving h (with the default
// Config) until the test ends, so that the tests written against handlers
// (httptest.NewRequest, ResponseRecorder) drive the server path the agent
// runs. Requests go one at a time over one kept-alive connection,
// reconnecting after an answer that closes it. A request whose URI no
// client can send (a byte no request line carries) goes to h directly; the
// answer to a HEAD, which carries no body on the wire, is h's own, once
// its status agrees with the server's.
func Via(t testing.TB, h http.Handler) http.Handler {
	t.Helper()
	s := &served{t: t, h: h, addr: Start(t, h, httpserver.Config{})}
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

// CheckDate fails the test unless resp carries one Date header, the time
// it was answered (RFC 9110 section 6.6.1: a server with a clock sends it
// with every 2xx, 3xx and 4xx answer).
func CheckDate(t testing.TB, resp *http.Response) {
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
