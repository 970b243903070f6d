package gossip

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/edgecount/edgecount/internal/testenv"
)

// cluster starts len(names) nodes of region sharing keys, all joined to the
// first, and waits until each sees all.
func cluster(t *testing.T, region, keys string, names ...string) ([]*Node, []*recorder) {
	t.Helper()
	var nodes []*Node
	var recs []*recorder
	for i, name := range names {
		n, rec := startNode(t, testConfig(region, name, keys))
		if i > 0 {
			join(t, n, nodes[0])
		}
		nodes, recs = append(nodes, n), append(recs, rec)
	}
	testenv.Eventually(t, 15*time.Second, "cluster forms", testenv.UntilEmpty(seesLive(nodes, names...)))
	return nodes, recs
}

func TestMembersCarryMetadata(t *testing.T) {
	keys := keyFile(t, newKey(t))
	nodes, recs := cluster(t, "us-east", keys, "a", "b", "c")
	fp := nodes[0].KeyFingerprints()
	for _, n := range nodes {
		ms := n.Members()
		if len(ms) != 3 {
			t.Fatalf("%s: %d members, want 3", n.Name(), len(ms))
		}
		for _, m := range ms {
			want := testConfig("us-east", m.Name, keys)
			if m.Region != "us-east" || m.AgentID != m.Name || m.HTTPAddr != want.HTTPAddr || m.Version != want.Version ||
				m.State != StateAlive || !slices.Equal(m.KeyFingerprints, fp) || m.Self != (m.Name == n.Name()) {
				t.Errorf("%s sees %+v; want region us-east, agent %s, http %s, version %s, alive, keys %v",
					n.Name(), m, m.Name, want.HTTPAddr, want.Version, fp)
			}
		}
	}
	for _, name := range []string{"b", "c"} {
		if !recs[0].has(EventJoin, name) {
			t.Errorf("a got no join event for %s", name)
		}
	}
	if got := nodes[0].Stats().Joins.Load(); got != 2 {
		t.Errorf("a counted %d joins, want 2", got)
	}
}

func TestPublishReachesEveryMember(t *testing.T) {
	keys := keyFile(t, newKey(t))
	nodes, _ := cluster(t, "us-east", keys, "a", "b", "c")
	a := nodes[0]
	small := []byte("top-k summary of likes")
	large := bytes.Repeat([]byte("0123456789abcdef"), 1024) // 16 KiB: TCP, not a packet
	for _, tc := range []struct {
		key  string
		data []byte
	}{
		{"like", small},
		{"view", large},
		{"like", []byte("a newer summary of likes")},
		{"view", append(large, 'x')},
	} {
		if err := a.Publish(tc.key, tc.data); err != nil {
			t.Fatalf("Publish(%s): %v", tc.key, err)
		}
		testenv.Eventually(t, 15*time.Second, "value "+tc.key+" reaches b and c", testenv.UntilEmpty(hasValue(nodes[1:], "a", tc.key, tc.data)))
	}
	if s := a.Stats(); s.Broadcasts.Load() < 2 || s.ReliableSends.Load() < 2 {
		t.Errorf("a: broadcasts %d, reliable sends %d; want ≥ 2 of each (small by UDP, large by TCP)",
			s.Broadcasts.Load(), s.ReliableSends.Load())
	}
	if got := a.Peers("like"); len(got) != 0 {
		t.Errorf("a.Peers(like) = %d values, want none (own values are not peers')", len(got))
	}
}

