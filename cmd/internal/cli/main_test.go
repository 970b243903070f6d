package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"
)

// mainChildEnv makes the test binary a daemon that runs Main: with "watch"
// its run reloads on SIGHUP as listener.Watch does, with "none" it has
// nothing to reload.
const mainChildEnv = "EDGECOUNT_CLI_MAIN_CHILD"

func TestMain(m *testing.M) {
	if mode := os.Getenv(mainChildEnv); mode != "" {
		Main("child", childRun(mode))
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// childRun is the child's run: it says "ready" on stdout once its SIGHUP
// watcher (if any) is in place, says "reloaded" on every SIGHUP it gets,
// and returns when ctx ends.
func childRun(mode string) RunFunc {
	return func(ctx context.Context, _ []string, _ func(string) string, stdout, _ io.Writer) error {
		if mode == "watch" {
			hup := make(chan os.Signal, 1)
			signal.Notify(hup, syscall.SIGHUP)
			defer signal.Stop(hup)
			go func() {
				for range hup {
					fmt.Fprintln(stdout, "reloaded")
				}
			}()
		}
		fmt.Fprintln(stdout, "ready")
		<-ctx.Done()
		return nil
	}
}

// TestMainSignals: SIGHUP (systemctl reload) never ends a process, whether
// or not it has something to reload, and reaches what reloads; SIGTERM
// then stops it cleanly (exit 0).
func TestMainSignals(t *testing.T) {
	for _, mode := range []string{"none", "watch"} {
		t.Run(mode, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), mainChildEnv+"="+mode)
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			var stderr strings.Builder
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cmd.Process.Kill() })
			lines := make(chan string)
			go func() {
				defer close(lines)
				sc := bufio.NewScanner(out)
				for sc.Scan() {
					lines <- sc.Text()
				}
			}()
			expect := func(want string) {
				t.Helper()
				select {
				case got, ok := <-lines:
					if !ok || got != want {
						t.Fatalf("child said %q (open %v); want %q; stderr %q", got, ok, want, stderr.String())
					}
				case <-time.After(30 * time.Second):
					t.Fatalf("after 30s: the child has not said %q; stderr %q", want, stderr.String())
				}
			}
			expect("ready")
			if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
				t.Fatal(err)
			}
			if mode == "watch" {
				expect("reloaded")
			}
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			for range lines { // until the child closes stdout
			}
			if err := cmd.Wait(); err != nil {
				var exit *exec.ExitError
				if errors.As(err, &exit) {
					t.Fatalf("child ended with %v after SIGHUP then SIGTERM; want exit 0; stderr %q", exit.ProcessState, stderr.String())
				}
				t.Fatal(err)
			}
		})
	}
}
