// Command edge-agent runs an edgecount edge agent. With no configuration it
// runs standalone: the agent, an embedded NATS JetStream broker, the rollup
// and the embedded store in one process under --data. The process's wiring
// is package agentd.
package main

import (
	"context"
	"fmt"
	"io"

	"github.com/edgecount/edgecount/agentd"
	"github.com/edgecount/edgecount/cmd/internal/cli"
)

func main() { cli.Main("edge-agent", run) }

// run starts the node, runs it until ctx ends (a signal) or a component
// fails, and stops it gracefully (see agentd.Node.Shutdown for the order).
// A signal during the start-up ends it early and is a clean stop.
// --version prints the build line and returns cli.ErrVersion.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, err := loadConfig(args, getenv, stdout, stderr)
	if err != nil {
		return err
	}
	logger := cli.Logger(stderr, cfg)
	n, err := agentd.Start(ctx, cfg, logger)
	if err != nil {
		return cli.StartFailed(ctx, logger, err)
	}
	if cfg.Standalone() {
		fmt.Fprintf(stdout, "edgecount edge-agent (standalone) region=%s listening on %s://%s data=%s\n", cfg.Region, n.Scheme(), n.Addr(), cfg.Agent.Data)
	} else {
		fmt.Fprintf(stdout, "edgecount edge-agent region=%s agent=%s listening on %s://%s\n", cfg.Region, n.AgentID(), n.Scheme(), n.Addr())
	}
	return n.Wait(ctx, cfg.Agent.ShutdownTimeout)
}
