package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/edgecount/edgecount/config"
	"github.com/edgecount/edgecount/directory"
	redisdir "github.com/edgecount/edgecount/directory/redis"
	"github.com/edgecount/edgecount/gossip"
	"github.com/edgecount/edgecount/httpapi"
	"github.com/edgecount/edgecount/metrics"
	"github.com/edgecount/edgecount/natsjs"
	"github.com/edgecount/edgecount/region"
	"github.com/edgecount/edgecount/rollup"
	"github.com/edgecount/edgecount/store/cassandra"
	"github.com/edgecount/edgecount/store/embedded"
)

// agentStore is what the agent process needs of a store, embedded or
// Cassandra.
type agentStore interface {
	region.ReactionStore
	region.StatsReader
	rollup.RecountStore
	rollup.TrendingStore
	region.TrendingReader
	Ping(ctx context.Context) error
	Close() error
}

// node is one edge-agent process. Standalone, it holds every part of a
// region: the embedded store, an embedded NATS JetStream server, the rollup
// consuming every partition, the agent and its HTTP API. Configured with a
// region file, it connects to the region's NATS, Redis and Cassandra and
// runs the agent alone (rollups are separate processes).
type node struct {
	logger    *slog.Logger
	store     agentStore
	broker    *natsjs.Server // standalone only
	bus       *natsjs.Client
	consumer  *natsjs.Consumer // standalone only
	parts     []uint32
	rollup    *rollup.Rollup      // standalone only
	recount   *rollup.Recounter   // standalone only
	directory *redisdir.Directory // with Redis only
	gossip    *gossip.Node        // with gossip.bind only
	agent     *region.Agent
	httpSrv   *http.Server
	ln        net.Listener

	stopRollup context.CancelFunc
	stopShare  context.CancelFunc
	wg         sync.WaitGroup
	failed     chan error
}

