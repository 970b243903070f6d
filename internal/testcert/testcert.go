// Package testcert makes the certificates that TLS tests need: a CA of the
// test's own, and server and client certificates it signs, written as PEM
// files into t.TempDir(). Nothing here is for production use: the keys are
// ECDSA P-256, made fresh for each test and never kept.
package testcert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority made for one test.
type CA struct {
	Cert *x509.Certificate
	// File is the CA certificate as a PEM file (ca_file, --cacert).
	File string
	// Pool holds only Cert, for a Go client's RootCAs.
	Pool *x509.CertPool
	key  *ecdsa.PrivateKey
	dir  string
}

// Pair is a certificate signed by a CA and its key.
type Pair struct {
	// CertFile and KeyFile are PEM files (cert_file, key_file).
	CertFile, KeyFile string
	// CertPEM and KeyPEM are their contents.
	CertPEM, KeyPEM []byte
	// Cert is the parsed leaf; TLS is the pair for a tls.Config.
	Cert *x509.Certificate
	TLS  tls.Certificate
}

// NewCA makes a CA named name, valid from an hour ago for a day, and writes
// its certificate to <t.TempDir()>/<name>-ca.pem.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: name + " test CA", Organization: []string{"edgecount tests"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatalf("testcert: cannot sign the CA: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &CA{Cert: cert, Pool: x509.NewCertPool(), key: key, dir: t.TempDir()}
	ca.Pool.AddCert(cert)
	ca.File = filepath.Join(ca.dir, name+"-ca.pem")
	write(t, ca.File, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	return ca
}

// Options change a certificate from the defaults of Server and Client.
type Options struct {
	// NotBefore and NotAfter default to an hour ago and a day from now.
	NotBefore, NotAfter time.Time
}

// Server returns a server certificate for hosts (IP addresses or DNS
// names; default 127.0.0.1, ::1 and localhost), written to
// <name>-cert.pem and <name>-key.pem in a fresh directory.
func (ca *CA) Server(t testing.TB, name string, hosts ...string) Pair {
	t.Helper()
	return ca.Issue(t, name, x509.ExtKeyUsageServerAuth, Options{}, hosts...)
}

// Client returns a client certificate whose common name is name.
func (ca *CA) Client(t testing.TB, name string) Pair {
	t.Helper()
	return ca.Issue(t, name, x509.ExtKeyUsageClientAuth, Options{})
}

// Issue returns a certificate for usage, named name, with opts; hosts as
// for Server (only for ExtKeyUsageServerAuth).
func (ca *CA) Issue(t testing.TB, name string, usage x509.ExtKeyUsage, opts Options, hosts ...string) Pair {
	t.Helper()
	if opts.NotBefore.IsZero() {
		opts.NotBefore = time.Now().Add(-time.Hour)
	}
	if opts.NotAfter.IsZero() {
		opts.NotAfter = time.Now().Add(24 * time.Hour)
	}
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: name, Organization: []string{"edgecount tests"}},
		NotBefore:    opts.NotBefore,
		NotAfter:     opts.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
	}
	if usage == x509.ExtKeyUsageServerAuth {
		if len(hosts) == 0 {
			hosts = []string{"127.0.0.1", "::1", "localhost"}
		}
		for _, h := range hosts {
			if ip := net.ParseIP(h); ip != nil {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			} else {
				tmpl.DNSNames = append(tmpl.DNSNames, h)
			}
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatalf("testcert: cannot sign %s: %v", name, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	p := Pair{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		Cert:    leaf,
	}
	if p.TLS, err = tls.X509KeyPair(p.CertPEM, p.KeyPEM); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	p.CertFile, p.KeyFile = filepath.Join(dir, name+"-cert.pem"), filepath.Join(dir, name+"-key.pem")
	write(t, p.CertFile, p.CertPEM)
	write(t, p.KeyFile, p.KeyPEM)
	return p
}

// Install writes p's certificate and key over certFile and keyFile, as an
// operator replacing a certificate does (each file replaced by a rename,
// so that no reader sees half a file).
func (p Pair) Install(t testing.TB, certFile, keyFile string) {
	t.Helper()
	replace(t, certFile, p.CertPEM)
	replace(t, keyFile, p.KeyPEM)
}

func replace(t testing.TB, path string, data []byte) {
	t.Helper()
	tmp := path + ".new"
	write(t, tmp, data)
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func write(t testing.TB, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}
