package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sync/errgroup"

	"github.com/edgecount/edgecount/cmd/internal/cli"
	"github.com/edgecount/edgecount/config"
	"github.com/edgecount/edgecount/directory"
	redisdir "github.com/edgecount/edgecount/directory/redis"
	"github.com/edgecount/edgecount/gossip"
	"github.com/edgecount/edgecount/httpapi"
	"github.com/edgecount/edgecount/httpserver"
	"github.com/edgecount/edgecount/metrics"
	"github.com/edgecount/edgecount/natsjs"
	"github.com/edgecount/edgecount/region"
	"github.com/edgecount/edgecount/rollupd"
	"github.com/edgecount/edgecount/store/cassandra"
)

// agentStore is what the agent process needs of a store, embedded or
// Cassandra.
type agentStore interface {
	region.ReactionStore
	region.StatsReader
	rollupd.Store
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
	rollup    *rollupd.Process    // standalone only
	directory *redisdir.Directory // with Redis only
	gossip    *gossip.Node        // with gossip.bind only
	agent     *region.Agent
	rows      *natsjs.RowSubscription // the rollup's row pushes
	agentID   string
	httpSrv   *httpserver.Server
	tokens    *cli.TokenWatch // nil when the API runs open
	certs     *cli.Watch      // reloads the TLS certificate; nil without TLS
	ln        net.Listener

	// The components that run on goroutines (HTTP, the rollup, the
	// gossip broadcaster) run under group; failed is done when one of
	// them failed. Each has its own stop, called in order by Shutdown.
	group      *errgroup.Group
	failed     context.Context
	stopRollup context.CancelFunc
	rollupDone chan struct{}
	stopShare  context.CancelFunc
}

// startTimeout bounds the start-up (store, broker, stream, directory,
// gossip join); ctx (a signal) ends it sooner.
const startTimeout = 60 * time.Second

