package main

import (
	"io"

	"github.com/edgecount/edgecount/cmd/internal/cli"
	"github.com/edgecount/edgecount/config"
)

// loadConfig builds the configuration from defaults, the --config file,
// EDGECOUNT_* environment variables and flags (weakest first), and
// validates it, listing every problem. The flags are the agent's settings
// in config.Settings, and --version (cli.ErrVersion).
func loadConfig(args []string, getenv func(string) string, stdout, stderr io.Writer) (config.Config, error) {
	return cli.LoadConfig("edge-agent", config.RoleAgent, args, getenv, stdout, stderr)
}
