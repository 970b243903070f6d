// Command rollup consumes partial-sum partitions from NATS JetStream and
// writes regional and global totals to the store.
//
// Until the Cassandra store lands, the rollup process writes to an embedded
// store under --data; the standalone edge-agent runs the same rollup
// in-process.
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
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/edgecount/edgecount/metrics"
	"github.com/edgecount/edgecount/natsjs"
	"github.com/edgecount/edgecount/rollup"
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

type config struct {
	HTTP       string
	Data       string
	NATS       string
	Partitions int
	Owned      []uint32
	LogLevel   slog.Level
}

func envOr(getenv func(string) string, name, def string) string {
	if v := getenv(name); v != "" {
		return v
	}
	return def
}

func loadConfig(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("rollup", flag.ContinueOnError)
	fs.SetOutput(stderr)
	httpAddr := fs.String("http", envOr(getenv, "EDGECOUNT_HTTP", "127.0.0.1:8081"), "HTTP `address` for /healthz, /readyz, /metrics (env EDGECOUNT_HTTP)")
	data := fs.String("data", envOr(getenv, "EDGECOUNT_DATA", "./data-rollup"), "data `directory` of the embedded store (env EDGECOUNT_DATA)")
	natsURL := fs.String("nats", envOr(getenv, "EDGECOUNT_NATS", "nats://127.0.0.1:4222"), "NATS `url` (env EDGECOUNT_NATS)")
	parts := fs.Int("partitions", 16, "partitions of the partial-sum stream (must match the agents')")
	owned := fs.String("owned", "", "comma-separated `partitions` this instance consumes (default: all)")
	level := fs.String("log-level", envOr(getenv, "EDGECOUNT_LOG_LEVEL", "info"), "log `level`")
	fs.String("config", "", "YAML configuration file (not yet read by the rollup; flags and environment only)")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	cfg := config{HTTP: *httpAddr, Data: *data, NATS: *natsURL, Partitions: *parts}
	var errs []error
	if _, _, err := net.SplitHostPort(cfg.HTTP); err != nil {
		errs = append(errs, fmt.Errorf("http %q: %w", cfg.HTTP, err))
	}
	if cfg.Partitions < 1 || cfg.Partitions > 4096 {
		errs = append(errs, fmt.Errorf("partitions %d: want 1..4096", cfg.Partitions))
	}
	if err := cfg.LogLevel.UnmarshalText([]byte(*level)); err != nil {
		errs = append(errs, fmt.Errorf("log-level %q: want debug, info, warn or error", *level))
	}
	if *owned == "" {
		for p := 0; p < cfg.Partitions; p++ {
			cfg.Owned = append(cfg.Owned, uint32(p))
		}
	} else {
		for _, s := range strings.Split(*owned, ",") {
			p, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil || p < 0 || p >= cfg.Partitions {
				errs = append(errs, fmt.Errorf("owned: %q is not a partition in 0..%d", s, cfg.Partitions-1))
				continue
			}
			cfg.Owned = append(cfg.Owned, uint32(p))
		}
	}
	return cfg, errors.Join(errs...)
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, err := loadConfig(args, getenv, stderr)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: cfg.LogLevel})).With("component", "rollup")

	if err := os.MkdirAll(cfg.Data, 0o750); err != nil {
		return fmt.Errorf("cannot create data directory: %w", err)
	}
	st, err := embedded.Open(embedded.Config{Path: filepath.Join(cfg.Data, "edgecount.db"), Timeout: 5 * time.Second})
	if err != nil {
		return err
	}
	defer st.Close()
	bus, err := natsjs.Dial(natsjs.ConnConfig{URL: cfg.NATS, Name: "rollup"}, logger)
	if err != nil {
		return err
	}
	defer bus.Close()
	stream := natsjs.DefaultStreamConfig()
	stream.Partitions = cfg.Partitions
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err = bus.EnsureStream(sctx, stream)
	cancel()
	if err != nil {
		return err
	}
	ru := rollup.New(st, nil, logger)
	consumer := bus.Consumer(natsjs.ConsumerConfig{Stream: stream, Logger: logger})

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if err := errors.Join(metrics.RegisterRollup(reg, ru), metrics.RegisterConsumer(reg, consumer)); err != nil {
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
	ln, err := net.Listen("tcp", cfg.HTTP)
	if err != nil {
		return fmt.Errorf("cannot listen on %s: %w", cfg.HTTP, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	fmt.Fprintf(stdout, "edgecount rollup listening on http://%s nats=%s partitions=%v\n", ln.Addr(), cfg.NATS, cfg.Owned)

	// The consumer runs until ctx ends; a message being applied when the
	// signal arrives is finished or left unacknowledged for redelivery.
	runErr := consumer.Run(ctx, cfg.Owned, func(ctx context.Context, seq uint64, data []byte) error {
		err := ru.Handle(ctx, seq, data)
		if errors.Is(err, rollup.ErrPoison) {
			return natsjs.Permanent(err)
		}
		return err
	})
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
