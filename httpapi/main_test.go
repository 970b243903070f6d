package httpapi

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/edgecount/edgecount/internal/testenv"
)

// TestMain checks that the tests leave no goroutine behind but fasthttp's
// Date clock (testenv.FasthttpDate): every server, agent and client a test
// starts is stopped by the time it ends.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testenv.FasthttpDate) }
