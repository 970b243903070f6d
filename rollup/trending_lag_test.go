package rollup_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/internal/testenv"
	"github.com/edgecount/edgecount/natsjs"
	"github.com/edgecount/edgecount/natsjs/natsjstest"
	"github.com/edgecount/edgecount/region"
	"github.com/edgecount/edgecount/rollup"
	"github.com/edgecount/edgecount/rollupd"
	"github.com/edgecount/edgecount/store/embedded"
	"github.com/edgecount/edgecount/store/embedded/embeddedtest"
)

// regionPeers gives an agent the trending summaries of the other agents
// of its region, read from them in process: the in-memory transport of
// what gossip carries between processes.
type regionPeers struct {
	self   *region.Agent
	agents []*region.Agent // the region's, self included
}

func (p *regionPeers) PeerSummaries(key string) []region.PeerSummary {
	var out []region.PeerSummary
	for _, a := range p.agents {
		if a == p.self {
			continue
		}
		for _, s := range a.TrendingSummaries() {
			if s.Key == key {
				out = append(out, region.PeerSummary{Agent: a.Config().AgentID, AsOf: s.AsOf, Data: s.Data})
			}
		}
	}
	return out
}

// lagEnv reads a duration or count from the environment, for the
// measurement command (docs/trending.md).
func lagEnv(t *testing.T, name string, def int64, parse func(string) (int64, error)) int64 {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := parse(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive value", name, v)
	}
	return n
}

