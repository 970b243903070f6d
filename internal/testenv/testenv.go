package testenv

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"testing"
	"time"
)

// DialTimeout bounds the connection attempt of NeedService.
const DialTimeout = 2 * time.Second

// InCI reports whether the tests run under CI (CI=true).
func InCI() bool { return os.Getenv("CI") == "true" }

// Addr returns the value of the environment variable env, or def when it
// is unset or empty.
func Addr(env, def string) string {
	if v := os.Getenv(env); v != "" {
		return v
	}
	return def
}

// NeedService makes sure that the service name (e.g. "Redis") accepts TCP
// connections at addr. When it does not, it fails t under CI and skips it
// otherwise; both messages name startCommand, the command that starts the
// service.
func NeedService(t testing.TB, name, addr, startCommand string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, DialTimeout)
	if err == nil {
		c.Close()
		return
	}
	Unavailable(t, fmt.Sprintf("%s not reachable at %s (%v); start it with %s", name, addr, err, startCommand))
}

// Unavailable fails t with msg under CI and skips it with msg otherwise:
// the rule for a test whose environment lacks something it needs (a
// service, a binary). msg should say how to provide it.
func Unavailable(t testing.TB, msg string) {
	t.Helper()
	if InCI() {
		t.Fatal(msg + " (fails under CI=true)")
	}
	t.Skip(msg)
}

// Eventually calls cond until it reports done, and fails t when it has not
// after timeout, with the state cond last saw before the state wanted:
//
//	after 10s: got 2 rows; want 3 rows stored
//
// got describes what cond sees now; what describes the state waited for.
// The first poll comes at once, and the interval between polls grows from
// a millisecond to 10 ms, so a fast condition is seen fast and a slow one
// costs little.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() (got string, done bool)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for wait := time.Millisecond; ; wait = min(2*wait, 10*time.Millisecond) {
		got, done := cond()
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: got %s; want %s", timeout, got, what)
		}
		time.Sleep(wait)
	}
}

// Until adapts a condition that has nothing to say about what it sees to
// Eventually: its failure reads "got not yet; want <what>".
func Until(cond func() bool) func() (string, bool) {
	return func() (string, bool) { return "not yet", cond() }
}

// UntilEmpty adapts a condition that describes what is still wrong, and
// returns "" once nothing is, to Eventually: its failure reads
// "got <the last complaint>; want <what>".
func UntilEmpty(cond func() string) func() (string, bool) {
	return func() (string, bool) {
		msg := cond()
		return msg, msg == ""
	}
}

// Within calls f in a goroutine of its own and returns f's error, or fails
// t when f has not returned after timeout:
//
//	after 30s: still waiting for the node to stop after its listener failed
//
// what describes f's return (e.g. "the node to stop after its listener
// failed"). On failure f's goroutine is left running.
func Within(t testing.TB, timeout time.Duration, what string, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(timeout):
		t.Fatalf("after %v: still waiting for %s", timeout, what)
		return nil
	}
}

// NeedCommand returns the program a test needs: the path in the environment
// variable env when it is set, else the first of names found on PATH. When
// there is none it fails t under CI and skips it otherwise; both messages
// name installCommand, the command that installs it.
func NeedCommand(t testing.TB, env string, names []string, installCommand string) string {
	t.Helper()
	if p := os.Getenv(env); p != "" {
		if _, err := exec.LookPath(p); err != nil {
			Unavailable(t, fmt.Sprintf("%s=%s: %v; unset it, or install one with %s", env, p, err, installCommand))
		}
		return p
	}
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	Unavailable(t, fmt.Sprintf("none of %v on PATH (nor %s set); install one with %s", names, env, installCommand))
	return ""
}
