package region

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that every test leaves no goroutine behind: a stopped
// Agent, flusher or hot-counter loop has ended all of its own.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
