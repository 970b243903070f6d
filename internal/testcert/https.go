package testcert

import (
	"crypto/tls"
	"io"
	"math/big"
	"net/http"
	"path/filepath"
	"testing"
	"time"
)

// InstallCopy writes p's certificate and key to files of their own in a
// fresh directory and returns their paths: a listener's certificate files,
// which the test may then replace (Install) without touching p's.
func (p Pair) InstallCopy(t testing.TB) (certFile, keyFile string) {
	t.Helper()
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	p.Install(t, certFile, keyFile)
	return certFile, keyFile
}

// HTTPSClient trusts only ca and opens a new connection for every
// request, so that each sees the certificate served at its handshake.
func (ca *CA) HTTPSClient() *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: ca.Pool}, DisableKeepAlives: true,
	}}
}

// ServedSerial GETs url with c and returns the serial of the certificate
// served, failing t unless the answer's status is want.
func ServedSerial(t testing.TB, c *http.Client, url string, want int) *big.Int {
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
