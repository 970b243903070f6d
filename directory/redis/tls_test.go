package redis

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/edgecount/edgecount/internal/testcert"
	"github.com/edgecount/edgecount/internal/testenv"
)

// tlsServer is a redis-server of the test's own that speaks only TLS, with
// a certificate of the test's CA.
type tlsServer struct {
	addr string
	ca   *testcert.CA
}

// startTLSServer starts redis-server on a free loopback port with TLS only
// (--port 0), clients authenticated as authClients says (no, optional,
// yes), and extra arguments; it is killed when the test ends. Under CI a
// missing redis-server fails the test.
func startTLSServer(t *testing.T, authClients string, extra ...string) *tlsServer {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		testenv.Unavailable(t, "redis-server not on PATH; install it with ./scripts/redis.sh install")
	}
	ca := testcert.NewCA(t, "redis")
	srv := ca.Server(t, "redis-server")
	dir := t.TempDir()
	port := freePort(t)
	s := &tlsServer{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), ca: ca}
	args := append([]string{
		"--port", "0", "--tls-port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--tls-cert-file", srv.CertFile, "--tls-key-file", srv.KeyFile, "--tls-ca-cert-file", ca.File,
		"--tls-auth-clients", authClients,
		"--save", "", "--appendonly", "no", "--dir", dir, "--logfile", filepath.Join(dir, "redis.log"),
	}, extra...)
	cmd := exec.Command(bin, args...)
	if err := cmd.Start(); err != nil {
		t.Fatalf("cannot start %s: %v", bin, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	testenv.Eventually(t, 10*time.Second, "redis-server with TLS on "+s.addr+" to accept", testenv.Until(func() bool {
		c, err := net.DialTimeout("tcp", s.addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	}))
	return s
}

// config returns testConfig for s with TLS on, verified with s's CA.
func (s *tlsServer) config(region string) Config {
	cfg := testConfig(s.addr, region)
	cfg.TLS = TLSConfig{Enabled: true, CAFile: s.ca.File}
	return cfg
}

// TestTLS: over TLS, verified with the test's CA, the directory works end
// to end (a Set is read back through the invalidation subscription); a
// client that trusts another CA, expects another server name, or does not
// speak TLS is refused with an error that says why.
func TestTLS(t *testing.T) {
	s := startTLSServer(t, "no")
	cfg := s.config("tls")
	d, changes := open(t, cfg)
	if err := d.Ping(context.Background()); err != nil {
		t.Fatalf("Ping over TLS: %v", err)
	}
	waitReady(t, d)
	if got := d.Shards("clip", "view"); got != 1 {
		t.Fatalf("Shards before Set = %d; want the default 1", got)
	}
	if err := d.Set(context.Background(), "clip", "view", 8); err != nil {
		t.Fatalf("Set over TLS: %v", err)
	}
	testenv.Eventually(t, 10*time.Second, "the change seen over TLS", testenv.Until(func() bool {
		return d.Shards("clip", "view") == 8 && changes.has(change{"clip", "view", 8})
	}))

	other := testcert.NewCA(t, "other")
	for _, bad := range []struct {
		name string
		tls  TLSConfig
		want string
	}{
		{"another CA", TLSConfig{Enabled: true, CAFile: other.File}, "certificate signed by unknown authority"},
		{"the system's roots", TLSConfig{Enabled: true}, "certificate signed by unknown authority"},
		{"another server name", TLSConfig{Enabled: true, CAFile: s.ca.File, ServerName: "redis.example"}, "redis.example"},
	} {
		t.Run(bad.name, func(t *testing.T) {
			cfg := s.config("tls")
			cfg.TLS = bad.tls
			d, _ := open(t, cfg)
			err := d.Ping(context.Background())
			t.Logf("Ping: %v", err)
			if err == nil || !strings.Contains(err.Error(), bad.want) || !strings.Contains(err.Error(), s.addr) {
				t.Fatalf("Ping = %v; want an error naming %s and containing %q", err, s.addr, bad.want)
			}
			if d.Healthy() {
				t.Error("Healthy() with a refused server certificate; want degraded")
			}
		})
	}
	t.Run("plain client", func(t *testing.T) {
		cfg := testConfig(s.addr, "tls")
		cfg.ReadTimeout = time.Second
		d, _ := open(t, cfg)
		if err := d.Ping(context.Background()); err == nil {
			t.Fatal("a client without TLS got an answer from the TLS port")
		}
	})
}

// TestTLSConfigErrors: files that cannot be used are refused by New with
// an error naming the file.
func TestTLSConfigErrors(t *testing.T) {
	ca := testcert.NewCA(t, "cfg")
	cl := ca.Client(t, "agent")
	missing := filepath.Join(t.TempDir(), "missing.pem")
	for _, c := range []struct {
		name string
		tls  TLSConfig
		want string
	}{
		{"missing CA", TLSConfig{Enabled: true, CAFile: missing}, "missing.pem"},
		{"CA not PEM", TLSConfig{Enabled: true, CAFile: cl.KeyFile}, "holds no PEM certificate"},
		{"cert without key", TLSConfig{Enabled: true, CertFile: cl.CertFile}, "cert file and key file go together"},
		{"key of another cert", TLSConfig{Enabled: true, CertFile: cl.CertFile, KeyFile: ca.Client(t, "other").KeyFile}, "private key does not match"},
	} {
		cfg := testConfig("127.0.0.1:1", "tls")
		cfg.TLS = c.tls
		d, err := New(context.Background(), cfg, nil)
		if err == nil {
			d.Close()
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: New = %v; want an error containing %q", c.name, err, c.want)
		}
	}
}

// TestTLSClientCertificate: a server that authenticates clients
// (--tls-auth-clients yes) refuses a client without a certificate and
// accepts one with a certificate of its CA.
func TestTLSClientCertificate(t *testing.T) {
	s := startTLSServer(t, "yes")
	cfg := s.config("tlsclient")
	without, _ := open(t, cfg)
	if err := without.Ping(context.Background()); err == nil {
		t.Fatal("Ping without a client certificate succeeded; want refused")
	}
	cl := s.ca.Client(t, "agent")
	cfg.TLS.CertFile, cfg.TLS.KeyFile = cl.CertFile, cl.KeyFile
	with, _ := open(t, cfg)
	if err := with.Ping(context.Background()); err != nil {
		t.Fatalf("Ping with a client certificate: %v", err)
	}
}

// canary is a password that must never be seen outside the server.
const canary = "CANARY-redis-secret-51a7"

// TestCredentials: over TLS, requirepass and an ACL user authenticate the
// directory; a wrong password or user is refused with the server's
// WRONGPASS, and the password never reaches a log line (the directory's or
// go-redis's) or an error.
func TestCredentials(t *testing.T) {
	s := startTLSServer(t, "no", "--requirepass", canary)
	admin := goredis.NewClient(&goredis.Options{Addr: s.addr, Password: canary, DisableIdentity: true,
		TLSConfig: &tls.Config{RootCAs: s.ca.Pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}})
	defer admin.Close()
	ctx := context.Background()
	if err := admin.Do(ctx, "ACL", "SETUSER", "agent", "on", ">"+canary+"-acl", "~ec:*", "&ec:*", "+@all").Err(); err != nil {
		t.Fatalf("ACL SETUSER: %v", err)
	}
	logs := &testenv.Buffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	SetClientLogger(logger)
	defer SetClientLogger(slog.New(slog.DiscardHandler))

	dial := func(user, password string) (*Directory, error) {
		cfg := s.config("creds")
		cfg.Username, cfg.Password = user, password
		d, err := New(ctx, cfg, logger)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		return d, d.Ping(ctx)
	}
	for _, c := range []struct {
		name, user, password string
		ok                   bool
	}{
		{"requirepass", "", canary, true},
		{"ACL user", "agent", canary + "-acl", true},
		{"no password", "", "", false},
		{"wrong password", "", canary + "-wrong", false},
		{"ACL user, default's password", "agent", canary, false},
		{"unknown user", "nobody-" + canary, canary, false},
	} {
		d, err := dial(c.user, c.password)
		t.Logf("%s: Ping: %v", c.name, err)
		switch {
		case c.ok && err != nil:
			t.Errorf("%s: Ping = %v; want accepted", c.name, err)
		case !c.ok && err == nil:
			t.Errorf("%s: Ping succeeded; want refused", c.name)
		case !c.ok && !strings.Contains(err.Error(), "WRONGPASS") && !strings.Contains(err.Error(), "NOAUTH"):
			t.Errorf("%s: Ping = %v; want the server's WRONGPASS or NOAUTH", c.name, err)
		}
		if err != nil && strings.Contains(err.Error(), "CANARY") {
			t.Errorf("%s: the error carries the secret: %v", c.name, err)
		}
		if c.ok {
			waitReady(t, d)
			if err := d.Set(ctx, "clip", "like", 4); err != nil {
				t.Errorf("%s: Set: %v", c.name, err)
			}
		}
	}
	// The refused directories keep retrying (subscription, resync): let
	// them log a while.
	time.Sleep(500 * time.Millisecond)
	if strings.Contains(logs.String(), "CANARY") {
		t.Fatalf("a password reached the log:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "WRONGPASS") {
		t.Errorf("the refused logins were not logged:\n%s", logs.String())
	}
}
