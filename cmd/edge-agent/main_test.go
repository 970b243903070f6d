package main

import (
	"bytes"
	"context"
	"io"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/edgecount/edgecount/internal/testenv"
)

// TestMain checks that the tests leave no goroutine behind but fasthttp's
// Date clock (testenv.FasthttpDate).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testenv.FasthttpDate) }

// TestSignalDuringStartUp: a signal while the node starts ends the start-up
// at once, cleanly, without serving.
func TestSignalDuringStartUp(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var stdout bytes.Buffer
	start := time.Now()
	err := run(ctx, []string{"--http", "127.0.0.1:0", "--data", t.TempDir()}, func(string) string { return "" }, &stdout, io.Discard)
	if err != nil {
		t.Fatalf("run = %v, want nil (a requested stop)", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("run took %v after the signal, want a prompt return", took)
	}
	if stdout.Len() > 0 {
		t.Errorf("run started serving after the signal: %q", stdout.String())
	}
}
