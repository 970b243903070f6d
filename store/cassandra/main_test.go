package cassandra

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that closed stores leave no goroutine behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
