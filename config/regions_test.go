package config

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/edgecount/edgecount/natsjs"
)

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