// startNode opens or connects to everything and starts serving. On error
// it stops what it had started. ctx bounds the start-up only.
func startNode(ctx context.Context, cfg config.Config, logger *slog.Logger) (_ *node, err error) {
	n := &node{logger: logger}
	defer func() {
		if err != nil {
			n.close()
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	stream := cfg.StreamConfig()
	reg := cli.Registry()
	var regs []error
	tlsCerts, certWatch, err := cli.ListenerTLS("agent.tls", cfg.Agent.TLS, reg, logger)
	if err != nil {
		return nil, err
	}
	n.certs = certWatch

	// The data directory decides the agent id (made once) and records the
	// epoch of this run, before anything is named after them.
	configured := cfg.Agent.ID
	if cfg.Agent.IDDefaulted {
		configured = ""
	}
	ident, err := region.LoadIdentity(cfg.Agent.Data, configured, cfg.Agent.ID, time.Now())
	if err != nil {
		return nil, err
	}
	cfg.Agent.ID, cfg.Agent.IDDefaulted = ident.ID, false
	n.agentID = ident.ID

	if cfg.Standalone() {
		es, err := cli.OpenEmbedded(cfg.Agent.Data)
		if err != nil {
			return nil, err
		}
		n.store = es
		regs = append(regs, metrics.RegisterStoreDeletes(reg, &es.Counters().Deletes),
			metrics.RegisterEmbeddedCommits(reg, &es.Counters().Writes, &es.Counters().Commits))
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
		if n.bus, err = natsjs.Dial(cfg.AgentConnConfig("edge-agent-"+cfg.Agent.ID), logger); err != nil {
			return nil, err
		}
	}
	if err := n.bus.EnsureStream(ctx, stream); err != nil {
		return nil, err
	}

	if cfg.Standalone() {
		// The rollup consumes every partition in-process.
		parts := make([]uint32, cfg.Partitions)
		for p := range parts {
			parts[p] = uint32(p)
		}
		if n.rollup, err = rollupd.New(n.bus, n.store, cli.RollupConfig(cfg, parts, logger)); err != nil {
			return nil, err
		}
		regs = append(regs, n.rollup.RegisterMetrics(reg))
	}

	checks := []region.Check{{Name: "store", Fn: n.store.Ping}, {Name: "nats", Fn: n.bus.Ping}}
	local := directory.NewLocal(1)
	var (
		dir    region.Directory   = local
		shards region.ShardWriter = local // the hot-counter rule writes here
	)
	if cfg.Redis.Addr != "" {
		rc := cfg.RedisConfig()
		redisdir.SetClientLogger(logger)
		if n.directory, err = redisdir.New(ctx, rc, logger); err != nil {
			return nil, err
		}
		dir, shards = n.directory, n.directory
		// Redis down never stops writes: /readyz reports it as degraded.
		checks = append(checks, region.Check{Name: "redis", Fn: n.directory.Ping, Optional: true})
	}
	ac := cfg.AgentConfig()
	if ac.Log.Enabled() {
		if ac.Log.ObserveFsync, err = metrics.FsyncObserver(reg, cfg.Region); err != nil {
			return nil, err
		}
	}
	pub := n.bus.Publisher(stream)
	n.agent, err = region.New(ac, region.Deps{
		Reactions:   n.store,
		Stats:       n.store,
		Publisher:   pub,
		Directory:   dir,
		ShardWriter: shards,
		Trending:    n.store,
		Checks:      checks,
		Logger:      logger,
		Epoch:       ident.Epoch,
	})
	if err != nil {
		return nil, err
	}
	if n.directory != nil {
		n.directory.SetOnChange(n.agent.Reshard)
	}
	// Replay the log (re-queue the unacknowledged flushes, add what no
	// flush carries, settle reaction intents) before the first write or
	// /readyz 200.
	if err := n.agent.Recover(ctx); err != nil {
		return nil, err
	}
	n.agent.Start()
	// The rollups push the rows they write; the agent updates the items
	// it keeps warm from them (docs/read-cache.md).
	if n.rows, err = n.bus.SubscribeRows("", func(p natsjs.RowsPush) { n.agent.ApplyPush(p.Partition, p.Sender, p.Seq, p.Written, p.Rows) }, logger); err != nil {
		return nil, err
	}
	regs = append(regs, registerReadCache(reg, n.agent, n.rows))

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
		// Fresh reads ask the peers for their held deltas.
		n.gossip.SetQueryHandler(n.agent.AnswerHeld)
		n.agent.SetHeldPeers(freshPeers{n.gossip})
		regs = append(regs, metrics.RegisterGossip(reg, n.gossip))
	}

	regs = append(regs, registerFresh(reg, n.agent, n.gossip))
	regs = append(regs, metrics.RegisterAgent(reg, n.agent), metrics.RegisterAgentTrending(reg, n.agent), metrics.RegisterAgentLog(reg, n.agent),
		metrics.RegisterPublisher(reg, pub), metrics.RegisterNATSClient(reg, n.bus))
	if stream.Domain != "" {
		// The region's own stream: the outage budget in use.
		regs = append(regs, metrics.RegisterRegionStream(reg, n.bus, stream))
	}
	if n.directory != nil {
		regs = append(regs, metrics.RegisterRedisDirectory(reg, n.directory))
	}
	if err := errors.Join(regs...); err != nil {
		return nil, err
	}
	var routes []httpapi.Option
	if n.gossip != nil {
		routes = append(routes, httpapi.WithCluster(n.gossip))
	}
	if n.rollup != nil {
		// The in-process rollup's admin routes (keep the address private).
		routes = append(routes, httpapi.WithAdmin(n.rollup.Recounter()))
	}
	handler, err := httpapi.New(n.agent, httpapi.Config{Region: cfg.Region, Regions: cfg.Regions, TrendingCounters: n.agent.TrendingCounters()},
		promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}), reg, logger, routes...)
	if err != nil {
		return nil, err
	}
	if handler, n.tokens, err = cli.Authenticate(cfg.Auth, cfg.Agent.HTTP, handler, reg, logger); err != nil {
		return nil, err
	}
	n.httpSrv = httpserver.New(handler, httpserver.Config{
		ReadTimeout: 30 * time.Second,
		IdleTimeout: 2 * time.Minute,
		Logger:      logger,
		TLS:         tlsCerts,
	})
	n.startComponents(max(cfg.Agent.FlushInterval, time.Second))
	mode := "standalone"
	if !cfg.Standalone() {
		mode = "region"
	}
	logger.Info("started", "component", "edge-agent", "mode", mode, "region", cfg.Region,
		"agent", cfg.Agent.ID, "http", n.Addr(), "partitions", cfg.Partitions)
	return n, nil
}

