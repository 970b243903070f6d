package natsjs

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgecount/edgecount/internal/testenv"
)

func TestConnConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     ConnConfig
		wantErr string
	}{
		{"zero", ConnConfig{}, ""},
		{"creds and nkey", ConnConfig{CredsFile: "a", NKeyFile: "b"}, "creds file and nkey file are exclusive"},
		{"cert without key", ConnConfig{CertFile: "c"}, "cert file and key file go together"},
		{"key without cert", ConnConfig{KeyFile: "k"}, "cert file and key file go together"},
		{"negative timeout", ConnConfig{ConnectTimeout: -time.Second}, "connect timeout -1s is negative"},
		{"inverted backoff", ConnConfig{ReconnectMin: time.Second, ReconnectMax: time.Millisecond}, "reconnect backoff 1s..1ms is not a range"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkErr(t, tt.cfg.Validate(), tt.wantErr)
		})
	}
}

func TestRedactURL(t *testing.T) {
	tests := []struct{ in, want string }{
		{"nats://127.0.0.1:4222", "nats://127.0.0.1:4222"},
		{"nats://user:secret@h:4222", "nats://redacted@h:4222"},
		{"nats://token@h:4222,nats://h2:4222", "nats://redacted@h:4222,nats://h2:4222"},
	}
	for _, tt := range tests {
		if got := redactURL(tt.in); got != tt.want {
			t.Errorf("redactURL(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// freePort returns a loopback port nothing listens on.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return port
}

func TestConnectFailsWhenUnreachable(t *testing.T) {
	url := "nats://127.0.0.1:" + strconv.Itoa(freePort(t))
	_, err := Connect(ConnConfig{URL: url, ConnectTimeout: time.Second}, nil)
	checkErr(t, err, "cannot connect to nats at "+url)

	_, err = Connect(ConnConfig{URL: url, NKeyFile: "/does/not/exist"}, nil)
	checkErr(t, err, "cannot read nkey seed")
}

// TestConnectReconnects starts the client before the server
// (WaitForServer), then restarts the server on the same port and store, and
// publishes through the same connection each time.
func TestConnectReconnects(t *testing.T) {
	port := freePort(t)
	dir := t.TempDir()
	logs := &testenv.Buffer{}
	nc, err := Connect(ConnConfig{
		URL:           "nats://127.0.0.1:" + strconv.Itoa(port),
		Name:          "reconnect-test",
		ReconnectMin:  5 * time.Millisecond,
		ReconnectMax:  50 * time.Millisecond,
		WaitForServer: true,
	}, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatalf("Connect with WaitForServer: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}

	cfg := testStreamConfig(1)
	pub := NewPublisher(js, cfg)
	var reconnects uint64 // before the last server stopped
	for i := range 2 {
		s := startServer(t, dir, port)
		// Wait for this server's connection: right after the previous
		// server stopped the client may still report CONNECTED.
		testenv.Eventually(t, 30*time.Second, "connection", testenv.Until(func() bool {
			return nc.Status() == nats.CONNECTED && (i == 0 || nc.Stats().Reconnects > reconnects)
		}))
		if err := EnsureStream(context.Background(), js, cfg); err != nil {
			t.Fatalf("EnsureStream on server #%d: %v", i+1, err)
		}
		publish(t, pub, 0, msgID(0, i), "x")
		reconnects = nc.Stats().Reconnects
		s.Shutdown()
	}
	if got := pub.Stats().Published; got != 2 {
		t.Errorf("published %d, want 2", got)
	}
	got := logs.String()
	for _, want := range []string{"nats connected", "nats disconnected", "nats reconnected"} {
		if !strings.Contains(got, want) {
			t.Errorf("logs lack %q:\n%s", want, got)
		}
	}
}

func TestWithDefaults(t *testing.T) {
	got := ConnConfig{URL: "nats://h:1", ReconnectMax: time.Minute}.withDefaults()
	want := DefaultConnConfig()
	want.URL, want.ReconnectMax = "nats://h:1", time.Minute
	if got != want {
		t.Errorf("withDefaults() = %+v, want %+v (given fields kept, zero ones defaulted)", got, want)
	}
	c := ConsumerConfig{Durable: "x"}.withDefaults()
	if c.Durable != "x" || c.Stream != DefaultStreamConfig() || c.AckWait != DefaultConsumerConfig().AckWait {
		t.Errorf("ConsumerConfig.withDefaults() = %+v, want durable x and the default stream and ack wait", c)
	}
}

// TestDialContextWaitsForTheServer: a process dialling while its broker
// restarts gets its connection once the broker is back (a nemesis run saw
// an agent restarted during a broker kill exit with "no servers
// available"); with its context ended it gives up, with the broker's error.
func TestDialContextWaitsForTheServer(t *testing.T) {
	port := freePort(t)
	url := "nats://127.0.0.1:" + strconv.Itoa(port)
	cfg := ConnConfig{URL: url, Name: "dial-wait-test", ConnectTimeout: time.Second}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := DialContext(ctx, cfg, nil); !errors.Is(err, nats.ErrNoServers) {
		t.Fatalf("DialContext with its context ended, no server = %v; want nats.ErrNoServers", err)
	}

	scfg := DefaultServerConfig(t.TempDir())
	scfg.Port = port
	started := make(chan error, 1)
	go func() {
		time.Sleep(1500 * time.Millisecond)
		s, err := StartServer(scfg)
		if err == nil {
			t.Cleanup(s.Shutdown)
		}
		started <- err
	}()
	c, err := DialContext(t.Context(), cfg, nil)
	if serr := <-started; serr != nil {
		t.Fatalf("StartServer: %v", serr)
	}
	if err != nil {
		t.Fatalf("DialContext while the server starts: %v", err)
	}
	defer c.Close()
	if err := c.Ping(t.Context()); err != nil {
		t.Fatal(err)
	}
}