// TestTrendingGlobalLag measures G14: how long after the regional lists
// show a write the global list shows all of it, in flush intervals. Three
// regions of two agents (region.Agent, with their region peers' summaries
// as gossip would give them) publish through a real embedded NATS
// JetStream server to a rollup process (rollupd, the production wiring,
// with the trending configuration the agents' flush interval implies),
// which stores its lists in a real embedded store, read back by an agent.
//
// Each probe is a new item viewed in every region by both of its agents,
// a different number of times per region. t0 is when every region's own
// list (from its agents' summaries) counts its share, t1 when the global
// list's lower bound counts the whole and it is marked complete (every
// region included); the test fails if a list ever
// claims more than was sent (a bound that does not hold), if the global
// list never completes, or if the marks (regions, complete) are wrong
// once it has. It prints the distribution of t1-t0; it asserts no
// timing. The measurement command (1 s flush, 40 probes):
//
//	EDGECOUNT_TREND_FLUSH=1s EDGECOUNT_TREND_PROBES=40 go test -run TestTrendingGlobalLag -v ./rollup/
func TestTrendingGlobalLag(t *testing.T) {
	flush := time.Duration(lagEnv(t, "EDGECOUNT_TREND_FLUSH", int64(200*time.Millisecond), func(s string) (int64, error) {
		d, err := time.ParseDuration(s)
		return int64(d), err
	}))
	probes := int(lagEnv(t, "EDGECOUNT_TREND_PROBES", 4, func(s string) (int64, error) { return strconv.ParseInt(s, 10, 64) }))
	const partitions = 8
	ctx := context.Background()
	scfg := natsjs.DefaultServerConfig(t.TempDir())
	stream := natsjs.DefaultStreamConfig()
	stream.Name, stream.SubjectPrefix, stream.Partitions = "TREND_LAG", "trend.lag", partitions
	bus := natsjstest.Stream(t, scfg, "trend-lag", stream)
	st := embeddedtest.Open(t, embedded.Config{Timeout: 5 * time.Second})

	gcfg := natsjs.DefaultGroupConfig()
	gcfg.Consumer.Stream = stream
	gcfg.Consumer.RetryMin, gcfg.Consumer.RetryMax = 10*time.Millisecond, 50*time.Millisecond
	trending := rollup.DefaultTrendingConfig(partitions)
	trending.Interval = flush // as deployed: the rollup's interval is the agents' flush interval
	recount := rollup.DefaultRecountConfig()
	recount.Partitions, recount.Interval = partitions, 0
	all := make([]uint32, partitions)
	for i := range all {
		all[i] = uint32(i)
	}
	proc, err := rollupd.New(bus, st, rollupd.Config{Partitions: all, Group: gcfg, Trending: trending, Recount: recount, NoPush: true})
	if err != nil {
		t.Fatal(err)
	}
	pctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := proc.Run(pctx); err != nil {
			t.Errorf("rollup: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })

	regions := []string{"us-east", "eu-west", "ap-south"}
	byRegion := map[string][]*region.Agent{}
	for _, r := range regions {
		for i := range 2 {
			cfg := region.DefaultConfig(r, fmt.Sprintf("%s-%d", r, i))
			cfg.Partitions = partitions
			cfg.FlushInterval = flush
			cfg.Trending = region.TrendingConfig{Counters: []string{"view"}, ListLen: 100, Regions: regions}
			a, err := region.New(cfg, region.Deps{Reactions: st, Stats: st, Publisher: bus.Publisher(stream), Trending: st})
			if err != nil {
				t.Fatal(err)
			}
			a.Start()
			t.Cleanup(func() { a.Stop(context.Background()) })
			byRegion[r] = append(byRegion[r], a)
		}
	}
	for _, as := range byRegion {
		for _, a := range as {
			a.SetPeers(&regionPeers{self: a, agents: as})
		}
	}
	reader := byRegion["us-east"][0]

	// find returns the bounds of id in the list, and whether it is there.
	find := func(l engagement.Trending, id string) (lo, hi int64, ok bool) {
		for _, it := range l.Items {
			if it.ContentID == id {
				return it.Count - it.Error, it.Count, true
			}
		}
		return 0, 0, false
	}
	var lags []float64
	partialSeen := 0
	for k := range probes {
		id := fmt.Sprintf("probe-%d-%d", time.Now().UnixNano(), k)
		want := map[string]int64{}
		var total int64
		for ri, r := range regions {
			for _, a := range byRegion[r] {
				n := int64(1000 * (ri + 1))
				if err := a.Increment(ctx, []region.Increment{{ContentID: id, Counter: "view", Delta: n}}); err != nil {
					t.Fatal(err)
				}
				want[r] += n
				total += n
			}
		}
		var t0, t1 time.Time
		deadline := time.Now().Add(30*time.Second + 20*flush)
		for t1.IsZero() {
			if time.Now().After(deadline) {
				t.Fatalf("probe %d: global list not complete after %v (regional at %v)", k, 30*time.Second+20*flush, t0)
			}
			now := time.Now()
			if t0.IsZero() {
				seen := 0
				for _, r := range regions {
					l, err := byRegion[r][0].Trending(ctx, r, "view", engagement.Window5m, region.MaxTrendingK)
					if err != nil {
						t.Fatal(err)
					}
					lo, hi, ok := find(l, id)
					if ok && lo > want[r] {
						t.Fatalf("probe %d: %s list counts at least %d of %s, %d were sent", k, r, lo, id, want[r])
					}
					if ok && hi >= want[r] {
						seen++
					}
				}
				if seen == len(regions) {
					t0 = now
				}
			}
			v, err := reader.TrendingView(ctx, engagement.GlobalScope, "view", engagement.Window5m, region.MaxTrendingK)
			if err != nil {
				t.Fatal(err)
			}
			lo, _, ok := find(v.Trending, id)
			if ok && lo > total {
				t.Fatalf("probe %d: global list counts at least %d of %s, %d were sent", k, lo, id, total)
			}
			if ok && lo > 0 && lo < total {
				partialSeen++
			}
			if v.Complete != (len(v.Regions) == len(regions)) {
				t.Fatalf("probe %d: global list marked complete=%v with regions %+v (behind %+v) of %v", k, v.Complete, v.Regions, v.Behind, regions)
			}
			if ok && lo == total && v.Complete && !t0.IsZero() {
				t1 = now
			}
			time.Sleep(5 * time.Millisecond)
		}
		lags = append(lags, float64(t1.Sub(t0))/float64(flush))
		// The next probe starts at another phase of the flushes.
		time.Sleep(time.Duration(k%4) * flush / 4)
	}
	slices.Sort(lags)
	q := func(p float64) float64 { return lags[min(len(lags)-1, int(p*float64(len(lags))))] }
	t.Logf("G14 global trending complete after the regional lists, %d probes, flush %v: p50 %.2f, p90 %.2f, p99 %.2f, max %.2f flush intervals; %d polls saw a partial global count",
		len(lags), flush, q(0.50), q(0.90), q(0.99), lags[len(lags)-1], partialSeen)
	t.Logf("all (flush intervals): %.2f", lags)

	// A region that stops sending (its agents gone, as if cut off from
	// the hub) while the others go on: the global answer leaves it out of
	// its regions (behind) and says it is not complete.
	for _, a := range byRegion["ap-south"] {
		if err := a.Stop(ctx); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, 30*time.Second+20*flush, "a global answer that marks ap-south behind", func() (string, bool) {
		for _, r := range []string{"us-east", "eu-west"} {
			if err := byRegion[r][0].Increment(ctx, []region.Increment{{ContentID: "after-cut", Counter: "view", Delta: 1}}); err != nil {
				t.Fatal(err)
			}
		}
		v, err := reader.TrendingView(ctx, engagement.GlobalScope, "view", engagement.Window5m, 1)
		if err != nil {
			t.Fatal(err)
		}
		names := func(rs []engagement.RegionAsOf) (out []string) {
			for _, r := range rs {
				out = append(out, r.Region)
			}
			return out
		}
		got := fmt.Sprintf("complete %v, regions %v, behind %v", v.Complete, names(v.Regions), names(v.Behind))
		return got, !v.Complete && slices.Equal(names(v.Regions), []string{"eu-west", "us-east"}) && slices.Equal(names(v.Behind), []string{"ap-south"})
	})
}
