package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edgecount/edgecount/agentd"
	"github.com/edgecount/edgecount/internal/testcert"
	"github.com/edgecount/edgecount/internal/testenv"
)

// TestTLSConfigRules: a certificate without its key is refused; TLS does
// not lift the rule that a non-loopback listener needs a token file; a
// certificate that does not load fails the start naming agent.tls.
func TestTLSConfigRules(t *testing.T) {
	ca := testcert.NewCA(t, "rules")
	p := ca.Server(t, "srv")
	none := func(string) string { return "" }
	if _, err := loadConfig([]string{"--data", t.TempDir(), "--tls-cert", p.CertFile}, none, io.Discard, io.Discard); err == nil ||
		!strings.Contains(err.Error(), "agent.tls: cert_file and key_file go together") {
		t.Errorf("--tls-cert alone: %v; want refused", err)
	}
	if _, err := loadConfig([]string{"--http", "192.0.2.1:8443", "--data", t.TempDir(), "--tls-cert", p.CertFile, "--tls-key", p.KeyFile},
		none, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "no token file") {
		t.Errorf("TLS on a public address without tokens: %v; want refused", err)
	}
	env := func(k string) string {
		return map[string]string{"EDGECOUNT_TLS_CERT": p.KeyFile, "EDGECOUNT_TLS_KEY": p.KeyFile}[k]
	}
	cfg, err := loadConfig([]string{"--http", "127.0.0.1:0", "--data", t.TempDir()}, env, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := agentd.Start(context.Background(), cfg, slog.New(slog.DiscardHandler)); err == nil ||
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
	certFile, keyFile := first.InstallCopy(t)
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
	c := ca.HTTPSClient()
	if got := testcert.ServedSerial(t, c, base+"/healthz", 200); got.Cmp(first.Cert.SerialNumber) != 0 {
		t.Fatalf("certificate %x; want the configured one", got)
	}
	second := ca.Server(t, "second")
	second.Install(t, certFile, keyFile)
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "the second certificate served after SIGHUP", func() (string, bool) {
		got := testcert.ServedSerial(t, c, base+"/healthz", 200)
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
