package cassandra

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
)

// Defaults of DefaultConfig.
const (
	DefaultKeyspace          = "edgecount"
	DefaultPort              = 9042
	DefaultConsistency       = "LOCAL_QUORUM"
	DefaultSerialConsistency = "SERIAL"
	// DefaultTimeout is above Cassandra's own request timeouts (2 s for
	// writes, 5 s for reads, 1 s of LWT contention by default), so a slow
	// request is answered by the server with a typed timeout rather than cut
	// off by the client.
	DefaultTimeout        = 6 * time.Second
	DefaultConnectTimeout = 5 * time.Second
	// DefaultIndexBuckets is the bucket count of a new keyspace's
	// by-content index: at 10^8 reactions on one item, 7.8·10^5 entries
	// (under 100 MB with 36-byte user ids) per partition; see
	// docs/data-model.md.
	DefaultIndexBuckets = 128
	// MaxIndexBuckets bounds Config.IndexBuckets.
	MaxIndexBuckets = 4096
)

// Config configures a Store. The zero value is not usable; start from
// DefaultConfig.
type Config struct {
	// Hosts are the contact points: addresses of some nodes of the cluster
	// (the driver discovers the rest). An entry may carry its own port as
	// "host:port".
	Hosts []string
	// Port is the CQL native port of hosts that do not name one.
	Port int
	// Keyspace holds edgecount's tables. Open creates it if missing, with
	// Replication; an existing keyspace is used as it is and never altered.
	// It must be a lower-case CQL identifier: [a-z][a-z0-9_]{0,47}.
	Keyspace string
	// LocalDC is the data centre of this process. When set, requests go to
	// replicas in it (token-aware, then round robin over its nodes) and to
	// no other data centre unless RemoteDCFallback is set; when empty, to
	// any replica of the row's token. With Replication.DataCenters naming
	// several data centres it is required, and must be one of them.
	LocalDC string
	// RemoteDCFallback lets requests go to another data centre's nodes when
	// no node of LocalDC can take them. LOCAL_* levels then count replicas
	// of that remote coordinator's data centre, so a region silently reads
	// another region's replicas (and writes there at a remote round trip per
	// request). Off by default: a region whose data centre is down answers
	// unavailable, and its rollup catches up when the data centre returns.
	RemoteDCFallback bool
	// Username and Password log in with Cassandra's PasswordAuthenticator
	// (both or neither). The password never appears in an error, a log line
	// or the Config's printed form.
	Username string
	Password string
	// TLS encrypts client connections when any of its fields is set.
	TLS TLS
	// Replication is used only when Open creates the keyspace.
	Replication Replication
	// Consistency of reads and plain writes, and of the commit of
	// lightweight transactions: ONE, LOCAL_ONE, QUORUM, LOCAL_QUORUM,
	// EACH_QUORUM or ALL. The default, LOCAL_QUORUM, needs a majority of the
	// local data centre's replicas; on a one-node test cluster it is that
	// node, so the default works there unchanged (as would ONE/LOCAL_ONE).
	Consistency string
	// SerialConsistency of lightweight transactions (the Paxos phase) and of
	// the read that settles a transaction whose outcome is unknown: SERIAL or
	// LOCAL_SERIAL. The default, SERIAL, runs Paxos across all data centres,
	// so two regions can never both apply a change conditioned on the same
	// row version. LOCAL_SERIAL is only safe when every writer of a row is in
	// one data centre; with edgecount's agents in several regions it would
	// let a user's two simultaneous toggles, sent to two regions, both apply.
	SerialConsistency string
	// Timeout bounds one request attempt on the client side. It must be
	// above the server's request timeouts, and above cas_contention_timeout
	// plus write_request_timeout (1 s + 2 s by default): a reaction write
	// whose answer did not come within Timeout is settled on the assumption
	// that the server has given up on it by then.
	Timeout time.Duration
	// ConnectTimeout bounds dialling and the connection handshake.
	ConnectTimeout time.Duration
	// IndexBuckets is the number of partitions of each item's by-content
	// index (1..MaxIndexBuckets). The first Open of a keyspace records it
	// (0 records DefaultIndexBuckets); later ones must pass 0 or the same
	// value: a keyspace's bucket count never changes.
	IndexBuckets int
	// ClockOffset shifts the clock of this store's write timestamps (and
	// of ClockSkew) by the offset. For tests of clock skew only: a
	// process whose clock is off the others' by more than the fence
	// margin can lose its writes to theirs (docs/rollup-ownership.md).
	ClockOffset time.Duration

	// dialer, when set, opens the driver's connections (tests use it to
	// lose a connection at a chosen moment).
	dialer gocql.Dialer
}

