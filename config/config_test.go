package config

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/edgecount/edgecount/natsjs"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestDefaultsAreStandalone(t *testing.T) {
	c := Default()
	if err := c.Finish(RoleAgent); err != nil {
		t.Fatal(err)
	}
	if !c.Standalone() || c.Agent.HTTP != "127.0.0.1:8080" || c.Agent.Data != "./data" || c.Region != "local" ||
		c.Agent.FlushInterval != time.Second || c.Partitions != 16 || !reflect.DeepEqual(c.Regions, []string{"local"}) ||
		!strings.HasPrefix(c.Agent.ID, "local-") {
		t.Fatalf("defaults = %+v", c)
	}
}

func TestGoodFile(t *testing.T) {
	c := Default()
	if err := c.LoadFile("testdata/good.yaml"); err != nil {
		t.Fatal(err)
	}
	if err := c.Finish(RoleAgent); err != nil {
		t.Fatal(err)
	}
	if c.Region != "eu-west" || c.Agent.ID != "eu-west-a1" || c.Agent.FlushInterval != 500*time.Millisecond ||
		c.Partitions != 32 || c.Standalone() || c.Redis.Addr != "127.0.0.1:6379" || c.Cassandra.Keyspace != "edgecount" {
		t.Fatalf("config = %+v", c)
	}
	cc := c.CassandraConfig()
	if cc.LocalDC != "datacenter1" || cc.Replication.Factor != 1 || cc.Keyspace != "edgecount" {
		t.Fatalf("cassandra config = %+v", cc)
	}
}