// startComponents starts the goroutines of the node under one errgroup:
// the HTTP server, the in-process rollup and the gossip broadcaster (every
// shareEvery). None of them stops before Shutdown stops it, unless it
// fails.
func (n *node) startComponents(shareEvery time.Duration) {
	n.group, n.failed = errgroup.WithContext(context.Background())
	n.group.Go(func() error {
		if err := n.httpSrv.Serve(n.ln); !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("http: %w", err)
		}
		return nil
	})
	if n.rollup != nil {
		var ctx context.Context
		ctx, n.stopRollup = context.WithCancel(context.Background())
		n.rollupDone = make(chan struct{})
		n.group.Go(func() error {
			defer close(n.rollupDone)
			return n.rollup.Run(ctx)
		})
	}
	if n.gossip != nil {
		var ctx context.Context
		ctx, n.stopShare = context.WithCancel(context.Background())
		n.group.Go(func() error {
			shareSummaries(ctx, n.gossip, n.agent, shareEvery, n.logger)
			return nil
		})
	}
}

// Addr is the HTTP listen address.
func (n *node) Addr() string { return n.ln.Addr().String() }

// Failed is done when a component stopped on its own; its error is
// context.Cause(Failed()), and Shutdown returns it.
func (n *node) Failed() <-chan struct{} { return n.failed.Done() }

// wait runs the node until ctx ends or a component fails, then shuts it
// down within timeout. It returns the failed component's error and those of
// the steps that did not complete.
func (n *node) wait(ctx context.Context, timeout time.Duration) error {
	select {
	case <-ctx.Done():
		n.logger.Info("stopping", "cause", context.Cause(ctx))
	case <-n.Failed():
		n.logger.Error("a component failed, stopping")
	}
	sctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	start := time.Now()
	if err := n.Shutdown(sctx); err != nil {
		return err
	}
	n.logger.Info("stopped", "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// Shutdown stops the node in this order:
//
//  1. stop intake: HTTP takes no new request and finishes those in flight;
//  2. final flush: the agent flushes its counters and publishes its outbox;
//  3. drain NATS: the in-process rollup applies everything published,
//     stops and writes its last trending lists; the broker connection
//     drains and closes;
//  4. leave gossip: peers drop this agent's summaries now rather than when
//     they find it dead;
//  5. close stores: the directory, the broker, the store.
//
// It returns the error of a component that failed, and an error for each
// step that did not complete (the rest still runs).
func (n *node) Shutdown(ctx context.Context) error {
	var errs []error
	if err := n.httpSrv.Shutdown(ctx); err != nil {
		errs = append(errs, fmt.Errorf("cannot stop http: %w", err))
	}
	if err := n.agent.Stop(ctx); err != nil {
		errs = append(errs, err)
	}
	if n.rollup != nil {
		select {
		case <-n.rollupDone: // failed; its error comes from the group
		default:
			if err := n.rollup.WaitApplied(ctx); err != nil {
				errs = append(errs, err)
			}
		}
		n.stopRollup()
		<-n.rollupDone
	}
	n.closeBus()
	if n.gossip != nil {
		n.stopShare()
		if err := n.gossip.Leave(5 * time.Second); err != nil {
			// Peers then see a failure instead of a leave; nothing is
			// lost (the flush is done), so this does not fail the stop.
			n.logger.Warn("cannot leave the gossip cluster cleanly", "err", err)
		}
	}
	failed := n.group.Wait()
	n.close()
	if err := errors.Join(errs...); err != nil {
		return errors.Join(failed, fmt.Errorf("cannot stop cleanly: %w", err))
	}
	return failed
}

// closeBus drains the broker connection.
func (n *node) closeBus() {
	if n.bus != nil {
		cli.Close(n.logger, n.bus, "drain broker connection")
	}
}

// close releases everything that was opened, in reverse order. It ends
// Shutdown, and undoes a failed start (when no component runs yet).
func (n *node) close() {
	if n.ln != nil {
		n.ln.Close() // closed already if it was served
	}
	n.tokens.Close()
	n.certs.Close()
	if n.agent != nil {
		// After Shutdown this returns at once; after a failed start it
		// stops the agent's loops before the bus and store close.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		if err := n.agent.Stop(ctx); err != nil {
			n.logger.Warn("agent stopped with an error", "err", err)
		}
		cancel()
	}
	if n.gossip != nil {
		cli.Close(n.logger, n.gossip, "close gossip")
	}
	if n.directory != nil {
		cli.Close(n.logger, n.directory, "close directory")
	}
	n.closeBus()
	if n.broker != nil {
		n.broker.Shutdown()
	}
	if n.store != nil {
		cli.Close(n.logger, n.store, "close store")
	}
}
