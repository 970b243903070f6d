package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	redisdir "github.com/edgecount/edgecount/directory/redis"
	"github.com/edgecount/edgecount/internal/testenv"
)

// endpoints is deploy/regions/.local/endpoints.json.
type endpoints struct {
	Regions map[string][]string `json:"regions"`
	Rollups []string            `json:"rollups"`
	Hub     struct {
		NATS        []string `json:"nats"`
		NATSMonitor []string `json:"nats_monitor"`
		CassandraDC string   `json:"cassandra_dc"`
	} `json:"hub"`
	Topology map[string]struct {
		Agents      []string `json:"agents"`
		NATS        string   `json:"nats"`
		NATSMonitor string   `json:"nats_monitor"`
		Domain      string   `json:"jetstream_domain"`
		CassandraDC string   `json:"cassandra_dc"`
		Cassandra   []string `json:"cassandra"`
	} `json:"topology"`
	Cassandra map[string][]string `json:"cassandra"`
}

// localSystem runs deploy/regions/local.sh up with a state directory, a
// port base (so brokers of its own) and a keyspace of this run's own on
// the two-DC cluster (sharedCluster), and stops it when the test ends.
func localSystem(t *testing.T) (eps endpoints, dir, run string, base int, system []string) {
	t.Helper()
	redisAddr := testenv.Addr("EDGECOUNT_REDIS", "127.0.0.1:6379")
	testenv.NeedService(t, "Redis", redisAddr, "./scripts/redis.sh start")
	cluster := sharedCluster(t)
	run = fmt.Sprintf("mr%d", rand.Uint32())
	dir = t.TempDir()
	base = freeBase(t)
	system = []string{
		"EDGECOUNT_REDIS_ADDR=" + redisAddr,
		"EDGECOUNT_CASSANDRA_HOSTS=" + cluster.hosts["dc1"] + "," + cluster.hosts["dc2"],
		"EDGECOUNT_CASSANDRA_KEYSPACE=" + run,
	}
	system = append(system, cluster.credentials()...)
	env := append(os.Environ(), system...)
	env = append(env, "EDGECOUNT_LOCAL_DIR="+dir, "EDGECOUNT_LOCAL_BASE="+strconv.Itoa(base),
		"EDGECOUNT_CASSANDRA_CLUSTER_BASE="+cluster.hosts["dc1"])
	script := filepath.Join("..", "deploy", "regions", "local.sh")
	localSh := func(verb string) ([]byte, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "bash", script, verb)
		cmd.Env = env
		return cmd.CombinedOutput()
	}
	out, err := localSh("up")
	t.Cleanup(func() {
		if out, err := localSh("down"); err != nil {
			t.Errorf("local.sh down: %v\n%s", err, out)
		}
		if t.Failed() {
			logs, _ := filepath.Glob(filepath.Join(dir, "logs", "*.log"))
			for _, l := range logs {
				b, _ := os.ReadFile(l)
				if len(b) > 4000 {
					b = b[len(b)-4000:]
				}
				t.Logf("--- %s (tail)\n%s", filepath.Base(l), b)
			}
		}
	})
	if err != nil {
		t.Fatalf("local.sh up: %v\n%s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "endpoints.json"))
	if err != nil {
		t.Fatalf("local.sh up wrote no endpoints: %v\n%s", err, out)
	}
	if err := json.Unmarshal(b, &eps); err != nil {
		t.Fatalf("endpoints.json: %v in %s", err, b)
	}
	if len(eps.Regions) != 3 || len(eps.Rollups) != 2 {
		t.Fatalf("endpoints = %+v; want 3 regions and 2 rollups", eps)
	}
	for r, urls := range eps.Regions {
		if len(urls) != 2 {
			t.Fatalf("region %s has %d agents; want 2", r, len(urls))
		}
		top := eps.Topology[r]
		if top.NATS == "" || top.Domain != r || len(top.Cassandra) != 1 || top.Cassandra[0] != cluster.hosts[topologyDC[r]]+":9042" || top.CassandraDC != topologyDC[r] {
			t.Fatalf("endpoints.json: region %s is %+v; want its broker (domain %s) and its data centre %s's node", r, top, r, topologyDC[r])
		}
		// The region's broker is linked to the hub.
		var lz struct {
			Leafnodes int `json:"leafnodes"`
		}
		if err := getJSON(&http.Client{Timeout: 5 * time.Second}, top.NATSMonitor+"/leafz", &lz); err != nil || lz.Leafnodes != 1 {
			t.Fatalf("%s's broker has %d leaf links (%v); want 1", r, lz.Leafnodes, err)
		}
	}
	if len(eps.Hub.NATS) != 3 || len(eps.Cassandra) != 2 || eps.Hub.CassandraDC != rollupDC {
		t.Fatalf("endpoints.json: hub %+v, cassandra %v; want 3 hub servers, the rollups in %s, 2 data centres", eps.Hub, eps.Cassandra, rollupDC)
	}
	return eps, dir, run, base, system
}

// freeBase returns a port base whose ports (local.sh's layout:
// base..base+390) were free a moment ago. The range lies below the
// kernel's ephemeral ports (ip_local_port_range): a port in that range
// that is free now can be handed to any outgoing connection (a Cassandra
// or NATS client, curl) before local.sh binds it, which once failed CI
// with "address already in use".
func freeBase(t *testing.T) int {
	t.Helper()
	lo := ephemeralLow()
	if lo < 10000+500 {
		t.Fatalf("the ephemeral port range starts at %d; this test needs 500 ports between 10000 and it", lo)
	}
	slots := (lo - 10000 - 400) / 100
	ports := []int{0, 1}
	for h := 1; h <= 3; h++ {
		ports = append(ports, 10+h, 20+h, 30+h, 40+h)
	}
	for i := 1; i <= 3; i++ {
		ports = append(ports, 100*i+1, 100*i+2, 100*i+51, 100*i+52, 100*i+80, 100*i+90)
	}
	for range 50 {
		base := 10000 + rand.IntN(slots)*100
		free := true
		for _, off := range ports {
			p := base + off
			ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
			if err != nil {
				free = false
				break
			}
			ln.Close()
		}
		if free {
			return base
		}
	}
	t.Fatal("no free port range for local.sh")
	return 0
}

// ephemeralLow returns the first port of the kernel's ephemeral range,
// 32768 (Linux's default) when /proc does not say.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 32768
	}
	lo, err := strconv.Atoi(f[0])
	if err != nil {
		return 32768
	}
	return lo
}

