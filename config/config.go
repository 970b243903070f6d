package config

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/edgecount/edgecount/auth"
	redisdir "github.com/edgecount/edgecount/directory/redis"
	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/gossip"
	"github.com/edgecount/edgecount/natsjs"
	"github.com/edgecount/edgecount/region"
	"github.com/edgecount/edgecount/rollup"
	"github.com/edgecount/edgecount/store/cassandra"
	"github.com/edgecount/edgecount/wal"
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
	// LogFormat is how log records are written: text (LogText, key=value
	// lines) or json (LogJSON, one object a line).
	LogFormat string `yaml:"log_format"`

	Agent     Agent     `yaml:"agent"`
	Rollup    Rollup    `yaml:"rollup"`
	NATS      NATS      `yaml:"nats"`
	Redis     Redis     `yaml:"redis"`
	Cassandra Cassandra `yaml:"cassandra"`
	Trending  Trending  `yaml:"trending"`
	Gossip    Gossip    `yaml:"gossip"`
	Auth      Auth      `yaml:"auth"`
	Debug     Debug     `yaml:"debug"`
}

// Debug turns on what helps to diagnose a running process, off by
// default.
type Debug struct {
	// Pprof serves net/http/pprof's profiles under /debug/pprof/ on the
	// process's HTTP listener (agent.http, rollup.http; httpapi.Profiling).
	// With a token file they need the admin scope; without one they are
	// as open as the rest of the API. Off, /debug/pprof/ is a 404.
	Pprof bool `yaml:"pprof"`
}

// Auth configures who may call the HTTP API (package auth). In YAML it is
// a mapping, or the scalar none (auth: none) to run open on purpose.
type Auth struct {
	// TokensFile holds one token a line: TOKEN SCOPE[,SCOPE…] [NAME]. With
	// it every /v1 and /admin route needs a bearer token; it is reloaded
	// on SIGHUP.
	TokensFile string `yaml:"tokens_file"`
	// Mode none runs open even on a non-loopback address; without a token
	// file and without it, only a loopback listener runs (open).
	Mode string `yaml:"mode"`
	// OpenMetrics serves /metrics without a token.
	OpenMetrics bool `yaml:"open_metrics"`
}

// UnmarshalYAML takes the mapping or the scalar none.
func (a *Auth) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		if n.Value != "none" {
			return fmt.Errorf("auth: %q: want none or a mapping (tokens_file, mode, open_metrics)", n.Value)
		}
		a.Mode = "none"
		return nil
	}
	type plain Auth
	return n.Decode((*plain)(a))
}

// Agent configures an edge agent.
type Agent struct {
	// HTTP is the API's listen address.
	HTTP string `yaml:"http"`
	// Data is the agent's directory: its identity (agent.json) and logs
	// (log/), and in standalone mode the embedded store and broker. One
	// agent per directory.
	Data string `yaml:"data"`
	// ID names the agent in message ids. Default: the id recorded in
	// Data/agent.json, made on first start as
	// "<region>-<hostname>-<8 random hex digits>". A configured id that
	// differs from the recorded one refuses to start.
	ID string `yaml:"id"`
	// IDDefaulted is set by Finish when no id was configured: ID then holds
	// the prefix of the id to make, and the data directory decides.
	IDDefaulted bool `yaml:"-"`
	// Durability says when a write is acknowledged: fsync (default: after
	// an fsync of the agent's log, group-committed), interval (after the
	// write; the log is fsynced every DurabilityInterval) or none (memory
	// only until the next flush is published).
	Durability string `yaml:"durability"`
	// DurabilityInterval is the fsync interval of interval mode.
	DurabilityInterval time.Duration `yaml:"durability_interval"`
	// LogMaxBytes bounds the intake log; when it is full (the broker is
	// unreachable for longer than it covers, or the disk is full) writes
	// answer 503 with Retry-After.
	LogMaxBytes int64 `yaml:"log_max_bytes"`
	// FlushInterval is how often counters are flushed to the broker.
	FlushInterval time.Duration `yaml:"flush_interval"`
	// CacheTTL is how long a read of totals is cached; CacheTTLPushed how
	// long while the rollups' row pushes arrive whole (docs/read-cache.md).
	CacheTTL       time.Duration `yaml:"cache_ttl"`
	CacheTTLPushed time.Duration `yaml:"cache_ttl_pushed"`
	// FreshPeerTimeout bounds how long a ?consistency=fresh read waits for
	// the region's gossip peers' deltas (docs/consistency.md).
	FreshPeerTimeout time.Duration `yaml:"fresh_peer_timeout"`
	// ShutdownTimeout bounds the graceful stop.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
	// NATSListen, in standalone mode, also exposes the embedded broker on
	// this loopback address (for tools); off by default.
	NATSListen string `yaml:"nats_listen"`
	// TLS makes the HTTP listener serve HTTPS.
	TLS TLS `yaml:"tls"`
	// Idempotency bounds the Idempotency-Key table (docs/idempotency.md).
	Idempotency Idempotency `yaml:"idempotency"`
}

// Idempotency bounds the idempotency keys an agent keeps, in memory and in
// its log directory.
type Idempotency struct {
	// Window is how long a key is kept after its write was answered
	// (default 24h; 1s..720h): a retry within it gets the first answer.
	Window time.Duration `yaml:"window"`
	// MaxKeys bounds the keys kept (default 1000000); at the bound the
	// oldest key is evicted early and a retry with it is applied again.
	MaxKeys int `yaml:"max_keys"`
}

