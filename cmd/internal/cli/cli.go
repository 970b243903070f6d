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
	"strconv"
	"syscall"

	"github.com/edgecount/edgecount/buildinfo"
	"github.com/edgecount/edgecount/config"
)

// RunFunc is a command's testable body: it runs until ctx ends (a signal)
// or a component fails, and returns nil only after a clean stop.
type RunFunc func(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error

// Main runs run with the process's arguments, environment and standard
// streams under a context that SIGINT or SIGTERM cancels, and exits: 0 after
// a clean stop, -help or --version, 1 with "<name>: <error>" on stderr
// otherwise. SIGHUP is ignored but by what reloads on it (tokens, TLS,
// gossip keys: each calls signal.Notify while it runs).
func Main(name string, run RunFunc) {
	// Go's default for SIGHUP is to die of it, and a process with nothing
	// to reload (no token file, no TLS, no gossip) would: a reload
	// (systemctl reload) would stop it for good, since systemd counts a
	// death by SIGHUP as a clean exit and does not restart it.
	signal.Ignore(syscall.SIGHUP)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) && !errors.Is(err, ErrVersion) {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}

// ErrVersion is returned, like flag.ErrHelp after -help, by a command
// that was asked for --version: it printed its build line and did nothing
// else. Main exits 0 on it.
var ErrVersion = errors.New("version printed")

// DefineVersion defines --version on fs, the flag set of the command name,
// and returns what to call once fs is parsed: if the flag was given, it
// prints the build's line (buildinfo.Info.Line) on stdout and returns
// ErrVersion, before anything is read or started; else it returns nil.
func DefineVersion(fs *flag.FlagSet, name string, stdout io.Writer) (check func() error) {
	asked := fs.Bool("version", false, "print the build (version, revision, Go version, platform) and exit")
	return func() error {
		if !*asked {
			return nil
		}
		if _, err := fmt.Fprintln(stdout, buildinfo.Read().Line(name)); err != nil {
			return fmt.Errorf("cannot print the version: %w", err)
		}
		return ErrVersion
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

// LoadConfig builds the configuration of command name in role from the
// defaults, the --config file, EDGECOUNT_* variables and flags (weakest
// first): --config, and a flag for every setting of config.Settings that
// role's command has, with its usage from there. It validates the result
// and lists every problem. Flag errors and -help's usage go to stderr;
// with --version it prints the build line on stdout and returns
// ErrVersion, having read no file and no variable but EDGECOUNT_CONFIG.
func LoadConfig(name string, role config.Role, args []string, getenv func(string) string, stdout, stderr io.Writer) (config.Config, error) {
	cfg := config.Default()
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.String("config", getenv("EDGECOUNT_CONFIG"), "YAML configuration `file`, e.g. deploy/regions/us-east.yaml (env EDGECOUNT_CONFIG)")
	version := DefineVersion(fs, name, stdout)
	var flags []func(*config.Config) error
	for _, s := range config.Settings() {
		if s.HasFlag(role) {
			flags = append(flags, defineFlag(fs, s))
		}
	}
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if err := version(); err != nil {
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
	var flagErrs []error
	for _, apply := range flags {
		flagErrs = append(flagErrs, apply(&cfg))
	}
	return cfg, errors.Join(envErr, errors.Join(flagErrs...), cfg.Finish(role))
}

// defineFlag defines s's flag on fs and returns what applies it. A
// duration, an integer or a bool is parsed by package flag, so a malformed
// one fails the parse; any other value is parsed when applied, with every
// other problem. A flag left at its zero value ("", 0) leaves the setting
// as the file and the environment made it. A bool flag is given alone
// (--debug-pprof) or with its value (--debug-pprof=false, which turns off
// what the file or the environment turned on); not given, it leaves the
// setting alone.
func defineFlag(fs *flag.FlagSet, s config.Setting) (apply func(*config.Config) error) {
	switch s.Kind() {
	case config.KindBool:
		b := new(boolFlag)
		fs.Var(b, s.Flag, s.Usage())
		return func(c *config.Config) error { return setGiven(c, s, b.given, strconv.FormatBool(b.value)) }
	case config.KindDuration:
		d := fs.Duration(s.Flag, 0, s.Usage())
		return func(c *config.Config) error { return setGiven(c, s, *d != 0, d.String()) }
	case config.KindInt:
		n := fs.Int(s.Flag, 0, s.Usage())
		return func(c *config.Config) error { return setGiven(c, s, *n != 0, strconv.Itoa(*n)) }
	default:
		v := fs.String(s.Flag, "", s.Usage())
		return func(c *config.Config) error { return setGiven(c, s, *v != "", *v) }
	}
}

// boolFlag is a bool flag that knows whether it was given.
type boolFlag struct{ given, value bool }

func (b *boolFlag) String() string   { return strconv.FormatBool(b.value) }
func (b *boolFlag) IsBoolFlag() bool { return true } // --name alone is --name=true

func (b *boolFlag) Set(v string) error {
	x, err := strconv.ParseBool(v)
	if err != nil {
		return errors.New("want true or false") // package flag names the flag and the value
	}
	b.given, b.value = true, x
	return nil
}

// setGiven sets s in c to v if the flag was given a value.
func setGiven(c *config.Config, s config.Setting, given bool, v string) error {
	if !given {
		return nil
	}
	return s.Set(c, s.Flag, v)
}

// Logger returns the process logger: records at the configured level
// (log_level) on w, as key=value lines or, with log_format json, as one
// JSON object a line. cfg is validated (LoadConfig): any format but json
// is text.
func Logger(w io.Writer, cfg config.Config) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.Level()}
	if cfg.LogFormat == config.LogJSON {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