// TestEnvOverridesFile: defaults < file < environment (flags come last, in cmd/).
func TestEnvOverridesFile(t *testing.T) {
	c := Default()
	if err := c.LoadFile("testdata/good.yaml"); err != nil {
		t.Fatal(err)
	}
	err := c.ApplyEnv(env(map[string]string{
		"EDGECOUNT_REGION": "us-east", "EDGECOUNT_FLUSH_INTERVAL": "2s", "EDGECOUNT_CASSANDRA_HOSTS": "10.0.0.1,10.0.0.2",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Region != "us-east" || c.Agent.FlushInterval != 2*time.Second || c.Agent.HTTP != "127.0.0.1:9090" ||
		!reflect.DeepEqual(c.Cassandra.Hosts, []string{"10.0.0.1", "10.0.0.2"}) {
		t.Fatalf("config = %+v", c)
	}
}

// TestBadFixtures: every bad file gives the errors it should, all at once.
func TestBadFixtures(t *testing.T) {
	tests := []struct {
		file string
		role Role
		want []string
	}{
		{"bad-unknown-key.yaml", RoleAgent, []string{"flush_intervall", "not found"}},
		{"bad-type.yaml", RoleAgent, []string{"cannot parse config", "many"}},
		{"bad-values.yaml", RoleAgent, []string{
			`agent.http "nonsense"`, `"bad region" is not a valid region`, "partitions 0", "flush interval 1ms",
			`log_level "loud"`, `log_format "xml": want text or json`, `region "Global"`, `redis.addr "redis"`, "needs an external NATS"}},
		{"bad-cassandra.yaml", RoleAgent, []string{"keyspace", "SOMETIMES", "both a factor and data centres"}},
		{"bad-cassandra-dc.yaml", RoleAgent, []string{"cassandra:", "replication names 2 data centres",
			"username and password", "tls ca file: open testdata/tls/missing.pem"}},
		{"bad-mixed.yaml", RoleAgent, []string{"needs an external NATS"}},
		{"bad-mixed.yaml", RoleRollup, []string{"the rollup needs an external NATS"}},
		{"missing.yaml", RoleAgent, []string{"cannot read config"}},
		{"bad-gossip.yaml", RoleAgent, []string{`gossip.bind "7946"`, "turbo", "key file"}},
		{"bad-gossip.yaml", RoleRollup, []string{"rollup:", "bad id!", "ack wait -1s"}},
		{"bad-gossip-standalone.yaml", RoleAgent, []string{"gossip.bind: gossip joins a region's agents"}},
		{"bad-durability.yaml", RoleAgent, []string{`agent.durability "sometimes": want fsync, interval or none`}},
		{"bad-durability-interval.yaml", RoleAgent, []string{
			"agent.durability_interval 0s: must be positive", "agent.log_max_bytes 1000: want at least 8388608",
			"agent.data: must not be empty with a durable log"}},
		{"bad-idempotency.yaml", RoleAgent, []string{
			"agent.idempotency.window 100ms: want 1s..720h", "agent.idempotency.max_keys 0: want 1..100000000"}},
		{"bad-read.yaml", RoleAgent, []string{
			"agent.cache_ttl -1s: want >= 0", "agent.cache_ttl_pushed -2s: want >= 0", "agent.fresh_peer_timeout 0s: want 1ns..1m"}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			c := Default()
			err := c.LoadFile(filepath.Join("testdata", tt.file))
			if err == nil {
				err = c.Finish(tt.role)
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// TestGossipAndGroup: the gossip section and the rollup's group settings
// reach the configurations of gossip.Node and natsjs.GroupConsumer, and a
// key file is required unless plain text is allowed.
func TestGossipAndGroup(t *testing.T) {
	c := Default()
	if err := c.LoadFile("testdata/good.yaml"); err != nil {
		t.Fatal(err)
	}
	err := c.ApplyEnv(env(map[string]string{
		"EDGECOUNT_GOSSIP_BIND": "127.0.0.1:7946", "EDGECOUNT_GOSSIP_SEEDS": "127.0.0.1:7947,127.0.0.1:7948",
		"EDGECOUNT_GOSSIP_PROFILE": "local", "EDGECOUNT_ROLLUP_MEMBER_ID": "r1", "EDGECOUNT_ROLLUP_MEMBER_TTL": "2s",
		"EDGECOUNT_NATS_ACK_WAIT": "10s",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Finish(RoleAgent); err == nil || !strings.Contains(err.Error(), "gossip") {
		t.Fatalf("gossip without a key file: error %v; want one naming gossip", err)
	}
	c.Gossip.KeyFile = "/etc/edgecount/gossip.key"
	if err := c.Finish(RoleAgent); err != nil {
		t.Fatal(err)
	}
	gc, err := c.GossipConfig("v1")
	if err != nil || gc.BindAddr != "127.0.0.1" || gc.BindPort != 7946 || len(gc.Seeds) != 2 || gc.Profile != "local" ||
		gc.Region != "eu-west" || gc.AgentID != "eu-west-a1" || gc.KeyFile != "/etc/edgecount/gossip.key" {
		t.Fatalf("gossip config = %+v, %v", gc, err)
	}
	if err := c.Finish(RoleRollup); err != nil {
		t.Fatal(err)
	}
	if g := c.GroupConfig(nil); g.MemberID != "r1" || g.MemberTTL != 2*time.Second || g.Consumer.AckWait != 10*time.Second {
		t.Fatalf("group config = %+v", g)
	}
}

// TestDurability: the log settings default to fsync, come from the file
// and the environment, and reach the agent's configuration.
func TestDurability(t *testing.T) {
	c := Default()
	if err := c.Finish(RoleAgent); err != nil {
		t.Fatal(err)
	}
	if lc := c.AgentConfig().Log; lc.Durability != "fsync" || lc.Dir != filepath.Join("data", "log") || lc.MaxBytes != 1<<30 || !c.Agent.IDDefaulted {
		t.Fatalf("default log config = %+v, id defaulted %v", lc, c.Agent.IDDefaulted)
	}
	err := c.ApplyEnv(env(map[string]string{
		"EDGECOUNT_DURABILITY": "interval", "EDGECOUNT_DURABILITY_INTERVAL": "5ms", "EDGECOUNT_LOG_MAX_BYTES": "16777216",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Finish(RoleAgent); err != nil {
		t.Fatal(err)
	}
	if lc := c.AgentConfig().Log; lc.Durability != "interval" || lc.SyncInterval != 5*time.Millisecond || lc.MaxBytes != 16<<20 {
		t.Fatalf("log config from the environment = %+v", lc)
	}
	c.Agent.Durability = "none"
	c.Agent.LogMaxBytes = 0
	if err := c.Finish(RoleAgent); err != nil || c.AgentConfig().Log.Enabled() {
		t.Fatalf("durability none: %v, log enabled %v", err, c.AgentConfig().Log.Enabled())
	}
	d := Default()
	if err := d.ApplyEnv(env(map[string]string{"EDGECOUNT_LOG_MAX_BYTES": "lots"})); err == nil || !strings.Contains(err.Error(), "EDGECOUNT_LOG_MAX_BYTES") {
		t.Fatalf("bad EDGECOUNT_LOG_MAX_BYTES: %v", err)
	}
}

func TestBadEnvironment(t *testing.T) {
	c := Default()
	err := c.ApplyEnv(env(map[string]string{"EDGECOUNT_FLUSH_INTERVAL": "soon", "EDGECOUNT_PARTITIONS": "x"}))
	for _, w := range []string{"EDGECOUNT_FLUSH_INTERVAL", "EDGECOUNT_PARTITIONS"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("error %v does not mention %s", err, w)
		}
	}
}

// TestShippedRegionFiles loads every file in deploy/regions for both roles.
func TestShippedRegionFiles(t *testing.T) {
	files, err := filepath.Glob("../deploy/regions/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 3 {
		t.Fatalf("deploy/regions has %d region files, want at least 3", len(files))
	}
	seen := map[string]bool{}
	for _, f := range files {
		for _, role := range []Role{RoleAgent, RoleRollup} {
			c := Default()
			if err := c.LoadFile(f); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if err := c.Finish(role); err != nil {
				t.Fatalf("%s (role %d): %v", f, role, err)
			}
			if want := strings.TrimSuffix(filepath.Base(f), ".yaml"); c.Region != want {
				t.Fatalf("%s names region %q", f, c.Region)
			}
			seen[c.Region] = true
		}
	}
	if len(seen) < 3 {
		t.Fatalf("regions %v, want at least 3", seen)
	}
}

// TestRecountProgressFile: the recount keeps its unfinished counts beside
// the embedded store by default, nowhere with Cassandra (rollups would
// share a file), and where it is told.
func TestRecountProgressFile(t *testing.T) {
	c := Default()
	c.Agent.Data = "/var/lib/edgecount"
	if got := c.RecountConfig().ProgressFile; got != "/var/lib/edgecount/recount-progress.json" {
		t.Errorf("standalone progress file %q", got)
	}
	c.Cassandra.Hosts = []string{"127.0.0.1"}
	if got := c.RecountConfig().ProgressFile; got != "" {
		t.Errorf("progress file with Cassandra %q; want none", got)
	}
	c.Rollup.Recount.ProgressFile, c.Rollup.Recount.CountBudget, c.Rollup.Recount.ItemTimeout = "/tmp/p.json", 500, time.Minute
	rc := c.RecountConfig()
	if rc.ProgressFile != "/tmp/p.json" || rc.CountBudget != 500 || rc.ItemTimeout != time.Minute {
		t.Errorf("recount config %+v", rc)
	}
	c.Cassandra.IndexBuckets = 256
	if got := c.CassandraConfig().IndexBuckets; got != 256 {
		t.Errorf("index buckets %d; want 256", got)
	}
}

// TestAuth: auth is a mapping or the scalar none, from YAML or the
// environment, and contradictions are refused.
func TestAuth(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	c := Default()
	if err := c.LoadFile(write("none.yaml", "auth: none\n")); err != nil || c.Auth.Mode != "none" {
		t.Fatalf("auth: none → %+v, %v", c.Auth, err)
	}
	c = Default()
	if err := c.LoadFile(write("map.yaml", "auth:\n  tokens_file: /etc/edgecount/tokens\n  open_metrics: true\n")); err != nil ||
		c.Auth.TokensFile != "/etc/edgecount/tokens" || !c.Auth.OpenMetrics {
		t.Fatalf("auth mapping → %+v, %v", c.Auth, err)
	}
	c = Default()
	if err := c.LoadFile(write("bad.yaml", "auth: open\n")); err == nil {
		t.Fatal("auth: open accepted")
	}
	c = Default()
	env := map[string]string{"EDGECOUNT_AUTH_TOKENS": "/tmp/t", "EDGECOUNT_AUTH": "none"}
	if err := c.ApplyEnv(func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	if err := c.Finish(RoleAgent); err == nil || !strings.Contains(err.Error(), "contradict") {
		t.Fatalf("none with a token file: %v; want refused", err)
	}
}

// TestTLS: the listeners' certificates and the Redis client's TLS come from
// YAML and the environment; a certificate without its key is refused, and
// any Redis TLS setting turns the client's TLS on.
func TestTLS(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tls.yaml")
	yaml := `nats:
  url: nats://127.0.0.1:4222
cassandra:
  hosts: [127.0.0.1]
agent:
  tls: {cert_file: /etc/ec/agent.pem, key_file: /etc/ec/agent-key.pem}
rollup:
  tls: {cert_file: /etc/ec/rollup.pem, key_file: /etc/ec/rollup-key.pem}
redis:
  addr: redis.internal:6380
  username: agent
  password: secret
  tls: {ca_file: /etc/ec/redis-ca.pem, server_name: redis.internal}
`
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	c := Default()
	if err := c.LoadFile(path); err != nil {
		t.Fatal(err)
	}
	if err := c.Finish(RoleAgent); err != nil {
		t.Fatal(err)
	}
	if c.Agent.TLS != (TLS{"/etc/ec/agent.pem", "/etc/ec/agent-key.pem"}) || c.Rollup.TLS != (TLS{"/etc/ec/rollup.pem", "/etc/ec/rollup-key.pem"}) {
		t.Errorf("tls = %+v, %+v", c.Agent.TLS, c.Rollup.TLS)
	}
	rc := c.RedisConfig()
	if !rc.TLS.Enabled || rc.TLS.CAFile != "/etc/ec/redis-ca.pem" || rc.TLS.ServerName != "redis.internal" ||
		rc.Username != "agent" || rc.Password != "secret" || rc.Addr != "redis.internal:6380" || rc.Region != c.Region {
		t.Errorf("redis config = %+v", rc)
	}
	if err := rc.Validate(); err != nil {
		t.Errorf("redis config: %v", err)
	}

	c = Default()
	err := c.ApplyEnv(env(map[string]string{
		"EDGECOUNT_TLS_CERT": "/a.pem", "EDGECOUNT_ROLLUP_TLS_KEY": "/r-key.pem",
		"EDGECOUNT_REDIS_ADDR": "127.0.0.1:6380", "EDGECOUNT_REDIS_USERNAME": "u", "EDGECOUNT_REDIS_TLS_CERT": "/c.pem",
		"EDGECOUNT_REDIS_TLS_CA": "/ca.pem", "EDGECOUNT_REDIS_TLS_SERVER_NAME": "r", "EDGECOUNT_NATS_URL": "nats://127.0.0.1:4222",
		"EDGECOUNT_CASSANDRA_HOSTS": "127.0.0.1",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Agent.TLS.CertFile != "/a.pem" || c.Rollup.TLS.KeyFile != "/r-key.pem" || c.Redis.Username != "u" ||
		c.Redis.TLS != (RedisTLS{CAFile: "/ca.pem", CertFile: "/c.pem", ServerName: "r"}) {
		t.Fatalf("from the environment: %+v", c)
	}
	for role, want := range map[Role][]string{
		RoleAgent:  {"agent.tls: cert_file and key_file go together", "redis.tls: cert_file and key_file go together"},
		RoleRollup: {"rollup.tls: cert_file and key_file go together"},
	} {
		c := c
		err := c.Finish(role)
		for _, w := range want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("role %d: %v; want %q", role, err, w)
			}
		}
	}
	c = Default()
	c.Redis.Addr = "127.0.0.1:6379"
	if c.RedisConfig().TLS.Enabled {
		t.Error("Redis TLS on with nothing set")
	}
	c.Redis.TLS.Enabled = true
	if !c.RedisConfig().TLS.Enabled {
		t.Error("redis.tls.enabled: true left TLS off")
	}
}

// TestCassandraDataCentres: a region in dc2 of a two-data-centre cluster,
// with TLS and a password from the environment that no printed form shows.
func TestCassandraDataCentres(t *testing.T) {
	const canary = "canary-pw-31f9a0"
	c := Default()
	if err := c.LoadFile("testdata/cassandra-dc.yaml"); err != nil {
		t.Fatal(err)
	}
	if err := c.ApplyEnv(env(map[string]string{"EDGECOUNT_CASSANDRA_PASSWORD": canary})); err != nil {
		t.Fatal(err)
	}
	if err := c.Finish(RoleAgent); err != nil {
		t.Fatal(err)
	}
	cc := c.CassandraConfig()
	if cc.LocalDC != "dc2" || !reflect.DeepEqual(cc.Replication.DataCenters, map[string]int{"dc1": 1, "dc2": 1}) ||
		cc.Consistency != "LOCAL_ONE" || cc.SerialConsistency != "SERIAL" || !cc.RemoteDCFallback ||
		cc.Username != "edgecount" || cc.Password != canary ||
		cc.TLS.CAFile != "testdata/tls/ca.pem" || cc.TLS.ServerName != "cassandra.internal" || !cc.TLS.Enabled() {
		t.Fatalf("cassandra config = %v", cc)
	}
	var logs strings.Builder
	slog.New(slog.NewTextHandler(&logs, nil)).Info("config", "cassandra", c.Cassandra, "store", cc, "all", c)
	for where, s := range map[string]string{
		"config %+v": fmt.Sprintf("%+v", c), "config %v": fmt.Sprint(c), "section": fmt.Sprint(c.Cassandra),
		"store config": fmt.Sprintf("%+v", cc), "log": logs.String(),
	} {
		if strings.Contains(s, canary) {
			t.Errorf("the password shows in the %s: %s", where, s)
		}
	}
}

// TestReadSettingsReachTheAgent: the read cache's TTLs and the fresh read's
// wait for peers reach region.Config, with their defaults when unset.
func TestReadSettingsReachTheAgent(t *testing.T) {
	c := Default()
	if got := c.AgentConfig(); got.FreshPeerTimeout != 50*time.Millisecond || got.CacheTTL != 100*time.Millisecond || got.CachePushedTTL != 5*time.Second {
		t.Fatalf("defaults: fresh %v, ttl %v, pushed %v; want 50ms, 100ms, 5s", got.FreshPeerTimeout, got.CacheTTL, got.CachePushedTTL)
	}
	c.Agent.FreshPeerTimeout, c.Agent.CacheTTL, c.Agent.CacheTTLPushed = 200*time.Millisecond, time.Second, 2*time.Second
	if got := c.AgentConfig(); got.FreshPeerTimeout != 200*time.Millisecond || got.CacheTTL != time.Second || got.CachePushedTTL != 2*time.Second {
		t.Fatalf("set: fresh %v, ttl %v, pushed %v; want 200ms, 1s, 2s", got.FreshPeerTimeout, got.CacheTTL, got.CachePushedTTL)
	}
}

// TestAckWaitDefaults: the embedded broker's rollup waits StandaloneAckWait
// for a dead run's deliveries, an external broker's the consumer default,
// and nats.ack_wait overrides both.
func TestAckWaitDefaults(t *testing.T) {
	c := Default()
	if got := c.ConsumerConfig(nil).AckWait; got != StandaloneAckWait {
		t.Errorf("standalone ack wait = %v, want %v", got, StandaloneAckWait)
	}
	c.NATS.URL = "nats://127.0.0.1:4222"
	if got, want := c.ConsumerConfig(nil).AckWait, natsjs.DefaultConsumerConfig().AckWait; got != want {
		t.Errorf("external broker ack wait = %v, want %v", got, want)
	}
	c.NATS.AckWait = 7 * time.Second
	if got := c.ConsumerConfig(nil).AckWait; got != 7*time.Second {
		t.Errorf("configured ack wait = %v, want 7s", got)
	}
	c.NATS.URL = ""
	if got := c.ConsumerConfig(nil).AckWait; got != 7*time.Second {
		t.Errorf("configured standalone ack wait = %v, want 7s", got)
	}
}
