package natsjs

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func TestServerConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(*ServerConfig)
		wantErr string // "" = valid
	}{
		{"default", func(*ServerConfig) {}, ""},
		{"random port", func(c *ServerConfig) { c.Port = -1 }, ""},
		{"no store dir", func(c *ServerConfig) { c.StoreDir = "" }, "store dir is required"},
		{"port too low", func(c *ServerConfig) { c.Port = -2 }, "port -2 is out of range"},
		{"port too high", func(c *ServerConfig) { c.Port = 70000 }, "port 70000 is out of range"},
		{"negative timeout", func(c *ServerConfig) { c.StartTimeout = -1 }, "start timeout -1ns is negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultServerConfig("/tmp/x")
			tt.edit(&cfg)
			checkErr(t, cfg.Validate(), tt.wantErr)
		})
	}
}

// checkErr checks that err is nil when want is "", else contains want.
func checkErr(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Errorf("got error %q, want none", err)
	case want != "" && err == nil:
		t.Errorf("got no error, want one containing %q", want)
	case want != "" && !strings.Contains(err.Error(), want):
		t.Errorf("got error %q, want one containing %q", err, want)
	}
}

func TestDefaultServerConfigSyncsAlways(t *testing.T) {
	if cfg := DefaultServerConfig("d"); !cfg.SyncAlways {
		t.Errorf("DefaultServerConfig().SyncAlways = false, want true")
	}
}

func TestStartServer(t *testing.T) {
	tests := []struct {
		name       string
		port       int
		wantURL    bool
		syncAlways bool
	}{
		{"in-process only", 0, false, true},
		{"random tcp port", -1, true, true},
		{"no sync always", -1, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultServerConfig(t.TempDir())
			cfg.Port = tt.port
			cfg.SyncAlways = tt.syncAlways
			cfg.Logger = testLogger(t)
			s, err := StartServer(cfg)
			if err != nil {
				t.Fatalf("StartServer: %v", err)
			}
			t.Cleanup(s.Shutdown)

			url := s.ClientURL()
			if got := url != ""; got != tt.wantURL {
				t.Fatalf("ClientURL() = %q, want a URL: %v", url, tt.wantURL)
			}
			nc, err := s.Connect("test")
			if err != nil {
				t.Fatalf("Connect: %v", err)
			}
			defer nc.Close()
			checkJetStream(t, nc)
			if got := s.SyncAlways(); got != tt.syncAlways {
				t.Errorf("SyncAlways() = %v, want %v", got, tt.syncAlways)
			}

			if tt.wantURL {
				tcp, err := Connect(ConnConfig{URL: url, Name: "tcp"}, testLogger(t))
				if err != nil {
					t.Fatalf("Connect(%s): %v", url, err)
				}
				defer tcp.Close()
				checkJetStream(t, tcp)
			}
		})
	}
}

// checkJetStream checks that JetStream answers on nc.
func checkJetStream(t *testing.T, nc *nats.Conn) {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream.New: %v", err)
	}
	ctx := context.Background()
	if _, err := js.AccountInfo(ctx); err != nil {
		t.Fatalf("AccountInfo: %v", err)
	}
}

func TestServerShutdownIsIdempotent(t *testing.T) {
	s := startServer(t, t.TempDir(), -1)
	s.Shutdown()
	s.Shutdown()
	if _, err := s.Connect("late"); err == nil {
		t.Errorf("Connect after Shutdown: got no error, want one")
	}
}

func TestStartServerFailsOnBadStoreDir(t *testing.T) {
	file := filepath.Join(t.TempDir(), "not-a-dir")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultServerConfig(file)
	cfg.Logger = testLogger(t)
	s, err := StartServer(cfg)
	if err == nil {
		s.Shutdown()
		t.Fatalf("StartServer with a file as store dir: got no error, want one")
	}
	if !strings.Contains(err.Error(), "cannot start nats server") {
		t.Errorf("got error %q, want it to start with the context", err)
	}
}

func TestStartServerRejectsInvalidConfig(t *testing.T) {
	_, err := StartServer(ServerConfig{})
	checkErr(t, err, "store dir is required")
}