// redisAddrOf returns the Redis address among the system's settings.
func redisAddrOf(system []string) string {
	for _, kv := range system {
		if v, ok := strings.CutPrefix(kv, "EDGECOUNT_REDIS_ADDR="); ok {
			return v
		}
	}
	return ""
}

// pidOf returns the pid local.sh recorded for a process.
func pidOf(t *testing.T, dir, name string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "pids", name))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

type trendingList struct {
	Region string `json:"region"`
	Items  []struct {
		ContentID string `json:"content_id"`
		Count     int64  `json:"count"`
		Error     int64  `json:"error"`
	} `json:"items"`
}

// waitTrending polls GET /v1/trending until ok accepts the list.
func waitTrending(t *testing.T, base, query string, ok func(trendingList) bool) trendingList {
	t.Helper()
	var got trendingList
	testenv.Eventually(t, 60*time.Second, "trending "+query+" the test accepts", func() (string, bool) {
		status, body := get(t, base+"/v1/trending?"+query)
		got = trendingList{}
		return fmt.Sprintf("%d %s", status, body), status == http.StatusOK && json.Unmarshal([]byte(body), &got) == nil && ok(got)
	})
	return got
}

// TestThreeRegions drives the system deploy/regions/local.sh starts: three
// regions of two agents, each region on its own JetStream server (a leaf
// of the hub) and its own Cassandra data centre, and two rollups sharing
// the partitions on the hub of three, in dc1. Each regional row equals what its region took
// and the global row their sum; regional trending differs per region and
// global trending merges them; killing one agent (after its flush) and one
// rollup loses no acknowledged write, and the survivors keep serving.
func TestThreeRegions(t *testing.T) {
	began := time.Now()
	eps, dir, run, base, system := localSystem(t)
	phase := func(what string) { t.Logf("%6.1fs %s", time.Since(began).Seconds(), what) }
	phase("local.sh up")
	regions := []string{"us-east", "eu-west", "ap-south"}
	shared := run + "-shared"
	hot := func(r string) string { return run + "-hot-" + r }
	client := &http.Client{Timeout: 30 * time.Second}

	want := map[string]*counts{"global": {Counters: map[string]int64{}}}
	for _, r := range regions {
		want[r] = &counts{Counters: map[string]int64{}}
	}
	// write sends one region's share through one of its agents: likes on
	// the shared item by users of its own, and views of the shared item
	// and of the region's hot item.
	nextUser := 0
	write := func(region string, agent int, users, sharedViews, hotViews int) {
		t.Helper()
		base := eps.Regions[region][agent]
		for range users {
			nextUser++
			r := reaction{fmt.Sprintf("%s-%s-%d", run, region, nextUser), shared, "like"}
			if got, err := send(client, base+"/v1/reactions", r); err != nil || got.status != http.StatusOK {
				t.Fatalf("reaction in %s via %s = %+v, %v", region, base, got, err)
			}
		}
		incs := []map[string]any{{"content_id": shared, "counter": "view", "delta": sharedViews}}
		if hotViews > 0 {
			incs = append(incs, map[string]any{"content_id": hot(region), "counter": "view", "delta": hotViews})
		}
		if got, err := send(client, base+"/v1/increments", map[string]any{"increments": incs}); err != nil || got.status != http.StatusAccepted {
			t.Fatalf("increments in %s via %s = %+v, %v", region, base, got, err)
		}
		for _, scope := range []string{region, "global"} {
			want[scope].Likes += int64(users)
			want[scope].Counters["view"] += int64(sharedViews)
		}
	}
	for i, r := range regions {
		write(r, 0, 2+i, 10*(i+1), 100*(i+1))
		write(r, 1, 1+i, 5, 50*(i+1))
	}
	for _, scope := range append([]string{"global"}, regions...) {
		waitCounts(t, eps.Regions["ap-south"][1], shared, scope, *want[scope])
	}
	phase("totals converged")

	// Regional trending, answered by an agent of the region from its own
	// and its gossip peer's summaries: the region's own hot item leads.
	for i, r := range regions {
		waitTrending(t, eps.Regions[r][1], "region="+r+"&counter=view&window=5m&k=3", func(l trendingList) bool {
			return len(l.Items) > 0 && l.Items[0].ContentID == hot(r) && l.Items[0].Count >= int64(150*(i+1))
		})
	}
	phase("regional trending checked")
	// Global trending merges the regions: ap-south's hot item (450 views)
	// leads, then eu-west's (300), then us-east's (150).
	waitTrending(t, eps.Regions["us-east"][0], "region=global&counter=view&window=5m&k=3", func(l trendingList) bool {
		if len(l.Items) != 3 {
			return false
		}
		for i, r := range []string{"ap-south", "eu-west", "us-east"} {
			it := l.Items[i]
			if it.ContentID != hot(r) || it.Count-it.Error > int64(150*(3-i)) || it.Count < int64(150*(3-i)) {
				return false
			}
		}
		return true
	})
	phase("trending checked")
	// Hot counters: each region's agents give its hot item more shards in
	// the region's Redis directory (the default rule: top 10 over 5m → 64
	// shards); another region's hot item keeps one there.
	for _, r := range regions {
		rc := redisdir.DefaultConfig()
		rc.Addr, rc.Region = redisAddrOf(system), r
		dir, err := redisdir.New(context.Background(), rc, nil)
		if err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, 60*time.Second, fmt.Sprintf("64 shards for %s's hot item in its directory", r), func() (string, bool) {
			n := dir.Shards(hot(r), "view")
			return fmt.Sprintf("%d shards", n), n == 64
		})
		other := hot(regions[(slices.Index(regions, r)+1)%len(regions)])
		if got := dir.Shards(other, "view"); got != 1 {
			t.Errorf("another region's hot item has %d shards in %s's directory, want 1", got, r)
		}
		dir.Close()
	}
	phase("hot counters checked")
	// Gossip: each agent sees its region's peer and no other region's.
	_, body := get(t, eps.Regions["eu-west"][0]+"/v1/cluster")
	var cluster struct {
		Region  string `json:"region"`
		Members []struct {
			Region string `json:"region"`
			State  string `json:"state"`
		} `json:"members"`
	}
	if err := json.Unmarshal([]byte(body), &cluster); err != nil || cluster.Region != "eu-west" || len(cluster.Members) != 2 {
		t.Fatalf("GET /v1/cluster = %s (%v); want eu-west's two agents", body, err)
	}
	for _, m := range cluster.Members {
		if m.Region != "eu-west" || m.State != "alive" {
			t.Fatalf("cluster member %+v; want alive eu-west agents only", m)
		}
	}

	// A last write through us-east's second agent, then wait until it has
	// flushed and published everything, and kill it; kill a rollup too.
	victim := eps.Regions["us-east"][1]
	write("us-east", 1, 3, 7, 0)
	flushes := metric(t, victim, "edgecount_agent_flushes_total")
	testenv.Eventually(t, 30*time.Second, fmt.Sprintf("the us-east agent's last writes flushed: %v flushes, an empty outbox", flushes+2), func() (string, bool) {
		n, out := metric(t, victim, "edgecount_agent_flushes_total"), metric(t, victim, "edgecount_agent_outbox_messages")
		return fmt.Sprintf("%v flushes, %v outbox messages", n, out), n >= flushes+2 && out == 0
	})
	for _, name := range []string{"us-east-2", "rollup-1"} {
		if err := syscall.Kill(pidOf(t, dir, name), syscall.SIGKILL); err != nil {
			t.Fatalf("cannot kill %s: %v", name, err)
		}
	}

	phase("agent and rollup killed")
	// The survivors keep serving: more writes in every region, and the
	// surviving rollup takes over the dead one's partitions.
	for _, r := range regions {
		write(r, 0, 2, 3, 1)
	}
	write("eu-west", 1, 1, 1, 1)
	for _, scope := range append([]string{"global"}, regions...) {
		waitCounts(t, eps.Regions["eu-west"][0], shared, scope, *want[scope])
	}
	phase("totals converged after the kills")
	var sum counts
	sum.Counters = map[string]int64{}
	for _, r := range regions {
		sum.Likes += want[r].Likes
		sum.Counters["view"] += want[r].Counters["view"]
	}
	if sum.String() != want["global"].String() {
		t.Fatalf("regions sum to %v; global is %v", sum, want["global"])
	}

	// An agent joining us-east picks up the region's trending state from
	// its gossip peer before it takes a single write.
	for _, kv := range system {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	t.Setenv("EDGECOUNT_GOSSIP_BIND", "127.0.0.1:0")
	t.Setenv("EDGECOUNT_GOSSIP_SEEDS", "127.0.0.1:"+strconv.Itoa(base+151))
	t.Setenv("EDGECOUNT_GOSSIP_KEY_FILE", filepath.Join(dir, "gossip.key"))
	t.Setenv("EDGECOUNT_GOSSIP_PROFILE", "local")
	// On us-east's broker, in its data centre.
	t.Setenv("EDGECOUNT_NATS_URL", eps.Topology["us-east"].NATS)
	t.Setenv("EDGECOUNT_CASSANDRA_LOCAL_DC", topologyDC["us-east"])
	joiner := start(t, "us-east-3", filepath.Join(dir, "bin", "edge-agent"), "--config", filepath.Join("..", "deploy", "regions", "us-east.yaml"),
		"--http", "127.0.0.1:0", "--agent-id", "us-east-3", "--data", t.TempDir())
	waitTrending(t, joiner.base, "region=us-east&counter=view&window=5m&k=1", func(l trendingList) bool {
		// us-east-1 took 100 + 1 views of the item; the joiner none.
		return len(l.Items) == 1 && l.Items[0].ContentID == hot("us-east") && l.Items[0].Count >= 101
	})
}
