// Command edge-agent runs an edgecount edge agent. With no configuration it
// runs standalone: the agent, an embedded NATS JetStream broker, the rollup
// and the embedded store in one process under --data.
package main

import (
	"context"
	"fmt"
	"io"

	"github.com/edgecount/edgecount/cmd/internal/cli"
)

func main() { cli.Main("edge-agent", run) }

// run starts the node, runs it until ctx ends (a signal) or a component
// fails, and stops it gracefully (see node.Shutdown for the order). A
// signal during the start-up ends it early and is a clean stop.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, err := loadConfig(args, getenv, stderr)
	if err != nil {
		return err
	}
	logger := cli.Logger(stderr, cfg)
	n, err := startNode(ctx, cfg, logger)
	if err != nil {
		return cli.StartFailed(ctx, logger, err)
	}
	if cfg.Standalone() {
		fmt.Fprintf(stdout, "edgecount edge-agent (standalone) region=%s listening on %s://%s data=%s\n", cfg.Region, n.httpSrv.Scheme(), n.Addr(), cfg.Agent.Data)
	} else {
		fmt.Fprintf(stdout, "edgecount edge-agent region=%s agent=%s listening on %s://%s\n", cfg.Region, n.agentID, n.httpSrv.Scheme(), n.Addr())
	}
	return n.wait(ctx, cfg.Agent.ShutdownTimeout)
}
