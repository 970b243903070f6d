package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/edgecount/edgecount/config"
	"github.com/edgecount/edgecount/rollupd"
	"github.com/edgecount/edgecount/store/embedded"
)

// RunFunc is a command's testable body: it runs until ctx ends (a signal)
// or a component fails, and returns nil only after a clean stop.
type RunFunc func(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error

// Main runs run with the process's arguments, environment and standard
// streams under a context that SIGINT or SIGTERM cancels, and exits: 0 after
// a clean stop or -help, 1 with "<name>: <error>" on stderr otherwise.
func Main(name string, run RunFunc) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}

// StartFailed returns the error of a failed start-up, or nil when ctx had
// ended (a signal during the start-up is a clean stop; logged on logger).
func StartFailed(ctx context.Context, logger *slog.Logger, err error) error {
	if ctx.Err() != nil {
		logger.Info("stopped during start-up", "cause", context.Cause(ctx), "err", err)
		return nil
	}
	return err
}

// Flags are a command's own flags: Bind defines them on fs; the function it
// returns applies the ones given to the configuration, after the file and
// the environment, and returns what is wrong with them.
type Flags func(fs *flag.FlagSet) (apply func(cfg *config.Config) error)

// LoadConfig builds the configuration of command name in role from the
// defaults, the --config file, EDGECOUNT_* variables and flags (weakest
// first): --config and --log-level, which every command has, and those of
// flags. It validates the result and lists every problem.
func LoadConfig(name string, role config.Role, args []string, getenv func(string) string, stderr io.Writer, flags Flags) (config.Config, error) {
	cfg := config.Default()
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.String("config", getenv("EDGECOUNT_CONFIG"), "YAML configuration `file`, e.g. deploy/regions/us-east.yaml (env EDGECOUNT_CONFIG)")
	level := fs.String("log-level", "", "log `level`: debug, info, warn, error (env EDGECOUNT_LOG_LEVEL)")
	tokens := fs.String("auth-tokens", "", "bearer token `file` (TOKEN SCOPE[,SCOPE…] [NAME] a line), reloaded on SIGHUP (env EDGECOUNT_AUTH_TOKENS)")
	tlsCert := fs.String("tls-cert", "", "serve HTTPS with this certificate `file` (PEM; reloaded on SIGHUP; env EDGECOUNT_TLS_CERT, rollup EDGECOUNT_ROLLUP_TLS_CERT)")
	tlsKey := fs.String("tls-key", "", "the certificate's key `file` (PEM; env EDGECOUNT_TLS_KEY, rollup EDGECOUNT_ROLLUP_TLS_KEY)")
	apply := flags(fs)
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
	envErr := cfg.ApplyEnv(getenv)
	Override(&cfg.LogLevel, *level)
	Override(&cfg.Auth.TokensFile, *tokens)
	listenerTLS := &cfg.Agent.TLS
	if role == config.RoleRollup {
		listenerTLS = &cfg.Rollup.TLS
	}
	Override(&listenerTLS.CertFile, *tlsCert)
	Override(&listenerTLS.KeyFile, *tlsKey)
	flagErr := apply(&cfg)
	return cfg, errors.Join(envErr, flagErr, cfg.Finish(role))
}

// Override sets *dst to v if v is not empty: a flag given wins over the
// file and the environment.
func Override(dst *string, v string) {
	if v != "" {
		*dst = v
	}
}

// Logger returns the process logger: text lines on w at the configured
// level.
func Logger(w io.Writer, cfg config.Config) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: cfg.Level()}))
}

// OpenEmbedded opens (creating it if needed) the embedded store of a
// command's data directory.
func OpenEmbedded(dir string) (*embedded.Store, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("cannot create data directory: %w", err)
	}
	return embedded.Open(embedded.Config{Path: filepath.Join(dir, "edgecount.db"), Timeout: 5 * time.Second})
}

// Registry returns a process's metrics registry, with the Go runtime's and
// the process's collectors.
func Registry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// Close closes c, logging a failure as "cannot <what>": at stop, a part
// that does not close cleanly is reported, and the rest still closes.
func Close(logger *slog.Logger, c io.Closer, what string) {
	if err := c.Close(); err != nil {
		logger.Warn("cannot "+what, "err", err)
	}
}

// RollupConfig is the rollup process's configuration from cfg: it consumes
// partitions alone, or shares every partition with the group when
// partitions is empty.
func RollupConfig(cfg config.Config, partitions []uint32, logger *slog.Logger) rollupd.Config {
	return rollupd.Config{
		Partitions: partitions,
		Group:      cfg.GroupConfig(logger),
		Trending:   cfg.RollupTrendingConfig(),
		Recount:    cfg.RecountConfig(),
		Logger:     logger,
	}
}