// TLS configures client-to-node encryption. Files are PEM.
type TLS struct {
	// CAFile holds the certificates that sign the nodes' (the system's
	// roots when empty).
	CAFile string
	// CertFile and KeyFile are the client's certificate and key, for nodes
	// that require client authentication (both or neither).
	CertFile, KeyFile string
	// ServerName is the name the nodes' certificates must carry; empty
	// means each node's address (an IP SAN).
	ServerName string
	// InsecureSkipVerify accepts any node certificate (encryption without
	// authentication of the server). For tests only.
	InsecureSkipVerify bool
}

// Enabled reports whether t asks for TLS.
func (t TLS) Enabled() bool {
	return t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" || t.ServerName != "" || t.InsecureSkipVerify
}

// String prints c with its password redacted; LogValue does the same for
// log/slog, and GoString for %#v.
func (c Config) String() string { return fmt.Sprintf("%+v", c.redacted()) }

// GoString is String, for %#v.
func (c Config) GoString() string { return c.String() }

// LogValue logs c with its password redacted.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.Any("hosts", c.Hosts), slog.Int("port", c.Port), slog.String("keyspace", c.Keyspace),
		slog.String("local_dc", c.LocalDC), slog.Bool("remote_dc_fallback", c.RemoteDCFallback),
		slog.String("consistency", c.Consistency), slog.String("serial_consistency", c.SerialConsistency),
		slog.String("username", c.Username), slog.Bool("password_set", c.Password != ""),
		slog.Bool("tls", c.TLS.Enabled()))
}

// redactedConfig has Config's fields but prints no password.
type redactedConfig struct {
	Hosts                   []string
	Port                    int
	Keyspace, LocalDC       string
	RemoteDCFallback        bool
	Username, Password      string
	TLS                     TLS
	Replication             Replication
	Consistency, Serial     string
	Timeout, ConnectTimeout time.Duration
	IndexBuckets            int
}

func (c Config) redacted() redactedConfig {
	r := redactedConfig{
		Hosts: c.Hosts, Port: c.Port, Keyspace: c.Keyspace, LocalDC: c.LocalDC, RemoteDCFallback: c.RemoteDCFallback,
		Username: c.Username, TLS: c.TLS, Replication: c.Replication, Consistency: c.Consistency,
		Serial: c.SerialConsistency, Timeout: c.Timeout, ConnectTimeout: c.ConnectTimeout, IndexBuckets: c.IndexBuckets,
	}
	if c.Password != "" {
		r.Password = "[redacted]"
	}
	return r
}

// Replication is the replication of a keyspace that Open creates.
type Replication struct {
	// DataCenters maps each data centre to its replication factor
	// (NetworkTopologyStrategy). Production clusters use this.
	DataCenters map[string]int
	// Factor is the replication factor of SimpleStrategy, used when
	// DataCenters is empty: 1 for a one-node test cluster.
	Factor int
}

// DefaultConfig returns the configuration for a one-node cluster on
// 127.0.0.1:9042: keyspace "edgecount" with SimpleStrategy factor 1,
// LOCAL_QUORUM reads and writes, SERIAL lightweight transactions.
func DefaultConfig() Config {
	return Config{
		Hosts:             []string{"127.0.0.1"},
		Port:              DefaultPort,
		Keyspace:          DefaultKeyspace,
		Replication:       Replication{Factor: 1},
		Consistency:       DefaultConsistency,
		SerialConsistency: DefaultSerialConsistency,
		Timeout:           DefaultTimeout,
		ConnectTimeout:    DefaultConnectTimeout,
	}
}

