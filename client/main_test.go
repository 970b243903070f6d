package client_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that the tests leave no goroutine behind: a closed
// Batcher has ended its sending loop, and the test servers and the
// clients' idle connections are closed.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