// TLS is a listener's certificate: with both files the listener serves
// HTTPS only (TLS 1.2 at least), /healthz, /readyz and /metrics included;
// SIGHUP reloads both files, and a pair that does not load keeps the
// certificate served. Neither file: plain HTTP.
type TLS struct {
	// CertFile is PEM: the certificate, then any intermediates.
	CertFile string `yaml:"cert_file"`
	// KeyFile is its private key, PEM.
	KeyFile string `yaml:"key_file"`
}

// Enabled reports whether a certificate is configured.
func (t TLS) Enabled() bool { return t.CertFile != "" || t.KeyFile != "" }

// Rollup configures a rollup process.
type Rollup struct {
	// HTTP serves /healthz, /readyz and /metrics.
	HTTP string `yaml:"http"`
	// Data is the embedded store's directory when no Cassandra is set.
	Data string `yaml:"data"`
	// Owned lists the partitions this process consumes. Empty means the
	// process shares all partitions with the other rollups of the system
	// (natsjs.GroupConsumer: one pinned writer per partition).
	Owned []int `yaml:"owned"`
	// Recount configures the recount job (also run by a standalone agent's
	// in-process rollup).
	Recount Recount `yaml:"recount"`
	// MemberID names this rollup among those sharing the partitions
	// (default <hostname>-<random>); MemberTTL is how long a silent member
	// keeps its partitions (default 5s).
	MemberID  string        `yaml:"member_id"`
	MemberTTL time.Duration `yaml:"member_ttl"`
	// TLS makes the HTTP listener serve HTTPS (see TLS).
	TLS TLS `yaml:"tls"`
}

// Gossip configures an agent's membership in its region's gossip cluster
// (package gossip). An empty Bind turns gossip off: the agent then answers
// its region's trending from the rollup's stored lists.
type Gossip struct {
	// Bind is the host:port gossip listens on (UDP and TCP).
	Bind string `yaml:"bind"`
	// Advertise is the host:port peers dial, when not Bind.
	Advertise string `yaml:"advertise"`
	// Seeds are host:port addresses of the region's agents.
	Seeds []string `yaml:"seeds"`
	// KeyFile holds the gossip keys: one base64 key per line, the first
	// encrypts (see docs/configuration.md, "Gossip keys").
	KeyFile string `yaml:"key_file"`
	// AllowPlaintext permits gossip without a key file (tests only).
	AllowPlaintext bool `yaml:"allow_plaintext"`
	// Profile picks memberlist's timings: lan (default), wan, local, fast.
	Profile string `yaml:"profile"`
}

// Recount configures the recount job that repairs totals from the
// reactions (rollup.RecountConfig).
type Recount struct {
	// Interval between passes; 0 disables passes (on-demand only).
	Interval time.Duration `yaml:"interval"`
	// StaleAfter: an item none of whose totals rows changed for this long
	// is checked by every pass that scans it.
	StaleAfter time.Duration `yaml:"stale_after"`
	// Sample: recently updated items each pass also checks, at random.
	Sample int `yaml:"sample"`
	// Quiet bounds the time from a reaction to its delta being applied:
	// at least agent.flush_interval plus the publish and rollup lag
	// tolerated. A repair waits for it and is skipped if the item's totals
	// moved meanwhile. 0 (the default) means the larger of 30 s and three
	// flush intervals.
	Quiet time.Duration `yaml:"quiet"`
	// Batch: totals rows scanned per pass.
	Batch int `yaml:"batch"`
	// CountBudget: index entries one count reads per call (0: 20,000).
	CountBudget int `yaml:"count_budget"`
	// ItemTimeout bounds one item's count; an unfinished count resumes at
	// the next pass (0: 30 s).
	ItemTimeout time.Duration `yaml:"item_timeout"`
	// ProgressFile keeps unfinished counts across restarts. Default: none
	// with Cassandra (each rollup needs a file of its own),
	// recount-progress.json beside the embedded store's file.
	ProgressFile string `yaml:"progress_file"`
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
	Durable string `yaml:"durable"`
	// AckWait is how long the broker waits for a rollup's ack before it
	// hands the message to another (default 30s; StandaloneAckWait, 10s,
	// with the embedded broker): with shared partitions it bounds the
	// handover of a partition whose rollup died mid-message.
	AckWait   time.Duration `yaml:"ack_wait"`
	CredsFile string        `yaml:"creds_file"`
	NKeyFile  string        `yaml:"nkey_file"`
	CAFile    string        `yaml:"ca_file"`
	CertFile  string        `yaml:"cert_file"`
	KeyFile   string        `yaml:"key_file"`

	// Domain (agent) is the JetStream domain of the region's own server, a
	// leaf node of the hub: the agent then publishes only there, to an
	// origin stream with limits retention that the hub sources
	// (docs/regions.md). Empty: one broker for the whole system.
	Domain string `yaml:"domain"`
	// MaxAge and MaxBytes bound the agent's stream: on a region's server
	// they are the outage budget, how long the region may be cut off from
	// the hub without losing a flush (defaults with a domain: 2h and
	// 4 GiB; without: 7 days and unbounded).
	MaxAge   time.Duration `yaml:"max_age"`
	MaxBytes int64         `yaml:"max_bytes"`
	// DuplicateWindow is how long a stream remembers message ids (default
	// 2m), set explicitly on every stream: a sourcing one has none.
	DuplicateWindow time.Duration `yaml:"duplicate_window"`
	// Hub (rollup) is the hub stream that sources every region's stream.
	Hub Hub `yaml:"hub"`
}