func TestLateJoinerGetsStateByPushPull(t *testing.T) {
	keys := keyFile(t, newKey(t))
	nodes, _ := cluster(t, "eu-west", keys, "a", "b", "c")
	large := bytes.Repeat([]byte{7}, 8<<10)
	for _, n := range nodes {
		if err := n.Publish("like", []byte("small from "+n.Name())); err != nil {
			t.Fatal(err)
		}
		if err := n.Publish("share", append([]byte(n.Name()), large...)); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range nodes {
		others := slices.DeleteFunc(slices.Clone(nodes), func(o *Node) bool { return o == n })
		testenv.Eventually(t, 15*time.Second, "values of "+n.Name()+" spread", testenv.UntilEmpty(hasValue(others, n.Name(), "like", []byte("small from "+n.Name()))))
	}
	// Broadcasts are retransmitted a few times and then dropped; large
	// values were sent once, to the members of the time. After that only a
	// push/pull can bring the values to a newcomer.
	testenv.Eventually(t, 15*time.Second, "broadcast queues drain", testenv.UntilEmpty(func() string {
		for _, n := range nodes {
			if q := n.QueuedBroadcasts(); q != 0 {
				return fmt.Sprintf("%s has %d queued", n.Name(), q)
			}
		}
		return ""
	}))
	d, _ := startNode(t, testConfig("eu-west", "d", keys))
	join(t, d, nodes[0])
	if got := len(d.Peers("like")) + len(d.Peers("share")); got != 6 {
		t.Fatalf("right after joining, d holds %d values, want 6", got)
	}
	for _, n := range nodes {
		if msg := hasValue([]*Node{d}, n.Name(), "share", append([]byte(n.Name()), large...))(); msg != "" {
			t.Error(msg)
		}
	}
}

func TestLeaveAndFailureAreObserved(t *testing.T) {
	keys := keyFile(t, newKey(t))
	nodes, recs := cluster(t, "us-east", keys, "a", "b", "c")
	a, b, c := nodes[0], nodes[1], nodes[2]
	for _, n := range nodes {
		if err := n.Publish("like", []byte(n.Name())); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, 15*time.Second, "values spread", testenv.UntilEmpty(hasValue([]*Node{a}, "b", "like", []byte("b"))))
	testenv.Eventually(t, 15*time.Second, "values spread", testenv.UntilEmpty(hasValue([]*Node{a}, "c", "like", []byte("c"))))

	if err := c.Leave(5e9); err != nil {
		t.Fatalf("Leave: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 15*time.Second, "c seen left", testenv.UntilEmpty(func() string {
		if !recs[0].has(EventLeave, "c") || !recs[1].has(EventLeave, "c") {
			return "no leave event for c at a or b"
		}
		return ""
	}))
	if err := b.Close(); err != nil { // no Leave: a failure
		t.Fatal(err)
	}
	testenv.Eventually(t, 15*time.Second, "b seen dead", testenv.UntilEmpty(func() string {
		if !recs[0].has(EventFail, "b") {
			return "no fail event for b at a"
		}
		return ""
	}))
	if !recs[0].has(EventSuspect, "b") {
		t.Error("a (b's only prober) got no suspect event for b before it failed")
	}
	states := map[string]State{}
	for _, m := range a.Members() {
		states[m.Name] = m.State
	}
	if want := map[string]State{"a": StateAlive, "b": StateDead, "c": StateLeft}; !mapsEqual(states, want) {
		t.Errorf("a sees states %v, want %v", states, want)
	}
	if got := a.Peers("like"); len(got) != 0 {
		t.Errorf("a still holds %d values of departed members", len(got))
	}
	if s := a.Stats(); s.Leaves.Load() != 1 || s.Failures.Load() != 1 {
		t.Errorf("a counted %d leaves, %d failures; want 1, 1", s.Leaves.Load(), s.Failures.Load())
	}
	// A late update from the dead node is refused, not resurrected.
	refused := a.Stats().UpdatesRefused.Load()
	a.receive(encodeEntries(nil, []entry{{Origin: "b", Key: "like", Version: 1 << 62, Millis: 1, Data: []byte("zombie")}}), true)
	if got := a.Stats().UpdatesRefused.Load(); got != refused+1 || len(a.Peers("like")) != 0 {
		t.Errorf("update from dead b: refused %d→%d, a holds %d values; want refused +1 and none", refused, got, len(a.Peers("like")))
	}
}

