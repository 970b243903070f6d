package testenv

import (
	"errors"
	"fmt"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"
)

// recorder is a testing.TB that records how a helper ended the test.
type recorder struct {
	testing.TB
	fatal, skip string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatal(args ...any) { r.fatal = fmt.Sprint(args...); runtime.Goexit() }

func (r *recorder) Fatalf(format string, args ...any) {
	r.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (r *recorder) Skip(args ...any) { r.skip = fmt.Sprint(args...); runtime.Goexit() }

// run calls f with a recorder in a goroutine of its own, as the testing
// package runs a test, and returns the recorder.
func run(t *testing.T, f func(tb testing.TB)) *recorder {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	return r
}

func TestEventually(t *testing.T) {
	n := 0
	r := run(t, func(tb testing.TB) {
		Eventually(tb, 10*time.Second, "3 polls", func() (string, bool) {
			n++
			return fmt.Sprintf("%d polls", n), n == 3
		})
	})
	if r.fatal != "" || n != 3 {
		t.Fatalf("Eventually of a condition met on the 3rd poll: failed %q after %d polls; want success after 3", r.fatal, n)
	}

	r = run(t, func(tb testing.TB) {
		Eventually(tb, 20*time.Millisecond, "3 rows stored", func() (string, bool) { return "2 rows", false })
	})
	if want := "after 20ms: got 2 rows; want 3 rows stored"; r.fatal != want {
		t.Fatalf("Eventually of a condition never met failed with %q; want %q", r.fatal, want)
	}
}

func TestNeedService(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if r := run(t, func(tb testing.TB) { NeedService(tb, "Thing", addr, "./start-thing") }); r.fatal != "" || r.skip != "" {
		t.Fatalf("NeedService of a listening service: fatal %q, skip %q; want neither", r.fatal, r.skip)
	}
	l.Close()

	for _, ci := range []string{"", "true"} {
		t.Setenv("CI", ci)
		r := run(t, func(tb testing.TB) { NeedService(tb, "Thing", addr, "./start-thing") })
		got := r.skip
		if ci == "true" {
			got = r.fatal
		}
		if !strings.Contains(got, "Thing not reachable at "+addr) || !strings.Contains(got, "./start-thing") {
			t.Fatalf("CI=%q: NeedService of a closed port: fatal %q, skip %q; want the %s to name the service, address and command",
				ci, r.fatal, r.skip, map[string]string{"": "skip", "true": "failure"}[ci])
		}
	}
}

func TestBufferConcurrent(t *testing.T) {
	var b Buffer
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 100 {
			b.Write([]byte("x"))
		}
	}()
	for range 100 {
		_ = b.String()
	}
	<-done
	if got := b.String(); got != strings.Repeat("x", 100) {
		t.Fatalf("Buffer holds %q, want 100 x", got)
	}
}

func TestClock(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 10, 0, 30, 0, time.UTC)
	c := NewClock(t0)
	c.Add(time.Minute)
	if got, want := c.Now(), t0.Add(time.Minute); !got.Equal(want) {
		t.Fatalf("after Add(1m): Now() = %v, want %v", got, want)
	}
	c.Set(t0)
	if got := c.Now(); !got.Equal(t0) {
		t.Fatalf("after Set: Now() = %v, want %v", got, t0)
	}
}

func TestUntilEmpty(t *testing.T) {
	complaints := []string{"2 rows", ""}
	cond := UntilEmpty(func() string { c := complaints[0]; complaints = complaints[1:]; return c })
	if got, done := cond(); got != "2 rows" || done {
		t.Fatalf("first poll = (%q, %v), want (\"2 rows\", false)", got, done)
	}
	if got, done := cond(); got != "" || !done {
		t.Fatalf("second poll = (%q, %v), want (\"\", true)", got, done)
	}
}

func TestWithin(t *testing.T) {
	want := errors.New("stopped")
	if err := Within(t, 10*time.Second, "f to return", func() error { return want }); err != want {
		t.Fatalf("Within of a returning f = %v, want its error %v", err, want)
	}
	release := make(chan struct{})
	defer close(release)
	r := run(t, func(tb testing.TB) {
		Within(tb, 20*time.Millisecond, "f to return", func() error { <-release; return nil })
	})
	if want := "after 20ms: still waiting for f to return"; r.fatal != want {
		t.Fatalf("Within of a hanging f failed with %q; want %q", r.fatal, want)
	}
}

func TestNeedCommand(t *testing.T) {
	t.Setenv("EDGECOUNT_TEST_PROGRAM", "")
	if p := NeedCommand(t, "EDGECOUNT_TEST_PROGRAM", []string{"no-such-program-x", "go"}, "./install-it"); !strings.HasSuffix(p, "go") {
		t.Fatalf("NeedCommand(no-such-program-x, go) = %q; want the path of go", p)
	}
	t.Setenv("EDGECOUNT_TEST_PROGRAM", "go")
	if p := NeedCommand(t, "EDGECOUNT_TEST_PROGRAM", []string{"no-such-program-x"}, "./install-it"); p != "go" {
		t.Fatalf("NeedCommand with EDGECOUNT_TEST_PROGRAM=go = %q; want go", p)
	}
	for _, env := range []string{"", "/no/such/program"} {
		t.Setenv("EDGECOUNT_TEST_PROGRAM", env)
		for _, ci := range []string{"", "true"} {
			t.Setenv("CI", ci)
			r := run(t, func(tb testing.TB) {
				NeedCommand(tb, "EDGECOUNT_TEST_PROGRAM", []string{"no-such-program-x"}, "./install-it")
			})
			got := r.skip
			if ci == "true" {
				got = r.fatal
			}
			if !strings.Contains(got, "./install-it") || (ci == "true") != (r.fatal != "") {
				t.Fatalf("EDGECOUNT_TEST_PROGRAM=%q CI=%q: NeedCommand of a missing program: fatal %q, skip %q; want the %s to name the install command",
					env, ci, r.fatal, r.skip, map[string]string{"": "skip", "true": "failure"}[ci])
			}
		}
	}
}