// Hub configures the rollup's hub stream, on the hub cluster, which
// sources every region's origin stream (nats.hub.sources). Without sources
// the rollup consumes nats.stream on one broker, as the agents publish.
type Hub struct {
	// Stream names the hub stream (default nats.stream).
	Stream string `yaml:"stream"`
	// Replicas of the hub stream (default 3).
	Replicas int `yaml:"replicas"`
	// Sources lists the regions' origin streams.
	Sources []HubSource `yaml:"sources"`
}

// HubSource is one region's origin stream.
type HubSource struct {
	Region string `yaml:"region"`
	// Domain is the region's JetStream domain (its agents' nats.domain).
	Domain string `yaml:"domain"`
	// Stream is the origin stream's name (default nats.stream).
	Stream string `yaml:"stream"`
}

// Defaults of a region's origin stream (nats.domain set): the outage
// budget. See docs/regions.md for the arithmetic.
const (
	DefaultOriginMaxAge   = 2 * time.Hour
	DefaultOriginMaxBytes = 4 << 30
	DefaultHubReplicas    = 3
)

// ParseHubSources parses EDGECOUNT_NATS_HUB_SOURCES and --nats-hub-sources:
// comma-separated region=domain or region=domain/stream.
func ParseHubSources(v string) ([]HubSource, error) {
	var (
		out  []HubSource
		errs []error
	)
	for _, f := range strings.Split(v, ",") {
		f = strings.TrimSpace(f)
		region, rest, ok := strings.Cut(f, "=")
		if !ok || region == "" || rest == "" {
			errs = append(errs, fmt.Errorf("hub source %q: want region=domain or region=domain/stream", f))
			continue
		}
		domain, stream, _ := strings.Cut(rest, "/")
		out = append(out, HubSource{Region: region, Domain: domain, Stream: stream})
	}
	return out, errors.Join(errs...)
}

// Redis says how to reach the shard directory. An empty Addr means the
// in-process directory.
type Redis struct {
	Addr string `yaml:"addr"`
	// Username and Password authenticate (an ACL user, or only a password
	// for requirepass). Neither is ever logged.
	Username string   `yaml:"username"`
	Password string   `yaml:"password"`
	DB       int      `yaml:"db"`
	TLS      RedisTLS `yaml:"tls"`
}

// RedisTLS is the Redis client's TLS (redis-server --tls-port). It is on
// when any field is set: Enabled alone verifies the server against the
// system's roots.
type RedisTLS struct {
	Enabled bool `yaml:"enabled"`
	// CAFile verifies the server's certificate (PEM; default the system's
	// roots).
	CAFile string `yaml:"ca_file"`
	// CertFile and KeyFile are the client's certificate, for a server
	// with --tls-auth-clients yes.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ServerName is the name verified in the server's certificate
	// (default the host of redis.addr).
	ServerName string `yaml:"server_name"`
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
	// IndexBuckets is the by-content index's bucket count of a new
	// keyspace (0: 128); an existing keyspace keeps its own.
	IndexBuckets int `yaml:"index_buckets"`
	// RemoteDCFallback lets requests use another data centre's nodes when
	// local_dc has none up (off: a region whose data centre is down answers
	// 503 rather than read another region's replicas).
	RemoteDCFallback bool `yaml:"remote_dc_fallback"`
	// ClockOffset shifts this process's write timestamps; for tests of
	// clock skew only (cassandra.Config.ClockOffset).
	ClockOffset time.Duration `yaml:"clock_offset"`
	// Username and Password log in (PasswordAuthenticator); the password is
	// best given as EDGECOUNT_CASSANDRA_PASSWORD and is never printed.
	Username string       `yaml:"username"`
	Password string       `yaml:"password"`
	TLS      CassandraTLS `yaml:"tls"`
}

// CassandraTLS encrypts the connections to Cassandra when any field is set.
type CassandraTLS struct {
	CAFile             string `yaml:"ca_file"`
	CertFile           string `yaml:"cert_file"`
	KeyFile            string `yaml:"key_file"`
	ServerName         string `yaml:"server_name"`
	InsecureSkipVerify bool   `yaml:"insecure_skip_verify"`
}

// String prints c without its password.
func (c Cassandra) String() string {
	if c.Password != "" {
		c.Password = "[redacted]"
	}
	type plain Cassandra // no String method
	return fmt.Sprintf("%+v", plain(c))
}

// LogValue logs c without its password.
func (c Cassandra) LogValue() slog.Value { return slog.StringValue(c.String()) }

// Trending configures the trending lists: the agents' summaries and hot
// counter rule (region.TrendingConfig) and the rollups' stored lists
// (rollup.TrendingConfig). Every agent and rollup of a system should use
// the same counters.
type Trending struct {
	// Counters lists the counters with trending lists; an empty list
	// (counters: []) turns trending off.
	Counters []string `yaml:"counters"`
	// SummaryBytes is the memory of one agent summary: one time bucket of
	// one counter (a counter keeps 91 of them).
	SummaryBytes int `yaml:"summary_bytes"`
	// ListLen is how many items of each list an agent ships to the rollup
	// and broadcasts to its peers (1..1000; more than the k asked for).
	ListLen int `yaml:"list_len"`
	// RowItems bounds one stored list (one partition's) of the rollup.
	RowItems int `yaml:"row_items"`
	// Interval is how often a rollup stores a partition's lists.
	Interval time.Duration `yaml:"interval"`
	// HotTop is N of the hot-counter rule (0 turns it off): an item in its
	// region's top N over HotWindow gets HotShards shards, and goes back
	// to one after HotCoolAfter out of the top 2N.
	HotTop       int           `yaml:"hot_top"`
	HotWindow    string        `yaml:"hot_window"`
	HotShards    int           `yaml:"hot_shards"`
	HotCoolAfter time.Duration `yaml:"hot_cool_after"`
}