// startNode opens or connects to everything and starts serving. On error
// it stops what it had started.
func startNode(cfg config.Config, logger *slog.Logger) (_ *node, err error) {
	n := &node{logger: logger, failed: make(chan error, 2)}
	defer func() {
		if err != nil {
			n.close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	stream := cfg.StreamConfig()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	var ru *rollup.Rollup
	var regs []error

	if cfg.Standalone() {
		if err := os.MkdirAll(cfg.Agent.Data, 0o750); err != nil {
			return nil, fmt.Errorf("cannot create data directory: %w", err)
		}
		es, err := embedded.Open(embedded.Config{Path: filepath.Join(cfg.Agent.Data, "edgecount.db"), Timeout: 5 * time.Second})
		if err != nil {
			return nil, err
		}
		n.store = es
		regs = append(regs, metrics.RegisterStoreDeletes(reg, &es.Counters().Deletes))
		scfg := natsjs.DefaultServerConfig(filepath.Join(cfg.Agent.Data, "nats"))
		scfg.Port = 0
		if cfg.Agent.NATSListen != "" {
			host, port, _ := net.SplitHostPort(cfg.Agent.NATSListen)
			scfg.Host = host
			scfg.Port, _ = strconv.Atoi(port)
		}
		scfg.Logger = logger.With("component", "nats-server")
		if n.broker, err = natsjs.StartServer(scfg); err != nil {
			return nil, err
		}
		if n.bus, err = n.broker.Client("edge-agent-" + cfg.Agent.ID); err != nil {
			return nil, err
		}
	} else {
		cs, err := cassandra.Open(ctx, cfg.CassandraConfig())
		if err != nil {
			return nil, err
		}
		n.store = cs
		regs = append(regs, metrics.RegisterCassandra(reg, cs), metrics.RegisterStoreDeletes(reg, &cs.Counters().Deletes))
		if n.bus, err = natsjs.Dial(cfg.ConnConfig("edge-agent-"+cfg.Agent.ID), logger); err != nil {
			return nil, err
		}
	}
	if err := n.bus.EnsureStream(ctx, stream); err != nil {
		return nil, err
	}

	if cfg.Standalone() {
		// The rollup consumes every partition in-process.
		ru = rollup.New(n.store, nil, logger)
		if err := ru.EnableTrending(cfg.RollupTrendingConfig(), n.store); err != nil {
			return nil, err
		}
		n.rollup = ru
		// Every message is applied through the recounter, which keeps its
		// repairs out of the way of the apply (see rollup/doc.go).
		rcfg := cfg.RecountConfig()
		rcfg.Owned = nil
		if n.recount, err = rollup.NewRecounter(ru, n.store, rcfg, logger); err != nil {
			return nil, err
		}
		n.consumer = n.bus.Consumer(cfg.ConsumerConfig(logger))
		for p := 0; p < cfg.Partitions; p++ {
			n.parts = append(n.parts, uint32(p))
		}
		rctx, rcancel := context.WithCancel(context.Background())
		n.stopRollup = rcancel
		n.wg.Add(3)
		go func() {
			defer n.wg.Done()
			ru.RunTrending(rctx)
		}()
		go func() {
			defer n.wg.Done()
			if err := n.consumer.Run(rctx, n.parts, rollupHandler(n.recount)); err != nil {
				n.failed <- fmt.Errorf("rollup consumer: %w", err)
			}
		}()
		go func() {
			defer n.wg.Done()
			if err := n.recount.Run(rctx); err != nil {
				logger.Warn("recount stopped with an error", "err", err)
			}
		}()
	}

	checks := []region.Check{{Name: "store", Fn: n.store.Ping}, {Name: "nats", Fn: n.bus.Ping}}
	local := directory.NewLocal(1)
	var (
		dir    region.Directory   = local
		shards region.ShardWriter = local // the hot-counter rule writes here
	)
	if cfg.Redis.Addr != "" {
		rc := redisdir.DefaultConfig()
		rc.Addr, rc.Username, rc.Password, rc.DB, rc.Region = cfg.Redis.Addr, cfg.Redis.Username, cfg.Redis.Password, cfg.Redis.DB, cfg.Region
		redisdir.SetClientLogger(logger)
		if n.directory, err = redisdir.New(ctx, rc, logger); err != nil {
			return nil, err
		}
		dir, shards = n.directory, n.directory
		// Redis down never stops writes: /readyz reports it as degraded.
		checks = append(checks, region.Check{Name: "redis", Fn: n.directory.Ping, Optional: true})
	}
	n.agent, err = region.New(cfg.AgentConfig(), region.Deps{
		Reactions:   n.store,
		Stats:       n.store,
		Publisher:   n.bus.Publisher(stream),
		Directory:   dir,
		ShardWriter: shards,
		Trending:    n.store,
		Checks:      checks,
		Logger:      logger,
	})
	if err != nil {
		return nil, err
	}
	if n.directory != nil {
		n.directory.SetOnChange(n.agent.Reshard)
	}
	n.agent.Start()

	n.ln, err = net.Listen("tcp", cfg.Agent.HTTP)
	if err != nil {
		return nil, fmt.Errorf("cannot listen on %s: %w", cfg.Agent.HTTP, err)
	}
	if cfg.Gossip.Bind != "" {
		// The region's agents share their trending summaries; the agent
		// answers its own region's trending from its own and its peers'.
		if n.gossip, err = startGossip(ctx, cfg, n.Addr(), logger); err != nil {
			return nil, err
		}
		n.agent.SetPeers(gossipPeers{n.gossip})
		sctx, scancel := context.WithCancel(context.Background())
		n.stopShare = scancel
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			shareSummaries(sctx, n.gossip, n.agent, max(cfg.Agent.FlushInterval, time.Second), logger)
		}()
		regs = append(regs, metrics.RegisterGossip(reg, n.gossip))
	}

	regs = append(regs, metrics.RegisterAgent(reg, n.agent), metrics.RegisterAgentTrending(reg, n.agent))
	if ru != nil {
		regs = append(regs, metrics.RegisterRollup(reg, ru), metrics.RegisterRollupTrending(reg, ru),
			metrics.RegisterConsumer(reg, n.consumer), metrics.RegisterRecount(reg, n.recount))
	}
	if n.directory != nil {
		regs = append(regs, metrics.RegisterRedisDirectory(reg, n.directory))
	}
	if err := errors.Join(regs...); err != nil {
		return nil, err
	}
	handler, err := httpapi.New(n.agent, httpapi.Config{Region: cfg.Region, Regions: cfg.Regions, TrendingCounters: n.agent.TrendingCounters()},
		promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}), reg, logger)
	if err != nil {
		return nil, err
	}
	var cluster http.Handler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeJSONError(w, http.StatusNotFound, "this agent runs no gossip (set gossip.bind)")
	})
	if n.gossip != nil {
		cluster = n.gossip.ClusterHandler()
	}
	var admin http.Handler
	if n.recount != nil {
		// The in-process rollup's admin routes (keep the address private).
		admin = httpapi.NewAdmin(n.recount, logger)
	}
	n.httpSrv = &http.Server{
		Handler:           routes(handler, cluster, admin),
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
	mode := "standalone"
	if !cfg.Standalone() {
		mode = "region"
	}
	logger.Info("started", "component", "edge-agent", "mode", mode, "region", cfg.Region,
		"agent", cfg.Agent.ID, "http", n.Addr(), "partitions", cfg.Partitions)
	return n, nil
}

