package main

import (
	"flag"
	"io"

	"github.com/edgecount/edgecount/cmd/internal/cli"
	"github.com/edgecount/edgecount/config"
)

// loadConfig builds the configuration from defaults, the --config file,
// EDGECOUNT_* environment variables and flags (weakest first), and
// validates it, listing every problem.
func loadConfig(args []string, getenv func(string) string, stderr io.Writer) (config.Config, error) {
	return cli.LoadConfig("edge-agent", config.RoleAgent, args, getenv, stderr, func(fs *flag.FlagSet) func(*config.Config) error {
		var (
			httpAddr = fs.String("http", "", "HTTP listen `address` (default 127.0.0.1:8080; env EDGECOUNT_HTTP)")
			data     = fs.String("data", "", "data `directory` (default ./data; env EDGECOUNT_DATA)")
			region   = fs.String("region", "", "region `name` (default local; env EDGECOUNT_REGION)")
			agentID  = fs.String("agent-id", "", "agent `id` (default: the one recorded in --data, made once as <region>-<hostname>-<8 hex>; env EDGECOUNT_AGENT_ID)")
			flush    = fs.Duration("flush-interval", 0, "counter flush `interval` (default 1s; env EDGECOUNT_FLUSH_INTERVAL)")
			durab    = fs.String("durability", "", "when a write is acknowledged: `fsync`, interval or none (default fsync; env EDGECOUNT_DURABILITY)")
			natsURL  = fs.String("nats", "", "NATS `url`: the region's own server, or the system's one broker (default: embedded, standalone; env EDGECOUNT_NATS_URL)")
			domain   = fs.String("nats-domain", "", "JetStream `domain` of the region's own server, a leaf node of the hub (env EDGECOUNT_NATS_DOMAIN)")
		)
		return func(cfg *config.Config) error {
			cli.Override(&cfg.Agent.HTTP, *httpAddr)
			cli.Override(&cfg.Agent.Data, *data)
			cli.Override(&cfg.Region, *region)
			cli.Override(&cfg.Agent.ID, *agentID)
			cli.Override(&cfg.Agent.Durability, *durab)
			cli.Override(&cfg.NATS.URL, *natsURL)
			cli.Override(&cfg.NATS.Domain, *domain)
			if *flush != 0 {
				cfg.Agent.FlushInterval = *flush
			}
			return nil
		}
	})
}
