package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/edgecount/edgecount/region"
	"github.com/edgecount/edgecount/store"
)

// config is the edge-agent's process configuration. Sources, weakest
// first: defaults, the --config file, EDGECOUNT_* environment variables,
// flags.
type config struct {
	// HTTP is the listen address of the API.
	HTTP string `yaml:"http"`
	// Data is the directory of the embedded store and the embedded broker.
	Data string `yaml:"data"`
	// Region is the region this agent counts for.
	Region string `yaml:"region"`
	// AgentID names the agent in message ids; default "<region>-<hostname>".
	AgentID string `yaml:"agent_id"`
	// Regions lists every region whose totals may be read; the own region
	// is always included.
	Regions []string `yaml:"regions"`
	// Partitions of the partial-sum stream; must match the rollup's.
	Partitions int `yaml:"partitions"`
	// FlushInterval is how often counters are flushed to the broker.
	FlushInterval time.Duration `yaml:"flush_interval"`
	// CacheTTL is how long a read of totals is cached.
	CacheTTL time.Duration `yaml:"cache_ttl"`
	// ShutdownTimeout bounds the whole graceful stop.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
	// LogLevel is debug, info, warn or error.
	LogLevel string `yaml:"log_level"`
	// NATSListen, when set, makes the embedded broker listen on this
	// loopback address as well (e.g. 127.0.0.1:4222) for tools; by default
	// it takes in-process connections only.
	NATSListen string `yaml:"nats_listen"`
}

func defaultConfig() config {
	return config{
		HTTP:            "127.0.0.1:8080",
		Data:            "./data",
		Region:          "local",
		Partitions:      16,
		FlushInterval:   time.Second,
		CacheTTL:        100 * time.Millisecond,
		ShutdownTimeout: 30 * time.Second,
		LogLevel:        "info",
	}
}

// loadConfig builds the configuration from defaults, file, environment and
// flags, and validates it, listing every problem.
func loadConfig(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	cfg := defaultConfig()
	fs := flag.NewFlagSet("edge-agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		configFile = fs.String("config", getenv("EDGECOUNT_CONFIG"), "YAML configuration `file` (env EDGECOUNT_CONFIG)")
		httpAddr   = fs.String("http", "", "HTTP listen `address` (default 127.0.0.1:8080; env EDGECOUNT_HTTP)")
		data       = fs.String("data", "", "data `directory` (default ./data; env EDGECOUNT_DATA)")
		regionName = fs.String("region", "", "region `name` (default local; env EDGECOUNT_REGION)")
		agentID    = fs.String("agent-id", "", "agent `id` (default <region>-<hostname>; env EDGECOUNT_AGENT_ID)")
		flush      = fs.Duration("flush-interval", 0, "counter flush `interval` (default 1s; env EDGECOUNT_FLUSH_INTERVAL)")
		logLevel   = fs.String("log-level", "", "log `level`: debug, info, warn, error (env EDGECOUNT_LOG_LEVEL)")
	)
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	if *configFile != "" {
		raw, err := os.ReadFile(*configFile)
		if err != nil {
			return cfg, fmt.Errorf("cannot read config: %w", err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(raw))
		dec.KnownFields(true)
		if err := dec.Decode(&cfg); err != nil && !errors.Is(err, io.EOF) {
			return cfg, fmt.Errorf("cannot parse config %s: %w", *configFile, err)
		}
	}
	var errs []error
	envString := func(name string, dst *string) {
		if v := getenv(name); v != "" {
			*dst = v
		}
	}
	envString("EDGECOUNT_HTTP", &cfg.HTTP)
	envString("EDGECOUNT_DATA", &cfg.Data)
	envString("EDGECOUNT_REGION", &cfg.Region)
	envString("EDGECOUNT_AGENT_ID", &cfg.AgentID)
	envString("EDGECOUNT_LOG_LEVEL", &cfg.LogLevel)
	if v := getenv("EDGECOUNT_FLUSH_INTERVAL"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("EDGECOUNT_FLUSH_INTERVAL: %w", err))
		}
		cfg.FlushInterval = d
	}
	if v := getenv("EDGECOUNT_PARTITIONS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("EDGECOUNT_PARTITIONS: %w", err))
		}
		cfg.Partitions = n
	}
	flagString := func(v string, dst *string) {
		if v != "" {
			*dst = v
		}
	}
	flagString(*httpAddr, &cfg.HTTP)
	flagString(*data, &cfg.Data)
	flagString(*regionName, &cfg.Region)
	flagString(*agentID, &cfg.AgentID)
	flagString(*logLevel, &cfg.LogLevel)
	if *flush != 0 {
		cfg.FlushInterval = *flush
	}
	if cfg.AgentID == "" {
		host, _ := os.Hostname()
		cfg.AgentID = cfg.Region + "-" + strings.ReplaceAll(host, "/", "_")
		if host == "" || !store.ValidID(cfg.AgentID) {
			cfg.AgentID = cfg.Region + "-agent"
		}
	}
	if !contains(cfg.Regions, cfg.Region) {
		cfg.Regions = append(cfg.Regions, cfg.Region)
	}
	errs = append(errs, cfg.validate())
	return cfg, errors.Join(errs...)
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func (c config) validate() error {
	var errs []error
	if _, _, err := net.SplitHostPort(c.HTTP); err != nil {
		errs = append(errs, fmt.Errorf("http %q: %w", c.HTTP, err))
	}
	if c.Data == "" {
		errs = append(errs, errors.New("data: must not be empty"))
	}
	for _, r := range c.Regions {
		if !store.ValidRegion(r) {
			errs = append(errs, fmt.Errorf("regions: %q is not a valid region name", r))
		}
	}
	if c.ShutdownTimeout <= 0 {
		errs = append(errs, fmt.Errorf("shutdown_timeout %v: must be positive", c.ShutdownTimeout))
	}
	if _, err := parseLevel(c.LogLevel); err != nil {
		errs = append(errs, err)
	}
	if c.NATSListen != "" {
		if _, _, err := net.SplitHostPort(c.NATSListen); err != nil {
			errs = append(errs, fmt.Errorf("nats_listen %q: %w", c.NATSListen, err))
		}
	}
	errs = append(errs, c.agentConfig().Validate())
	return errors.Join(errs...)
}

func (c config) agentConfig() region.Config {
	ac := region.DefaultConfig(c.Region, c.AgentID)
	ac.Partitions = c.Partitions
	ac.FlushInterval = c.FlushInterval
	ac.CacheTTL = c.CacheTTL
	return ac
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return l, fmt.Errorf("log_level %q: want debug, info, warn or error", s)
	}
	return l, nil
}
