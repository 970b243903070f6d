package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgecount/edgecount/httpserver"
	"github.com/edgecount/edgecount/httpserver/httpservertest"
	"github.com/edgecount/edgecount/internal/testcert"
	"github.com/edgecount/edgecount/internal/testenv"
)

// tlsFixture is the real handler stack (a fake Service) served over TLS
// with a certificate of a test CA, from files that the test may replace.
type tlsFixture struct {
	ta                *testAPI
	ca                *testcert.CA
	first             testcert.Pair
	certFile, keyFile string
	certs             *httpserver.Certs
	addr              string
	srvLog            *testenv.Buffer // the Server's own log, at debug level
}

func newTLSFixture(t *testing.T) *tlsFixture {
	t.Helper()
	f := &tlsFixture{ta: newTestAPI(t, testConfig()), ca: testcert.NewCA(t, "httpapi"), srvLog: &testenv.Buffer{}}
	f.first = f.ca.Server(t, "first")
	dir := t.TempDir()
	f.certFile, f.keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	f.first.Install(t, f.certFile, f.keyFile)
	var err error
	if f.certs, err = httpserver.LoadCerts(f.certFile, f.keyFile); err != nil {
		t.Fatal(err)
	}
	f.addr = httpservertest.Start(t, f.ta.h, httpserver.Config{TLS: f.certs,
		Logger: slog.New(slog.NewTextHandler(f.srvLog, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	return f
}

// client returns an HTTPS client that trusts only the test CA and opens a
// new connection for every request.
func (f *tlsFixture) client() *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: f.ca.Pool},
		DisableKeepAlives: true,
	}}
}

// served returns the serial number of the certificate a new connection
// gets, after checking that /healthz answers 200 over it.
func (f *tlsFixture) served(t *testing.T) *big.Int {
	t.Helper()
	resp, err := f.client().Get("https://" + f.addr + "/healthz")
	if err != nil {
		t.Fatalf("GET /healthz over TLS: %v", err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body) //nolint:errcheck // only the status matters
	if resp.StatusCode != 200 {
		t.Fatalf("GET /healthz over TLS = %d; want 200", resp.StatusCode)
	}
	if resp.TLS.Version < tls.VersionTLS12 {
		t.Errorf("TLS version %x; want 1.2 or later", resp.TLS.Version)
	}
	return resp.TLS.PeerCertificates[0].SerialNumber
}

// TestTLSServesAndReloads: the API answers over TLS with the configured
// certificate; after Reload a new connection gets the new one while a
// connection already open keeps working; a reload of files that do not
// make a valid pair is refused with an error naming the file and the
// certificate served does not change.
func TestTLSServesAndReloads(t *testing.T) {
	f := newTLSFixture(t)
	if got := f.served(t); got.Cmp(f.first.Cert.SerialNumber) != 0 {
		t.Fatalf("served serial %x; want the first certificate's %x", got, f.first.Cert.SerialNumber)
	}

	// A kept-alive connection opened before the reload.
	keep := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: f.ca.Pool}}}
	defer keep.CloseIdleConnections()
	post := func(c *http.Client) *http.Response {
		t.Helper()
		resp, err := c.Post("https://"+f.addr+"/v1/increments", "application/json",
			strings.NewReader(incBody(item(`"c1"`, `"view"`, "1"))))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body) //nolint:errcheck // only the status matters
		resp.Body.Close()
		if resp.StatusCode != 202 {
			t.Fatalf("POST /v1/increments over TLS = %d; want 202", resp.StatusCode)
		}
		return resp
	}
	before := post(keep)

	second := f.ca.Server(t, "second")
	second.Install(t, f.certFile, f.keyFile)
	if got := f.served(t); got.Cmp(f.first.Cert.SerialNumber) != 0 {
		t.Fatalf("before Reload a new connection got %x; want the first certificate still", got)
	}
	if err := f.certs.Reload(); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	if got := f.served(t); got.Cmp(second.Cert.SerialNumber) != 0 {
		t.Fatalf("after Reload a new connection got %x; want the second certificate %x", got, second.Cert.SerialNumber)
	}
	after := post(keep)
	if after.TLS.PeerCertificates[0].SerialNumber.Cmp(before.TLS.PeerCertificates[0].SerialNumber) != 0 {
		t.Errorf("the kept-alive connection changed certificate; want it kept")
	}

	third := f.ca.Server(t, "third")
	expired := f.ca.Issue(t, "expired", x509.ExtKeyUsageServerAuth,
		testcert.Options{NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-time.Hour)})
	for _, bad := range []struct {
		name       string
		cert, key  []byte
		wantErrSub string
	}{
		{"not PEM", []byte("not a certificate"), second.KeyPEM, "cert.pem"},
		{"empty key", third.CertPEM, nil, "key.pem"},
		{"key of another certificate", third.CertPEM, second.KeyPEM, "private key does not match"},
		{"expired", expired.CertPEM, expired.KeyPEM, "expired"},
	} {
		if err := os.WriteFile(f.certFile, bad.cert, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f.keyFile, bad.key, 0o600); err != nil {
			t.Fatal(err)
		}
		err := f.certs.Reload()
		if err == nil || !strings.Contains(err.Error(), bad.wantErrSub) {
			t.Errorf("Reload of %s = %v; want an error containing %q", bad.name, err, bad.wantErrSub)
		}
		if err != nil && strings.Contains(err.Error(), "PRIVATE KEY-----") {
			t.Errorf("Reload of %s: the error quotes the key: %v", bad.name, err)
		}
		if got := f.served(t); got.Cmp(second.Cert.SerialNumber) != 0 {
			t.Fatalf("after the refused reload (%s) a new connection got %x; want the second certificate kept", bad.name, got)
		}
	}
	st := f.certs.Stats()
	if st.Reloads != 1 || st.ReloadErrors != 4 || !st.NotAfter.Equal(second.Cert.NotAfter) {
		t.Errorf("stats %+v; want 1 reload, 4 refused, NotAfter %v", st, second.Cert.NotAfter)
	}
}

