package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/edgecount/edgecount/natsjs"
	"github.com/edgecount/edgecount/region"
	"github.com/edgecount/edgecount/store"
	"github.com/edgecount/edgecount/store/cassandra"
)

// Config is a whole process configuration.
type Config struct {
	// Region is the region of this process's agents.
	Region string `yaml:"region"`
	// Regions lists every region whose totals may be read; Region is
	// always included.
	Regions []string `yaml:"regions"`
	// Partitions of the partial-sum stream: the same for every agent and
	// rollup, and never changed for a stream.
	Partitions int `yaml:"partitions"`
	// LogLevel is debug, info, warn or error.
	LogLevel string `yaml:"log_level"`

	Agent     Agent     `yaml:"agent"`
	Rollup    Rollup    `yaml:"rollup"`
	NATS      NATS      `yaml:"nats"`
	Redis     Redis     `yaml:"redis"`
	Cassandra Cassandra `yaml:"cassandra"`
}

// Agent configures an edge agent.
type Agent struct {
	// HTTP is the API's listen address.
	HTTP string `yaml:"http"`
	// Data is the directory of the embedded store and broker (standalone).
	Data string `yaml:"data"`
	// ID names the agent in message ids; default "<region>-<hostname>".
	ID string `yaml:"id"`
	// FlushInterval is how often counters are flushed to the broker.
	FlushInterval time.Duration `yaml:"flush_interval"`
	// CacheTTL is how long a read of totals is cached.
	CacheTTL time.Duration `yaml:"cache_ttl"`
	// ShutdownTimeout bounds the graceful stop.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
	// NATSListen, in standalone mode, also exposes the embedded broker on
	// this loopback address (for tools); off by default.
	NATSListen string `yaml:"nats_listen"`
}

// Rollup configures a rollup process.
type Rollup struct {
	// HTTP serves /healthz, /readyz and /metrics.
	HTTP string `yaml:"http"`
	// Data is the embedded store's directory when no Cassandra is set.
	Data string `yaml:"data"`
	// Owned lists the partitions this process consumes; empty means all.
	Owned []int `yaml:"owned"`
}

// NATS says how to reach the broker. An empty URL means the embedded
// broker (standalone agent only).
type NATS struct {
	URL string `yaml:"url"`
	// Stream and SubjectPrefix name the partial-sum stream (defaults
	// EDGECOUNT_SUMS and edgecount.sums); several systems may share a
	// server under different names.
	Stream        string `yaml:"stream"`
	SubjectPrefix string `yaml:"subject_prefix"`
	// Durable prefixes the rollup's consumer names (default "rollup").
	Durable   string `yaml:"durable"`
	CredsFile string `yaml:"creds_file"`
	NKeyFile  string `yaml:"nkey_file"`
	CAFile    string `yaml:"ca_file"`
	CertFile  string `yaml:"cert_file"`
	KeyFile   string `yaml:"key_file"`
}

// Redis says how to reach the shard directory. An empty Addr means the
// in-process directory.
type Redis struct {
	Addr     string `yaml:"addr"`
	Username string `yaml:"username"`
	Password string `yaml:"password"`
	DB       int    `yaml:"db"`
}

// Cassandra says how to reach the store. No hosts means the embedded store.
type Cassandra struct {
	Hosts    []string `yaml:"hosts"`
	Port     int      `yaml:"port"`
	Keyspace string   `yaml:"keyspace"`
	LocalDC  string   `yaml:"local_dc"`
	// ReplicationFactor is SimpleStrategy's factor (one data centre).
	ReplicationFactor int `yaml:"replication_factor"`
	// DataCenters gives NetworkTopologyStrategy's factor per data centre.
	DataCenters       map[string]int `yaml:"data_centers"`
	Consistency       string         `yaml:"consistency"`
	SerialConsistency string         `yaml:"serial_consistency"`
	Timeout           time.Duration  `yaml:"timeout"`
	ConnectTimeout    time.Duration  `yaml:"connect_timeout"`
}

// Default returns the standalone defaults.
func Default() Config {
	cd := cassandra.DefaultConfig()
	return Config{
		Region:     "local",
		Partitions: 16,
		LogLevel:   "info",
		Agent: Agent{
			HTTP: "127.0.0.1:8080", Data: "./data",
			FlushInterval: time.Second, CacheTTL: 100 * time.Millisecond, ShutdownTimeout: 30 * time.Second,
		},
		Rollup: Rollup{HTTP: "127.0.0.1:8081", Data: "./data-rollup"},
		Cassandra: Cassandra{
			Port: cd.Port, Keyspace: cd.Keyspace, Consistency: cd.Consistency, SerialConsistency: cd.SerialConsistency,
			Timeout: cd.Timeout, ConnectTimeout: cd.ConnectTimeout,
		},
	}
}

