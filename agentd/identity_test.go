package agentd

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/edgecount/edgecount/config"
)

// TestAgentIDKeptPerDataDirectory: the id made on first start is kept by
// the next start on the same data directory, another directory gets
// another id, and a configured id that differs from the recorded one
// refuses to start.
func TestAgentIDKeptPerDataDirectory(t *testing.T) {
	dir := t.TempDir()
	n := startTestNode(t, dir, time.Second)
	first := n.AgentID()
	shutdown(t, n)
	n = startTestNode(t, dir, time.Second)
	if n.AgentID() != first {
		t.Errorf("id after a restart = %q, want %q", n.AgentID(), first)
	}
	shutdown(t, n)
	other := startTestNode(t, t.TempDir(), time.Second)
	if other.AgentID() == first {
		t.Errorf("two data directories share the id %q", first)
	}
	shutdown(t, other)
	cfg := testConfig(t, dir, 0, func(cfg *config.Config) { cfg.Agent.ID = "someone-else" })
	if _, err := Start(t.Context(), cfg, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "differs from the one recorded") {
		t.Fatalf("start with another configured id: err = %v, want a refusal naming the recorded id", err)
	}
}