func mapsEqual(a, b map[string]State) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestIntrudersRejectedAndCounted: nodes with the wrong key, no key, or
// another label cannot join, and the seed counts what it dropped.
func TestIntrudersRejectedAndCounted(t *testing.T) {
	good := keyFile(t, newKey(t))
	seed, _ := startNode(t, testConfig("us-east", "seed", good))
	for _, tc := range []struct {
		name    string
		cfg     Config
		counter func(*Stats) uint64
	}{
		{"wrong key", testConfig("us-east", "x1", keyFile(t, newKey(t))), func(s *Stats) uint64 { return s.KeyRejected.Load() }},
		{"no key", testConfig("us-east", "x2", ""), func(s *Stats) uint64 { return s.KeyRejected.Load() }},
		{"wrong label", func() Config {
			c := testConfig("us-east", "x3", good)
			c.label = "edgecount/elsewhere"
			return c
		}(), func(s *Stats) uint64 { return s.LabelRejected.Load() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.counter(seed.Stats())
			x, _ := startNode(t, tc.cfg)
			if k, err := x.Join(t.Context(), []string{seed.Addr()}); err == nil || !errors.Is(err, ErrNoSeed) {
				t.Fatalf("Join = %d, %v; want ErrNoSeed", k, err)
			}
			testenv.Eventually(t, 15*time.Second, "rejection counted", testenv.UntilEmpty(func() string {
				if got := tc.counter(seed.Stats()); got <= before {
					return fmt.Sprintf("counter at %d, was %d", got, before)
				}
				return ""
			}))
			if got := liveNames(seed); !slices.Equal(got, []string{"seed"}) {
				t.Errorf("seed sees %v, want only itself", got)
			}
		})
	}
	t.Run("no label", func(t *testing.T) {
		// A plain memberlist node (another system) sends no label at all.
		before := seed.Stats().LabelRejected.Load()
		mc := memberlist.DefaultLocalConfig()
		mc.Name, mc.BindAddr, mc.BindPort = "x4", "127.0.0.1", 0
		mc.LogOutput = io.Discard
		ml, err := memberlist.Create(mc)
		if err != nil {
			t.Fatal(err)
		}
		defer ml.Shutdown()
		if _, err := ml.Join([]string{seed.Addr()}); err == nil {
			t.Fatal("an unlabelled memberlist node joined the seed")
		}
		testenv.Eventually(t, 15*time.Second, "rejection counted", testenv.UntilEmpty(func() string {
			if got := seed.Stats().LabelRejected.Load(); got <= before {
				return fmt.Sprintf("label rejections at %d, was %d", got, before)
			}
			return ""
		}))
	})
	if got := liveNames(seed); !slices.Equal(got, []string{"seed"}) {
		t.Errorf("seed sees %v, want only itself", got)
	}
}

// TestRegionsNeverMerge: two regions' clusters stay apart even when a node
// is pointed at the other region's seed, whether the label stops it or,
// behind a label misconfigured to match, the region in its metadata.
func TestRegionsNeverMerge(t *testing.T) {
	keys := keyFile(t, newKey(t)) // even with one key for both regions
	east, _ := cluster(t, "us-east", keys, "e1", "e2")
	west, _ := cluster(t, "eu-west", keys, "w1", "w2")

	before := east[0].Stats().LabelRejected.Load()
	if _, err := west[1].Join(t.Context(), []string{east[0].Addr()}); err == nil {
		t.Fatal("a eu-west node joined us-east")
	}
	testenv.Eventually(t, 15*time.Second, "us-east counts the label rejection", testenv.UntilEmpty(func() string {
		if got := east[0].Stats().LabelRejected.Load(); got <= before {
			return fmt.Sprintf("label rejections %d → %d", before, got)
		}
		return ""
	}))

	cfg := testConfig("eu-west", "w3", keys)
	cfg.label = LabelPrefix + "us-east"
	spy, _ := startNode(t, cfg)
	refused := east[0].Stats().RefusedNodes.Load()
	if _, err := spy.Join(t.Context(), []string{east[0].Addr()}); err == nil {
		t.Fatal("a eu-west node with us-east's label joined us-east")
	}
	testenv.Eventually(t, 15*time.Second, "us-east refuses the eu-west node", testenv.UntilEmpty(func() string {
		if got := east[0].Stats().RefusedNodes.Load(); got <= refused {
			return fmt.Sprintf("refused nodes %d → %d", refused, got)
		}
		return ""
	}))
	testenv.Eventually(t, 15*time.Second, "regions stay apart", testenv.UntilEmpty(seesLive(east, "e1", "e2")))
	testenv.Eventually(t, 15*time.Second, "regions stay apart", testenv.UntilEmpty(seesLive(west, "w1", "w2")))
}