// Defaults that are choices of this package alone: every other default is
// taken from the package that owns the setting.
const (
	defaultRegion          = "local"
	defaultLogLevel        = "info"
	defaultAgentHTTP       = "127.0.0.1:8080"
	defaultAgentData       = "./data"
	defaultShutdownTimeout = 30 * time.Second
	defaultRollupHTTP      = "127.0.0.1:8081"
	defaultRollupData      = "./data-rollup"
)

// Default returns the standalone defaults: the defaults above, and those of
// region, wal, rollup and store/cassandra.
func Default() Config {
	return Config{
		Region:     defaultRegion,
		Partitions: region.DefaultConfig(defaultRegion, "").Partitions,
		LogLevel:   defaultLogLevel,
		LogFormat:  LogText,
		Agent:      defaultAgent(),
		Rollup: Rollup{
			HTTP: defaultRollupHTTP, Data: defaultRollupData, Recount: defaultRecount(),
		},
		Cassandra: defaultCassandra(),
		Trending:  defaultTrending(),
	}
}

// defaultAgent takes the agent's defaults from region (its read cache, log
// and idempotency keys) and wal (durability: the library's log defaults to
// none, a process to fsync).
func defaultAgent() Agent {
	ad, ld, id := region.DefaultConfig(defaultRegion, ""), region.DefaultLogConfig(), region.DefaultIdempotencyConfig()
	return Agent{
		HTTP: defaultAgentHTTP, Data: defaultAgentData,
		FlushInterval: ad.FlushInterval, CacheTTL: ad.CacheTTL, CacheTTLPushed: ad.CachePushedTTL,
		FreshPeerTimeout: ad.FreshPeerTimeout, ShutdownTimeout: defaultShutdownTimeout,
		Durability: string(wal.DefaultConfig().Durability), DurabilityInterval: ld.SyncInterval, LogMaxBytes: ld.MaxBytes,
		Idempotency: Idempotency{Window: id.Window, MaxKeys: id.MaxKeys},
	}
}

// defaultRecount takes the recount job's defaults from rollup; quiet,
// count_budget and item_timeout stay zero, which RecountConfig resolves.
func defaultRecount() Recount {
	rd := rollup.DefaultRecountConfig()
	return Recount{Interval: rd.Interval, StaleAfter: rd.StaleAfter, Sample: rd.Sample, Batch: rd.Batch}
}

// defaultCassandra takes the store's defaults from store/cassandra; no
// hosts, so the embedded store is used.
func defaultCassandra() Cassandra {
	cd := cassandra.DefaultConfig()
	return Cassandra{
		Port: cd.Port, Keyspace: cd.Keyspace, Consistency: cd.Consistency, SerialConsistency: cd.SerialConsistency,
		Timeout: cd.Timeout, ConnectTimeout: cd.ConnectTimeout,
	}
}

