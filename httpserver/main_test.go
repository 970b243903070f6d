package httpserver_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/edgecount/edgecount/internal/testenv"
)

// TestMain checks that the tests leave no goroutine behind but fasthttp's
// Date clock (testenv.FasthttpDate): a Server that was shut down has ended
// its sweeper and its connections' goroutines.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testenv.FasthttpDate) }
