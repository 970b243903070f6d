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
	"syscall"

	"github.com/edgecount/edgecount/config"
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