var (
	keyspaceRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,47}$`)
	// dcRE bounds data-centre names to what can sit inside a quoted CQL
	// string literal without escaping.
	dcRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)
)

// Validate reports every problem of c.
func (c Config) Validate() error {
	var errs []error
	if len(c.Hosts) == 0 {
		errs = append(errs, errors.New("hosts is empty"))
	}
	for i, h := range c.Hosts {
		if strings.TrimSpace(h) == "" {
			errs = append(errs, fmt.Errorf("host %d is empty", i))
		}
	}
	if c.Port < 1 || c.Port > 65535 {
		errs = append(errs, fmt.Errorf("port %d is not in 1…65535", c.Port))
	}
	if !keyspaceRE.MatchString(c.Keyspace) {
		errs = append(errs, fmt.Errorf("keyspace %q is not a lower-case identifier of 1–48 characters", c.Keyspace))
	}
	if c.LocalDC != "" && !dcRE.MatchString(c.LocalDC) {
		errs = append(errs, fmt.Errorf("local data centre %q is not a valid name", c.LocalDC))
	}
	errs = append(errs, c.Replication.validate()...)
	if dcs := c.Replication.DataCenters; len(dcs) > 0 && c.LocalDC != "" {
		if _, ok := dcs[c.LocalDC]; !ok {
			errs = append(errs, fmt.Errorf("local data centre %q is not one of the replication's data centres (%s)", c.LocalDC, strings.Join(slices.Sorted(maps.Keys(dcs)), ", ")))
		}
	} else if len(dcs) > 1 {
		errs = append(errs, fmt.Errorf("local data centre is empty, but replication names %d data centres: name the one of this process", len(dcs)))
	}
	if c.RemoteDCFallback && c.LocalDC == "" {
		errs = append(errs, errors.New("remote data centre fallback needs a local data centre"))
	}
	if (c.Username == "") != (c.Password == "") {
		errs = append(errs, errors.New("username and password: give both or neither"))
	}
	if c.TLS.Enabled() {
		if _, err := c.TLS.config(); err != nil {
			errs = append(errs, err)
		}
	}
	if _, err := c.consistency(); err != nil {
		errs = append(errs, err)
	}
	if _, err := c.serialConsistency(); err != nil {
		errs = append(errs, err)
	}
	if c.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("timeout %v is not positive", c.Timeout))
	}
	if c.ConnectTimeout <= 0 {
		errs = append(errs, fmt.Errorf("connect timeout %v is not positive", c.ConnectTimeout))
	}
	if c.IndexBuckets < 0 || c.IndexBuckets > MaxIndexBuckets {
		errs = append(errs, fmt.Errorf("index buckets %d: want 0 (the keyspace's, %d for a new one) or 1..%d", c.IndexBuckets, DefaultIndexBuckets, MaxIndexBuckets))
	}
	return errors.Join(errs...)
}

func (r Replication) validate() []error {
	var errs []error
	if len(r.DataCenters) == 0 {
		if r.Factor < 1 {
			errs = append(errs, fmt.Errorf("replication factor %d is not positive", r.Factor))
		}
		return errs
	}
	if r.Factor != 0 {
		errs = append(errs, errors.New("replication names both a factor and data centres; give one"))
	}
	for _, dc := range slices.Sorted(maps.Keys(r.DataCenters)) {
		if !dcRE.MatchString(dc) {
			errs = append(errs, fmt.Errorf("replication data centre %q is not a valid name", dc))
		}
		if f := r.DataCenters[dc]; f < 1 {
			errs = append(errs, fmt.Errorf("replication factor %d of data centre %q is not positive", f, dc))
		}
	}
	return errs
}

// cql returns the replication map of CREATE KEYSPACE. r must be valid.
func (r Replication) cql() string {
	if len(r.DataCenters) == 0 {
		return fmt.Sprintf("{'class': 'SimpleStrategy', 'replication_factor': %d}", r.Factor)
	}
	var b strings.Builder
	b.WriteString("{'class': 'NetworkTopologyStrategy'")
	for _, dc := range slices.Sorted(maps.Keys(r.DataCenters)) {
		fmt.Fprintf(&b, ", '%s': %d", dc, r.DataCenters[dc])
	}
	b.WriteString("}")
	return b.String()
}

// consistency parses c.Consistency.
func (c Config) consistency() (gocql.Consistency, error) {
	v, err := gocql.ParseConsistencyWrapper(c.Consistency)
	if err != nil {
		return 0, fmt.Errorf("consistency %q is not a consistency level", c.Consistency)
	}
	switch v {
	case gocql.One, gocql.LocalOne, gocql.Quorum, gocql.LocalQuorum, gocql.EachQuorum, gocql.All:
		return v, nil
	}
	return 0, fmt.Errorf("consistency %s cannot serve both reads and writes; use ONE, LOCAL_ONE, QUORUM, LOCAL_QUORUM, EACH_QUORUM or ALL", v)
}

// serialConsistency parses c.SerialConsistency.
func (c Config) serialConsistency() (gocql.Consistency, error) {
	v, err := gocql.ParseConsistencyWrapper(c.SerialConsistency)
	if err != nil || (v != gocql.Serial && v != gocql.LocalSerial) {
		return 0, fmt.Errorf("serial consistency %q is not SERIAL or LOCAL_SERIAL", c.SerialConsistency)
	}
	return v, nil
}
