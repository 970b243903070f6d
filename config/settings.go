package config

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/edgecount/edgecount/gossip"
	"github.com/edgecount/edgecount/natsjs"
	"github.com/edgecount/edgecount/region"
	"github.com/edgecount/edgecount/rollup"
	"github.com/edgecount/edgecount/store/cassandra"
)

// Setting is one setting of a Config: its YAML key, the EDGECOUNT_*
// variable and the flag that override it, its default and its meaning.
// Settings lists them all; ApplyEnv, the commands' flags (cmd/internal/cli)
// and docs/configuration.md are made from that list.
type Setting struct {
	// Key is the YAML key, dotted: agent.flush_interval.
	Key string
	// Env is the environment variable that overrides the file; empty:
	// none.
	Env string
	// Flag is the name, without dashes, of the flag that overrides the
	// environment in the commands of FlagRoles; empty: none.
	Flag      string
	FlagRoles []Role
	// Meaning says in one line what the setting does. A word in
	// backquotes names the flag's value in its help, as in package flag.
	Meaning string

	field field
	// unset, if set, says what a zero value stands for: the default that
	// the package owning the setting fills in when the value is resolved.
	unset func() string
}

// Kind says how a setting's value is written in an environment variable or
// a flag.
type Kind int

// The kinds of settings.
const (
	KindString      Kind = iota
	KindBool             // strconv.ParseBool
	KindInt              // decimal
	KindInt64            // decimal
	KindDuration         // time.ParseDuration: 1s, 500ms, 2h
	KindList             // comma-separated strings
	KindPartitions       // comma-separated partition numbers
	KindHubSources       // comma-separated region=domain[/stream] (ParseHubSources)
	KindDataCenters      // comma-separated dc=factor
)

// String names k in the configuration reference.
func (k Kind) String() string {
	switch k {
	case KindBool:
		return "bool"
	case KindInt, KindInt64:
		return "integer"
	case KindDuration:
		return "duration"
	case KindList:
		return "list"
	case KindPartitions:
		return "partitions"
	case KindHubSources:
		return "hub sources"
	case KindDataCenters:
		return "dc factors"
	}
	return "string"
}

// Kind returns how the setting's value is written.
func (s Setting) Kind() Kind { return s.field.kind() }

// Get returns the setting's value in c, written as Set takes it.
func (s Setting) Get(c *Config) string { return s.field.get(c) }

// Set parses v and sets the setting in c. A value that does not parse
// leaves what did (the good sources or partitions; zero for a scalar), and
// the error names the value's source, name (an environment variable or a
// flag).
func (s Setting) Set(c *Config, name, v string) error { return s.field.set(c, name, v) }

// Default returns the setting's default as the reference shows it: its
// value in Default(), or what its zero value stands for. Empty: none.
func (s Setting) Default() string {
	d, zero := Default(), Config{}
	if v := s.field.get(&d); v != s.field.get(&zero) || s.unset == nil {
		return v
	}
	return s.unset()
}

// HasFlag reports whether the command of role has the setting's flag.
func (s Setting) HasFlag(role Role) bool {
	return s.Flag != "" && slices.Contains(s.FlagRoles, role)
}

// Usage returns the flag's help: the meaning, the default and the
// environment variable.
func (s Setting) Usage() string {
	var notes []string
	if d := s.Default(); d != "" {
		notes = append(notes, "default "+d)
	}
	if s.Env != "" {
		notes = append(notes, "env "+s.Env)
	}
	if len(notes) == 0 {
		return s.Meaning
	}
	return s.Meaning + " (" + strings.Join(notes, "; ") + ")"
}

// Settings returns every setting, in the order ApplyEnv and the commands
// apply them: the order of the YAML schema, but for rollup.owned,
// member_id and member_ttl, which follow the nats section.
func Settings() []Setting { return slices.Clone(settings) }

// ApplyEnv applies EDGECOUNT_* variables over c and returns every bad one.
// An empty variable is not set.
func (c *Config) ApplyEnv(getenv func(string) string) error {
	var errs []error
	for _, s := range settings {
		if v := getenv(s.Env); s.Env != "" && v != "" {
			errs = append(errs, s.Set(c, s.Env, v))
		}
	}
	return errors.Join(errs...) // drops the nils of the good ones
}

