package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/edgecount/edgecount/directory"
	"github.com/edgecount/edgecount/httpapi"
	"github.com/edgecount/edgecount/metrics"
	"github.com/edgecount/edgecount/natsjs"
	"github.com/edgecount/edgecount/region"
	"github.com/edgecount/edgecount/rollup"
	"github.com/edgecount/edgecount/store/embedded"
)

// standalone is one process holding every part of a region: the embedded
// store, an embedded NATS JetStream server, the rollup consuming every
// partition, the agent and its HTTP API.
type standalone struct {
	logger   *slog.Logger
	store    *embedded.Store
	broker   *natsjs.Server
	bus      *natsjs.Client
	consumer *natsjs.Consumer
	parts    []uint32
	agent    *region.Agent
	httpSrv  *http.Server
	ln       net.Listener

	stopRollup context.CancelFunc
	wg         sync.WaitGroup
	failed     chan error
}

// startStandalone opens or creates everything under cfg.Data and starts
// serving. On error it stops what it had started.
func startStandalone(cfg config, logger *slog.Logger) (_ *standalone, err error) {
	n := &standalone{logger: logger, failed: make(chan error, 2)}
	defer func() {
		if err != nil {
			n.close()
		}
	}()
	if err := os.MkdirAll(cfg.Data, 0o750); err != nil {
		return nil, fmt.Errorf("cannot create data directory: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	n.store, err = embedded.Open(embedded.Config{Path: filepath.Join(cfg.Data, "edgecount.db"), Timeout: 5 * time.Second})
	if err != nil {
		return nil, err
	}

	scfg := natsjs.DefaultServerConfig(filepath.Join(cfg.Data, "nats"))
	scfg.Port = 0
	if cfg.NATSListen != "" {
		host, port, _ := net.SplitHostPort(cfg.NATSListen)
		scfg.Host = host
		fmt.Sscan(port, &scfg.Port)
	}
	scfg.Logger = logger.With("component", "nats-server")
	n.broker, err = natsjs.StartServer(scfg)
	if err != nil {
		return nil, err
	}
	n.bus, err = n.broker.Client("edge-agent-" + cfg.AgentID)
	if err != nil {
		return nil, err
	}
	stream := natsjs.DefaultStreamConfig()
	stream.Partitions = cfg.Partitions
	if err := n.bus.EnsureStream(ctx, stream); err != nil {
		return nil, err
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	// Rollup: consumes every partition.
	ru := rollup.New(n.store, nil, logger)
	n.consumer = n.bus.Consumer(natsjs.ConsumerConfig{Stream: stream, Logger: logger})
	for p := 0; p < cfg.Partitions; p++ {
		n.parts = append(n.parts, uint32(p))
	}
	rctx, rcancel := context.WithCancel(context.Background())
	n.stopRollup = rcancel
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		err := n.consumer.Run(rctx, n.parts, func(ctx context.Context, seq uint64, data []byte) error {
			err := ru.Handle(ctx, seq, data)
			if errors.Is(err, rollup.ErrPoison) {
				return natsjs.Permanent(err)
			}
			return err
		})
		if err != nil {
			n.failed <- fmt.Errorf("rollup consumer: %w", err)
		}
	}()

	// Agent.
	n.agent, err = region.New(cfg.agentConfig(), region.Deps{
		Reactions: n.store,
		Stats:     n.store,
		Publisher: n.bus.Publisher(stream),
		Directory: directory.NewLocal(1),
		Checks: []region.Check{
			{Name: "store", Fn: n.store.Ping},
			{Name: "nats", Fn: n.bus.Ping},
		},
		Logger: logger,
	})
	if err != nil {
		return nil, err
	}
	n.agent.Start()

	for _, f := range []func(prometheus.Registerer) error{
		func(r prometheus.Registerer) error { return metrics.RegisterAgent(r, n.agent) },
		func(r prometheus.Registerer) error { return metrics.RegisterRollup(r, ru) },
		func(r prometheus.Registerer) error { return metrics.RegisterConsumer(r, n.consumer) },
	} {
		if err := f(reg); err != nil {
			return nil, err
		}
	}
	handler, err := httpapi.New(n.agent, httpapi.Config{Region: cfg.Region, Regions: cfg.Regions},
		promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}), reg, logger)
	if err != nil {
		return nil, err
	}
	n.ln, err = net.Listen("tcp", cfg.HTTP)
	if err != nil {
		return nil, fmt.Errorf("cannot listen on %s: %w", cfg.HTTP, err)
	}
	n.httpSrv = &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		if err := n.httpSrv.Serve(n.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			n.failed <- fmt.Errorf("http: %w", err)
		}
	}()
	logger.Info("started", "component", "edge-agent", "mode", "standalone", "region", cfg.Region,
		"agent", cfg.AgentID, "http", n.Addr(), "data", cfg.Data, "partitions", cfg.Partitions)
	return n, nil
}

// Addr is the HTTP listen address.
func (n *standalone) Addr() string { return n.ln.Addr().String() }

// Failed delivers the error of a component that stopped on its own.
func (n *standalone) Failed() <-chan error { return n.failed }

// Shutdown stops in order: HTTP intake, the agent's final flush and
// publish, the rollup once it has applied everything published, the
// broker connection, the broker, the store.
func (n *standalone) Shutdown(ctx context.Context) error {
	var errs []error
	if err := n.httpSrv.Shutdown(ctx); err != nil {
		errs = append(errs, fmt.Errorf("cannot stop http: %w", err))
	}
	if err := n.agent.Stop(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := n.waitApplied(ctx); err != nil {
		errs = append(errs, err)
	}
	n.close()
	return errors.Join(errs...)
}

// waitApplied waits until the rollup has applied every published message.
func (n *standalone) waitApplied(ctx context.Context) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		pending, err := n.consumer.Pending(ctx, n.parts)
		if err == nil && pending == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("rollup did not apply %d pending messages before stopping (they are kept by the broker and applied at next start): %w", pending, ctx.Err())
		case <-t.C:
		}
	}
}

// close releases everything that was started, in reverse order. It is used
// both by Shutdown and on a failed start.
func (n *standalone) close() {
	if n.httpSrv != nil {
		n.httpSrv.Close()
	} else if n.ln != nil {
		n.ln.Close()
	}
	if n.stopRollup != nil {
		n.stopRollup()
	}
	n.wg.Wait()
	if n.bus != nil {
		if err := n.bus.Close(); err != nil {
			n.logger.Warn("cannot drain broker connection", "err", err)
		}
	}
	if n.broker != nil {
		n.broker.Shutdown()
	}
	if n.store != nil {
		if err := n.store.Close(); err != nil {
			n.logger.Warn("cannot close store", "err", err)
		}
	}
}
