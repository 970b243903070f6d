package cassandra

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgecount/edgecount/internal/testenv"
)

// firstByteDialer records the first byte each connection writes: 0x16
// opens a TLS handshake, a CQL frame starts with its protocol version.
type firstByteDialer struct {
	d     net.Dialer
	mu    sync.Mutex
	first []byte
}

func (f *firstByteDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := f.d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &firstByteConn{Conn: c, d: f}, nil
}

func (f *firstByteDialer) firsts() []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return bytes.Clone(f.first)
}

type firstByteConn struct {
	net.Conn
	d    *firstByteDialer
	once sync.Once
}

func (c *firstByteConn) Write(p []byte) (int, error) {
	if len(p) > 0 {
		c.once.Do(func() {
			c.d.mu.Lock()
			c.d.first = append(c.d.first, p[0])
			c.d.mu.Unlock()
		})
	}
	return c.Conn.Write(p)
}

// clusterTLS returns the TLS files scripts/cassandra-cluster.sh made.
func clusterTLS(tb testing.TB, tc *testCluster) TLS {
	tb.Helper()
	d := filepath.Join(tc.dir, "tls")
	t := TLS{CAFile: filepath.Join(d, "ca.pem"), CertFile: filepath.Join(d, "client.pem"), KeyFile: filepath.Join(d, "client-key.pem")}
	for _, f := range []string{t.CAFile, t.CertFile, t.KeyFile} {
		if _, err := os.Stat(f); err != nil {
			testenv.Unavailable(tb, fmt.Sprintf("no TLS material of the cluster (%v); set %s to the state dir of %s", err, clusterDirEnv, clusterStart))
		}
	}
	return t
}

// otherCA writes a CA certificate that signed none of the cluster's.
func otherCA(tb testing.TB) string {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "not the cluster's CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	f := filepath.Join(tb.TempDir(), "other-ca.pem")
	if err := os.WriteFile(f, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		tb.Fatal(err)
	}
	return f
}

// TestClusterTLS connects to the cluster's nodes over TLS (client
// encryption is optional there, so plain and TLS clients share port 9042),
// verifying the node certificates against the script's CA, and checks
// that verification is real: another CA, a wrong server name or no client
// certificate (the nodes require one of TLS clients) fail.
func TestClusterTLS(t *testing.T) {
	tc := needCluster(t)
	good := clusterTLS(t, tc)
	ks := sharedKeyspace
	cfg := tc.config(tc.dcs[0], ks)
	cfg.TLS = good
	dialer := &firstByteDialer{}
	cfg.dialer = dialer
	s := openStore(t, cfg)
	if err := s.Ping(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReadStats(t.Context(), []string{"x"}); err != nil {
		t.Fatal(err)
	}
	firsts := dialer.firsts()
	if len(firsts) == 0 || bytes.Count(firsts, []byte{0x16}) != len(firsts) {
		t.Fatalf("first bytes of the connections = %x; want every one 16 (a TLS handshake)", firsts)
	}

	bad := map[string]func(testing.TB, *TLS){
		"another CA":        func(tb testing.TB, c *TLS) { c.CAFile = otherCA(tb) },
		"wrong server name": func(_ testing.TB, c *TLS) { c.ServerName = "not-a-node.example" },
		"no client cert":    func(_ testing.TB, c *TLS) { c.CertFile, c.KeyFile = "", "" },
	}
	for name, change := range bad {
		t.Run(name, func(t *testing.T) {
			cfg := tc.config(tc.dcs[0], ks)
			cfg.TLS = good
			change(t, &cfg.TLS)
			cfg.ConnectTimeout = 5 * time.Second
			s, err := Open(t.Context(), cfg)
			if err == nil {
				s.Close()
				t.Fatalf("Open with %s succeeded", name)
			}
			t.Logf("Open with %s: %v", name, err)
		})
	}
	t.Run("insecure skip verify", func(t *testing.T) {
		cfg := tc.config(tc.dcs[0], ks)
		cfg.TLS = good
		cfg.TLS.CAFile, cfg.TLS.InsecureSkipVerify = otherCA(t), true
		if err := openStore(t, cfg).Ping(t.Context()); err != nil {
			t.Fatal(err)
		}
	})
}

// TestClusterPasswordNeverShown logs in with a wrong password that is a
// canary, and checks that it appears in no error, log line or printed
// Config; and that the right password logs in.
func TestClusterPasswordNeverShown(t *testing.T) {
	tc := needCluster(t)
	if !tc.auth {
		testenv.Unavailable(t, "the cluster does not authenticate; start it with "+clusterStart)
	}
	const canary = "canary-9c41f7d2e8"
	cfg := tc.config(tc.dcs[0], sharedKeyspace)
	cfg.Password = canary
	cfg.ConnectTimeout = 5 * time.Second

	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	log.Info("opening", "cassandra", cfg)
	_, err := Open(t.Context(), cfg)
	if err == nil {
		t.Fatal("Open with a wrong password succeeded")
	}
	log.Error("open failed", "err", err, "cassandra", cfg)
	js, _ := json.Marshal(cfg.redacted())
	shown := map[string]string{
		"error": err.Error(), "log": logs.String(), "%v": fmt.Sprintf("%v", cfg), "%+v": fmt.Sprintf("%+v", cfg),
		"%#v": fmt.Sprintf("%#v", cfg), "%s": fmt.Sprintf("%s", cfg), "json": string(js),
	}
	for where, s := range shown {
		if strings.Contains(s, canary) {
			t.Errorf("the password appears in the %s: %s", where, s)
		}
	}
	if !strings.Contains(err.Error(), "authentication") && !strings.Contains(err.Error(), "password") {
		t.Errorf("Open error %q does not say that the login failed", err)
	}
	if !loginRefused(err) {
		t.Errorf("Open error %q is not recognised as a refused login: Open would try it again until OpenWait", err)
	}
	t.Logf("Open with a wrong password: %v", err)

	cfg.Password = clusterPassword
	cfg.Keyspace = sharedKeyspace
	if err := openStore(t, cfg).Ping(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// sharedKeyspace is the keyspace of the cluster tests that only connect:
// created by the first, kept (every "cassandra-cluster.sh up" starts
// empty), so that later opens skip the slow schema changes of a 2-DC
// cluster.
const sharedKeyspace = "edgecount_cluster_shared"
