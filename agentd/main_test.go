package agentd

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/edgecount/edgecount/internal/testenv"
)

// TestMain checks that the tests leave no goroutine behind but fasthttp's
// Date clock (testenv.FasthttpDate).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testenv.FasthttpDate) }

// TestFailedComponentFailsTheProcess: a component that stops on its own
// (here the HTTP listener) stops the node, and Wait's error reports it, so
// the process exits non-zero.
func TestFailedComponentFailsTheProcess(t *testing.T) {
	n := startTestNode(t, t.TempDir(), time.Second)
	n.ln.Close()
	err := testenv.Within(t, 30*time.Second, "the node to stop after its HTTP listener failed", func() error {
		return n.Wait(context.Background(), 30*time.Second)
	})
	if err == nil || !strings.Contains(err.Error(), "http:") {
		t.Fatalf("wait = %v, want the HTTP server's error", err)
	}
}
