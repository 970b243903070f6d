package agentd

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edgecount/edgecount/config"
	"github.com/edgecount/edgecount/internal/testcert"
	"github.com/edgecount/edgecount/internal/testenv"
)

// TestTLSListener runs a standalone agent with a certificate (agent.tls):
// the API, health, readiness and metrics answer over HTTPS (and a write
// counts); plain HTTP on the port gets a 400; SIGHUP (a real signal to this
// process) makes new connections get the replaced certificate, and a
// SIGHUP with a broken file logs the refusal and keeps serving the last
// good one.
func TestTLSListener(t *testing.T) {
	ca := testcert.NewCA(t, "agent")
	first := ca.Server(t, "first")
	certFile, keyFile := first.InstallCopy(t)
	cfg := testConfig(t, t.TempDir(), 100*time.Millisecond, func(cfg *config.Config) {
		cfg.Agent.TLS = config.TLS{CertFile: certFile, KeyFile: keyFile}
	})
	logs := &testenv.Buffer{}
	n, err := Start(context.Background(), cfg, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer shutdown(t, n)
	if n.Scheme() != "https" {
		t.Fatalf("Scheme() = %q; want https", n.Scheme())
	}
	base := "https://" + n.Addr()
	c := ca.HTTPSClient()
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		if got := testcert.ServedSerial(t, c, base+path, 200); got.Cmp(first.Cert.SerialNumber) != 0 {
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
		got := testcert.ServedSerial(t, c, base+"/healthz", 200)
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
	if got := testcert.ServedSerial(t, c, base+"/healthz", 200); got.Cmp(second.Cert.SerialNumber) != 0 {
		t.Fatalf("after a refused reload the certificate is %x; want the second one kept", got)
	}
	if strings.Contains(logs.String(), "PRIVATE KEY") {
		t.Errorf("key material reached the log:\n%s", logs.String())
	}
}
