package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/edgecount/edgecount/client"
	redisdir "github.com/edgecount/edgecount/directory/redis"
)

// TestShardChangeReachesEveryAgent runs two agents of one region against
// the real Redis directory: after an operator changes a hot counter's shard
// list in Redis, both agents see the change (and reshard their live
// counter) within one second, without a restart.
func TestShardChangeReachesEveryAgent(t *testing.T) {
	natsAddr, redisAddr, cassAddr := faultServers(t, true)
	agentBin, _ := binaries(t)
	file, run := faultConfig(t, natsAddr, redisAddr, cassAddr)
	a1 := start(t, "edge-agent-1", agentBin, "--config", file, "--http", "127.0.0.1:0", "--agent-id", run+"-a1", "--data", t.TempDir())
	a2 := start(t, "edge-agent-2", agentBin, "--config", file, "--http", "127.0.0.1:0", "--agent-id", run+"-a2", "--data", t.TempDir())
	ctx := context.Background()
	for _, a := range []*proc{a1, a2} { // make the counter live on both agents
		c, err := client.New(a.base)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Increments(ctx, []client.Increment{{ContentID: "hot-" + run, Counter: "view", Delta: 1}}); err != nil {
			t.Fatalf("%s: %v", a.name, err)
		}
	}
	before := []float64{metric(t, a1.base, "edgecount_directory_changes_total"), metric(t, a2.base, "edgecount_directory_changes_total")}

	cfg := redisdir.DefaultConfig()
	cfg.Addr, cfg.Region = redisAddr, "us-east"
	operator, err := redisdir.New(ctx, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer operator.Close()
	t.Cleanup(func() { operator.Delete(context.Background(), "hot-"+run, "view") })
	set := time.Now()
	if err := operator.Set(ctx, "hot-"+run, "view", 16); err != nil {
		t.Fatal(err)
	}
	for i, a := range []*proc{a1, a2} {
		for metric(t, a.base, "edgecount_directory_changes_total") <= before[i] {
			if time.Since(set) > 5*time.Second {
				t.Fatalf("%s did not see the shard change within 5s", a.name)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	// The design bound is one second; a loaded CI machine gets a margin in
	// the poll above, and the measured time is reported.
	t.Logf("both agents saw the change %v after Set", time.Since(set).Round(time.Millisecond))
}
