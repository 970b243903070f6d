package cassandra

import (
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain checks that closed stores leave no goroutine behind. The
// driver's connection pool sleeps up to 131 ms after a failed fill before
// it ends (hostConnPool.fillingStopped), and a loaded machine stretches
// that past goleak's own retries: a leak stays a leak after 15 s.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		var err error
		for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(250 * time.Millisecond) {
			if err = goleak.Find(); err == nil || time.Now().After(deadline) {
				break
			}
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "goleak: errors on a successful test run: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
