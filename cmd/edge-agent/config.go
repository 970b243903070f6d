package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/edgecount/edgecount/config"
)

// loadConfig builds the configuration from defaults, the --config file,
// EDGECOUNT_* environment variables and flags (weakest first), and
// validates it, listing every problem.
func loadConfig(args []string, getenv func(string) string, stderr io.Writer) (config.Config, error) {
	cfg := config.Default()
	fs := flag.NewFlagSet("edge-agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		file     = fs.String("config", getenv("EDGECOUNT_CONFIG"), "YAML configuration `file`, e.g. deploy/regions/us-east.yaml (env EDGECOUNT_CONFIG)")
		httpAddr = fs.String("http", "", "HTTP listen `address` (default 127.0.0.1:8080; env EDGECOUNT_HTTP)")
		data     = fs.String("data", "", "data `directory` (default ./data; env EDGECOUNT_DATA)")
		region   = fs.String("region", "", "region `name` (default local; env EDGECOUNT_REGION)")
		agentID  = fs.String("agent-id", "", "agent `id` (default <region>-<hostname>; env EDGECOUNT_AGENT_ID)")
		flush    = fs.Duration("flush-interval", 0, "counter flush `interval` (default 1s; env EDGECOUNT_FLUSH_INTERVAL)")
		logLevel = fs.String("log-level", "", "log `level`: debug, info, warn, error (env EDGECOUNT_LOG_LEVEL)")
	)
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
	set := func(v string, dst *string) {
		if v != "" {
			*dst = v
		}
	}
	set(*httpAddr, &cfg.Agent.HTTP)
	set(*data, &cfg.Agent.Data)
	set(*region, &cfg.Region)
	set(*agentID, &cfg.Agent.ID)
	set(*logLevel, &cfg.LogLevel)
	if *flush != 0 {
		cfg.Agent.FlushInterval = *flush
	}
	return cfg, errors.Join(envErr, cfg.Finish(config.RoleAgent))
}