func TestKeyRotationWithoutPartition(t *testing.T) {
	oldKey, newKey := newKey(t), newKey(t)
	names := []string{"a", "b", "c"}
	var files []string
	var nodes []*Node
	for i, name := range names {
		f := keyFile(t, oldKey)
		files = append(files, f)
		n, _ := startNode(t, testConfig("ap-south", name, f))
		if i > 0 {
			join(t, n, nodes[0])
		}
		nodes = append(nodes, n)
	}
	testenv.Eventually(t, 15*time.Second, "cluster forms", testenv.UntilEmpty(seesLive(nodes, names...)))
	oldFP, newFP := Fingerprint(oldKey), Fingerprint(newKey)

	for step, tc := range []struct {
		keys [][]byte
		want []string // fingerprints every member shows, primary first
	}{
		{[][]byte{oldKey, newKey}, []string{oldFP, newFP}},
		{[][]byte{newKey, oldKey}, []string{newFP, oldFP}},
		{[][]byte{newKey}, []string{newFP}},
	} {
		for i, n := range nodes {
			writeKeys(t, files[i], tc.keys...)
			if err := n.ReloadKeys(); err != nil {
				t.Fatalf("step %d: %s.ReloadKeys: %v", step+1, n.Name(), err)
			}
			// Between two reloads the nodes differ; they must keep talking.
			data := []byte(fmt.Sprintf("step %d after %s", step+1, n.Name()))
			if err := nodes[0].Publish("like", data); err != nil {
				t.Fatal(err)
			}
			testenv.Eventually(t, 15*time.Second, "gossip flows mid-rotation", testenv.UntilEmpty(hasValue(nodes[1:], "a", "like", data)))
		}
		testenv.Eventually(t, 15*time.Second, fmt.Sprintf("step %d visible in /v1/cluster", step+1), testenv.UntilEmpty(func() string {
			for _, n := range nodes {
				for _, m := range n.Members() {
					if !slices.Equal(m.KeyFingerprints, tc.want) {
						return fmt.Sprintf("%s sees %s with keys %v, want %v", n.Name(), m.Name, m.KeyFingerprints, tc.want)
					}
				}
			}
			return ""
		}))
		testenv.Eventually(t, 15*time.Second, "no partition", testenv.UntilEmpty(seesLive(nodes, names...)))
	}
	for _, n := range nodes {
		if got := n.Stats().KeyRejected.Load(); got != 0 {
			t.Errorf("%s rejected %d packets during the rotation, want 0", n.Name(), got)
		}
		if got := n.Stats().KeyReloads.Load(); got != 3 {
			t.Errorf("%s reloaded keys %d times, want 3", n.Name(), got)
		}
	}
	// The old key is gone: a node that only has it cannot join.
	before := nodes[0].Stats().KeyRejected.Load()
	stale, _ := startNode(t, testConfig("ap-south", "stale", keyFile(t, oldKey)))
	if _, err := stale.Join(t.Context(), []string{nodes[0].Addr()}); err == nil {
		t.Fatal("a node with the removed key joined")
	}
	if got := nodes[0].Stats().KeyRejected.Load(); got <= before {
		t.Errorf("key rejections %d → %d after the old key was removed; want more", before, got)
	}
}

func TestReloadKeysRefusesBadFile(t *testing.T) {
	key := newKey(t)
	f := keyFile(t, key)
	n, _ := startNode(t, testConfig("us-east", "a", f))
	writeKeys(t, f) // no key at all
	if err := n.ReloadKeys(); err == nil {
		t.Fatal("ReloadKeys of an empty file succeeded")
	}
	if got, want := n.KeyFingerprints(), []string{Fingerprint(key)}; !slices.Equal(got, want) {
		t.Errorf("keys after a failed reload = %v, want unchanged %v", got, want)
	}
	if got := n.Stats().KeyFailures.Load(); got != 1 {
		t.Errorf("key failures = %d, want 1", got)
	}
	plain, _ := startNode(t, testConfig("us-east", "p", ""))
	if err := plain.ReloadKeys(); !errors.Is(err, ErrNoKeyFile) {
		t.Errorf("ReloadKeys without a key file = %v, want ErrNoKeyFile", err)
	}
}

