package wal

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// crashChildEnv, when set, makes the test binary a crash-test child that
// appends to the log in that directory until it is killed.
const (
	crashChildEnv   = "EDGECOUNT_WAL_CRASH_DIR"
	crashSessionEnv = "EDGECOUNT_WAL_CRASH_SESSION"
)

func crashConfig(dir string) Config {
	cfg := DefaultConfig()
	cfg.Dir = dir
	cfg.SegmentBytes = 64 << 10 // rotate often
	cfg.MaxBytes = 256 << 20
	cfg.MaxRecordBytes = 4 << 10
	return cfg
}

// crashChild appends from 4 goroutines in Fsync mode and reports on fd 3
// "A index payload" after each Append returns and "T index" after each
// TruncateBefore returns, until it is killed.
func crashChild() int {
	l, _, err := Open(crashConfig(os.Getenv(crashChildEnv)))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	out := os.NewFile(3, "acks")
	session := os.Getenv(crashSessionEnv)
	var mu sync.Mutex
	var maxAcked atomic.Uint64
	report := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if _, err := fmt.Fprintf(out, format, args...); err != nil {
			os.Exit(4)
		}
	}
	for g := range 4 {
		go func() {
			for i := 0; ; i++ {
				p := fmt.Sprintf("s%s-g%d-%d-%s", session, g, i, strings.Repeat("p", (i*131)%700))
				idx, err := l.Append(context.Background(), []byte(p))
				if err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(3)
				}
				report("A %d %s\n", idx, p)
				if idx > maxAcked.Load() {
					maxAcked.Store(idx) // a race between goroutines only lowers it
				}
			}
		}()
	}
	for {
		time.Sleep(5 * time.Millisecond)
		if m := maxAcked.Load(); m > 200 {
			if err := l.TruncateBefore(m - 200); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 5
			}
			report("T %d\n", m-200)
		}
	}
}

// TestCrashSIGKILL runs a child that appends in Fsync mode, SIGKILLs it at a
// random moment, reopens the log and checks that every index the child
// reported acknowledged (and not truncated) is replayed once, with its
// payload. Five sessions run on one directory, each after the previous kill.
func TestCrashSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the crash test runs child processes")
	}
	dir := t.TempDir()
	acked := map[uint64]string{}
	var truncated uint64
	for session := range 5 {
		lines := runAndKill(t, dir, session, time.Duration(100+rand.IntN(400))*time.Millisecond)
		n := 0
		for _, line := range lines {
			kind, rest, _ := strings.Cut(line, " ")
			switch kind {
			case "A":
				s, p, _ := strings.Cut(rest, " ")
				idx, err := strconv.ParseUint(s, 10, 64)
				if err != nil {
					t.Fatalf("child said %q", line)
				}
				if old, ok := acked[idx]; ok {
					t.Fatalf("index %d acknowledged twice: %.30q… and %.30q…", idx, old, p)
				}
				acked[idx] = p
				n++
			case "T":
				idx, err := strconv.ParseUint(rest, 10, 64)
				if err != nil {
					t.Fatalf("child said %q", line)
				}
				truncated = max(truncated, idx)
			default:
				t.Fatalf("child said %q", line)
			}
		}

		l, rec, err := Open(crashConfig(dir))
		if err != nil {
			t.Fatalf("session %d: Open after SIGKILL: %v", session, err)
		}
		if rec.First < truncated {
			t.Fatalf("session %d: truncation point %d, the child truncated before %d", session, rec.First, truncated)
		}
		replayed := map[uint64]string{}
		seen := map[string]bool{}
		err = l.Replay(0, func(index uint64, payload []byte) error {
			p := string(payload)
			if seen[p] {
				return fmt.Errorf("payload %.30q… replayed twice", p)
			}
			seen[p] = true
			if want, ok := acked[index]; ok && want != p {
				return fmt.Errorf("index %d: replayed %.30q…, acknowledged %.30q…", index, p, want)
			}
			if !strings.HasPrefix(p, "s") {
				return fmt.Errorf("index %d: %.30q… was never appended", index, p)
			}
			replayed[index] = p
			return nil
		})
		if err != nil {
			t.Fatalf("session %d: %v", session, err)
		}
		missing := 0
		for idx := range acked {
			if idx >= rec.First {
				if _, ok := replayed[idx]; !ok {
					missing++
				}
			}
		}
		if missing > 0 {
			t.Fatalf("session %d: %d acknowledged records not replayed (truncation point %d)", session, missing, rec.First)
		}
		t.Logf("session %d: %d acknowledged, killed; replayed %d from %d, problems %v", session, n, len(replayed), rec.First, rec.Problems)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			t.Fatalf("session %d: the child acknowledged nothing", session)
		}
	}
}

// runAndKill starts the crash child on dir, SIGKILLs it after d and returns
// the complete lines it reported.
func runAndKill(t *testing.T, dir string, session int, d time.Duration) []string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+dir, crashSessionEnv+"="+strconv.Itoa(session))
	cmd.ExtraFiles = []*os.File{w}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	var lines []string
	done := make(chan struct{})
	first := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			if len(lines) == 0 {
				close(first)
			}
			lines = append(lines, sc.Text())
		}
	}()
	// The random moment counts from the child's first report: a loaded
	// machine may take longer than d to start it and open the log.
	select {
	case <-first:
	case <-done:
	case <-time.After(30 * time.Second):
	}
	time.Sleep(d)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	werr := cmd.Wait()
	<-done
	if st, ok := cmd.ProcessState.Sys().(interface{ Signaled() bool }); !ok || !st.Signaled() {
		t.Fatalf("child ended before the kill: %v, stderr %s", werr, stderr.String())
	}
	// A line cut by the kill has no newline; bufio.Scanner returns it as a
	// last token, so drop a last line that does not parse.
	if n := len(lines); n > 0 && !completeLine(lines[n-1]) {
		lines = lines[:n-1]
	}
	return lines
}

func completeLine(s string) bool {
	kind, rest, ok := strings.Cut(s, " ")
	if !ok {
		return false
	}
	switch kind {
	case "T":
		_, err := strconv.ParseUint(rest, 10, 64)
		return err == nil
	case "A":
		idx, p, ok := strings.Cut(rest, " ")
		if _, err := strconv.ParseUint(idx, 10, 64); err != nil || !ok {
			return false
		}
		// The payload ends with its padding of (i*131)%700 'p's.
		f := strings.SplitN(p, "-", 4)
		if len(f) != 4 {
			return false
		}
		i, err := strconv.Atoi(f[2])
		return err == nil && len(f[3]) == (i*131)%700
	}
	return false
}
