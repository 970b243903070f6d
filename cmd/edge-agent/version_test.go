package main

import (
	"testing"

	"github.com/edgecount/edgecount/cmd/internal/cli/clitest"
)

// TestVersion: --version prints the build line and returns before the
// configuration is read (the missing file is not reported), so before
// anything could start.
func TestVersion(t *testing.T) {
	clitest.CheckVersion(t, "edge-agent", run, []string{"--version", "--http", "127.0.0.1:0"},
		map[string]string{"EDGECOUNT_CONFIG": "/nonexistent/edge.yaml"})
}