// TestBadStateMessagesCountedAndIgnored sends malformed, oversized, stale
// and foreign state messages from a real member over TCP.
func TestBadStateMessagesCountedAndIgnored(t *testing.T) {
	keys := keyFile(t, newKey(t))
	nodes, _ := cluster(t, "us-east", keys, "a", "b")
	a, b := nodes[0], nodes[1]
	if err := a.Publish("like", []byte("v2")); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 15*time.Second, "value reaches b", testenv.UntilEmpty(hasValue([]*Node{b}, "a", "like", []byte("v2"))))
	held := b.Peers("like")[0]

	valid := func(e entry) []byte { return encodeEntries(nil, []entry{e}) }
	oversized := valid(entry{Origin: "a", Key: "like", Version: held.Version + 1, Millis: 1, Data: make([]byte, a.cfg.MaxValueBytes+1)})
	for _, tc := range []struct {
		name string
		msg  []byte
	}{
		{"garbage", []byte("\x00\xffnot a state message")},
		{"truncated", valid(entry{Origin: "a", Key: "like", Version: held.Version + 1, Millis: 1, Data: []byte("v3")})[:12]},
		{"oversized value", oversized},
		{"stale version", valid(entry{Origin: "a", Key: "like", Version: held.Version - 1, Millis: 1, Data: []byte("v1")})},
		{"unknown origin", valid(entry{Origin: "zed", Key: "like", Version: 1, Millis: 1, Data: []byte("z")})},
	} {
		if err := a.ml.SendReliable(&memberlist.Node{Name: "b", Addr: net.ParseIP("127.0.0.1"), Port: mustPort(t, b.Addr())}, tc.msg); err != nil {
			t.Fatalf("%s: SendReliable: %v", tc.name, err)
		}
	}
	s := b.Stats()
	testenv.Eventually(t, 15*time.Second, "b counts every bad message", testenv.UntilEmpty(func() string {
		got := [4]uint64{s.StateMalformed.Load(), s.StateOversized.Load(), s.UpdatesStale.Load(), s.UpdatesRefused.Load()}
		if got[0] < 2 || got[1] < 1 || got[2] < 1 || got[3] < 1 {
			return fmt.Sprintf("malformed, oversized, stale, refused = %v; want ≥ [2 1 1 1]", got)
		}
		return ""
	}))
	if got := b.Peers("like"); len(got) != 1 || string(got[0].Data) != "v2" || got[0].Version != held.Version {
		t.Errorf("b holds %+v; want a's v2 unchanged", got)
	}
	if got := b.Peers("like"); slices.ContainsFunc(got, func(v Value) bool { return v.Node == "zed" }) {
		t.Error("b keeps a value from a non-member")
	}
	testenv.Eventually(t, 15*time.Second, "b still in the cluster", testenv.UntilEmpty(seesLive(nodes, "a", "b")))
}

func mustPort(t *testing.T, addr string) uint16 {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	var port uint16
	if _, err := fmt.Sscan(p, &port); err != nil {
		t.Fatal(err)
	}
	return port
}

