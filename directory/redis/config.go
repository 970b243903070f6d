package redis

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/edgecount/edgecount/engagement"
)

// MaxShards is the largest shard count Set accepts. The agent clamps further
// to its own maximum.
const MaxShards = 1 << 16

// Config configures a Directory. Build it from DefaultConfig and change what
// differs; Validate reports every problem at once.
type Config struct {
	// Addr is the Redis server, host:port.
	Addr string
	// Username and Password authenticate with Redis (ACL user, or only a
	// password for requirepass). Empty means no authentication. Neither
	// appears in a log line or an error.
	Username string
	Password string
	// TLS, when enabled, encrypts every connection and verifies the
	// server.
	TLS TLSConfig
	// DB is the Redis logical database.
	DB int

	// Region namespaces every key and the invalidation channel: agents of
	// one region share one directory, and regions sharing a Redis server do
	// not see each other's entries. It must be a valid region name
	// (engagement.ValidRegion).
	Region string
	// DefaultShards is the answer for a counter without an entry, and for
	// any counter whose entry is not cached yet or cannot be fetched.
	DefaultShards int
	// Channel is the pub/sub channel that carries invalidations. Empty means
	// "ec:{<region>}:directory".
	Channel string

	// DialTimeout bounds connecting to Redis; ReadTimeout and WriteTimeout
	// bound one command or pipeline on an open connection.
	DialTimeout  time.Duration
	ReadTimeout  time.Duration
	WriteTimeout time.Duration

	// PingInterval is the heartbeat of the invalidation subscription: when
	// no message arrived for this long the directory pings Redis over the
	// subscription, and when the ping stays unanswered for ReadTimeout it
	// drops the connection and subscribes again. A silently dead
	// connection goes unnoticed for at most PingInterval + ReadTimeout; a
	// closed one is noticed at once.
	PingInterval time.Duration
	// RefreshInterval is the safety net behind push invalidation (pub/sub
	// delivers at most once): this often the directory evicts the cached
	// items that nobody asked for since the last refresh and have no
	// explicit entry, and re-reads all the others from Redis.
	RefreshInterval time.Duration

	// QueueSize bounds the misses waiting to be fetched. A miss that finds
	// the queue full is answered with the default and not fetched
	// (Stats.Dropped).
	QueueSize int
	// BatchSize is the most lookups one pipelined round trip carries.
	BatchSize int
	// Fetchers is the number of goroutines fetching misses.
	Fetchers int
	// MaxItems bounds the cached content items. Beyond it a fetched item is
	// answered but not cached (Stats.Overflow).
	MaxItems int
}

// TLSConfig is the client's TLS (redis-server --tls-port).
type TLSConfig struct {
	// Enabled turns TLS on; without CAFile the server is verified against
	// the system's roots.
	Enabled bool
	// CAFile holds the PEM certificates that verify the server's.
	CAFile string
	// CertFile and KeyFile are the client's certificate and key (PEM), for
	// a server that authenticates clients (--tls-auth-clients yes).
	CertFile, KeyFile string
	// ServerName is the name verified in the server's certificate; empty
	// means the host of Addr.
	ServerName string
}

// clientConfig returns the tls.Config of t for a server at addr, nil when
// TLS is off. A file that cannot be read or holds no certificate is an
// error naming it.
func (t TLSConfig) clientConfig(addr string) (*tls.Config, error) {
	if !t.Enabled {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}
	if cfg.ServerName == "" {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("tls: no server name: addr %q: %w", addr, err)
		}
		cfg.ServerName = host
	}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("tls: cannot read ca_file: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls: ca_file %s holds no PEM certificate", t.CAFile)
		}
	}
	if t.CertFile != "" || t.KeyFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("tls: cannot load client certificate %s and key %s: %w", t.CertFile, t.KeyFile, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// Defaults of DefaultConfig.
const (
	DefaultAddr            = "127.0.0.1:6379"
	DefaultDialTimeout     = time.Second
	DefaultReadTimeout     = time.Second
	DefaultWriteTimeout    = time.Second
	DefaultPingInterval    = time.Second
	DefaultRefreshInterval = 10 * time.Minute
	DefaultQueueSize       = 4096
	DefaultBatchSize       = 128
	DefaultFetchers        = 1
	DefaultMaxItems        = 1 << 20
)

// DefaultConfig returns the configuration for region "local" on a Redis
// server at 127.0.0.1:6379, with one shard per counter by default.
func DefaultConfig() Config {
	return Config{
		Addr:            DefaultAddr,
		Region:          "local",
		DefaultShards:   1,
		DialTimeout:     DefaultDialTimeout,
		ReadTimeout:     DefaultReadTimeout,
		WriteTimeout:    DefaultWriteTimeout,
		PingInterval:    DefaultPingInterval,
		RefreshInterval: DefaultRefreshInterval,
		QueueSize:       DefaultQueueSize,
		BatchSize:       DefaultBatchSize,
		Fetchers:        DefaultFetchers,
		MaxItems:        DefaultMaxItems,
	}
}

// Validate reports every problem of c, joined.
func (c Config) Validate() error {
	var errs []error
	if c.Addr == "" {
		errs = append(errs, errors.New("addr is empty"))
	}
	if (c.TLS.CertFile == "") != (c.TLS.KeyFile == "") {
		errs = append(errs, errors.New("tls: cert file and key file go together"))
	}
	if c.DB < 0 {
		errs = append(errs, fmt.Errorf("db %d is negative", c.DB))
	}
	if !engagement.ValidRegion(c.Region) {
		errs = append(errs, fmt.Errorf("region %q is not a valid region name", c.Region))
	}
	if c.DefaultShards < 1 || c.DefaultShards > MaxShards {
		errs = append(errs, fmt.Errorf("default shards %d is outside 1..%d", c.DefaultShards, MaxShards))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"dial timeout", c.DialTimeout},
		{"read timeout", c.ReadTimeout},
		{"write timeout", c.WriteTimeout},
		{"ping interval", c.PingInterval},
		{"refresh interval", c.RefreshInterval},
	} {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("%s %v is not positive", d.name, d.v))
		}
	}
	for _, n := range []struct {
		name string
		v    int
	}{
		{"queue size", c.QueueSize},
		{"batch size", c.BatchSize},
		{"fetchers", c.Fetchers},
		{"max items", c.MaxItems},
	} {
		if n.v < 1 {
			errs = append(errs, fmt.Errorf("%s %d is below 1", n.name, n.v))
		}
	}
	return errors.Join(errs...)
}

// channel returns the invalidation channel of c.
func (c Config) channel() string {
	if c.Channel != "" {
		return c.Channel
	}
	return "ec:{" + c.Region + "}:directory"
}