// routes sends /v1/cluster to cluster, /admin/… to admin (when not nil)
// and everything else to the API, which answers its own 404s and the 400
// of a non-canonical path (an http.ServeMux in front would redirect those).
func routes(api, cluster, admin http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch p := r.URL.Path; {
		case p == "/v1/cluster":
			if r.Method != http.MethodGet && r.Method != http.MethodHead {
				w.Header().Set("Allow", "GET, HEAD")
				writeJSONError(w, http.StatusMethodNotAllowed, "method "+r.Method+" is not allowed")
				return
			}
			cluster.ServeHTTP(w, r)
		case admin != nil && strings.HasPrefix(p, "/admin/"):
			admin.ServeHTTP(w, r)
		default:
			api.ServeHTTP(w, r)
		}
	})
}

// writeJSONError answers status with {"error": msg}.
func writeJSONError(w http.ResponseWriter, status int, msg string) {
	b, _ := json.Marshal(map[string]string{"error": msg})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// rollupHandler adapts the rollup to the consumer: a message that can
// never be applied is dropped (terminated), anything else is retried.
func rollupHandler(ru *rollup.Recounter) natsjs.Handler {
	return func(ctx context.Context, seq uint64, data []byte) error {
		err := ru.Handle(ctx, seq, data)
		if errors.Is(err, rollup.ErrPoison) {
			return natsjs.Permanent(err)
		}
		return err
	}
}

// Addr is the HTTP listen address.
func (n *node) Addr() string { return n.ln.Addr().String() }

// Failed delivers the error of a component that stopped on its own.
func (n *node) Failed() <-chan error { return n.failed }

// Shutdown stops in order: HTTP intake, the agent's final flush and
// publish, the rollup once it has applied everything published, the
// broker connection, the broker, the store.
func (n *node) Shutdown(ctx context.Context) error {
	var errs []error
	if err := n.httpSrv.Shutdown(ctx); err != nil {
		errs = append(errs, fmt.Errorf("cannot stop http: %w", err))
	}
	if err := n.agent.Stop(ctx); err != nil {
		errs = append(errs, err)
	}
	if n.gossip != nil {
		// After the final flush: peers drop this agent's summaries now.
		n.stopShare()
		if err := n.gossip.Leave(5 * time.Second); err != nil {
			// Peers then see a failure instead of a leave; nothing is
			// lost (the flush is done), so this does not fail the stop.
			n.logger.Warn("cannot leave the gossip cluster cleanly", "err", err)
		}
	}
	if n.consumer != nil {
		if err := n.waitApplied(ctx); err != nil {
			errs = append(errs, err)
		} else if err := n.rollup.WriteTrending(ctx); err != nil {
			// The lists of the final flush; the next start rebuilds them.
			errs = append(errs, err)
		}
	}
	n.close()
	return errors.Join(errs...)
}

// waitApplied waits until the rollup has applied every published message.
func (n *node) waitApplied(ctx context.Context) error {
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
func (n *node) close() {
	if n.httpSrv != nil {
		n.httpSrv.Close()
	} else if n.ln != nil {
		n.ln.Close()
	}
	if n.stopRollup != nil {
		n.stopRollup()
	}
	if n.stopShare != nil {
		n.stopShare()
	}
	if n.agent != nil {
		// After Shutdown this returns at once; after a failed start it
		// stops the agent's loops before the bus and store close.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		if err := n.agent.Stop(ctx); err != nil {
			n.logger.Warn("agent stopped with an error", "err", err)
		}
		cancel()
	}
	n.wg.Wait()
	if n.gossip != nil {
		if err := n.gossip.Close(); err != nil {
			n.logger.Warn("cannot close gossip", "err", err)
		}
	}
	if n.directory != nil {
		if err := n.directory.Close(); err != nil {
			n.logger.Warn("cannot close directory", "err", err)
		}
	}
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
