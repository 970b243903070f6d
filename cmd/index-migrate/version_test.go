package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/edgecount/edgecount/cmd/internal/cli"
)

// TestVersion: --version prints the build line and returns without
// connecting to Cassandra (192.0.2.1, TEST-NET-1, would never answer).
func TestVersion(t *testing.T) {
	var stdout, stderr strings.Builder
	err := run(context.Background(), []string{"-version", "-hosts", "192.0.2.1"}, func(string) string { return "" }, &stdout, &stderr)
	if !errors.Is(err, cli.ErrVersion) {
		t.Fatalf("run -version = %v; want cli.ErrVersion", err)
	}
	if out := stdout.String(); !strings.HasPrefix(out, "index-migrate version=") || strings.Count(out, "\n") != 1 || stderr.Len() > 0 {
		t.Errorf("run -version: stdout %q, stderr %q; want one line starting index-migrate version=", out, stderr.String())
	}
}