// defaultTrending takes the trending defaults from region (the agents'
// summaries) and rollup (the stored lists).
func defaultTrending() Trending {
	at, rt := region.DefaultTrendingConfig(), rollup.DefaultTrendingConfig(1)
	return Trending{
		Counters: at.Counters, SummaryBytes: at.SummaryBytes, ListLen: at.ListLen,
		RowItems: rt.RowItems, Interval: rt.Interval,
		HotTop: at.Hot.Top, HotWindow: at.Hot.Window, HotShards: at.Hot.Shards, HotCoolAfter: at.Hot.CoolAfter,
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

// Role says which process a configuration is validated for.
type Role int

// The processes.
const (
	RoleAgent Role = iota
	RoleRollup
)

// String returns the command that runs the process: edge-agent or rollup.
func (r Role) String() string {
	if r == RoleRollup {
		return "rollup"
	}
	return "edge-agent"
}

// Finish fills derived defaults (agent id, the own region in Regions) and
// validates c for role, listing every problem. Without a configured agent
// id it sets IDDefaulted and leaves in ID the prefix "<region>-<hostname>"
// of the id the agent makes (region.LoadIdentity).
func (c *Config) Finish(role Role) error {
	if c.Agent.ID == "" || c.Agent.IDDefaulted {
		c.Agent.IDDefaulted = true
		host, _ := os.Hostname()
		c.Agent.ID = c.Region + "-" + host
		if host == "" || !engagement.ValidID(c.Agent.ID) {
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

// validate lists every problem of c for role, step by step: auth, the
// process-wide settings, the role's own, the recount and trending of a
// process that runs a rollup, NATS, then the directory and the store.
func (c Config) validate(role Role) error {
	var errs []error
	errs = append(errs, c.authErrors(role)...)
	errs = append(errs, c.processErrors()...)
	switch role {
	case RoleAgent:
		errs = append(errs, c.agentErrors()...)
	case RoleRollup:
		errs = append(errs, c.rollupErrors()...)
	}
	if role == RoleRollup || c.Standalone() {
		errs = append(errs, c.recountErrors()...)
		errs = append(errs, c.trendingErrors()...)
	}
	errs = append(errs, c.natsErrors(role)...)
	errs = append(errs, c.directoryErrors()...)
	errs = append(errs, c.storeErrors()...)
	return errors.Join(errs...)
}

// authErrors checks the auth section: an API runs open only on purpose
// (auth: none) or on the loopback address of the role's listener.
func (c Config) authErrors(role Role) []error {
	switch {
	case c.Auth.Mode != "" && c.Auth.Mode != "none":
		return []error{fmt.Errorf("auth.mode %q: want none or nothing", c.Auth.Mode)}
	case c.Auth.Mode == "none" && c.Auth.TokensFile != "":
		return []error{errors.New("auth: none and auth.tokens_file contradict each other")}
	case c.Auth.Mode == "" && c.Auth.TokensFile == "":
		// Refused before anything listens: an open API only on loopback.
		name, listen := "agent.http", c.Agent.HTTP
		if role == RoleRollup {
			name, listen = "rollup.http", c.Rollup.HTTP
		}
		if !auth.Loopback(listen) {
			return []error{fmt.Errorf("%s %q is not a loopback address and no token file is set: set auth.tokens_file (--auth-tokens), or auth: none to run open on purpose", name, listen)}
		}
	}
	return nil
}

// processErrors checks what every process has: the regions and the log
// level and format.
func (c Config) processErrors() []error {
	var errs []error
	for _, r := range c.Regions {
		if !engagement.ValidRegion(r) {
			errs = append(errs, fmt.Errorf("regions: %q is not a valid region name", r))
		}
	}
	var l levelText
	if err := l.UnmarshalText([]byte(c.LogLevel)); err != nil {
		errs = append(errs, fmt.Errorf("log_level %q: want debug, info, warn or error", c.LogLevel))
	}
	if c.LogFormat != LogText && c.LogFormat != LogJSON {
		errs = append(errs, fmt.Errorf("log_format %q: want %s or %s", c.LogFormat, LogText, LogJSON))
	}
	return errs
}

// addrErrors checks that v, the setting name, is a host:port.
func addrErrors(name, v string) []error {
	if _, _, err := net.SplitHostPort(v); err != nil {
		return []error{fmt.Errorf("%s %q: %w", name, v, err)}
	}
	return nil
}

// pairErrors checks that t, the setting name, has both files or none.
func (t TLS) pairErrors(name string) []error {
	if t.Enabled() && (t.CertFile == "" || t.KeyFile == "") {
		return []error{fmt.Errorf("%s: cert_file and key_file go together (--tls-cert, --tls-key)", name)}
	}
	return nil
}

// agentErrors checks an agent: its listener, the servers its mode needs,
// the region package's configuration (each bad read or log setting
// reported once, by field) and its gossip.
func (c Config) agentErrors() []error {
	var errs []error
	errs = append(errs, addrErrors("agent.http", c.Agent.HTTP)...)
	errs = append(errs, c.Agent.TLS.pairErrors("agent.tls")...)
	if c.Agent.ShutdownTimeout <= 0 {
		errs = append(errs, fmt.Errorf("agent.shutdown_timeout %v: must be positive", c.Agent.ShutdownTimeout))
	}
	if c.Agent.NATSListen != "" {
		errs = append(errs, addrErrors("agent.nats_listen", c.Agent.NATSListen)...)
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
	ac := c.AgentConfig()
	if readErrs := c.readErrors(); len(readErrs) > 0 {
		errs = append(errs, readErrs...)
		d := region.DefaultConfig(c.Region, c.Agent.ID) // reported above, by field
		ac.CacheTTL, ac.CachePushedTTL, ac.FreshPeerTimeout = d.CacheTTL, d.CachePushedTTL, d.FreshPeerTimeout
	}
	if logErrs := c.logErrors(); len(logErrs) > 0 {
		errs = append(errs, logErrs...)
		ac.Log = region.DefaultLogConfig() // reported above, by field
		ac.Idempotency = region.DefaultIdempotencyConfig()
	}
	if err := ac.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("agent: %w", err))
	}
	return append(errs, c.gossipErrors()...)
}

// gossipErrors checks the agent's gossip, when gossip.bind turns it on.
func (c Config) gossipErrors() []error {
	if c.Gossip.Bind == "" {
		return nil
	}
	var errs []error
	if c.Standalone() {
		errs = append(errs, errors.New("gossip.bind: gossip joins a region's agents; a standalone agent has none"))
	}
	gc, err := c.GossipConfig("")
	if err != nil {
		errs = append(errs, err)
	}
	if err := gc.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("gossip: %w", err))
	}
	return errs
}

// rollupErrors checks a rollup: its listener, the broker, the partitions
// it owns, its store and, sharing the partitions, its group.
func (c Config) rollupErrors() []error {
	var errs []error
	errs = append(errs, addrErrors("rollup.http", c.Rollup.HTTP)...)
	errs = append(errs, c.Rollup.TLS.pairErrors("rollup.tls")...)
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
	if len(c.Rollup.Owned) == 0 {
		if err := c.GroupConfig(nil).Validate(); err != nil {
			errs = append(errs, fmt.Errorf("rollup: %w", err))
		}
	}
	return errs
}

// recountErrors checks the recount job's settings (partitions and owned
// are the rollup's, checked by rollupErrors).
func (c Config) recountErrors() []error {
	var errs []error
	rcv := c.RecountConfig()
	rcv.Partitions, rcv.Owned = 1, nil
	if err := rcv.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("rollup.recount: %w", err))
	}
	if q := c.Rollup.Recount.Quiet; q != 0 && q <= c.Agent.FlushInterval {
		errs = append(errs, fmt.Errorf("rollup.recount.quiet %v: must exceed agent.flush_interval (%v) plus the tolerated lag", q, c.Agent.FlushInterval))
	}
	return errs
}

