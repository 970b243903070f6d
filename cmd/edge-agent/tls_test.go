package main

import (
	"bufio"
	"context"
	"crypto/tls"
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
	"syscall"
	"testing"
	"time"

	"github.com/edgecount/edgecount/internal/testcert"
	"github.com/edgecount/edgecount/internal/testenv"
)

// certFiles installs p as the listener's certificate files in a fresh
// directory and returns their paths.
func certFiles(t *testing.T, p testcert.Pair) (cert, key string) {
	t.Helper()
	dir := t.TempDir()
	cert, key = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	p.Install(t, cert, key)
	return cert, key
}

// httpsClient trusts only ca and opens a new connection for every request,
// so that each sees the certificate served at its handshake.
func httpsClient(ca *testcert.CA) *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: ca.Pool}, DisableKeepAlives: true,
	}}
}

// servedSerial GETs url and returns the serial of the certificate served,
// failing t unless the answer is want.
func servedSerial(t *testing.T, c *http.Client, url string, want int) *big.Int {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body) //nolint:errcheck // only the status matters
	if resp.StatusCode != want {
		t.Fatalf("GET %s = %d; want %d", url, resp.StatusCode, want)
	}
	return resp.TLS.PeerCertificates[0].SerialNumber
}

// TestTLSListener runs a standalone agent with --tls-cert and --tls-key:
// the API, health, readiness and metrics answer over HTTPS (and a write
// counts); plain HTTP on the port gets a 400; SIGHUP (a real signal to this
// process) makes new connections get the replaced certificate, and a
// SIGHUP with a broken file logs the refusal and keeps serving the last
// good one.
func TestTLSListener(t *testing.T) {
	ca := testcert.NewCA(t, "agent")
	first := ca.Server(t, "first")
	certFile, keyFile := certFiles(t, first)
	cfg, err := loadConfig([]string{"--http", "127.0.0.1:0", "--data", t.TempDir(), "--flush-interval", "100ms",
		"--tls-cert", certFile, "--tls-key", keyFile}, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	logs := &testenv.Buffer{}
	n, err := startNode(context.Background(), cfg, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer shutdown(t, n)
	if n.httpSrv.Scheme() != "https" {
		t.Fatalf("Scheme() = %q; want https", n.httpSrv.Scheme())
	}
	base := "https://" + n.Addr()
	c := httpsClient(ca)
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		if got := servedSerial(t, c, base+path, 200); got.Cmp(first.Cert.SerialNumber) != 0 {
			t.Fatalf("GET %s: certificate %x; want the configured one %x", path, got, first.Cert.SerialNumber)
		}
	}
	resp, err := c.Post(base+"/v1/increments", "application/json",
		strings.NewReader(`{"increments":[{"content_id":"tls-clip","counter":"view","delta":3}]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 202 {
		t.Fatalf("POST /v1/increments over HTTPS = %d; want 202", resp.StatusCode)
	}
	testenv.Eventually(t, 20*time.Second, "the increment counted", func() (string, bool) {
		resp, err := c.Get(base + "/v1/counts/tls-clip")
		if err != nil {
			return err.Error(), false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b), strings.Contains(string(b), `"view":3`)
	})
	resp, err = c.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := fmt.Sprintf("edgecount_http_tls_cert_expiry_timestamp_seconds %g", float64(first.Cert.NotAfter.Unix())); !strings.Contains(string(metrics), want) {
		t.Errorf("/metrics lacks %q", want)
	}

	// Plain HTTP on the TLS port: a clean 400, and the agent serves on.
	conn, err := net.Dial("tcp", n.Addr())
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	plain, err := http.ReadResponse(bufio.NewReader(conn), nil)
	conn.Close()
	if err != nil || plain.StatusCode != 400 {
		t.Fatalf("plain HTTP on the TLS port: %v %v; want a 400", plain, err)
	}

	second := ca.Server(t, "second")
	second.Install(t, certFile, keyFile)
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "the second certificate served after SIGHUP", func() (string, bool) {
		got := servedSerial(t, c, base+"/healthz", 200)
		return fmt.Sprintf("serial %x", got), got.Cmp(second.Cert.SerialNumber) == 0
	})
	if !strings.Contains(logs.String(), "TLS certificate reloaded") {
		t.Errorf("the reload was not logged:\n%s", logs.String())
	}

	if err := os.WriteFile(certFile, []byte("-----BEGIN CERTIFICATE-----\ngarbage\n-----END CERTIFICATE-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "the refused reload logged", testenv.Until(func() bool {
		return strings.Contains(logs.String(), "TLS certificate reload failed")
	}))
	if got := servedSerial(t, c, base+"/healthz", 200); got.Cmp(second.Cert.SerialNumber) != 0 {
		t.Fatalf("after a refused reload the certificate is %x; want the second one kept", got)
	}
	if strings.Contains(logs.String(), "PRIVATE KEY") {
		t.Errorf("key material reached the log:\n%s", logs.String())
	}
}

// TestTLSConfigRules: a certificate without its key is refused; TLS does
// not lift the rule that a non-loopback listener needs a token file; a
// certificate that does not load fails the start naming agent.tls.
func TestTLSConfigRules(t *testing.T) {
	ca := testcert.NewCA(t, "rules")
	p := ca.Server(t, "srv")
	none := func(string) string { return "" }
	if _, err := loadConfig([]string{"--data", t.TempDir(), "--tls-cert", p.CertFile}, none, io.Discard); err == nil ||
		!strings.Contains(err.Error(), "agent.tls: cert_file and key_file go together") {
		t.Errorf("--tls-cert alone: %v; want refused", err)
	}
	if _, err := loadConfig([]string{"--http", "192.0.2.1:8443", "--data", t.TempDir(), "--tls-cert", p.CertFile, "--tls-key", p.KeyFile},
		none, io.Discard); err == nil || !strings.Contains(err.Error(), "no token file") {
		t.Errorf("TLS on a public address without tokens: %v; want refused", err)
	}
	env := func(k string) string {
		return map[string]string{"EDGECOUNT_TLS_CERT": p.KeyFile, "EDGECOUNT_TLS_KEY": p.KeyFile}[k]
	}
	cfg, err := loadConfig([]string{"--http", "127.0.0.1:0", "--data", t.TempDir()}, env, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := startNode(context.Background(), cfg, slog.New(slog.DiscardHandler)); err == nil ||
		!strings.Contains(err.Error(), "agent.tls: cannot load TLS certificate") {
		t.Fatalf("start with a key as the certificate: %v; want refused naming agent.tls", err)
	}
}

// TestTLSBinary runs the real binary with a certificate: the start line
// names https, curl (trusting only the test CA) reads /healthz, a SIGHUP
// sent to the process makes it serve the replaced certificate, and SIGTERM
// stops it cleanly.
func TestTLSBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "edge-agent")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ca := testcert.NewCA(t, "binary")
	first := ca.Server(t, "first")
	certFile, keyFile := certFiles(t, first)
	cmd := exec.Command(bin, "--http", "127.0.0.1:0", "--data", t.TempDir(), "--tls-cert", certFile, "--tls-key", keyFile)
	cmd.Env = append(os.Environ(), "EDGECOUNT_LOG_LEVEL=info")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &testenv.Buffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			cmd.Process.Kill()
			cmd.Wait()
		}
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("no start line: %v\n%s", err, stderr.String())
	}
	i := strings.Index(line, "https://")
	if i < 0 {
		t.Fatalf("start line %q names no https address", line)
	}
	base := strings.Fields(line[i:])[0]
	if curl, err := exec.LookPath("curl"); err == nil {
		out, err := exec.Command(curl, "--silent", "--show-error", "--fail", "--cacert", ca.File, base+"/healthz").CombinedOutput()
		if err != nil {
			t.Fatalf("curl --cacert %s/healthz: %v\n%s", base, err, out)
		}
	} else {
		t.Log("curl not on PATH: only Go's client is tried")
	}
	c := httpsClient(ca)
	if got := servedSerial(t, c, base+"/healthz", 200); got.Cmp(first.Cert.SerialNumber) != 0 {
		t.Fatalf("certificate %x; want the configured one", got)
	}
	second := ca.Server(t, "second")
	second.Install(t, certFile, keyFile)
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "the second certificate served after SIGHUP", func() (string, bool) {
		got := servedSerial(t, c, base+"/healthz", 200)
		return fmt.Sprintf("serial %x", got), got.Cmp(second.Cert.SerialNumber) == 0
	})
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	stopped = true
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "TLS certificate reloaded") {
		t.Errorf("the reload was not logged:\n%s", stderr.String())
	}
}
