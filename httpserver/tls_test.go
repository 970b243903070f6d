package httpserver_test

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgecount/edgecount/httpserver"
	"github.com/edgecount/edgecount/httpserver/httpservertest"
	"github.com/edgecount/edgecount/internal/testcert"
)

// TestTLSLoadCertsRefuses: a start with files that do not make a pair
// fails with an error naming the file.
func TestTLSLoadCertsRefuses(t *testing.T) {
	ca := testcert.NewCA(t, "load")
	p := ca.Server(t, "srv")
	if _, err := httpserver.LoadCerts(filepath.Join(t.TempDir(), "missing.pem"), p.KeyFile); err == nil || !strings.Contains(err.Error(), "missing.pem") {
		t.Errorf("LoadCerts of a missing file = %v; want an error naming it", err)
	}
	if _, err := httpserver.LoadCerts(p.KeyFile, p.CertFile); err == nil || !strings.Contains(err.Error(), "cannot load TLS certificate") {
		t.Errorf("LoadCerts with the files swapped = %v; want refused", err)
	}
}

// TestTLSRequestState: a handler served over TLS sees r.TLS (as under
// net/http), one served over plain HTTP does not.
func TestTLSRequestState(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil {
			io.WriteString(w, "plain") //nolint:errcheck // test handler
			return
		}
		fmt.Fprintf(w, "tls %x %s", r.TLS.Version, r.TLS.ServerName)
	})
	ca := testcert.NewCA(t, "state")
	p := ca.Server(t, "srv")
	certs, err := httpserver.LoadCerts(p.CertFile, p.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		cfg    httpserver.Config
		scheme string
		want   string
	}{
		{httpserver.Config{}, "http", "plain"},
		{httpserver.Config{TLS: certs}, "https", "tls 304 localhost"},
	} {
		addr := httpservertest.Start(t, h, c.cfg)
		if got := httpserver.New(h, c.cfg).Scheme(); got != c.scheme {
			t.Errorf("Scheme() = %q; want %q", got, c.scheme)
		}
		port := addr[strings.LastIndex(addr, ":"):]
		client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool}}}
		for range 2 { // the second request reuses the connection
			resp, err := client.Get(c.scheme + "://localhost" + port + "/")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(body) != c.want {
				t.Errorf("%s: handler saw %q; want %q", c.scheme, body, c.want)
			}
		}
		client.CloseIdleConnections()
	}
}

// FuzzTLSFirstBytes sends arbitrary first bytes to the TLS listener, then
// closes its side: whatever they are (a ClientHello cut short, garbage,
// plain HTTP), the server answers at most a plain 400 to what looks like
// HTTP, closes the connection, and goes on serving TLS clients.
//
//	go test ./httpserver -run '^$' -fuzz '^FuzzTLSFirstBytes$' -fuzztime 30s
func FuzzTLSFirstBytes(f *testing.F) {
	for _, s := range []string{
		"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
		"POST /v1/increments HTTP/1.1\r\nContent-Length: 1\r\n\r\nx",
		"\x16\x03\x01\x00\x05\x01\x00\x00\x01\x00",
		"\x16\x03\x03\xff\xff",
		"\x15\x03\x03\x00\x02\x02\x28",
		"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
		"",
	} {
		f.Add([]byte(s))
	}
	ca := testcert.NewCA(f, "fuzz")
	p := ca.Server(f, "srv")
	certs, err := httpserver.LoadCerts(p.CertFile, p.KeyFile)
	if err != nil {
		f.Fatal(err)
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }) //nolint:errcheck // test handler
	addr := httpservertest.Start(f, h, httpserver.Config{TLS: certs, ReadTimeout: 2 * time.Second})
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool}}}
	f.Cleanup(client.CloseIdleConnections)
	f.Fuzz(func(t *testing.T, first []byte) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conn.Write(first) //nolint:errcheck // the server may close before reading all
		conn.(*net.TCPConn).CloseWrite()
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		answer, err := io.ReadAll(conn)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("first bytes %q: the connection was still open after 10 s", first)
		}
		if len(answer) > 0 && answer[0] != 0x15 && answer[0] != 0x16 && !bytes.HasPrefix(answer, []byte("HTTP/1.0 400 ")) {
			t.Fatalf("first bytes %q: answered %q; want TLS records or a plain 400", first, answer)
		}
		resp, err := client.Get("https://" + addr + "/")
		if err != nil {
			t.Fatalf("after first bytes %q the server does not serve TLS: %v", first, err)
		}
		io.Copy(io.Discard, resp.Body) //nolint:errcheck // only the status matters
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("after first bytes %q: %d", first, resp.StatusCode)
		}
	})
}
