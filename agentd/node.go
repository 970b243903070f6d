package agentd

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

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sync/errgroup"

	"github.com/edgecount/edgecount/closer"
	"github.com/edgecount/edgecount/config"
	"github.com/edgecount/edgecount/directory"
	redisdir "github.com/edgecount/edgecount/directory/redis"
	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/gossip"
	"github.com/edgecount/edgecount/httpapi"
	"github.com/edgecount/edgecount/httpserver"
	"github.com/edgecount/edgecount/listener"
	"github.com/edgecount/edgecount/metrics"
	"github.com/edgecount/edgecount/natsjs"
	"github.com/edgecount/edgecount/region"
	"github.com/edgecount/edgecount/rollupd"
	"github.com/edgecount/edgecount/store/cassandra"
	"github.com/edgecount/edgecount/store/embedded"
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

// Node is one edge-agent process: see the package documentation for what
// it holds in each mode, how it starts and in which order it stops.
type Node struct {
	cfg    config.Config // as started: the agent id is the one recorded
	logger *slog.Logger
	reg    *prometheus.Registry
	// opened releases what the start opened, in reverse order: the end of
	// Shutdown, or the undoing of a failed start.
	opened closer.Stack

	epoch     uint64 // of this run, recorded in the data directory
	store     agentStore
	broker    *natsjs.Server // standalone only
	bus       *natsjs.Client
	stream    natsjs.StreamConfig // the stream the agent publishes to
	rollup    *rollupd.Process    // standalone only
	directory *redisdir.Directory // with Redis only
	agent     *region.Agent
	pub       *natsjs.Publisher       // the agent's flushes
	rows      *natsjs.RowSubscription // the rollups' row pushes
	ln        net.Listener
	gossip    *gossip.Node      // with gossip.bind only
	certs     *httpserver.Certs // the listener's certificate; nil without TLS
	httpSrv   *httpserver.Server

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

// Start opens or connects to everything cfg names and starts serving, in
// the steps the package documentation lists. On error it closes what it
// had opened, in reverse order. ctx bounds the start-up only.
func Start(ctx context.Context, cfg config.Config, logger *slog.Logger) (_ *Node, err error) {
	n := &Node{cfg: cfg, logger: logger, reg: metrics.NewRegistry()}
	defer func() {
		if err != nil {
			n.opened.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	for _, step := range []func(context.Context) error{
		// The listener's certificate first: one that does not load fails
		// the start before anything opens.
		n.loadTLS,
		// The identity the data directory records, the store, the bus
		// and, standalone, the in-process rollup.
		n.loadIdentity,
		n.openStore,
		n.openBus,
		n.buildRollup,
		// The agent and its log.
		n.buildAgent,
		// HTTP, and gossip, which tells the peers the HTTP address.
		n.listen,
		n.joinGossip,
		n.registerMetrics,
		n.buildHTTP,
	} {
		if err := step(ctx); err != nil {
			return nil, err
		}
	}
	n.startComponents(max(n.cfg.Agent.FlushInterval, time.Second))
	mode := "standalone"
	if !n.cfg.Standalone() {
		mode = "region"
	}
	logger.Info("started", "component", "edge-agent", "mode", mode, "region", n.cfg.Region,
		"agent", n.cfg.Agent.ID, "http", n.Addr(), "partitions", n.cfg.Partitions)
	return n, nil
}

// loadTLS loads the listener's certificate (agent.tls), which SIGHUP
// reloads from then on. Without one the API is plain HTTP.
func (n *Node) loadTLS(context.Context) error {
	certs, watch, err := listener.TLS("agent.tls", n.cfg.Agent.TLS, n.reg, n.logger)
	if err != nil {
		return err
	}
	if watch != nil {
		n.opened.PushCloser(n.logger, watch, "stop the certificate reloads")
	}
	n.certs = certs
	return nil
}

// loadIdentity takes the agent id from the data directory (made there on
// the first start; a configured id that differs from the recorded one is
// refused) and records the epoch of this run, before anything is named
// after them.
func (n *Node) loadIdentity(context.Context) error {
	configured := n.cfg.Agent.ID
	if n.cfg.Agent.IDDefaulted {
		configured = ""
	}
	ident, err := region.LoadIdentity(n.cfg.Agent.Data, configured, n.cfg.Agent.ID, time.Now())
	if err != nil {
		return err
	}
	n.cfg.Agent.ID, n.cfg.Agent.IDDefaulted = ident.ID, false
	n.epoch = ident.Epoch
	return nil
}

// openStore opens the embedded store of the data directory (standalone)
// or connects to the region's Cassandra.
func (n *Node) openStore(ctx context.Context) error {
	var err error
	if n.cfg.Standalone() {
		n.store, err = embedded.OpenDir(n.cfg.Agent.Data)
	} else {
		n.store, err = cassandra.Open(ctx, n.cfg.CassandraConfig())
	}
	if err != nil {
		return err
	}
	n.opened.PushCloser(n.logger, n.store, "close store")
	if cs, ok := n.store.(*cassandra.Store); ok {
		// Reaction tokens carry this host's second; settles assume the
		// writers' clocks agree within engagement.WriterSkew.
		if skew, err := cs.CheckClock(ctx, engagement.WriterSkew/2); err != nil {
			n.logger.Warn("this host's clock and Cassandra's disagree (or cannot be compared)", "skew", skew.Round(time.Millisecond), "err", err)
		}
	}
	return nil
}

// openBus starts the embedded NATS JetStream server under the data
// directory and connects to it (standalone), or dials the region's NATS,
// and makes sure the stream the agent publishes to exists.
func (n *Node) openBus(ctx context.Context) error {
	name := "edge-agent-" + n.cfg.Agent.ID
	var err error
	if n.cfg.Standalone() {
		if err := n.startBroker(); err != nil {
			return err
		}
		n.bus, err = n.broker.Client(name)
	} else {
		n.bus, err = natsjs.DialContext(ctx, n.cfg.AgentConnConfig(name), n.logger)
	}
	if err != nil {
		return err
	}
	n.opened.Push(n.closeBus)
	n.stream = n.cfg.StreamConfig()
	return n.bus.EnsureStream(ctx, n.stream)
}

// startBroker starts the embedded NATS JetStream server: on a random
// loopback port, or on agent.nats_listen.
func (n *Node) startBroker() error {
	scfg := natsjs.DefaultServerConfig(filepath.Join(n.cfg.Agent.Data, "nats"))
	scfg.Port = 0
	if n.cfg.Agent.NATSListen != "" {
		host, port, _ := net.SplitHostPort(n.cfg.Agent.NATSListen)
		scfg.Host = host
		scfg.Port, _ = strconv.Atoi(port)
	}
	scfg.Logger = n.logger.With("component", "nats-server")
	broker, err := natsjs.StartServer(scfg)
	if err != nil {
		return err
	}
	n.broker = broker
	n.opened.Push(broker.Shutdown)
	return nil
}

// buildRollup builds the in-process rollup of a standalone node, which
// consumes every partition; it runs from startComponents on. In a region
// the rollups are processes of their own.
func (n *Node) buildRollup(context.Context) error {
	if !n.cfg.Standalone() {
		return nil
	}
	parts := make([]uint32, n.cfg.Partitions)
	for p := range parts {
		parts[p] = uint32(p)
	}
	var err error
	n.rollup, err = rollupd.New(n.bus, n.store, rollupd.ConfigFrom(n.cfg, parts, n.logger))
	return err
}

// buildAgent builds the agent on the store, the bus and its shard
// directory, replays its log (re-queues the unacknowledged flushes, adds
// what no flush carries, settles reaction intents) before the first write
// or /readyz 200, starts it and subscribes it to the rollups' row pushes,
// which update the items it keeps warm (docs/read-cache.md).
func (n *Node) buildAgent(ctx context.Context) error {
	checks := []region.Check{{Name: "store", Fn: n.store.Ping}, {Name: "nats", Fn: n.bus.Ping}}
	dir, shards, err := n.openDirectory(ctx)
	if err != nil {
		return err
	}
	if n.directory != nil {
		// Redis down never stops writes: /readyz reports it as degraded.
		checks = append(checks, region.Check{Name: "redis", Fn: n.directory.Ping, Optional: true})
	}
	ac := n.cfg.AgentConfig()
	if ac.Log.Enabled() {
		if ac.Log.ObserveFsync, err = metrics.FsyncObserver(n.reg, n.cfg.Region); err != nil {
			return err
		}
	}
	n.pub = n.bus.Publisher(n.stream)
	if n.agent, err = region.New(ac, region.Deps{
		Reactions:   n.store,
		Stats:       n.store,
		Publisher:   n.pub,
		Directory:   dir,
		ShardWriter: shards,
		Trending:    n.store,
		Checks:      checks,
		Logger:      n.logger,
		Epoch:       n.epoch,
	}); err != nil {
		return err
	}
	n.opened.Push(n.stopAgent)
	if n.directory != nil {
		n.directory.SetOnChange(n.agent.Reshard)
	}
	if err := n.agent.Recover(ctx); err != nil {
		return err
	}
	n.agent.Start()
	n.rows, err = n.bus.SubscribeRows("", func(p natsjs.RowsPush) { n.agent.ApplyPush(p.Partition, p.Sender, p.Seq, p.Written, p.Rows) }, n.logger)
	return err
}

// openDirectory connects to the region's Redis shard directory when one
// is configured, else makes a local one. It returns where the agent looks
// shard counts up and where the hot-counter rule writes them.
func (n *Node) openDirectory(ctx context.Context) (region.Directory, region.ShardWriter, error) {
	if n.cfg.Redis.Addr == "" {
		local := directory.NewLocal(1)
		return local, local, nil
	}
	redisdir.SetClientLogger(n.logger)
	d, err := redisdir.New(ctx, n.cfg.RedisConfig(), n.logger)
	if err != nil {
		return nil, nil, err
	}
	n.directory = d
	n.opened.PushCloser(n.logger, d, "close directory")
	return d, d, nil
}

// stopAgent stops the agent's loops before the bus and the store close:
// after a failed start; after Shutdown it returns at once.
func (n *Node) stopAgent() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := n.agent.Stop(ctx); err != nil {
		n.logger.Warn("agent stopped with an error", "err", err)
	}
}

// listen opens the HTTP listener; it is served from startComponents on.
func (n *Node) listen(context.Context) error {
	ln, err := net.Listen("tcp", n.cfg.Agent.HTTP)
	if err != nil {
		return fmt.Errorf("cannot listen on %s: %w", n.cfg.Agent.HTTP, err)
	}
	n.ln = ln
	n.opened.Push(func() { ln.Close() }) // closed already if it was served
	return nil
}

// joinGossip joins the region's gossip cluster when gossip.bind is set:
// the region's agents share their trending summaries (the agent answers
// its own region's trending from its own and its peers'), and fresh reads
// ask the peers for their held deltas.
func (n *Node) joinGossip(ctx context.Context) error {
	if n.cfg.Gossip.Bind == "" {
		return nil
	}
	g, err := startGossip(ctx, n.cfg, n.Addr(), n.logger)
	if err != nil {
		return err
	}
	n.gossip = g
	n.opened.PushCloser(n.logger, g, "close gossip")
	n.agent.SetPeers(gossipPeers{g})
	g.SetQueryHandler(n.agent.AnswerHeld)
	n.agent.SetHeldPeers(freshPeers{g})
	return nil
}

// registerMetrics exports the parts' metrics on the node's registry (the
// log's fsync latency and the certificate's are registered as they are
// made; the HTTP API's by the handler).
func (n *Node) registerMetrics(context.Context) error {
	reg := n.reg
	errs := []error{
		metrics.RegisterAgent(reg, n.agent), metrics.RegisterAgentTrending(reg, n.agent), metrics.RegisterAgentLog(reg, n.agent),
		metrics.RegisterFresh(reg, n.agent, n.gossip), metrics.RegisterReadCache(reg, n.agent, n.rows),
		metrics.RegisterPublisher(reg, n.pub), metrics.RegisterNATSClient(reg, n.bus),
	}
	switch st := n.store.(type) {
	case *embedded.Store:
		errs = append(errs, metrics.RegisterStoreDeletes(reg, &st.Counters().Deletes),
			metrics.RegisterEmbeddedCommits(reg, &st.Counters().Writes, &st.Counters().Commits))
	case *cassandra.Store:
		errs = append(errs, metrics.RegisterCassandra(reg, st), metrics.RegisterStoreDeletes(reg, &st.Counters().Deletes))
	}
	if n.rollup != nil {
		errs = append(errs, n.rollup.RegisterMetrics(reg))
	}
	if n.stream.Domain != "" {
		// The region's own stream: the outage budget in use.
		errs = append(errs, metrics.RegisterRegionStream(reg, n.bus, n.stream))
	}
	if n.directory != nil {
		errs = append(errs, metrics.RegisterRedisDirectory(reg, n.directory))
	}
	if n.gossip != nil {
		errs = append(errs, metrics.RegisterGossip(reg, n.gossip))
	}
	return errors.Join(errs...)
}

// buildHTTP builds the HTTP server: the API's handler with /metrics, the
// cluster route (with gossip), the in-process rollup's admin routes
// (standalone; keep the address private) and, with debug.pprof, the
// profiles under /debug/pprof/, behind the bearer-token check (admin scope
// for both), served with the certificate of loadTLS.
func (n *Node) buildHTTP(context.Context) error {
	var routes []httpapi.Option
	if n.gossip != nil {
		routes = append(routes, httpapi.WithCluster(n.gossip))
	}
	if n.rollup != nil {
		routes = append(routes, httpapi.WithAdmin(n.rollup.Recounter()))
	}
	handler, err := httpapi.New(n.agent, httpapi.Config{Region: n.cfg.Region, Regions: n.cfg.Regions, TrendingCounters: n.agent.TrendingCounters()},
		promhttp.HandlerFor(n.reg, promhttp.HandlerOpts{Registry: n.reg}), n.reg, n.logger, routes...)
	if err != nil {
		return err
	}
	if n.cfg.Debug.Pprof {
		handler = httpapi.Profiling(handler)
		n.logger.Info("serving profiles (debug.pprof)", "component", "edge-agent", "path", httpapi.ProfilingPrefix)
	}
	handler, tokens, err := listener.Authenticate(n.cfg.Auth, n.cfg.Agent.HTTP, handler, n.reg, n.logger)
	if err != nil {
		return err
	}
	if tokens != nil {
		n.opened.PushCloser(n.logger, tokens, "stop the token file reloads")
	}
	n.httpSrv = httpserver.New(handler, httpserver.Config{
		ReadTimeout: 30 * time.Second,
		IdleTimeout: 2 * time.Minute,
		Logger:      n.logger,
		TLS:         n.certs,
	})
	return nil
}

// startComponents starts the goroutines of the node under one errgroup:
// the HTTP server, the in-process rollup and the gossip broadcaster (every
// shareEvery). None of them stops before Shutdown stops it, unless it
// fails.
func (n *Node) startComponents(shareEvery time.Duration) {
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
func (n *Node) Addr() string { return n.ln.Addr().String() }

// Scheme is how the API is served: "https" with a certificate, else
// "http".
func (n *Node) Scheme() string { return n.httpSrv.Scheme() }

// AgentID is the agent's id: the one recorded in the data directory.
func (n *Node) AgentID() string { return n.cfg.Agent.ID }

// Failed is done when a component stopped on its own; its error is
// context.Cause(Failed()), and Shutdown returns it.
func (n *Node) Failed() <-chan struct{} { return n.failed.Done() }

// Wait runs the node until ctx ends or a component fails, then shuts it
// down within timeout. It returns the failed component's error and those of
// the steps that did not complete.
func (n *Node) Wait(ctx context.Context, timeout time.Duration) error {
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
//  5. close stores: the directory, the broker, the store (with the rest
//     of what the start opened, in reverse order).
//
// It returns the error of a component that failed, and an error for each
// step that did not complete (the rest still runs).
func (n *Node) Shutdown(ctx context.Context) error {
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
	n.opened.Close()
	if err := errors.Join(errs...); err != nil {
		return errors.Join(failed, fmt.Errorf("cannot stop cleanly: %w", err))
	}
	return failed
}

// closeBus drains the broker connection.
func (n *Node) closeBus() {
	closer.Close(n.logger, n.bus, "drain broker connection")
}
