package agentd

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/edgecount/edgecount/gossip"
	"github.com/edgecount/edgecount/internal/testenv"
	"github.com/edgecount/edgecount/region"
	"github.com/edgecount/edgecount/store/embedded"
	"github.com/edgecount/edgecount/store/embedded/embeddedtest"
)

// nowhere is a broker that takes nothing: every flush stays in its
// agent's outbox, so no delta reaches the store.
type nowhere struct{}

func (nowhere) Publish(ctx context.Context, _ uint32, _ string, _ []byte) error {
	<-ctx.Done()
	return ctx.Err()
}

// freshAgent is one agent of region "us" with its gossip node, wired as
// node.go wires them.
func freshAgent(t *testing.T, st *embedded.Store, id string) (*region.Agent, *gossip.Node) {
	t.Helper()
	cfg := region.DefaultConfig("us", id)
	cfg.FlushInterval = 20 * time.Millisecond
	// The default (50 ms) holds on a quiet machine; a loaded test machine
	// can take longer for a peer's first TCP stream.
	cfg.FreshPeerTimeout = 2 * time.Second
	a, err := region.New(cfg, region.Deps{Reactions: st, Stats: st, Publisher: nowhere{}})
	if err != nil {
		t.Fatal(err)
	}
	a.Start()
	gc := gossip.DefaultConfig("us", id)
	gc.BindAddr, gc.BindPort, gc.Profile, gc.RejoinInterval, gc.AllowPlaintext = "127.0.0.1", 0, gossip.ProfileFast, 0, true
	g, err := gossip.New(gc, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	g.SetQueryHandler(a.AnswerHeld)
	a.SetHeldPeers(freshPeers{g})
	t.Cleanup(func() {
		g.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		a.Stop(ctx) //nolint:errcheck // the outbox cannot drain: nowhere takes nothing
	})
	return a, g
}

// TestFreshShowsPeersHeldDeltas: two agents of one region, gossip peers,
// take writes that never reach the store; a fresh read on A shows what B
// holds (in its counters and in flushed messages), an eventual read shows
// the store's nothing, and once B is down A's fresh answer names it.
func TestFreshShowsPeersHeldDeltas(t *testing.T) {
	st := embeddedtest.Open(t, embedded.Config{Timeout: time.Second})
	a, ga := freshAgent(t, st, "us-a")
	b, gb := freshAgent(t, st, "us-b")
	if _, err := gb.Join(t.Context(), []string{ga.Addr()}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "a and b to see each other", testenv.Until(func() bool {
		return ga.NumLive() == 2 && gb.NumLive() == 2
	}))
	// A first fresh read puts both agents' flushes on remembering their
	// messages (docs/consistency.md: until then a flush keeps nothing).
	if _, err := a.ReadCounts(t.Context(), []string{"v0"}, region.Fresh, make([]region.CountRead, 1)); err != nil {
		t.Fatal(err)
	}
	if err := a.Increment(t.Context(), []region.Increment{{ContentID: "v1", Counter: "view", Delta: 3}}); err != nil {
		t.Fatal(err)
	}
	if err := b.Increment(t.Context(), []region.Increment{{ContentID: "v1", Counter: "view", Delta: 4}, {ContentID: "v1", Counter: "share", Delta: 1}}); err != nil {
		t.Fatal(err)
	}
	read := func(mode region.Consistency) (map[string]int64, region.ReadInfo) {
		dst := make([]region.CountRead, 1)
		info, err := a.ReadCounts(t.Context(), []string{"v1"}, mode, dst)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int64{}
		for _, r := range dst[0].Rows {
			if r.Scope == "global" {
				got = r.Counters
			}
		}
		return got, info
	}
	// Over several flush intervals (deltas move from the counters into
	// unacknowledged messages) the fresh answer stays 7 views, 1 share.
	for range 5 {
		got, info := read(region.Fresh)
		if got["view"] != 7 || got["share"] != 1 || len(info.Missing) != 0 || info.Peers != 1 {
			t.Fatalf("fresh = %v, %+v; want 7 views and 1 share from both agents", got, info)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got, _ := read(region.Eventual); len(got) != 0 {
		t.Errorf("eventual = %v, want nothing stored", got)
	}

	// B stops answering (its gossip node closed without leaving: A still
	// counts it live until the failure detector says otherwise).
	gb.Close()
	start := time.Now()
	got, info := read(region.Fresh)
	if took := time.Since(start); took > time.Second {
		t.Errorf("fresh read with a peer down took %v", took)
	}
	if ga.NumLive() == 2 {
		if !slices.Equal(info.Missing, []string{"us-b"}) {
			t.Errorf("missing = %q, want [us-b]", info.Missing)
		}
		if got["view"] != 3 {
			t.Errorf("fresh views with b down = %d, want a's own 3", got["view"])
		}
	}
}

// TestFreshNeverDoubleCounts: a standalone agent (real embedded NATS, its
// broker sequences, the in-process rollup and its row pushes) takes writes
// one at a time while a fresh read follows each: a fresh answer never
// exceeds what was acknowledged (no delta counted twice, whichever step of
// held, flushed, acknowledged, applied it is at), and once the writes
// stop it is the total, as eventual becomes.
func TestFreshNeverDoubleCounts(t *testing.T) {
	n := startTestNode(t, t.TempDir(), 30*time.Millisecond)
	defer shutdown(t, n)
	a := n.agent
	fresh := func(mode region.Consistency) int64 {
		dst := make([]region.CountRead, 1)
		if _, err := a.ReadCounts(t.Context(), []string{"nd1"}, mode, dst); err != nil {
			t.Fatal(err)
		}
		for _, r := range dst[0].Rows {
			if r.Scope == "global" {
				return r.Counters["view"]
			}
		}
		return 0
	}
	fresh(region.Fresh) // fresh reads in use from the first write on
	var acked int64
	deadline := time.Now().Add(3 * time.Second)
	misses := 0
	for time.Now().Before(deadline) {
		if err := a.Increment(t.Context(), []region.Increment{{ContentID: "nd1", Counter: "view", Delta: 1}}); err != nil {
			t.Fatal(err)
		}
		acked++
		got := fresh(region.Fresh)
		if got > acked {
			t.Fatalf("fresh = %d after %d acknowledged writes: counted twice", got, acked)
		}
		if got < acked {
			misses++
		}
	}
	t.Logf("%d writes; %d fresh answers behind (an ack in flight)", acked, misses)
	testenv.Eventually(t, 30*time.Second, "eventual to reach the total", func() (string, bool) {
		got := fresh(region.Eventual)
		return fmt.Sprint(got), got == acked
	})
	if got := fresh(region.Fresh); got != acked {
		t.Errorf("fresh = %d once everything is applied, want %d", got, acked)
	}
}