// LoadFile reads a YAML file over c. Unknown keys are errors.
func (c *Config) LoadFile(path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("cannot read config: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("cannot parse config %s: %w", path, err)
	}
	return nil
}

// ApplyEnv applies EDGECOUNT_* variables over c and returns every bad one.
func (c *Config) ApplyEnv(getenv func(string) string) error {
	var errs []error
	str := func(name string, dst *string) {
		if v := getenv(name); v != "" {
			*dst = v
		}
	}
	dur := func(name string, dst *time.Duration) {
		if v := getenv(name); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
			}
			*dst = d
		}
	}
	num := func(name string, dst *int) {
		if v := getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
			}
			*dst = n
		}
	}
	list := func(name string, dst *[]string) {
		if v := getenv(name); v != "" {
			*dst = strings.Split(v, ",")
		}
	}
	str("EDGECOUNT_REGION", &c.Region)
	list("EDGECOUNT_REGIONS", &c.Regions)
	num("EDGECOUNT_PARTITIONS", &c.Partitions)
	str("EDGECOUNT_LOG_LEVEL", &c.LogLevel)
	str("EDGECOUNT_HTTP", &c.Agent.HTTP)
	str("EDGECOUNT_DATA", &c.Agent.Data)
	str("EDGECOUNT_AGENT_ID", &c.Agent.ID)
	dur("EDGECOUNT_FLUSH_INTERVAL", &c.Agent.FlushInterval)
	str("EDGECOUNT_ROLLUP_HTTP", &c.Rollup.HTTP)
	str("EDGECOUNT_ROLLUP_DATA", &c.Rollup.Data)
	str("EDGECOUNT_NATS_URL", &c.NATS.URL)
	str("EDGECOUNT_NATS_CREDS", &c.NATS.CredsFile)
	str("EDGECOUNT_REDIS_ADDR", &c.Redis.Addr)
	str("EDGECOUNT_REDIS_PASSWORD", &c.Redis.Password)
	list("EDGECOUNT_CASSANDRA_HOSTS", &c.Cassandra.Hosts)
	str("EDGECOUNT_CASSANDRA_KEYSPACE", &c.Cassandra.Keyspace)
	str("EDGECOUNT_CASSANDRA_LOCAL_DC", &c.Cassandra.LocalDC)
	return errors.Join(errs...)
}

// Role says which process a configuration is validated for.
type Role int

// The processes.
const (
	RoleAgent Role = iota
	RoleRollup
)

// Finish fills derived defaults (agent id, the own region in Regions) and
// validates c for role, listing every problem.
func (c *Config) Finish(role Role) error {
	if c.Agent.ID == "" {
		host, _ := os.Hostname()
		c.Agent.ID = c.Region + "-" + host
		if host == "" || !store.ValidID(c.Agent.ID) {
			c.Agent.ID = c.Region + "-agent"
		}
	}
	found := false
	for _, r := range c.Regions {
		found = found || r == c.Region
	}
	if !found {
		c.Regions = append(c.Regions, c.Region)
	}
	return c.validate(role)
}

