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
			`log_level "loud"`, `region "Global"`, `redis.addr "redis"`, "needs an external NATS"}},
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

// TestRegionalAgent: with nats.domain the agent's stream is its region's
// origin stream, with the outage budget's limits, and its JetStream
// requests go to that domain.
func TestRegionalAgent(t *testing.T) {
	c := Default()
	if err := c.LoadFile("testdata/region-agent.yaml"); err != nil {
		t.Fatal(err)
	}
	if err := c.Finish(RoleAgent); err != nil {
		t.Fatal(err)
	}
	sc := c.StreamConfig()
	if sc.Domain != "us-east" || sc.MaxAge != 2*time.Hour || sc.MaxBytes != 2<<30 || sc.DuplicateWindow != 2*time.Minute || sc.Hub != nil {
		t.Fatalf("agent stream %+v", sc)
	}
	if cc := c.AgentConnConfig("a"); cc.Domain != "us-east" || cc.URL != "nats://127.0.0.1:14301" {
		t.Fatalf("agent connection %+v", cc)
	}
	if cc := c.ConnConfig("r"); cc.Domain != "" {
		t.Fatalf("rollup connection has domain %q", cc.Domain)
	}
	// Defaults of a domain's stream, and the environment over the file.
	c.NATS.MaxAge, c.NATS.MaxBytes = 0, 0
	if sc := c.StreamConfig(); sc.MaxAge != DefaultOriginMaxAge || sc.MaxBytes != DefaultOriginMaxBytes {
		t.Fatalf("default origin limits %v %d", sc.MaxAge, sc.MaxBytes)
	}
	err := c.ApplyEnv(env(map[string]string{"EDGECOUNT_NATS_DOMAIN": "eu-west", "EDGECOUNT_NATS_MAX_AGE": "3h",
		"EDGECOUNT_NATS_MAX_BYTES": "1000000000", "EDGECOUNT_NATS_DUPLICATE_WINDOW": "5m"}))
	if err != nil {
		t.Fatal(err)
	}
	if sc := c.StreamConfig(); sc.Domain != "eu-west" || sc.MaxAge != 3*time.Hour || sc.MaxBytes != 1e9 || sc.DuplicateWindow != 5*time.Minute {
		t.Fatalf("agent stream after env %+v", sc)
	}
	// Without a domain (one broker) nothing changes: the defaults of today.
	c = Default()
	c.NATS.URL = "nats://127.0.0.1:4222"
	if sc, d := c.StreamConfig(), c.HubStreamConfig(); sc.Domain != "" || sc.MaxBytes != 0 || sc.MaxAge != 7*24*time.Hour || sc.Hub != nil || d != sc {
		t.Fatalf("single-broker stream %+v, consumed %+v", sc, d)
	}
}

// TestHubRollup: with nats.hub.sources the rollup consumes the hub stream,
// R3 by default, sourcing each region's stream.
func TestHubRollup(t *testing.T) {
	c := Default()
	if err := c.LoadFile("testdata/hub-rollup.yaml"); err != nil {
		t.Fatal(err)
	}
	if err := c.Finish(RoleRollup); err != nil {
		t.Fatal(err)
	}
	hc := c.HubStreamConfig()
	want := []natsjs.Source{{Region: "us-east", Domain: "us-east", Stream: "EDGECOUNT_SUMS"},
		{Region: "eu-west", Domain: "eu-west", Stream: "EDGECOUNT_SUMS"}, {Region: "ap-south", Domain: "ap-south", Stream: "EDGECOUNT_SUMS"}}
	if hc.Name != "EDGECOUNT_SUMS" || hc.Replicas != 3 || hc.Domain != "" || hc.MaxBytes != 0 || hc.Hub == nil || !reflect.DeepEqual(hc.Hub.Sources, want) {
		t.Fatalf("hub stream %+v", hc)
	}
	if gc := c.GroupConfig(nil); gc.Consumer.Stream.Hub == nil || gc.Consumer.Stream.Replicas != 3 {
		t.Fatalf("the group does not consume the hub stream: %+v", gc.Consumer.Stream)
	}
	err := c.ApplyEnv(env(map[string]string{"EDGECOUNT_NATS_HUB_SOURCES": "us-east=r1,eu-west=r2/ORIGIN",
		"EDGECOUNT_NATS_HUB_REPLICAS": "1", "EDGECOUNT_NATS_HUB_STREAM": "HUB"}))
	if err != nil {
		t.Fatal(err)
	}
	hc = c.HubStreamConfig()
	want = []natsjs.Source{{Region: "us-east", Domain: "r1", Stream: "EDGECOUNT_SUMS"}, {Region: "eu-west", Domain: "r2", Stream: "ORIGIN"}}
	if hc.Name != "HUB" || hc.Replicas != 1 || !reflect.DeepEqual(hc.Hub.Sources, want) {
		t.Fatalf("hub stream after env %+v", hc)
	}
	if err := c.ApplyEnv(env(map[string]string{"EDGECOUNT_NATS_HUB_SOURCES": "us-east,=x"})); err == nil ||
		!strings.Contains(err.Error(), `hub source "us-east"`) || !strings.Contains(err.Error(), `hub source "=x"`) {
		t.Fatalf("bad sources: %v", err)
	}
	// A rollup of regions on their own domains without sources would
	// consume nothing.
	c = Default()
	c.NATS.URL, c.NATS.Domain, c.Cassandra.Hosts = "nats://127.0.0.1:14222", "us-east", []string{"127.0.0.1"}
	if err := c.Finish(RoleRollup); err == nil || !strings.Contains(err.Error(), "nats.hub.sources") {
		t.Fatalf("rollup with a domain and no sources: %v", err)
	}
}

// TestBadHub: every bad regional key is reported, naming the key.
func TestBadHub(t *testing.T) {
	for _, tc := range []struct {
		role Role
		want []string
	}{
		{RoleAgent, []string{"nats.max_age -1h0m0s", "nats.max_bytes -5", `domain "us.east"`}},
		{RoleRollup, []string{"nats.hub.replicas 7", `domain "us-east" is listed twice`, `region "a b"`, `domain "x>"`}},
	} {
		c := Default()
		if err := c.LoadFile("testdata/bad-hub.yaml"); err != nil {
			t.Fatal(err)
		}
		err := c.Finish(tc.role)
		for _, w := range tc.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("role %d: error %v does not mention %s", tc.role, err, w)
			}
		}
	}
	c := Default()
	c.NATS.Domain = "us-east"
	if err := c.Finish(RoleAgent); err == nil || !strings.Contains(err.Error(), "nats.domain") {
		t.Errorf("standalone agent with a domain: %v", err)
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