// TestTLSRefusesOldVersionsAndPlainHTTP: a TLS 1.1 client and a plain HTTP
// client are refused (the latter with a 400 saying to use HTTPS); both are
// counted, neither is logged as an error, and the server keeps serving.
func TestTLSRefusesOldVersionsAndPlainHTTP(t *testing.T) {
	f := newTLSFixture(t)
	c, err := tls.Dial("tcp", f.addr, &tls.Config{RootCAs: f.ca.Pool, MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11})
	if err == nil {
		c.Close()
		t.Fatal("a TLS 1.1 handshake succeeded; want refused (TLS 1.2 at least)")
	}
	if !strings.Contains(err.Error(), "protocol version") {
		t.Fatalf("TLS 1.1 client: %v; want the server to refuse the protocol version", err)
	}

	conn, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /healthz HTTP/1.1\r\nHost: %s\r\nUser-Agent: plain\r\n\r\n", f.addr)
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("plain HTTP on the TLS port: no answer: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 400 || !strings.Contains(string(body), "HTTPS") || !strings.Contains(string(body), `"field":"scheme"`) {
		t.Fatalf("plain HTTP on the TLS port = %d %s; want a 400 saying the port serves HTTPS", resp.StatusCode, body)
	}

	f.served(t) // still serving
	testenv.Eventually(t, 5*time.Second, "both refusals counted", func() (string, bool) {
		st := f.certs.Stats()
		return fmt.Sprintf("%d handshake errors, %d plain HTTP", st.HandshakeErrors, st.PlainHTTP), st.HandshakeErrors == 2 && st.PlainHTTP == 1
	})
	log := f.srvLog.String()
	if strings.Contains(log, "level=WARN") || strings.Contains(log, "level=ERROR") || !strings.Contains(log, "TLS handshake failed") {
		t.Errorf("server log:\n%s\nwant the refused handshakes at debug level only", log)
	}
}

// TestTLSOversizedBodyClientWritesAllFirst: over TLS too, a client that
// writes its whole oversized body before it reads gets the 413 (the
// lingering close drains the encrypted bytes), and nothing reaches the
// service.
func TestTLSOversizedBodyClientWritesAllFirst(t *testing.T) {
	f := newTLSFixture(t)
	conn, err := tls.Dial("tcp", f.addr, &tls.Config{RootCAs: f.ca.Pool})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	const size = 1_800_000
	fmt.Fprintf(conn, "POST /v1/increments HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", f.addr, size)
	chunk := bytes.Repeat([]byte(" "), 64<<10)
	for sent := 0; sent < size; sent += len(chunk) {
		if _, err := conn.Write(chunk[:min(len(chunk), size-sent)]); err != nil {
			t.Fatalf("writing the body after %d bytes: %v (the server reset the connection)", sent, err)
		}
	}
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	got, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 413 || !strings.Contains(string(got), `"field":"body"`) {
		t.Fatalf("answer %d %s; want the 413 naming body", resp.StatusCode, got)
	}
	if calls := f.ta.fake.Calls(); len(calls) != 0 {
		t.Errorf("service calls = %q, want none", calls)
	}
}

// TestTLSCurl: a client that is not Go (curl, trusting only the test CA)
// reads health, readiness and metrics over the TLS listener.
func TestTLSCurl(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		testenv.Unavailable(t, "curl is not on PATH; install it (apt-get install curl)")
	}
	f := newTLSFixture(t)
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		out, err := exec.CommandContext(ctx, curl, "--silent", "--show-error", "--fail", "--cacert", f.ca.File,
			"--tlsv1.2", "https://"+f.addr+path).CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("curl %s: %v\n%s", path, err, out)
		}
	}
	// Without the CA curl refuses the certificate.
	out, err := exec.Command(curl, "--silent", "--show-error", "https://"+f.addr+"/healthz").CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || !strings.Contains(string(out), "certificate") {
		t.Errorf("curl without the CA: %v %s; want a certificate error", err, out)
	}
}