func (c Config) validate(role Role) error {
	var errs []error
	addr := func(name, v string) {
		if _, _, err := net.SplitHostPort(v); err != nil {
			errs = append(errs, fmt.Errorf("%s %q: %w", name, v, err))
		}
	}
	for _, r := range c.Regions {
		if !store.ValidRegion(r) {
			errs = append(errs, fmt.Errorf("regions: %q is not a valid region name", r))
		}
	}
	var l levelText
	if err := l.UnmarshalText([]byte(c.LogLevel)); err != nil {
		errs = append(errs, fmt.Errorf("log_level %q: want debug, info, warn or error", c.LogLevel))
	}
	switch role {
	case RoleAgent:
		addr("agent.http", c.Agent.HTTP)
		if c.Agent.ShutdownTimeout <= 0 {
			errs = append(errs, fmt.Errorf("agent.shutdown_timeout %v: must be positive", c.Agent.ShutdownTimeout))
		}
		if c.Agent.NATSListen != "" {
			addr("agent.nats_listen", c.Agent.NATSListen)
		}
		if c.Standalone() {
			if c.Agent.Data == "" {
				errs = append(errs, errors.New("agent.data: must not be empty in standalone mode"))
			}
			if c.Redis.Addr != "" || len(c.Cassandra.Hosts) > 0 {
				errs = append(errs, errors.New("nats.url: an agent using Redis or Cassandra needs an external NATS (the embedded broker is for standalone mode)"))
			}
		} else if len(c.Cassandra.Hosts) == 0 {
			errs = append(errs, errors.New("cassandra.hosts: an agent on an external NATS needs Cassandra (its rollup writes there)"))
		}
		if err := c.AgentConfig().Validate(); err != nil {
			errs = append(errs, fmt.Errorf("agent: %w", err))
		}
	case RoleRollup:
		addr("rollup.http", c.Rollup.HTTP)
		if c.NATS.URL == "" {
			errs = append(errs, errors.New("nats.url: the rollup needs an external NATS"))
		}
		if c.Partitions < 1 || c.Partitions > natsjs.MaxPartitions {
			errs = append(errs, fmt.Errorf("partitions %d: want 1..%d", c.Partitions, natsjs.MaxPartitions))
		}
		for _, p := range c.Rollup.Owned {
			if p < 0 || p >= c.Partitions {
				errs = append(errs, fmt.Errorf("rollup.owned: %d is not a partition in 0..%d", p, c.Partitions-1))
			}
		}
		if len(c.Cassandra.Hosts) == 0 && c.Rollup.Data == "" {
			errs = append(errs, errors.New("rollup.data: must not be empty without Cassandra"))
		}
	}
	if err := c.StreamConfig().Validate(); err != nil {
		errs = append(errs, fmt.Errorf("nats: %w", err))
	}
	if err := c.ConsumerConfig(nil).Validate(); err != nil {
		errs = append(errs, fmt.Errorf("nats: %w", err))
	}
	if c.NATS.URL != "" {
		if err := c.ConnConfig("check").Validate(); err != nil {
			errs = append(errs, fmt.Errorf("nats: %w", err))
		}
	}
	if c.Redis.Addr != "" {
		addr("redis.addr", c.Redis.Addr)
	}
	if len(c.Cassandra.Hosts) > 0 {
		if err := c.CassandraConfig().Validate(); err != nil {
			errs = append(errs, fmt.Errorf("cassandra: %w", err))
		}
	}
	return errors.Join(errs...)
}

// Standalone reports whether the agent runs with the embedded broker.
func (c Config) Standalone() bool { return c.NATS.URL == "" }

// AgentConfig returns the region package's configuration.
func (c Config) AgentConfig() region.Config {
	ac := region.DefaultConfig(c.Region, c.Agent.ID)
	ac.Partitions = c.Partitions
	ac.FlushInterval = c.Agent.FlushInterval
	ac.CacheTTL = c.Agent.CacheTTL
	return ac
}

// ConnConfig returns the NATS connection settings for a client called name.
func (c Config) ConnConfig(name string) natsjs.ConnConfig {
	cc := natsjs.DefaultConnConfig()
	cc.URL, cc.Name = c.NATS.URL, name
	cc.CredsFile, cc.NKeyFile = c.NATS.CredsFile, c.NATS.NKeyFile
	cc.CAFile, cc.CertFile, cc.KeyFile = c.NATS.CAFile, c.NATS.CertFile, c.NATS.KeyFile
	return cc
}

// StreamConfig returns the partial-sum stream's configuration.
func (c Config) StreamConfig() natsjs.StreamConfig {
	sc := natsjs.DefaultStreamConfig()
	sc.Partitions = c.Partitions
	if c.NATS.Stream != "" {
		sc.Name = c.NATS.Stream
	}
	if c.NATS.SubjectPrefix != "" {
		sc.SubjectPrefix = c.NATS.SubjectPrefix
	}
	return sc
}

// ConsumerConfig returns the rollup's consumer configuration.
func (c Config) ConsumerConfig(logger *slog.Logger) natsjs.ConsumerConfig {
	cc := natsjs.DefaultConsumerConfig()
	cc.Stream = c.StreamConfig()
	if c.NATS.Durable != "" {
		cc.Durable = c.NATS.Durable
	}
	cc.Logger = logger
	return cc
}

// CassandraConfig returns the Cassandra store's configuration.
func (c Config) CassandraConfig() cassandra.Config {
	cc := cassandra.DefaultConfig()
	cc.Hosts = c.Cassandra.Hosts
	cc.Port = c.Cassandra.Port
	cc.Keyspace = c.Cassandra.Keyspace
	cc.LocalDC = c.Cassandra.LocalDC
	cc.Replication = cassandra.Replication{Factor: c.Cassandra.ReplicationFactor, DataCenters: c.Cassandra.DataCenters}
	if cc.Replication.Factor == 0 && len(cc.Replication.DataCenters) == 0 {
		cc.Replication.Factor = 1
	}
	cc.Consistency = c.Cassandra.Consistency
	cc.SerialConsistency = c.Cassandra.SerialConsistency
	cc.Timeout = c.Cassandra.Timeout
	cc.ConnectTimeout = c.Cassandra.ConnectTimeout
	return cc
}
