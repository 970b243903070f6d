// Command rollup consumes partial-sum partitions from NATS JetStream and
// writes regional and global totals to the store.
//
// With a region file (cassandra.hosts set) it writes to Cassandra; without,
// to an embedded store under --data. The standalone edge-agent runs the
// same rollup in-process.
//
// It also runs the recount job over the partitions it owns (settings
// rollup.recount.*) and serves, next to /healthz, /readyz and /metrics,
// POST /admin/recount for an on-demand recount of given ids and, with
// debug.pprof, Go's profiles under /debug/pprof/. With a token file
// (auth.tokens_file) both need the admin scope; without one the rollup
// runs open, on a loopback address only unless auth: none.
package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sync/errgroup"

	"github.com/edgecount/edgecount/closer"
	"github.com/edgecount/edgecount/cmd/internal/cli"
	"github.com/edgecount/edgecount/config"
	"github.com/edgecount/edgecount/httpapi"
	"github.com/edgecount/edgecount/httpserver"
	"github.com/edgecount/edgecount/listener"
	"github.com/edgecount/edgecount/metrics"
	"github.com/edgecount/edgecount/natsjs"
	"github.com/edgecount/edgecount/rollupd"
	"github.com/edgecount/edgecount/store/cassandra"
	"github.com/edgecount/edgecount/store/embedded"
)

func main() { cli.Main("rollup", run) }

// loadConfig builds the configuration from defaults, the --config file,
// EDGECOUNT_* variables and flags (weakest first), listing every problem.
// The flags are the rollup's settings in config.Settings, and --version
// (cli.ErrVersion).
func loadConfig(args []string, getenv func(string) string, stdout, stderr io.Writer) (config.Config, error) {
	return cli.LoadConfig("rollup", config.RoleRollup, args, getenv, stdout, stderr)
}

// rollupStore is what the rollup process needs of a store.
type rollupStore interface {
	rollupd.Store
	Ping(ctx context.Context) error
	Close() error
}

// process is a started rollup process: store, broker connection, the
// rollup itself and its HTTP server.
type process struct {
	logger *slog.Logger
	st     rollupStore
	bus    *natsjs.Client
	proc   *rollupd.Process
	srv    *httpserver.Server
	tokens *listener.Watch // reloads the token file; nil when the API runs open
	certs  *listener.Watch // reloads the TLS certificate; nil without TLS
	ln     net.Listener
}

// startTimeout bounds the start-up (store, broker, stream); a signal ends
// it sooner.
const startTimeout = 60 * time.Second

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, err := loadConfig(args, getenv, stdout, stderr)
	if err != nil {
		return err
	}
	logger := cli.Logger(stderr, cfg).With("component", "rollup")
	p, err := start(ctx, cfg, logger)
	if err != nil {
		return cli.StartFailed(ctx, logger, err)
	}
	if g := p.proc.Group(); g != nil {
		fmt.Fprintf(stdout, "edgecount rollup listening on %s://%s nats=%s member=%s sharing %d partitions (handover within %v)\n",
			p.srv.Scheme(), p.ln.Addr(), cfg.NATS.URL, g.MemberID(), cfg.Partitions, g.Config().HandoverBound())
	} else {
		fmt.Fprintf(stdout, "edgecount rollup listening on %s://%s nats=%s partitions=%v\n", p.srv.Scheme(), p.ln.Addr(), cfg.NATS.URL, p.proc.Partitions())
	}
	if err := p.run(ctx); err != nil {
		return err
	}
	logger.Info("stopped")
	return nil
}