// trendingErrors checks the rollup's trending lists.
func (c Config) trendingErrors() []error {
	if err := c.RollupTrendingConfig().Validate(); err != nil {
		return []error{fmt.Errorf("trending: %w", err)}
	}
	return nil
}

// directoryErrors checks the Redis shard directory, when redis.addr is set.
func (c Config) directoryErrors() []error {
	if c.Redis.Addr == "" {
		return nil
	}
	errs := addrErrors("redis.addr", c.Redis.Addr)
	if t := c.Redis.TLS; (t.CertFile == "") != (t.KeyFile == "") {
		errs = append(errs, errors.New("redis.tls: cert_file and key_file go together"))
	}
	return errs
}

// storeErrors checks Cassandra, when cassandra.hosts is set.
func (c Config) storeErrors() []error {
	if len(c.Cassandra.Hosts) == 0 {
		return nil
	}
	if err := c.CassandraConfig().Validate(); err != nil {
		return []error{fmt.Errorf("cassandra: %w", err)}
	}
	return nil
}

// natsErrors checks the NATS section for role: the stream the process
// publishes to or consumes, the regional keys, the consumer and the
// connection.
func (c Config) natsErrors(role Role) []error {
	var errs []error
	if c.NATS.MaxAge < 0 {
		errs = append(errs, fmt.Errorf("nats.max_age %v: must not be negative", c.NATS.MaxAge))
	}
	if c.NATS.MaxBytes < 0 {
		errs = append(errs, fmt.Errorf("nats.max_bytes %d: must not be negative", c.NATS.MaxBytes))
	}
	if c.NATS.DuplicateWindow < 0 {
		errs = append(errs, fmt.Errorf("nats.duplicate_window %v: must be positive", c.NATS.DuplicateWindow))
	}
	if c.NATS.Hub.Replicas < 0 || c.NATS.Hub.Replicas > 5 {
		errs = append(errs, fmt.Errorf("nats.hub.replicas %d: want 1..5", c.NATS.Hub.Replicas))
	}
	if c.Standalone() && c.NATS.Domain != "" {
		errs = append(errs, fmt.Errorf("nats.domain %q: a region's domain needs nats.url (the region's own server); the embedded broker has none", c.NATS.Domain))
	}
	if c.Standalone() && len(c.NATS.Hub.Sources) > 0 {
		errs = append(errs, errors.New("nats.hub.sources: a hub needs nats.url (the hub cluster); a standalone agent has none"))
	}
	if err := c.StreamConfig().Validate(); err != nil {
		errs = append(errs, fmt.Errorf("nats: %w", err))
	}
	if role == RoleRollup && c.NATS.Domain != "" && len(c.NATS.Hub.Sources) == 0 {
		errs = append(errs, fmt.Errorf("nats.hub.sources: the agents publish to their region's domain (nats.domain %q), so the rollup needs the hub's sources (--nats-hub-sources region=domain,…)", c.NATS.Domain))
	}
	if role == RoleRollup && len(c.NATS.Hub.Sources) > 0 {
		if err := c.HubStreamConfig().Validate(); err != nil {
			errs = append(errs, fmt.Errorf("nats.hub: %w", err))
		}
	}
	if err := c.ConsumerConfig(nil).Validate(); err != nil {
		errs = append(errs, fmt.Errorf("nats: %w", err))
	}
	if c.NATS.URL != "" {
		if err := c.ConnConfig("check").Validate(); err != nil {
			errs = append(errs, fmt.Errorf("nats: %w", err))
		}
	}
	return errs
}

// minLogBytes is the smallest agent.log_max_bytes: the log's segments are
// a quarter of it, and one record (one request of up to 1 MiB) must fit in
// a segment.
const minLogBytes = 8 << 20

// readErrors checks the agent's read settings.
func (c Config) readErrors() []error {
	var errs []error
	if c.Agent.CacheTTL < 0 {
		errs = append(errs, fmt.Errorf("agent.cache_ttl %v: want >= 0", c.Agent.CacheTTL))
	}
	if c.Agent.CacheTTLPushed < 0 {
		errs = append(errs, fmt.Errorf("agent.cache_ttl_pushed %v: want >= 0", c.Agent.CacheTTLPushed))
	}
	if t := c.Agent.FreshPeerTimeout; t <= 0 || t > time.Minute {
		errs = append(errs, fmt.Errorf("agent.fresh_peer_timeout %v: want 1ns..1m", t))
	}
	return errs
}

