package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/edgecount/edgecount/cmd/internal/cli"
)

// TestVersion: --version prints the build line and returns before the
// configuration is read (the missing file is not reported), so before
// anything could start.
func TestVersion(t *testing.T) {
	var stdout, stderr strings.Builder
	getenv := func(k string) string { return map[string]string{"EDGECOUNT_CONFIG": "/nonexistent/edge.yaml"}[k] }
	err := run(context.Background(), []string{"--version", "--http", "127.0.0.1:0"}, getenv, &stdout, &stderr)
	if !errors.Is(err, cli.ErrVersion) {
		t.Fatalf("run --version = %v; want cli.ErrVersion", err)
	}
	if out := stdout.String(); !strings.HasPrefix(out, "edge-agent version=") || strings.Count(out, "\n") != 1 || stderr.Len() > 0 {
		t.Errorf("run --version: stdout %q, stderr %q; want one line starting edge-agent version=", out, stderr.String())
	}
}
