package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edgecount/edgecount/internal/testcert"
	"github.com/edgecount/edgecount/internal/testenv"
	"github.com/edgecount/edgecount/natsjs"
)

// TestTLSListener runs the rollup command with --tls-cert and --tls-key
// (from the environment, EDGECOUNT_ROLLUP_TLS_*): its start line names
// https, /healthz, /readyz and /metrics answer over TLS, and a SIGHUP (a
// real signal to this process) serves the replaced certificate to new
// connections.
func TestTLSListener(t *testing.T) {
	srv, err := natsjs.StartServer(natsjs.ServerConfig{StoreDir: t.TempDir(), Host: "127.0.0.1", Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	ca := testcert.NewCA(t, "rollup")
	first, second := ca.Server(t, "first"), ca.Server(t, "second")
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	first.Install(t, certFile, keyFile)
	env := map[string]string{"EDGECOUNT_ROLLUP_TLS_CERT": certFile, "EDGECOUNT_ROLLUP_TLS_KEY": keyFile}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	logs := &testenv.Buffer{}
	go func() {
		done <- run(ctx, []string{"--nats", srv.ClientURL(), "--data", t.TempDir(), "--http", "127.0.0.1:0"},
			func(k string) string { return env[k] }, pw, logs)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("no start line: %v\n%s", err, logs.String())
	}
	go io.Copy(io.Discard, pr) //nolint:errcheck // the rest of stdout
	i := strings.Index(line, "https://")
	if i < 0 {
		t.Fatalf("start line %q names no https address", line)
	}
	base := strings.Fields(line[i:])[0]
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: ca.Pool}, DisableKeepAlives: true,
	}}
	serial := func(path string) *big.Int {
		t.Helper()
		resp, err := client.Get(base + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		io.Copy(io.Discard, resp.Body) //nolint:errcheck // only the status matters
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s = %d; want 200", path, resp.StatusCode)
		}
		return resp.TLS.PeerCertificates[0].SerialNumber
	}
	testenv.Eventually(t, 30*time.Second, "/readyz 200 over TLS", testenv.Until(func() bool {
		resp, err := client.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	}))
	for _, path := range []string{"/healthz", "/metrics"} {
		if got := serial(path); got.Cmp(first.Cert.SerialNumber) != 0 {
			t.Fatalf("GET %s: certificate %x; want the configured one", path, got)
		}
	}
	second.Install(t, certFile, keyFile)
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "the second certificate served after SIGHUP", func() (string, bool) {
		got := serial("/healthz")
		return fmt.Sprintf("serial %x", got), got.Cmp(second.Cert.SerialNumber) == 0
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	if !strings.Contains(logs.String(), "TLS certificate reloaded") {
		t.Errorf("the reload was not logged:\n%s", logs.String())
	}
}

// TestTLSBadCertificate: a rollup whose certificate does not load does not
// start, and says which setting is wrong; a certificate without its key is
// refused before anything starts.
func TestTLSBadCertificate(t *testing.T) {
	srv, err := natsjs.StartServer(natsjs.ServerConfig{StoreDir: t.TempDir(), Host: "127.0.0.1", Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	p := testcert.NewCA(t, "bad").Server(t, "srv")
	args := []string{"--nats", srv.ClientURL(), "--data", t.TempDir(), "--http", "127.0.0.1:0"}
	err = run(context.Background(), append(args, "--tls-cert", p.KeyFile, "--tls-key", p.KeyFile),
		func(string) string { return "" }, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "rollup.tls: cannot load TLS certificate") {
		t.Errorf("run with a key as the certificate = %v; want refused naming rollup.tls", err)
	}
	err = run(context.Background(), append(args, "--tls-cert", p.CertFile), func(string) string { return "" }, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "rollup.tls: cert_file and key_file go together") {
		t.Errorf("run with --tls-cert alone = %v; want refused", err)
	}
}