// start opens the store, connects to the broker, builds the rollup and
// listens. On error it closes what it had opened.
func start(ctx context.Context, cfg config.Config, logger *slog.Logger) (_ *process, err error) {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	p := &process{logger: logger}
	defer func() {
		if err != nil {
			p.close()
		}
	}()
	if p.st, err = openStore(ctx, cfg); err != nil {
		return nil, err
	}
	if p.bus, err = natsjs.DialContext(ctx, cfg.ConnConfig("rollup"), logger); err != nil {
		return nil, err
	}
	// The stream it consumes: the hub stream sourcing every region's, or
	// the agents' stream on one broker.
	if err := p.bus.EnsureStream(ctx, cfg.HubStreamConfig()); err != nil {
		return nil, err
	}
	var owned []uint32 // none: share every partition with the group
	for part := 0; part < cfg.Partitions && len(cfg.Rollup.Owned) > 0; part++ {
		if slices.Contains(cfg.Rollup.Owned, part) {
			owned = append(owned, uint32(part))
		}
	}
	if cs, ok := p.st.(*cassandra.Store); ok && len(owned) == 0 {
		// A member whose write timestamps are off the others' by more
		// than the fence margin can lose its writes to theirs after a
		// handover (docs/rollup-ownership.md): it does not join.
		gc := cfg.GroupConfig(nil)
		skew, err := cs.CheckClock(ctx, cmp.Or(gc.FenceMargin, gc.Consumer.AckWait/3)/2)
		switch {
		case errors.Is(err, cassandra.ErrClockSkew):
			return nil, err
		case err != nil:
			logger.Warn("cannot compare this host's clock with Cassandra's; starting without the check", "err", err)
		default:
			logger.Info("clock compared with Cassandra's", "skew", skew.Round(time.Millisecond))
		}
	}
	if p.proc, err = rollupd.New(p.bus, p.st, rollupd.ConfigFrom(cfg, owned, logger)); err != nil {
		return nil, err
	}
	reg := metrics.NewRegistry()
	metricErrs := []error{p.proc.RegisterMetrics(reg), metrics.RegisterNATSClient(reg, p.bus)}
	if hub := cfg.HubStreamConfig(); hub.Hub != nil {
		metricErrs = append(metricErrs, metrics.RegisterHubSources(reg, p.bus, hub))
	}
	if cs, ok := p.st.(*cassandra.Store); ok {
		metricErrs = append(metricErrs, metrics.RegisterCassandra(reg, cs), metrics.RegisterStoreDeletes(reg, &cs.Counters().Deletes))
	}
	if err := errors.Join(metricErrs...); err != nil {
		return nil, err
	}
	st, bus := p.st, p.bus
	handler, err := httpapi.NewRollup(func(ctx context.Context) error {
		return errors.Join(st.Ping(ctx), bus.Ping(ctx))
	}, promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}), p.proc.Recounter(), logger)
	if err != nil {
		return nil, err
	}
	if cfg.Debug.Pprof {
		handler = httpapi.Profiling(handler)
		logger.Info("serving profiles (debug.pprof)", "path", httpapi.ProfilingPrefix)
	}
	if handler, p.tokens, err = listener.Authenticate(cfg.Auth, cfg.Rollup.HTTP, handler, reg, logger); err != nil {
		return nil, err
	}
	tlsCerts, certWatch, err := listener.TLS("rollup.tls", cfg.Rollup.TLS, reg, logger)
	if err != nil {
		return nil, err
	}
	p.certs = certWatch
	p.srv = httpserver.New(handler, httpserver.Config{ReadTimeout: 30 * time.Second, Logger: logger, TLS: tlsCerts})
	if p.ln, err = net.Listen("tcp", cfg.Rollup.HTTP); err != nil {
		return nil, fmt.Errorf("cannot listen on %s: %w", cfg.Rollup.HTTP, err)
	}
	return p, nil
}

// openStore opens the Cassandra store cfg names, or the embedded one under
// the data directory. On error the store is nil, not a nil pointer in the
// interface (which close would call).
func openStore(ctx context.Context, cfg config.Config) (rollupStore, error) {
	if len(cfg.Cassandra.Hosts) > 0 {
		st, err := cassandra.Open(ctx, cfg.CassandraConfig())
		if err != nil {
			return nil, err
		}
		return st, nil
	}
	st, err := embedded.OpenDir(cfg.Rollup.Data)
	if err != nil {
		return nil, err
	}
	return st, nil
}

// httpStopTimeout bounds the wait for HTTP requests in flight at stop.
const httpStopTimeout = 10 * time.Second

// run runs the rollup and the HTTP server under one errgroup until ctx
// ends or one of them fails, and stops in this order:
//
//  1. stop intake: the consumer stops pulling (a message being applied is
//     finished or left unacknowledged for redelivery), the recount job and
//     the trending writer stop;
//  2. final flush: the trending lists of what was applied since the last
//     periodic write are stored (rollupd.Process.Run);
//  3. the HTTP server stops (it answered /metrics and /readyz until now);
//  4. drain NATS: the connection flushes pending acks and closes;
//  5. close the store.
//
// It returns the first component's error, nil after a clean stop.
func (p *process) run(ctx context.Context) error {
	defer p.close()
	g, gctx := errgroup.WithContext(ctx)
	rollupDone := make(chan struct{})
	g.Go(func() error {
		defer close(rollupDone)
		return p.proc.Run(gctx)
	})
	g.Go(func() error {
		if err := p.srv.Serve(p.ln); !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("http: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		<-rollupDone // ctx ended or a component failed, and the rollup has stopped
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), httpStopTimeout)
		defer cancel()
		if err := p.srv.Shutdown(sctx); err != nil {
			p.logger.Warn("cannot stop http cleanly", "err", err)
		}
		return nil
	})
	return g.Wait()
}

// close drains the broker connection and closes the store (steps 4 and 5
// of run), or releases what a failed start had opened.
func (p *process) close() {
	if p.ln != nil {
		p.ln.Close() // closed already if it was served
	}
	p.tokens.Close()
	p.certs.Close()
	if p.bus != nil {
		closer.Close(p.logger, p.bus, "drain broker connection")
	}
	if p.st != nil {
		closer.Close(p.logger, p.st, "close store")
	}
}
