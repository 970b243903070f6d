package main

import (
	"bufio"
	"bytes"
	"context"
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
	"github.com/edgecount/edgecount/agentd/agentdtest"
)

// startTestNode starts a standalone node on a random port under dir.
func startTestNode(t testing.TB, dir string, flush time.Duration) *agentd.Node {
	t.Helper()
	return startNodeArgs(t, "--http", "127.0.0.1:0", "--data", dir, "--region", "local", "--flush-interval", flush.String())
}

// startNodeArgs starts a node configured by flags alone.
func startNodeArgs(t testing.TB, args ...string) *agentd.Node {
	t.Helper()
	cfg, err := loadConfig(args, func(string) string { return "" }, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	n, err := agentd.Start(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestSIGTERMFlushesBeforeExit runs the real binary with a flush interval
// far longer than the test, so only the shutdown flush can carry the
// increments; after SIGTERM it must exit 0 and a restart must show them.
func TestSIGTERMFlushesBeforeExit(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "edge-agent")
	if out, err := exec.Command("go", "build", "-race", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	dir := t.TempDir()
	start := func(flush string) (*exec.Cmd, string, *bytes.Buffer) {
		t.Helper()
		cmd := exec.Command(bin, "--http", "127.0.0.1:0", "--data", dir, "--flush-interval", flush)
		cmd.Env = append(os.Environ(), "EDGECOUNT_LOG_LEVEL=warn")
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err != nil {
			cmd.Process.Kill()
			t.Fatalf("no start line: %v\n%s", err, stderr.String())
		}
		i := strings.Index(line, "http://")
		if i < 0 {
			t.Fatalf("start line %q has no address", line)
		}
		return cmd, strings.Fields(line[i:])[0], &stderr
	}
	cmd, base, stderr := start("1h")
	agentdtest.Call(t, "POST", base+"/v1/increments", map[string]any{"increments": []map[string]any{
		{"content_id": "clip", "counter": "view", "delta": 7},
	}}, 202, nil)
	agentdtest.Call(t, "POST", base+"/v1/reactions", map[string]string{"user_id": "u", "content_id": "clip", "action": "like"}, 200, nil)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, stderr.String())
	}

	cmd, base, stderr = start("1h")
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		if err := cmd.Wait(); err != nil {
			t.Errorf("second run exit: %v\n%s", err, stderr.String())
		}
	}()
	var got agentdtest.Counts
	agentdtest.Call(t, "GET", base+"/v1/counts/clip", nil, 200, &got)
	if got.Likes != 1 || got.Counters["view"] != 7 {
		t.Fatalf("after SIGTERM and restart: %v, want likes=1 view=7", got)
	}
}
