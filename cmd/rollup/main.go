// Command rollup consumes partial-sum partitions from NATS JetStream and
// writes regional and global totals to the store.
//
// With a region file (cassandra.hosts set) it writes to Cassandra; without,
// to an embedded store under --data. The standalone edge-agent runs the
// same rollup in-process.
//
// It also runs the recount job over the partitions it owns (settings
// rollup.recount.*) and serves, next to /healthz, /readyz and /metrics,
// POST /admin/recount for an on-demand recount of given ids. The admin
// route has no authentication: keep the rollup's HTTP address private.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/edgecount/edgecount/config"
	"github.com/edgecount/edgecount/httpapi"
	"github.com/edgecount/edgecount/metrics"
	"github.com/edgecount/edgecount/natsjs"
	"github.com/edgecount/edgecount/rollup"
	"github.com/edgecount/edgecount/store/cassandra"
	"github.com/edgecount/edgecount/store/embedded"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "rollup:", err)
		os.Exit(1)
	}
}

// loadConfig builds the configuration from defaults, the --config file,
// EDGECOUNT_* variables and flags (weakest first), listing every problem.
func loadConfig(args []string, getenv func(string) string, stderr io.Writer) (config.Config, error) {
	cfg := config.Default()
	fs := flag.NewFlagSet("rollup", flag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.String("config", getenv("EDGECOUNT_CONFIG"), "YAML configuration `file`, e.g. deploy/regions/us-east.yaml (env EDGECOUNT_CONFIG)")
	httpAddr := fs.String("http", "", "HTTP `address` for /healthz, /readyz, /metrics (default 127.0.0.1:8081; env EDGECOUNT_ROLLUP_HTTP)")
	data := fs.String("data", "", "embedded store `directory` when no Cassandra is configured (env EDGECOUNT_ROLLUP_DATA)")
	natsURL := fs.String("nats", "", "NATS `url` (env EDGECOUNT_NATS_URL)")
	owned := fs.String("owned", "", "comma-separated `partitions` this instance consumes (default: all)")
	level := fs.String("log-level", "", "log `level` (env EDGECOUNT_LOG_LEVEL)")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	if *file != "" {
		if err := cfg.LoadFile(*file); err != nil {
			return cfg, err
		}
	}
	errs := []error{cfg.ApplyEnv(getenv)}
	set := func(v string, dst *string) {
		if v != "" {
			*dst = v
		}
	}
	set(*httpAddr, &cfg.Rollup.HTTP)
	set(*data, &cfg.Rollup.Data)
	set(*natsURL, &cfg.NATS.URL)
	set(*level, &cfg.LogLevel)
	if *owned != "" {
		cfg.Rollup.Owned = nil
		for _, f := range strings.Split(*owned, ",") {
			p, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil {
				errs = append(errs, fmt.Errorf("owned: %q is not a number", f))
				continue
			}
			cfg.Rollup.Owned = append(cfg.Rollup.Owned, p)
		}
	}
	errs = append(errs, cfg.Finish(config.RoleRollup))
	return cfg, errors.Join(errs...)
}

// rollupStore is what the rollup process needs of a store.
type rollupStore interface {
	rollup.RecountStore
	rollup.TrendingStore
	Ping(ctx context.Context) error
	Close() error
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, err := loadConfig(args, getenv, stderr)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: cfg.Level()})).With("component", "rollup")
	var owned []uint32
	for p := 0; p < cfg.Partitions; p++ {
		if len(cfg.Rollup.Owned) == 0 || slices.Contains(cfg.Rollup.Owned, p) {
			owned = append(owned, uint32(p))
		}
	}

	var st rollupStore
	if len(cfg.Cassandra.Hosts) > 0 {
		octx, cancel := context.WithTimeout(ctx, 60*time.Second)
		st, err = cassandra.Open(octx, cfg.CassandraConfig())
		cancel()
	} else {
		if err := os.MkdirAll(cfg.Rollup.Data, 0o750); err != nil {
			return fmt.Errorf("cannot create data directory: %w", err)
		}
		st, err = embedded.Open(embedded.Config{Path: filepath.Join(cfg.Rollup.Data, "edgecount.db"), Timeout: 5 * time.Second})
	}
	if err != nil {
		return err
	}
	defer st.Close()
	bus, err := natsjs.Dial(cfg.ConnConfig("rollup"), logger)
	if err != nil {
		return err
	}
	defer bus.Close()
	stream := cfg.StreamConfig()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err = bus.EnsureStream(sctx, stream)
	cancel()
	if err != nil {
		return err
	}
	ru := rollup.New(st, nil, logger)
	if err := ru.EnableTrending(cfg.RollupTrendingConfig(), st); err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metricErrs := []error{metrics.RegisterRollup(reg, ru), metrics.RegisterRollupTrending(reg, ru)}
	if cs, ok := st.(*cassandra.Store); ok {
		metricErrs = append(metricErrs, metrics.RegisterCassandra(reg, cs), metrics.RegisterStoreDeletes(reg, &cs.Counters().Deletes))
	}

	// Every message is applied through the recounter, which keeps its
	// repairs out of the way of the apply (see rollup/doc.go).
	rcfg := cfg.RecountConfig()
	var (
		consume func(ctx context.Context, h natsjs.Handler) error
		group   *natsjs.GroupConsumer
	)
	if len(cfg.Rollup.Owned) == 0 {
		// Shared partitions: each is pinned to one rollup at a time. The
		// recount repairs the partitions the membership assigns to this
		// rollup (pinned or idle; a repair also needs the item's rows
		// unchanged for the quiet period, which a handover in progress
		// breaks), and trending state of a partition that moves away is
		// dropped.
		gcfg := cfg.GroupConfig(logger)
		gcfg.OnRelease = func(p uint32, handedBack bool) {
			if handedBack {
				// Still the partition's writer: store its last lists.
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				if err := ru.WriteTrendingPartition(ctx, p); err != nil {
					logger.Warn("cannot write the last trending lists of a partition handed back", "partition", p, "err", err)
				}
				cancel()
			}
			ru.ForgetTrending(p)
		}
		group = bus.GroupConsumer(gcfg)
		rcfg.Owned = nil
		rcfg.Owns = func(p uint32) bool { return slices.Contains(group.Assigned(), p) }
		metricErrs = append(metricErrs, metrics.RegisterGroupConsumer(reg, group))
		consume = group.Run
		owned = nil
	} else {
		consumer := bus.Consumer(cfg.ConsumerConfig(logger))
		rcfg.Owned = owned
		metricErrs = append(metricErrs, metrics.RegisterConsumer(reg, consumer))
		consume = func(ctx context.Context, h natsjs.Handler) error { return consumer.Run(ctx, owned, h) }
	}
	rc, err := rollup.NewRecounter(ru, st, rcfg, logger)
	if err != nil {
		return err
	}
	metricErrs = append(metricErrs, metrics.RegisterRecount(reg, rc))
	if err := errors.Join(metricErrs...); err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"status":"ok"}`+"\n")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if err := errors.Join(st.Ping(r.Context()), bus.Ping(r.Context())); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "{\"status\":\"unavailable\",\"error\":%q}\n", err.Error())
			return
		}
		io.WriteString(w, `{"status":"ready"}`+"\n")
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.Handle("/admin/", httpapi.NewAdmin(rc, logger))
	ln, err := net.Listen("tcp", cfg.Rollup.HTTP)
	if err != nil {
		return fmt.Errorf("cannot listen on %s: %w", cfg.Rollup.HTTP, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	if group != nil {
		fmt.Fprintf(stdout, "edgecount rollup listening on http://%s nats=%s member=%s sharing %d partitions (handover within %v)\n",
			ln.Addr(), cfg.NATS.URL, group.MemberID(), cfg.Partitions, group.Config().HandoverBound())
	} else {
		fmt.Fprintf(stdout, "edgecount rollup listening on http://%s nats=%s partitions=%v\n", ln.Addr(), cfg.NATS.URL, owned)
	}

	// The recount job and the trending writer run beside the consumer and
	// stop with it.
	rctx, stopRecount := context.WithCancel(ctx)
	recountDone, trendingDone := make(chan error, 1), make(chan struct{})
	go func() { recountDone <- rc.Run(rctx) }()
	go func() { defer close(trendingDone); ru.RunTrending(rctx) }()
	// The consumer runs until ctx ends; a message being applied when the
	// signal arrives is finished or left unacknowledged for redelivery.
	runErr := consume(ctx, func(ctx context.Context, seq uint64, data []byte) error {
		err := rc.Handle(ctx, seq, data)
		if errors.Is(err, rollup.ErrPoison) {
			return natsjs.Permanent(err)
		}
		return err
	})
	stopRecount()
	<-trendingDone
	if group == nil {
		// The last trending lists of the partitions applied since the
		// last periodic write (a group member wrote each partition's as
		// it handed the partition back).
		tctx, cancelT := context.WithTimeout(context.Background(), 10*time.Second)
		if err := ru.WriteTrending(tctx); err != nil {
			logger.Warn("cannot write the last trending lists", "err", err)
		}
		cancelT()
	}
	if err := <-recountDone; err != nil {
		logger.Warn("recount stopped with an error", "err", err)
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		logger.Warn("cannot stop http cleanly", "err", err)
	}
	if runErr != nil {
		return fmt.Errorf("consumer: %w", runErr)
	}
	logger.Info("stopped")
	return nil
}