// logErrors checks the agent's log settings.
func (c Config) logErrors() []error {
	var errs []error
	d, err := wal.ParseDurability(c.Agent.Durability)
	if err != nil {
		errs = append(errs, fmt.Errorf("agent.durability %q: want fsync, interval or none", c.Agent.Durability))
	}
	if d == wal.Interval && c.Agent.DurabilityInterval <= 0 {
		errs = append(errs, fmt.Errorf("agent.durability_interval %v: must be positive with durability interval", c.Agent.DurabilityInterval))
	}
	if d != wal.None && c.Agent.LogMaxBytes < minLogBytes {
		errs = append(errs, fmt.Errorf("agent.log_max_bytes %d: want at least %d", c.Agent.LogMaxBytes, minLogBytes))
	}
	if d != wal.None && c.Agent.Data == "" {
		errs = append(errs, errors.New("agent.data: must not be empty with a durable log"))
	}
	if w := c.Agent.Idempotency.Window; w < time.Second || w > 30*24*time.Hour {
		errs = append(errs, fmt.Errorf("agent.idempotency.window %v: want 1s..720h", w))
	}
	if n := c.Agent.Idempotency.MaxKeys; n < 1 || n > 100_000_000 {
		errs = append(errs, fmt.Errorf("agent.idempotency.max_keys %d: want 1..100000000", n))
	}
	return errs
}

// Standalone reports whether the agent runs with the embedded broker.
func (c Config) Standalone() bool { return c.NATS.URL == "" }

// AgentConfig returns the region package's configuration.
func (c Config) AgentConfig() region.Config {
	ac := region.DefaultConfig(c.Region, c.Agent.ID)
	ac.Partitions = c.Partitions
	ac.FlushInterval = c.Agent.FlushInterval
	ac.CacheTTL, ac.CachePushedTTL = c.Agent.CacheTTL, c.Agent.CacheTTLPushed
	ac.FreshPeerTimeout = c.Agent.FreshPeerTimeout
	ac.SourcedStream = c.NATS.Domain != ""
	ac.Log = region.LogConfig{
		Durability: wal.Durability(c.Agent.Durability), Dir: filepath.Join(c.Agent.Data, "log"),
		SyncInterval: c.Agent.DurabilityInterval, MaxBytes: c.Agent.LogMaxBytes,
	}
	ac.Idempotency = region.IdempotencyConfig{Window: c.Agent.Idempotency.Window, MaxKeys: c.Agent.Idempotency.MaxKeys}
	t := c.Trending
	ac.Trending = region.TrendingConfig{
		Counters: t.Counters, SummaryBytes: t.SummaryBytes, ListLen: t.ListLen,
		Hot:     region.HotConfig{Top: t.HotTop, Window: t.HotWindow, Shards: t.HotShards, CoolAfter: t.HotCoolAfter},
		Regions: c.Regions,
	}
	return ac
}

// RollupTrendingConfig returns the rollup's trending configuration.
func (c Config) RollupTrendingConfig() rollup.TrendingConfig {
	return rollup.TrendingConfig{Partitions: c.Partitions, RowItems: c.Trending.RowItems, Interval: c.Trending.Interval}
}

// ConnConfig returns the NATS connection settings for a client called name.
func (c Config) ConnConfig(name string) natsjs.ConnConfig {
	cc := natsjs.DefaultConnConfig()
	cc.URL, cc.Name = c.NATS.URL, name
	cc.CredsFile, cc.NKeyFile = c.NATS.CredsFile, c.NATS.NKeyFile
	cc.CAFile, cc.CertFile, cc.KeyFile = c.NATS.CAFile, c.NATS.CertFile, c.NATS.KeyFile
	return cc
}

// AgentConnConfig is ConnConfig for an agent: its JetStream requests go
// to its region's domain (nats.domain), if any.
func (c Config) AgentConnConfig(name string) natsjs.ConnConfig {
	cc := c.ConnConfig(name)
	cc.Domain = c.NATS.Domain
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
	if c.NATS.DuplicateWindow != 0 {
		sc.DuplicateWindow = c.NATS.DuplicateWindow
	}
	if c.NATS.Domain != "" && !c.Standalone() {
		sc.Domain = c.NATS.Domain
		sc.MaxAge, sc.MaxBytes = DefaultOriginMaxAge, DefaultOriginMaxBytes
	}
	if c.NATS.MaxAge != 0 {
		sc.MaxAge = c.NATS.MaxAge
	}
	if c.NATS.MaxBytes != 0 {
		sc.MaxBytes = c.NATS.MaxBytes
	}
	return sc
}

// HubStreamConfig returns the stream the rollups consume: with
// nats.hub.sources the hub stream (R nats.hub.replicas, sourcing each
// region's stream); without, the agents' stream (StreamConfig).
func (c Config) HubStreamConfig() natsjs.StreamConfig {
	sc := c.StreamConfig()
	if len(c.NATS.Hub.Sources) == 0 {
		return sc
	}
	origin := sc.Name
	sc.Domain, sc.MaxBytes = "", 0
	sc.MaxAge = natsjs.DefaultStreamConfig().MaxAge
	if c.NATS.Hub.Stream != "" {
		sc.Name = c.NATS.Hub.Stream
	}
	sc.Replicas = cmp.Or(c.NATS.Hub.Replicas, DefaultHubReplicas)
	sc.Hub = &natsjs.Hub{}
	for _, s := range c.NATS.Hub.Sources {
		sc.Hub.Sources = append(sc.Hub.Sources, natsjs.Source{Region: s.Region, Domain: s.Domain, Stream: cmp.Or(s.Stream, origin)})
	}
	return sc
}