// TestRawPacketsCounted sends raw UDP packets to a node's gossip port.
func TestRawPacketsCounted(t *testing.T) {
	enc, _ := startNode(t, testConfig("us-east", "enc", keyFile(t, newKey(t))))
	plain, _ := startNode(t, testConfig("us-east", "plain", ""))
	label := func(l string, rest []byte) []byte {
		b, err := memberlist.AddLabelHeaderToPacket(rest, l)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, tc := range []struct {
		name    string
		to      *Node
		packet  []byte
		counter func(*Stats) uint64
	}{
		{"unlabelled", enc, []byte("\x01hello"), func(s *Stats) uint64 { return s.LabelRejected.Load() }},
		{"other label", enc, label("edgecount/eu-west", []byte("\x01hello")), func(s *Stats) uint64 { return s.LabelRejected.Load() }},
		{"truncated label", enc, []byte{244, 40, 'e'}, func(s *Stats) uint64 { return s.MalformedPackets.Load() }},
		{"not encrypted", enc, label("edgecount/us-east", []byte("\x01garbage garbage garbage garbage garbage garbage")), func(s *Stats) uint64 { return s.KeyRejected.Load() }},
		{"unknown type", plain, label("edgecount/us-east", []byte{250, 1, 2, 3}), func(s *Stats) uint64 { return s.MalformedPackets.Load() }},
		{"bad compound", plain, label("edgecount/us-east", []byte{7, 200, 0, 1}), func(s *Stats) uint64 { return s.MalformedPackets.Load() }},
		{"bad ping", plain, label("edgecount/us-east", []byte{0, 0xc1, 0xc1}), func(s *Stats) uint64 { return s.MalformedPackets.Load() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.counter(tc.to.Stats())
			conn, err := net.Dial("udp", tc.to.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			testenv.Eventually(t, 15*time.Second, "packet counted", testenv.UntilEmpty(func() string {
				if _, err := conn.Write(tc.packet); err != nil {
					return err.Error()
				}
				if got := tc.counter(tc.to.Stats()); got <= before {
					return fmt.Sprintf("counter at %d, was %d", got, before)
				}
				return ""
			}))
		})
	}
	for _, n := range []*Node{enc, plain} {
		if got := liveNames(n); !slices.Equal(got, []string{n.Name()}) {
			t.Errorf("%s sees %v after garbage, want only itself", n.Name(), got)
		}
	}
}

func TestClusterView(t *testing.T) {
	keys := keyFile(t, newKey(t))
	nodes, _ := cluster(t, "us-east", keys, "a", "b")
	if err := nodes[1].Publish("like", []byte("12345")); err != nil {
		t.Fatal(err)
	}
	if err := nodes[0].Publish("view", []byte("123")); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 15*time.Second, "value reaches a", testenv.UntilEmpty(hasValue(nodes[:1], "b", "like", []byte("12345"))))

	// The view's JSON form, which GET /v1/cluster answers (httpapi tests
	// the route).
	body, err := json.Marshal(nodes[0].Cluster())
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Region  string `json:"region"`
		Self    string `json:"self"`
		Members []struct {
			Name      string `json:"name"`
			AgentID   string `json:"agent_id"`
			HTTPAddr  string `json:"http_addr"`
			State     string `json:"state"`
			Published []struct {
				Key     string `json:"key"`
				Bytes   int    `json:"bytes"`
				Version uint64 `json:"version"`
			} `json:"published"`
		} `json:"members"`
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("body %s: %v", body, err)
	}
	if got.Region != "us-east" || got.Self != "a" || len(got.Members) != 2 {
		t.Fatalf("view = %s; want region us-east, self a, 2 members", body)
	}
	for i, want := range []struct{ name, key string }{{"a", "view"}, {"b", "like"}} {
		m := got.Members[i]
		if m.Name != want.name || m.State != "alive" || len(m.Published) != 1 || m.Published[0].Key != want.key || m.Published[0].Version == 0 {
			t.Errorf("member %d = %+v; want %s alive with one key %s", i, m, want.name, want.key)
		}
	}
	if b := got.Members[1]; b.Published[0].Bytes != 5 || b.HTTPAddr != "b.test:8080" {
		t.Errorf("b = %+v; want 5 bytes of like, http b.test:8080", b)
	}
}

func TestPublishValidates(t *testing.T) {
	cfg := testConfig("us-east", "a", "")
	cfg.MaxKeys = 2
	cfg.MaxValueBytes = 10
	n, _ := startNode(t, cfg)
	for _, tc := range []struct {
		key  string
		data []byte
		ok   bool
	}{
		{"like", []byte("0123456789"), true},
		{"view", nil, true},
		{"like", []byte("again"), true},
		{"share", []byte("x"), false}, // third key
		{"", []byte("x"), false},
		{"has space", []byte("x"), false},
		{"like", []byte("0123456789A"), false},
		{string(bytes.Repeat([]byte("k"), 65)), nil, false},
	} {
		err := n.Publish(tc.key, tc.data)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrInvalid)) {
			t.Errorf("Publish(%q, %d bytes) = %v; want ok %v (or ErrInvalid)", tc.key, len(tc.data), err, tc.ok)
		}
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if err := n.Publish("like", nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Publish after Close = %v, want ErrClosed", err)
	}
	if err := n.Leave(0); !errors.Is(err, ErrClosed) {
		t.Errorf("Leave after Close = %v, want ErrClosed", err)
	}
}

func TestRejoinLoopFormsCluster(t *testing.T) {
	keys := keyFile(t, newKey(t))
	a, _ := startNode(t, testConfig("us-east", "a", keys))
	cfg := testConfig("us-east", "b", keys)
	cfg.Seeds = []string{a.Addr()}
	cfg.RejoinInterval = 50e6
	b, _ := startNode(t, cfg) // never calls Join
	testenv.Eventually(t, 15*time.Second, "rejoin loop joins", testenv.UntilEmpty(seesLive([]*Node{a, b}, "a", "b")))
}
