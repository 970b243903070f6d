// Command edge-agent runs an edgecount edge agent. With no configuration it
// runs standalone: the agent, an embedded NATS JetStream broker, the rollup
// and the embedded store in one process under --data.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "edge-agent:", err)
		os.Exit(1)
	}
}

// run starts the node, waits for ctx to end (a signal), and stops it
// gracefully: stop intake, flush, let the rollup apply, close.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, err := loadConfig(args, getenv, stderr)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: cfg.Level()}))
	n, err := startNode(cfg, logger)
	if err != nil {
		return err
	}
	if cfg.Standalone() {
		fmt.Fprintf(stdout, "edgecount edge-agent (standalone) region=%s listening on http://%s data=%s\n", cfg.Region, n.Addr(), cfg.Agent.Data)
	} else {
		fmt.Fprintf(stdout, "edgecount edge-agent region=%s agent=%s listening on http://%s\n", cfg.Region, cfg.Agent.ID, n.Addr())
	}
	select {
	case <-ctx.Done():
		logger.Info("stopping", "cause", context.Cause(ctx))
	case err := <-n.Failed():
		logger.Error("component failed, stopping", "err", err)
	}
	sctx, cancel := context.WithTimeout(context.Background(), cfg.Agent.ShutdownTimeout)
	defer cancel()
	start := time.Now()
	if err := n.Shutdown(sctx); err != nil {
		return fmt.Errorf("cannot stop cleanly: %w", err)
	}
	logger.Info("stopped", "took", time.Since(start).Round(time.Millisecond))
	return nil
}
