package gossip

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain checks that no goroutine outlives the tests. memberlist's
// Shutdown does not wait for a probe in flight, which ends within a probe
// interval (scaled up to 8× when the node thinks itself unhealthy), so the
// check waits up to 10 s for those before failing.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		deadline := time.Now().Add(10 * time.Second)
		err := goleak.Find()
		for err != nil && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
			err = goleak.Find()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// testLogger logs warnings to t's output until t's cleanup, and drops
// them after: memberlist's timers (a suspicion that ends, say) may still
// fire after Close, and the testing package panics at a write after its
// test completed.
func testLogger(t testing.TB) *slog.Logger {
	t.Helper()
	w := &testOutput{w: t.Output()}
	t.Cleanup(w.close)
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// testOutput forwards writes to w until close.
type testOutput struct {
	mu     sync.Mutex
	w      io.Writer
	closed bool
}

func (o *testOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return len(p), nil
	}
	return o.w.Write(p)
}

func (o *testOutput) close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.closed = true
}

func newKey(t testing.TB) []byte {
	t.Helper()
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return k
}

// writeKeys writes keys to path in the key file format, primary first.
func writeKeys(t testing.TB, path string, keys ...[]byte) {
	t.Helper()
	var b strings.Builder
	b.WriteString("# gossip keys, primary first\n")
	for _, k := range keys {
		b.WriteString(base64.StdEncoding.EncodeToString(k) + "\n")
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}

// keyFile writes keys to a new file in a fresh directory.
func keyFile(t testing.TB, keys ...[]byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "gossip.keys")
	writeKeys(t, path, keys...)
	return path
}

// testConfig is a node of region on loopback with a free port and the fast
// profile; keys == "" means plain text.
func testConfig(region, name, keys string) Config {
	cfg := DefaultConfig(region, name)
	cfg.BindAddr = "127.0.0.1"
	cfg.BindPort = 0
	cfg.Profile = ProfileFast
	cfg.RejoinInterval = 0
	cfg.HTTPAddr = name + ".test:8080"
	cfg.Version = "v1.2.3-test"
	cfg.KeyFile = keys
	cfg.AllowPlaintext = keys == ""
	return cfg
}

// recorder collects a node's events.
type recorder struct {
	mu     sync.Mutex
	events []Event
}

func (r *recorder) add(e Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

func (r *recorder) has(typ EventType, node string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.ContainsFunc(r.events, func(e Event) bool { return e.Type == typ && e.Member.Name == node })
}

// startNode starts a node closed when the test ends, recording its events.
func startNode(t testing.TB, cfg Config) (*Node, *recorder) {
	t.Helper()
	rec := &recorder{}
	cfg.OnEvent = rec.add
	n, err := New(cfg, testLogger(t))
	if err != nil {
		t.Fatalf("New(%s): %v", cfg.AgentID, err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Errorf("Close(%s): %v", n.Name(), err)
		}
	})
	return n, rec
}

// join joins n to seed and fails the test on error.
func join(t testing.TB, n, seed *Node) {
	t.Helper()
	if k, err := n.Join(t.Context(), []string{seed.Addr()}); err != nil || k != 1 {
		t.Fatalf("Join(%s → %s) = %d, %v; want 1, nil", n.Name(), seed.Name(), k, err)
	}
}

// liveNames returns the names of n's live members.
func liveNames(n *Node) []string {
	var names []string
	for _, m := range n.Members() {
		if m.State.live() {
			names = append(names, m.Name)
		}
	}
	return names
}

// seesLive reports "" when every node sees exactly names live.
func seesLive(nodes []*Node, names ...string) func() string {
	want := slices.Sorted(slices.Values(names))
	return func() string {
		for _, n := range nodes {
			if got := liveNames(n); !slices.Equal(got, want) {
				return fmt.Sprintf("%s sees live %v, want %v", n.Name(), got, want)
			}
		}
		return ""
	}
}

// hasValue reports "" when every node holds data from origin under key.
func hasValue(nodes []*Node, origin, key string, data []byte) func() string {
	return func() string {
		for _, n := range nodes {
			vs := n.Peers(key)
			i := slices.IndexFunc(vs, func(v Value) bool { return v.Node == origin })
			if i < 0 {
				return fmt.Sprintf("%s has no %s from %s", n.Name(), key, origin)
			}
			if got := vs[i].Data; string(got) != string(data) {
				return fmt.Sprintf("%s holds %s from %s = %.20q…, want %.20q…", n.Name(), key, origin, got, data)
			}
		}
		return ""
	}
}