// The commands that have a flag.
var (
	agentFlag  = []Role{RoleAgent}
	rollupFlag = []Role{RoleRollup}
	everyFlag  = []Role{RoleAgent, RoleRollup}
)

// settings is the table of settings (see Settings for its order).
var settings = []Setting{
	{Key: "region", Env: "EDGECOUNT_REGION", Flag: "region", FlagRoles: agentFlag,
		Meaning: "region `name` of this process's agents",
		field:   stringField(func(c *Config) *string { return &c.Region })},
	{Key: "regions", Env: "EDGECOUNT_REGIONS",
		Meaning: "regions whose totals may be read; the own region is always one",
		field:   listField(func(c *Config) *[]string { return &c.Regions }),
		unset:   describe("the own region")},
	{Key: "partitions", Env: "EDGECOUNT_PARTITIONS",
		Meaning: "partitions of the partial-sum stream: the same for every agent and rollup, fixed for a stream",
		field:   intField(func(c *Config) *int { return &c.Partitions })},
	{Key: "log_level", Env: "EDGECOUNT_LOG_LEVEL", Flag: "log-level", FlagRoles: everyFlag,
		Meaning: "log `level`: debug, info, warn or error",
		field:   stringField(func(c *Config) *string { return &c.LogLevel })},
	{Key: "log_format", Env: "EDGECOUNT_LOG_FORMAT", Flag: "log-format", FlagRoles: everyFlag,
		Meaning: "log `format`: text (key=value lines) or json (one object a line)",
		field:   stringField(func(c *Config) *string { return &c.LogFormat })},

	{Key: "agent.http", Env: "EDGECOUNT_HTTP", Flag: "http", FlagRoles: agentFlag,
		Meaning: "HTTP listen `address` of the agent's API",
		field:   stringField(func(c *Config) *string { return &c.Agent.HTTP })},
	{Key: "agent.data", Env: "EDGECOUNT_DATA", Flag: "data", FlagRoles: agentFlag,
		Meaning: "data `directory`: the agent's identity and logs, and in standalone mode the embedded store and broker; one agent per directory",
		field:   stringField(func(c *Config) *string { return &c.Agent.Data })},
	{Key: "agent.id", Env: "EDGECOUNT_AGENT_ID", Flag: "agent-id", FlagRoles: agentFlag,
		Meaning: "agent `id` in message ids; one that differs from the id recorded in agent.data refuses to start",
		field:   stringField(func(c *Config) *string { return &c.Agent.ID }),
		unset:   describe("the one recorded in agent.data, made once as <region>-<hostname>-<8 hex>")},
	{Key: "agent.flush_interval", Env: "EDGECOUNT_FLUSH_INTERVAL", Flag: "flush-interval", FlagRoles: agentFlag,
		Meaning: "counter flush `interval`: how often counters are flushed to the broker",
		field:   durationField(func(c *Config) *time.Duration { return &c.Agent.FlushInterval })},
	{Key: "agent.durability", Env: "EDGECOUNT_DURABILITY", Flag: "durability", FlagRoles: agentFlag,
		Meaning: "when a write is acknowledged: `fsync` (after an fsync of the agent's log), interval (after the write) or none (memory only until flushed)",
		field:   stringField(func(c *Config) *string { return &c.Agent.Durability })},
	{Key: "agent.durability_interval", Env: "EDGECOUNT_DURABILITY_INTERVAL",
		Meaning: "how often the log is fsynced with durability interval",
		field:   durationField(func(c *Config) *time.Duration { return &c.Agent.DurabilityInterval })},
	{Key: "agent.log_max_bytes", Env: "EDGECOUNT_LOG_MAX_BYTES",
		Meaning: "bound of the intake log: when it is full, writes answer 503 with Retry-After",
		field:   int64Field(func(c *Config) *int64 { return &c.Agent.LogMaxBytes })},
	{Key: "agent.cache_ttl",
		Meaning: "how long a read of totals is cached",
		field:   durationField(func(c *Config) *time.Duration { return &c.Agent.CacheTTL })},
	{Key: "agent.cache_ttl_pushed",
		Meaning: "how long a read of totals is cached while the rollups' row pushes arrive whole (docs/read-cache.md)",
		field:   durationField(func(c *Config) *time.Duration { return &c.Agent.CacheTTLPushed })},
	{Key: "agent.fresh_peer_timeout",
		Meaning: "how long a ?consistency=fresh read waits for the region's gossip peers",
		field:   durationField(func(c *Config) *time.Duration { return &c.Agent.FreshPeerTimeout })},
	{Key: "agent.shutdown_timeout",
		Meaning: "bound of the graceful stop",
		field:   durationField(func(c *Config) *time.Duration { return &c.Agent.ShutdownTimeout })},
	{Key: "agent.nats_listen",
		Meaning: "in standalone mode, also expose the embedded broker on this loopback address (for tools)",
		field:   stringField(func(c *Config) *string { return &c.Agent.NATSListen }),
		unset:   describe("none: not exposed")},
	{Key: "agent.tls.cert_file", Env: "EDGECOUNT_TLS_CERT", Flag: "tls-cert", FlagRoles: agentFlag,
		Meaning: "serve HTTPS with this certificate `file` (PEM, then any intermediates; reloaded on SIGHUP)",
		field:   stringField(func(c *Config) *string { return &c.Agent.TLS.CertFile }),
		unset:   describe("none: plain HTTP")},
	{Key: "agent.tls.key_file", Env: "EDGECOUNT_TLS_KEY", Flag: "tls-key", FlagRoles: agentFlag,
		Meaning: "the certificate's private key `file` (PEM)",
		field:   stringField(func(c *Config) *string { return &c.Agent.TLS.KeyFile })},
	{Key: "agent.idempotency.window", Env: "EDGECOUNT_IDEMPOTENCY_WINDOW",
		Meaning: "how long an Idempotency-Key is kept after its write was answered (1s..720h)",
		field:   durationField(func(c *Config) *time.Duration { return &c.Agent.Idempotency.Window })},
	{Key: "agent.idempotency.max_keys", Env: "EDGECOUNT_IDEMPOTENCY_MAX_KEYS",
		Meaning: "bound of the idempotency keys kept; at it the oldest is evicted early",
		field:   intField(func(c *Config) *int { return &c.Agent.Idempotency.MaxKeys })},

	{Key: "rollup.http", Env: "EDGECOUNT_ROLLUP_HTTP", Flag: "http", FlagRoles: rollupFlag,
		Meaning: "HTTP `address` for /healthz, /readyz, /metrics and /admin/recount",
		field:   stringField(func(c *Config) *string { return &c.Rollup.HTTP })},
	{Key: "rollup.data", Env: "EDGECOUNT_ROLLUP_DATA", Flag: "data", FlagRoles: rollupFlag,
		Meaning: "embedded store `directory` when no Cassandra is configured",
		field:   stringField(func(c *Config) *string { return &c.Rollup.Data })},
	{Key: "rollup.recount.interval", Env: "EDGECOUNT_RECOUNT_INTERVAL",
		Meaning: "time between recount passes; 0: on demand only",
		field:   durationField(func(c *Config) *time.Duration { return &c.Rollup.Recount.Interval })},
	{Key: "rollup.recount.stale_after", Env: "EDGECOUNT_RECOUNT_STALE_AFTER",
		Meaning: "an item none of whose totals rows changed for this long is checked by every pass that scans it",
		field:   durationField(func(c *Config) *time.Duration { return &c.Rollup.Recount.StaleAfter })},
	{Key: "rollup.recount.sample", Env: "EDGECOUNT_RECOUNT_SAMPLE",
		Meaning: "recently updated items each pass also checks, at random",
		field:   intField(func(c *Config) *int { return &c.Rollup.Recount.Sample })},
	{Key: "rollup.recount.quiet", Env: "EDGECOUNT_RECOUNT_QUIET",
		Meaning: "bound of the time from a reaction to its delta being applied; a repair waits for it (more than agent.flush_interval)",
		field:   durationField(func(c *Config) *time.Duration { return &c.Rollup.Recount.Quiet }),
		unset: func() string {
			return "the larger of " + formatDuration(defaultQuiet(0)) + " and three agent.flush_interval"
		}},
	{Key: "rollup.recount.batch", Env: "EDGECOUNT_RECOUNT_BATCH",
		Meaning: "totals rows scanned per pass",
		field:   intField(func(c *Config) *int { return &c.Rollup.Recount.Batch })},
	{Key: "rollup.recount.count_budget",
		Meaning: "index entries one count reads per call",
		field:   intField(func(c *Config) *int { return &c.Rollup.Recount.CountBudget }),
		unset:   func() string { return fmt.Sprint(rollup.DefaultRecountConfig().CountBudget) }},
	{Key: "rollup.recount.item_timeout",
		Meaning: "bound of one item's count; an unfinished count resumes at the next pass",
		field:   durationField(func(c *Config) *time.Duration { return &c.Rollup.Recount.ItemTimeout }),
		unset:   func() string { return formatDuration(rollup.DefaultRecountConfig().ItemTimeout) }},
	{Key: "rollup.recount.progress_file",
		Meaning: "file that keeps unfinished counts across restarts (with Cassandra, give each rollup its own)",
		field:   stringField(func(c *Config) *string { return &c.Rollup.Recount.ProgressFile }),
		unset:   describe("recount-progress.json beside the embedded store; none with Cassandra")},
	{Key: "rollup.tls.cert_file", Env: "EDGECOUNT_ROLLUP_TLS_CERT", Flag: "tls-cert", FlagRoles: rollupFlag,
		Meaning: "serve HTTPS with this certificate `file` (PEM, then any intermediates; reloaded on SIGHUP)",
		field:   stringField(func(c *Config) *string { return &c.Rollup.TLS.CertFile }),
		unset:   describe("none: plain HTTP")},
	{Key: "rollup.tls.key_file", Env: "EDGECOUNT_ROLLUP_TLS_KEY", Flag: "tls-key", FlagRoles: rollupFlag,
		Meaning: "the certificate's private key `file` (PEM)",
		field:   stringField(func(c *Config) *string { return &c.Rollup.TLS.KeyFile })},

	{Key: "nats.url", Env: "EDGECOUNT_NATS_URL", Flag: "nats", FlagRoles: everyFlag,
		Meaning: "NATS `url`: the region's own server (agents), the hub (rollups), or the system's one broker",
		field:   stringField(func(c *Config) *string { return &c.NATS.URL }),
		unset:   describe("none: the embedded broker, standalone agent only")},
	{Key: "nats.stream", Env: "EDGECOUNT_NATS_STREAM",
		Meaning: "name of the partial-sum stream; several systems may share a server under different names",
		field:   stringField(func(c *Config) *string { return &c.NATS.Stream }),
		unset:   func() string { return natsjs.DefaultStreamConfig().Name }},
	{Key: "nats.subject_prefix", Env: "EDGECOUNT_NATS_SUBJECT_PREFIX",
		Meaning: "subject prefix of the partial-sum stream",
		field:   stringField(func(c *Config) *string { return &c.NATS.SubjectPrefix }),
		unset:   func() string { return natsjs.DefaultStreamConfig().SubjectPrefix }},
	{Key: "nats.durable", Env: "EDGECOUNT_NATS_DURABLE",
		Meaning: "prefix of the rollups' consumer names",
		field:   stringField(func(c *Config) *string { return &c.NATS.Durable }),
		unset:   func() string { return natsjs.DefaultConsumerConfig().Durable }},
	{Key: "nats.ack_wait", Env: "EDGECOUNT_NATS_ACK_WAIT",
		Meaning: "how long the broker waits for a rollup's ack before it hands the message to another",
		field:   durationField(func(c *Config) *time.Duration { return &c.NATS.AckWait }),
		unset: func() string {
			return formatDuration(natsjs.DefaultConsumerConfig().AckWait) + "; " + formatDuration(StandaloneAckWait) + " with the embedded broker"
		}},
	{Key: "nats.creds_file", Env: "EDGECOUNT_NATS_CREDS",
		Meaning: "NATS credentials file",
		field:   stringField(func(c *Config) *string { return &c.NATS.CredsFile })},
	{Key: "nats.nkey_file",
		Meaning: "NATS NKey seed file",
		field:   stringField(func(c *Config) *string { return &c.NATS.NKeyFile })},
	{Key: "nats.ca_file",
		Meaning: "CA that verifies the NATS server (PEM)",
		field:   stringField(func(c *Config) *string { return &c.NATS.CAFile })},
	{Key: "nats.cert_file",
		Meaning: "client certificate for NATS (PEM)",
		field:   stringField(func(c *Config) *string { return &c.NATS.CertFile })},
	{Key: "nats.key_file",
		Meaning: "the NATS client certificate's key (PEM)",
		field:   stringField(func(c *Config) *string { return &c.NATS.KeyFile })},
	{Key: "nats.domain", Env: "EDGECOUNT_NATS_DOMAIN", Flag: "nats-domain", FlagRoles: agentFlag,
		Meaning: "JetStream `domain` of the region's own server, a leaf node of the hub: the agent publishes there only (docs/regions.md)",
		field:   stringField(func(c *Config) *string { return &c.NATS.Domain }),
		unset:   describe("none: one broker for the whole system")},
	{Key: "nats.max_age", Env: "EDGECOUNT_NATS_MAX_AGE",
		Meaning: "age bound of the agents' stream; with nats.domain, how long a region may be cut off from the hub",
		field:   durationField(func(c *Config) *time.Duration { return &c.NATS.MaxAge }),
		unset: func() string {
			return formatDuration(DefaultOriginMaxAge) + " with nats.domain, else " + formatDuration(natsjs.DefaultStreamConfig().MaxAge)
		}},
	{Key: "nats.max_bytes", Env: "EDGECOUNT_NATS_MAX_BYTES",
		Meaning: "size bound of the agents' stream (the outage budget with nats.domain)",
		field:   int64Field(func(c *Config) *int64 { return &c.NATS.MaxBytes }),
		unset:   func() string { return fmt.Sprint(DefaultOriginMaxBytes) + " with nats.domain, else unbounded" }},
	{Key: "nats.duplicate_window", Env: "EDGECOUNT_NATS_DUPLICATE_WINDOW",
		Meaning: "how long a stream remembers message ids",
		field:   durationField(func(c *Config) *time.Duration { return &c.NATS.DuplicateWindow }),
		unset:   func() string { return formatDuration(natsjs.DefaultStreamConfig().DuplicateWindow) }},
	{Key: "nats.hub.stream", Env: "EDGECOUNT_NATS_HUB_STREAM",
		Meaning: "name of the hub stream that sources every region's stream",
		field:   stringField(func(c *Config) *string { return &c.NATS.Hub.Stream }),
		unset:   describe("nats.stream")},
	{Key: "nats.hub.replicas", Env: "EDGECOUNT_NATS_HUB_REPLICAS", Flag: "nats-hub-replicas", FlagRoles: rollupFlag,
		Meaning: "replicas of the hub stream",
		field:   intField(func(c *Config) *int { return &c.NATS.Hub.Replicas }),
		unset:   func() string { return fmt.Sprint(DefaultHubReplicas) }},
	{Key: "nats.hub.sources", Env: "EDGECOUNT_NATS_HUB_SOURCES", Flag: "nats-hub-sources", FlagRoles: rollupFlag,
		Meaning: "the regions' streams the hub stream sources: comma-separated `region=domain[/stream]` (YAML: a list of {region, domain, stream})",
		field:   hubSourcesField(func(c *Config) *[]HubSource { return &c.NATS.Hub.Sources }),
		unset:   describe("none: the rollups consume nats.stream on one broker")},
	// The partitions a rollup consumes: owned alone, or shared with the
	// other rollups in a group on the broker (natsjs.GroupConfig).
	{Key: "rollup.owned", Flag: "owned", FlagRoles: rollupFlag,
		Meaning: "comma-separated `partitions` this process consumes alone",
		field:   partitionsField(func(c *Config) *[]int { return &c.Rollup.Owned }),
		unset:   describe("none: share every partition with the other rollups")},
	{Key: "rollup.member_id", Env: "EDGECOUNT_ROLLUP_MEMBER_ID",
		Meaning: "name of this rollup among those sharing the partitions",
		field:   stringField(func(c *Config) *string { return &c.Rollup.MemberID }),
		unset:   describe("<hostname>-<random>")},
	{Key: "rollup.member_ttl", Env: "EDGECOUNT_ROLLUP_MEMBER_TTL",
		Meaning: "how long a silent member keeps its partitions",
		field:   durationField(func(c *Config) *time.Duration { return &c.Rollup.MemberTTL }),
		unset:   func() string { return formatDuration(natsjs.DefaultGroupConfig().MemberTTL) }},

	{Key: "redis.addr", Env: "EDGECOUNT_REDIS_ADDR",
		Meaning: "host:port of the Redis shard directory",
		field:   stringField(func(c *Config) *string { return &c.Redis.Addr }),
		unset:   describe("none: the in-process directory")},
	{Key: "redis.username", Env: "EDGECOUNT_REDIS_USERNAME",
		Meaning: "Redis ACL user",
		field:   stringField(func(c *Config) *string { return &c.Redis.Username })},
	{Key: "redis.password", Env: "EDGECOUNT_REDIS_PASSWORD",
		Meaning: "Redis password (requirepass or the ACL user's); never logged",
		field:   stringField(func(c *Config) *string { return &c.Redis.Password })},
	{Key: "redis.db",
		Meaning: "Redis database number",
		field:   intField(func(c *Config) *int { return &c.Redis.DB })},
	{Key: "redis.tls.enabled",
		Meaning: "TLS to Redis, verified against the system's roots (any other redis.tls setting turns it on too)",
		field:   boolField(func(c *Config) *bool { return &c.Redis.TLS.Enabled })},
	{Key: "redis.tls.ca_file", Env: "EDGECOUNT_REDIS_TLS_CA",
		Meaning: "CA that verifies the Redis server (PEM)",
		field:   stringField(func(c *Config) *string { return &c.Redis.TLS.CAFile }),
		unset:   describe("the system's roots")},
	{Key: "redis.tls.cert_file", Env: "EDGECOUNT_REDIS_TLS_CERT",
		Meaning: "client certificate for a server with --tls-auth-clients yes (PEM)",
		field:   stringField(func(c *Config) *string { return &c.Redis.TLS.CertFile })},
	{Key: "redis.tls.key_file", Env: "EDGECOUNT_REDIS_TLS_KEY",
		Meaning: "the Redis client certificate's key (PEM)",
		field:   stringField(func(c *Config) *string { return &c.Redis.TLS.KeyFile })},
	{Key: "redis.tls.server_name", Env: "EDGECOUNT_REDIS_TLS_SERVER_NAME",
		Meaning: "name verified in the Redis server's certificate",
		field:   stringField(func(c *Config) *string { return &c.Redis.TLS.ServerName }),
		unset:   describe("the host of redis.addr")},

	{Key: "cassandra.hosts", Env: "EDGECOUNT_CASSANDRA_HOSTS",
		Meaning: "Cassandra contact points",
		field:   listField(func(c *Config) *[]string { return &c.Cassandra.Hosts }),
		unset:   describe("none: the embedded store")},
	{Key: "cassandra.port",
		Meaning: "Cassandra's native protocol port",
		field:   intField(func(c *Config) *int { return &c.Cassandra.Port })},
	{Key: "cassandra.keyspace", Env: "EDGECOUNT_CASSANDRA_KEYSPACE",
		Meaning: "keyspace, created if missing",
		field:   stringField(func(c *Config) *string { return &c.Cassandra.Keyspace })},
	{Key: "cassandra.local_dc", Env: "EDGECOUNT_CASSANDRA_LOCAL_DC",
		Meaning: "the data centre whose nodes this process uses; required when data_centers names several",
		field:   stringField(func(c *Config) *string { return &c.Cassandra.LocalDC })},
	{Key: "cassandra.replication_factor",
		Meaning: "SimpleStrategy's factor (one data centre)",
		field:   intField(func(c *Config) *int { return &c.Cassandra.ReplicationFactor }),
		unset: func() string {
			return fmt.Sprint(cassandra.DefaultConfig().Replication.Factor) + " without data_centers"
		}},
	{Key: "cassandra.data_centers",
		Meaning: "NetworkTopologyStrategy's factor per data centre (YAML: a mapping dc: factor)",
		field:   dataCentersField(func(c *Config) *map[string]int { return &c.Cassandra.DataCenters })},
	{Key: "cassandra.consistency",
		Meaning: "consistency of reads and writes",
		field:   stringField(func(c *Config) *string { return &c.Cassandra.Consistency })},
	{Key: "cassandra.serial_consistency",
		Meaning: "consistency of lightweight transactions (reactions)",
		field:   stringField(func(c *Config) *string { return &c.Cassandra.SerialConsistency })},
	{Key: "cassandra.timeout",
		Meaning: "bound of one query",
		field:   durationField(func(c *Config) *time.Duration { return &c.Cassandra.Timeout })},
	{Key: "cassandra.connect_timeout",
		Meaning: "bound of connecting to a node",
		field:   durationField(func(c *Config) *time.Duration { return &c.Cassandra.ConnectTimeout })},
	{Key: "cassandra.index_buckets",
		Meaning: "bucket count of the by-content index of a new keyspace; an existing keyspace keeps its own",
		field:   intField(func(c *Config) *int { return &c.Cassandra.IndexBuckets }),
		unset:   func() string { return fmt.Sprint(cassandra.DefaultIndexBuckets) }},
	{Key: "cassandra.remote_dc_fallback",
		Meaning: "let requests use another data centre's nodes when local_dc has none up (off: answer 503)",
		field:   boolField(func(c *Config) *bool { return &c.Cassandra.RemoteDCFallback })},
	{Key: "cassandra.clock_offset", Env: "EDGECOUNT_CASSANDRA_CLOCK_OFFSET",
		Meaning: "testing only: shift this process's Cassandra write timestamps by this much, to test clock skew (a rollup off by more than the fence margin can lose its writes)",
		field:   durationField(func(c *Config) *time.Duration { return &c.Cassandra.ClockOffset })},
	{Key: "cassandra.username", Env: "EDGECOUNT_CASSANDRA_USERNAME",
		Meaning: "Cassandra login (PasswordAuthenticator)",
		field:   stringField(func(c *Config) *string { return &c.Cassandra.Username })},
	{Key: "cassandra.password", Env: "EDGECOUNT_CASSANDRA_PASSWORD",
		Meaning: "Cassandra password, best given in the environment; never printed",
		field:   stringField(func(c *Config) *string { return &c.Cassandra.Password })},
	{Key: "cassandra.tls.ca_file",
		Meaning: "CA that verifies the Cassandra nodes (PEM); any cassandra.tls setting turns TLS on",
		field:   stringField(func(c *Config) *string { return &c.Cassandra.TLS.CAFile })},
	{Key: "cassandra.tls.cert_file",
		Meaning: "client certificate for Cassandra (PEM)",
		field:   stringField(func(c *Config) *string { return &c.Cassandra.TLS.CertFile })},
	{Key: "cassandra.tls.key_file",
		Meaning: "the Cassandra client certificate's key (PEM)",
		field:   stringField(func(c *Config) *string { return &c.Cassandra.TLS.KeyFile })},
	{Key: "cassandra.tls.server_name",
		Meaning: "name verified in the nodes' certificates",
		field:   stringField(func(c *Config) *string { return &c.Cassandra.TLS.ServerName })},
	{Key: "cassandra.tls.insecure_skip_verify",
		Meaning: "do not verify the nodes' certificates (tests only)",
		field:   boolField(func(c *Config) *bool { return &c.Cassandra.TLS.InsecureSkipVerify })},

	{Key: "trending.counters", Env: "EDGECOUNT_TRENDING_COUNTERS",
		Meaning: "counters with trending lists; an empty list (counters: []) turns trending off",
		field:   listField(func(c *Config) *[]string { return &c.Trending.Counters })},
	{Key: "trending.summary_bytes",
		Meaning: "memory of one agent summary: one time bucket of one counter (a counter keeps 91)",
		field:   intField(func(c *Config) *int { return &c.Trending.SummaryBytes })},
	{Key: "trending.list_len",
		Meaning: "items of each list an agent ships to the rollup and broadcasts to its peers (1..1000)",
		field:   intField(func(c *Config) *int { return &c.Trending.ListLen })},
	{Key: "trending.row_items",
		Meaning: "bound of one stored list (one partition's) of the rollup",
		field:   intField(func(c *Config) *int { return &c.Trending.RowItems })},
	{Key: "trending.interval",
		Meaning: "how often a rollup stores a partition's lists",
		field:   durationField(func(c *Config) *time.Duration { return &c.Trending.Interval })},
	{Key: "trending.hot_top",
		Meaning: "N of the hot-counter rule: an item in its region's top N gets hot_shards shards; 0 turns the rule off",
		field:   intField(func(c *Config) *int { return &c.Trending.HotTop })},
	{Key: "trending.hot_window",
		Meaning: "trending window the hot-counter rule reads",
		field:   stringField(func(c *Config) *string { return &c.Trending.HotWindow })},
	{Key: "trending.hot_shards",
		Meaning: "shards of a hot counter",
		field:   intField(func(c *Config) *int { return &c.Trending.HotShards }),
		unset:   func() string { return fmt.Sprint(region.DefaultCountersConfig().MaxShards) + ", a counter's most" }},
	{Key: "trending.hot_cool_after",
		Meaning: "how long a hot item stays out of the top 2N before it goes back to one shard",
		field:   durationField(func(c *Config) *time.Duration { return &c.Trending.HotCoolAfter })},

	{Key: "gossip.bind", Env: "EDGECOUNT_GOSSIP_BIND",
		Meaning: "host:port the region's gossip listens on (UDP and TCP)",
		field:   stringField(func(c *Config) *string { return &c.Gossip.Bind }),
		unset:   describe("off: the region's trending comes from the rollup's stored lists")},
	{Key: "gossip.advertise", Env: "EDGECOUNT_GOSSIP_ADVERTISE",
		Meaning: "host:port peers dial",
		field:   stringField(func(c *Config) *string { return &c.Gossip.Advertise }),
		unset:   describe("gossip.bind")},
	{Key: "gossip.seeds", Env: "EDGECOUNT_GOSSIP_SEEDS",
		Meaning: "host:port addresses of the region's agents",
		field:   listField(func(c *Config) *[]string { return &c.Gossip.Seeds })},
	{Key: "gossip.key_file", Env: "EDGECOUNT_GOSSIP_KEY_FILE",
		Meaning: "gossip keys, one base64 key a line; the first encrypts (see Gossip keys)",
		field:   stringField(func(c *Config) *string { return &c.Gossip.KeyFile })},
	{Key: "gossip.allow_plaintext",
		Meaning: "permit gossip without a key file (tests only)",
		field:   boolField(func(c *Config) *bool { return &c.Gossip.AllowPlaintext })},
	{Key: "gossip.profile", Env: "EDGECOUNT_GOSSIP_PROFILE",
		Meaning: "memberlist's timings: lan, wan, local or fast",
		field:   stringField(func(c *Config) *string { return &c.Gossip.Profile }),
		unset:   func() string { return string(gossip.DefaultConfig("", "").Profile) }},

	{Key: "auth.tokens_file", Env: "EDGECOUNT_AUTH_TOKENS", Flag: "auth-tokens", FlagRoles: everyFlag,
		Meaning: "bearer token `file` (TOKEN SCOPE[,SCOPE…] [NAME] a line), reloaded on SIGHUP",
		field:   stringField(func(c *Config) *string { return &c.Auth.TokensFile }),
		unset:   describe("none: the API runs open, on a loopback address only")},
	{Key: "auth.mode", Env: "EDGECOUNT_AUTH",
		Meaning: "none runs the API open on purpose, on any address (YAML also auth: none)",
		field:   stringField(func(c *Config) *string { return &c.Auth.Mode })},
	{Key: "auth.open_metrics",
		Meaning: "serve /metrics without a token",
		field:   boolField(func(c *Config) *bool { return &c.Auth.OpenMetrics })},

	{Key: "debug.pprof", Env: "EDGECOUNT_DEBUG_PPROF", Flag: "debug-pprof", FlagRoles: everyFlag,
		Meaning: "serve Go's profiles (net/http/pprof) under /debug/pprof/ on the HTTP listener; with auth.tokens_file they need the admin scope",
		field:   boolField(func(c *Config) *bool { return &c.Debug.Pprof })},
}

// describe returns an unset that says what a zero value means in words:
// a choice this package or a process makes, not a package's value.
func describe(s string) func() string { return func() string { return s } }