// ConsumerConfig returns the rollup's consumer configuration.
func (c Config) ConsumerConfig(logger *slog.Logger) natsjs.ConsumerConfig {
	cc := natsjs.DefaultConsumerConfig()
	cc.Stream = c.HubStreamConfig()
	if c.NATS.Durable != "" {
		cc.Durable = c.NATS.Durable
	}
	switch {
	case c.NATS.AckWait != 0:
		cc.AckWait = c.NATS.AckWait
	case c.Standalone():
		cc.AckWait = StandaloneAckWait
	}
	cc.Logger = logger
	return cc
}

// StandaloneAckWait is the default nats.ack_wait of the embedded broker.
// Broker and rollup share the process there, so a crash kills both and the
// restarted rollup holds its first batch back until the dead run's
// unacknowledged deliveries come again, AckWait after the restart: at the
// hub's 30 s a graceful stop soon after a crash (agent.shutdown_timeout,
// 30 s) could not wait that long, and failed to apply them before exiting.
const StandaloneAckWait = 10 * time.Second

// RecountConfig returns the recount job's configuration: its settings,
// the stream's partitions and the partitions this process owns
// (rollup.owned; all when empty).
func (c Config) RecountConfig() rollup.RecountConfig {
	rc := rollup.DefaultRecountConfig()
	r := c.Rollup.Recount
	rc.Interval, rc.StaleAfter, rc.Sample, rc.Quiet, rc.Batch = r.Interval, r.StaleAfter, r.Sample, r.Quiet, r.Batch
	if r.CountBudget != 0 {
		rc.CountBudget = r.CountBudget
	}
	if r.ItemTimeout != 0 {
		rc.ItemTimeout = r.ItemTimeout
	}
	rc.ProgressFile = r.ProgressFile
	switch {
	case rc.ProgressFile != "", len(c.Cassandra.Hosts) > 0:
	case c.Standalone() && c.Agent.Data != "":
		rc.ProgressFile = filepath.Join(c.Agent.Data, "recount-progress.json")
	case c.Rollup.Data != "":
		rc.ProgressFile = filepath.Join(c.Rollup.Data, "recount-progress.json")
	}
	if rc.Quiet == 0 {
		rc.Quiet = defaultQuiet(c.Agent.FlushInterval)
	}
	rc.Partitions = c.Partitions
	for _, p := range c.Rollup.Owned {
		if p >= 0 {
			rc.Owned = append(rc.Owned, uint32(p))
		}
	}
	return rc
}

// GroupConfig returns the configuration of a rollup that shares the
// partitions with the other rollups (rollup.owned empty).
func (c Config) GroupConfig(logger *slog.Logger) natsjs.GroupConfig {
	gc := natsjs.DefaultGroupConfig()
	gc.Consumer = c.ConsumerConfig(logger)
	gc.MemberID = c.Rollup.MemberID
	if c.Rollup.MemberTTL > 0 {
		gc.MemberTTL = c.Rollup.MemberTTL
	}
	return gc
}

// GossipConfig returns the agent's gossip configuration (version is the
// build version told to peers).
func (c Config) GossipConfig(version string) (gossip.Config, error) {
	gc := gossip.DefaultConfig(c.Region, c.Agent.ID)
	gc.HTTPAddr, gc.Version = c.Agent.HTTP, version
	var errs []error
	hostPort := func(name, v string, host *string, port *int) {
		h, p, err := net.SplitHostPort(v)
		if err == nil {
			*port, err = strconv.Atoi(p)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %q: want host:port", name, v))
			return
		}
		*host = h
	}
	hostPort("gossip.bind", c.Gossip.Bind, &gc.BindAddr, &gc.BindPort)
	if c.Gossip.Advertise != "" {
		hostPort("gossip.advertise", c.Gossip.Advertise, &gc.AdvertiseAddr, &gc.AdvertisePort)
	}
	gc.Seeds, gc.KeyFile, gc.AllowPlaintext = c.Gossip.Seeds, c.Gossip.KeyFile, c.Gossip.AllowPlaintext
	if c.Gossip.Profile != "" {
		gc.Profile = gossip.Profile(c.Gossip.Profile)
	}
	return gc, errors.Join(errs...)
}

// defaultQuiet is the recount's quiet period when none is configured: the
// larger of 30 s and three flush intervals.
func defaultQuiet(flush time.Duration) time.Duration {
	return max(30*time.Second, 3*flush)
}

// RedisConfig returns the shard directory's configuration (redis.addr set).
func (c Config) RedisConfig() redisdir.Config {
	rc := redisdir.DefaultConfig()
	rc.Addr, rc.Username, rc.Password, rc.DB, rc.Region = c.Redis.Addr, c.Redis.Username, c.Redis.Password, c.Redis.DB, c.Region
	t := c.Redis.TLS
	rc.TLS = redisdir.TLSConfig{
		Enabled: t.Enabled || t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" || t.ServerName != "",
		CAFile:  t.CAFile, CertFile: t.CertFile, KeyFile: t.KeyFile, ServerName: t.ServerName,
	}
	return rc
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
	if c.Cassandra.IndexBuckets != 0 {
		cc.IndexBuckets = c.Cassandra.IndexBuckets
	}
	cc.RemoteDCFallback = c.Cassandra.RemoteDCFallback
	cc.ClockOffset = c.Cassandra.ClockOffset
	cc.Username, cc.Password = c.Cassandra.Username, c.Cassandra.Password
	t := c.Cassandra.TLS
	cc.TLS = cassandra.TLS{CAFile: t.CAFile, CertFile: t.CertFile, KeyFile: t.KeyFile, ServerName: t.ServerName, InsecureSkipVerify: t.InsecureSkipVerify}
	return cc
}
