package main

import (
	"testing"

	"github.com/edgecount/edgecount/cmd/internal/cli/clitest"
)

// TestVersion: -version prints the build line and returns without
// connecting to Cassandra (192.0.2.1, TEST-NET-1, would never answer).
func TestVersion(t *testing.T) {
	clitest.CheckVersion(t, "index-migrate", run, []string{"-version", "-hosts", "192.0.2.1"}, nil)
}
