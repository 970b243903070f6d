package gossip

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"maps"
	"net"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/edgecount/edgecount/internal/periodic"
)

// Errors callers act on.
var (
	// ErrClosed is returned by calls on a closed Node.
	ErrClosed = errors.New("gossip node is closed")
	// ErrInvalid is a Publish with a bad key or an oversized value, or one
	// key too many.
	ErrInvalid = errors.New("invalid gossip state")
	// ErrNoSeed is a Join that reached none of its seeds.
	ErrNoSeed = errors.New("no seed reachable")
)

// State is a member's state as this node sees it.
type State string

// Member states.
const (
	// StateAlive: the member answers.
	StateAlive State = "alive"
	// StateSuspect: this node's last probe of the member got no answer;
	// it is declared dead if nobody hears from it within the suspicion
	// timeout. Only the node that probed sees this state (memberlist does
	// not report suspicion learned from peers), until its next successful
	// probe, a metadata update or the member's death.
	StateSuspect State = "suspect"
	// StateDead: the member failed (stopped answering probes).
	StateDead State = "dead"
	// StateLeft: the member left on purpose (Leave).
	StateLeft State = "left"
)

func (s State) live() bool { return s == StateAlive || s == StateSuspect }

// EventType says what changed.
type EventType string

// Event types.
const (
	EventJoin    EventType = "join"    // a member joined (or came back)
	EventUpdate  EventType = "update"  // a member's metadata changed
	EventSuspect EventType = "suspect" // this node's probe of a member failed
	EventAlive   EventType = "alive"   // a suspect member answered again
	EventFail    EventType = "fail"    // a member was declared dead
	EventLeave   EventType = "leave"   // a member left
)

// Event is a membership change.
type Event struct {
	Type   EventType
	Member Member
	Time   time.Time
}

// Member is a node of the region's cluster as this node sees it.
type Member struct {
	// Name is the memberlist node name; Addr its gossip host:port.
	Name string `json:"name"`
	Addr string `json:"addr"`
	// Region, AgentID, HTTPAddr and Version come from the member's
	// metadata; KeyFingerprints names its installed gossip keys, primary
	// first.
	Region          string   `json:"region"`
	AgentID         string   `json:"agent_id"`
	HTTPAddr        string   `json:"http_addr"`
	Version         string   `json:"version"`
	KeyFingerprints []string `json:"key_fingerprints,omitempty"`
	// State and the time this node saw it change.
	State State     `json:"state"`
	Since time.Time `json:"since"`
	// RTT is this node's last direct probe round trip (0: none yet).
	RTT time.Duration `json:"rtt_ns,omitempty"`
	// Self is this node.
	Self bool `json:"self"`
}

// Value is the latest value a peer published under a key.
type Value struct {
	Node    string
	AgentID string
	// Version increases with every publish of the node (any key).
	Version uint64
	// Published is the publisher's clock when it published; Received is
	// this node's when the value arrived.
	Published time.Time
	Received  time.Time
	// Data is a copy of the published bytes.
	Data []byte
}

// Stats are a node's running totals (plain atomics; the metrics package
// exports them).
type Stats struct {
	// Rejected gossip traffic, counted from memberlist's log lines: a
	// packet or stream with another cluster's label (another region, or
	// another system); one that no installed key decrypts or that is not
	// encrypted; one that does not parse.
	LabelRejected    atomic.Uint64
	KeyRejected      atomic.Uint64
	MalformedPackets atomic.Uint64
	// RefusedNodes counts alive messages and joins refused because the
	// node's metadata is invalid or names another region.
	RefusedNodes atomic.Uint64
	// NameConflicts counts two addresses claiming one node name.
	NameConflicts atomic.Uint64

	// State messages received (broadcasts, direct sends, push/pull) and
	// those dropped whole because they did not parse or exceeded a limit.
	StateMessages  atomic.Uint64
	StateMalformed atomic.Uint64
	StateOversized atomic.Uint64
	// Entries of state messages: applied (newer than what was held),
	// duplicate (same version), stale (older), refused (from a node that
	// is not a live member, or beyond MaxKeys for that node).
	UpdatesApplied   atomic.Uint64
	UpdatesDuplicate atomic.Uint64
	UpdatesStale     atomic.Uint64
	UpdatesRefused   atomic.Uint64
	// Publishes by this node; Broadcasts queued for UDP gossip (own and
	// forwarded); ReliableSends and ReliableErrors of values too large for
	// a packet, sent over TCP to each member; LocalStateTruncated push/pull
	// states cut at the size limit.
	Publishes           atomic.Uint64
	Broadcasts          atomic.Uint64
	ReliableSends       atomic.Uint64
	ReliableErrors      atomic.Uint64
	LocalStateTruncated atomic.Uint64

	// Membership changes of other nodes seen by this one.
	Joins      atomic.Uint64
	Leaves     atomic.Uint64
	Failures   atomic.Uint64
	Suspicions atomic.Uint64
	// JoinErrors counts Joins that reached no seed; KeyReloads and
	// KeyFailures successful and failed ReloadKeys.
	JoinErrors  atomic.Uint64
	KeyReloads  atomic.Uint64
	KeyFailures atomic.Uint64
}

type memberRec struct {
	name  string
	addr  net.IP
	port  uint16
	meta  Meta
	state State
	since time.Time
	rtt   time.Duration
}

type peerEntry struct {
	entry
	received time.Time
}

// leaveNoticeTTL is how long a leave notice waits for memberlist to report
// the member gone.
const leaveNoticeTTL = time.Minute

// Node is one agent's membership in its region's gossip cluster. All
// methods are safe for concurrent use.
type Node struct {
	cfg     Config
	name    string
	logger  *slog.Logger
	ml      *memberlist.Memberlist
	keyring *memberlist.Keyring // nil: plain text
	logw    *logWriter
	queue   *memberlist.TransmitLimitedQueue
	budget  int // largest state message sent as a UDP broadcast
	addr    string
	timeout time.Duration // memberlist's TCP timeout
	stats   Stats
	meta    atomic.Pointer[[]byte]
	live    atomic.Int64 // alive or suspect members, self included

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	wake   chan struct{}
	q      queryState // questions asked and served (query.go)

	// lifeMu orders Leave and Close (memberlist panics on a Leave after
	// Shutdown); keysMu serializes ReloadKeys.
	lifeMu sync.Mutex
	closed atomic.Bool
	keysMu sync.Mutex

	// mu guards the tables below. Lock order: memberlist's locks, then
	// logWriter.mu, then mu; nothing is called with mu held that may take
	// another lock except the broadcast queue's.
	mu      sync.Mutex
	members map[string]*memberRec
	own     map[string]entry
	peers   map[string]map[string]peerEntry
	clock   uint64
	pending map[string][]byte
	// leaving holds when members announced their Leave: memberlist tells
	// a leave from a failure only inside its own state (the Node its
	// EventDelegate gets always says alive), so Leave first tells every
	// live member over TCP.
	leaving map[string]time.Time
}

// New starts a node: it listens for gossip at once (Addr tells where) but
// joins nobody until Join (or, while alone, the rejoin loop). logger may be
// nil (slog.Default).
func New(cfg Config, logger *slog.Logger) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("cannot start gossip: %w", err)
	}
	if logger == nil {
		logger = slog.Default()
	}
	n := &Node{
		cfg:     cfg,
		name:    cfg.nodeName(),
		logger:  logger.With("component", "gossip", "region", cfg.Region),
		members: make(map[string]*memberRec),
		own:     make(map[string]entry),
		peers:   make(map[string]map[string]peerEntry),
		pending: make(map[string][]byte),
		leaving: make(map[string]time.Time),
		wake:    make(chan struct{}, 1),
	}
	n.q.in = make(chan question, queryQueue)
	mc := cfg.memberlistConfig()
	meta := Meta{Region: cfg.Region, AgentID: cfg.AgentID, HTTPAddr: cfg.HTTPAddr, Version: cfg.Version}
	if cfg.KeyFile != "" {
		keys, err := LoadKeyFile(cfg.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("cannot start gossip: %w", err)
		}
		if fi, err := os.Stat(cfg.KeyFile); err == nil && fi.Mode().Perm()&0o077 != 0 {
			n.logger.Warn("gossip key file is readable by group or others", "path", cfg.KeyFile, "mode", fi.Mode().Perm().String())
		}
		kr, err := memberlist.NewKeyring(keys[1:], keys[0])
		if err != nil {
			return nil, fmt.Errorf("cannot start gossip: cannot build keyring: %w", err)
		}
		mc.Keyring = kr
		n.keyring = kr
		meta.Keys = fingerprints(keys)
	} else {
		n.logger.Warn("gossip is not encrypted: any host that reaches the gossip port can join the region")
	}
	mb, err := encodeMeta(meta)
	if err != nil {
		return nil, fmt.Errorf("cannot start gossip: %w", err)
	}
	n.meta.Store(&mb)

	n.logw = &logWriter{logger: n.logger, stats: &n.stats, onSuspect: n.suspect, every: cfg.LogThrottle}
	mc.Logger = log.New(n.logw, "", 0)
	d := &delegate{n: n}
	mc.Delegate, mc.Events, mc.Alive, mc.Merge, mc.Ping = d, d, d, d, d
	n.queue = &memberlist.TransmitLimitedQueue{
		NumNodes:       func() int { return int(n.live.Load()) },
		RetransmitMult: mc.RetransmitMult,
	}
	// What memberlist leaves for user broadcasts in one UDP packet (see its
	// gossip): compound header 2, label header, encryption ≤ 45, per-part
	// length 2, user message type 1; and a margin.
	n.budget = mc.UDPBufferSize - 2 - (2 + len(mc.Label)) - 45 - 3 - 16

	n.ctx, n.cancel = context.WithCancel(context.Background())
	ml, err := memberlist.Create(mc)
	if err != nil {
		n.cancel()
		n.logw.close()
		return nil, fmt.Errorf("cannot start gossip: %w", err)
	}
	n.ml = ml
	ln := ml.LocalNode() // memberlist hands out its own record: copy at once
	n.addr = net.JoinHostPort(ln.Addr.String(), strconv.Itoa(int(ln.Port)))
	n.timeout = mc.TCPTimeout
	n.wg.Add(2)
	go n.sendLoop()
	go n.serveLoop()
	if len(cfg.Seeds) > 0 && cfg.RejoinInterval > 0 {
		n.wg.Add(1)
		go n.rejoinLoop()
	}
	n.logger.Info("gossip listening", "node", n.name, "addr", n.Addr(), "label", mc.Label, "encrypted", n.keyring != nil)
	return n, nil
}

func fingerprints(keys [][]byte) []string {
	fs := make([]string, 0, len(keys))
	for _, k := range keys {
		fs = append(fs, Fingerprint(k))
	}
	return fs
}

// Name is this node's memberlist name.
func (n *Node) Name() string { return n.name }

// Addr is the host:port peers dial to reach this node (the advertised
// address, with the port actually bound when BindPort was 0).
func (n *Node) Addr() string { return n.addr }

// Stats returns the node's live counters.
func (n *Node) Stats() *Stats { return &n.stats }

// Region is the node's region.
func (n *Node) Region() string { return n.cfg.Region }

// Join contacts each seed in turn (one push/pull each, bounded by the
// profile's TCP timeout), stopping early when ctx is done. It returns how
// many seeds it reached; reaching none is ErrNoSeed (wrapping each seed's
// error). A seed that is the node's own address counts as reached, though
// the node stays alone (NumLive 1); the rejoin loop keeps trying.
func (n *Node) Join(ctx context.Context, seeds []string) (int, error) {
	if n.closed.Load() {
		return 0, ErrClosed
	}
	joined := 0
	var errs []error
	for _, s := range seeds {
		if err := ctx.Err(); err != nil {
			return joined, fmt.Errorf("cannot join gossip seeds: %w", err)
		}
		k, err := n.ml.Join([]string{s})
		joined += k
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", s, err))
		}
	}
	if joined == 0 && len(seeds) > 0 {
		n.stats.JoinErrors.Add(1)
		return 0, fmt.Errorf("cannot join gossip seeds: %w: %w", ErrNoSeed, errors.Join(errs...))
	}
	return joined, nil
}

// Leave tells the cluster this node is leaving, waiting up to timeout;
// then Close. It first tells every live member over TCP (so that they
// record the member as left, not dead), then lets memberlist broadcast its
// leave. Peers drop the node's values.
func (n *Node) Leave(timeout time.Duration) error {
	n.lifeMu.Lock()
	defer n.lifeMu.Unlock()
	if n.closed.Load() {
		return ErrClosed
	}
	deadline := time.Now().Add(timeout)
	msg := encodeLeave(n.name)
	for _, t := range n.targets() {
		if time.Now().After(deadline) {
			break
		}
		if err := n.ml.SendReliable(t, msg); err != nil {
			n.logger.Debug("gossip leave notice not sent", "to", t.Name, "err", err)
		}
	}
	if err := n.ml.Leave(max(time.Until(deadline), time.Millisecond)); err != nil {
		return fmt.Errorf("cannot leave gossip cluster: %w", err)
	}
	return nil
}

// targets returns the live members other than this node.
func (n *Node) targets() []*memberlist.Node {
	n.mu.Lock()
	defer n.mu.Unlock()
	var ts []*memberlist.Node
	for _, r := range n.members {
		if r.name != n.name && r.state.live() {
			ts = append(ts, &memberlist.Node{Name: r.name, Addr: r.addr, Port: r.port})
		}
	}
	return ts
}

// Close stops the node's goroutines and memberlist (without a Leave, peers
// declare it dead after the suspicion timeout). It waits for the goroutines
// it started; it is safe to call more than once.
func (n *Node) Close() error {
	n.lifeMu.Lock()
	defer n.lifeMu.Unlock()
	if n.closed.Swap(true) {
		return nil
	}
	n.cancel()
	n.wg.Wait()
	err := n.ml.Shutdown()
	n.logw.close()
	if err != nil {
		return fmt.Errorf("cannot shut down gossip: %w", err)
	}
	return nil
}

// Publish makes data the node's latest value under key, sent to every live
// member: by UDP gossip when it fits one packet (about 1.3 KB; peers
// forward it), otherwise over TCP to each member from a background sender
// (only the latest value per key is sent). Push/pull (every profile's
// interval, and on join) carries every value too, so a member that missed
// a send catches up. key is 1–64 bytes of printable ASCII without spaces;
// data at most Config.MaxValueBytes; at most Config.MaxKeys keys. Publish
// copies data and does not block on the network.
func (n *Node) Publish(key string, data []byte) error {
	if !validKey(key) {
		return fmt.Errorf("%w: key %q is not 1-%d bytes of printable ASCII", ErrInvalid, key, maxKeyLen)
	}
	if len(data) > n.cfg.MaxValueBytes {
		return fmt.Errorf("%w: value of %d bytes exceeds %d", ErrInvalid, len(data), n.cfg.MaxValueBytes)
	}
	if n.closed.Load() {
		return ErrClosed
	}
	now := time.Now()
	n.mu.Lock()
	if _, ok := n.own[key]; !ok && len(n.own) >= n.cfg.MaxKeys {
		n.mu.Unlock()
		return fmt.Errorf("%w: more than %d keys", ErrInvalid, n.cfg.MaxKeys)
	}
	n.clock = max(n.clock+1, uint64(now.UnixNano()))
	e := entry{Origin: n.name, Key: key, Version: n.clock, Millis: now.UnixMilli(), Data: slices.Clone(data)}
	n.own[key] = e
	msg := encodeEntries(nil, []entry{e})
	reliable := len(msg) > n.budget
	if reliable {
		n.pending[key] = msg
	}
	n.mu.Unlock()
	n.stats.Publishes.Add(1)
	if reliable {
		select {
		case n.wake <- struct{}{}:
		default:
		}
		return nil
	}
	n.queue.QueueBroadcast(&broadcast{name: n.name + "\x00" + key, msg: msg})
	n.stats.Broadcasts.Add(1)
	return nil
}

// Peers returns the latest value each live peer (not this node) published
// under key, sorted by node name.
func (n *Node) Peers(key string) []Value {
	n.mu.Lock()
	defer n.mu.Unlock()
	var vs []Value
	for origin, keys := range n.peers {
		pe, ok := keys[key]
		if !ok {
			continue
		}
		var agent string
		if m := n.members[origin]; m != nil {
			agent = m.meta.AgentID
		}
		vs = append(vs, Value{
			Node: origin, AgentID: agent, Version: pe.Version,
			Published: time.UnixMilli(pe.Millis), Received: pe.received,
			Data: slices.Clone(pe.Data),
		})
	}
	slices.SortFunc(vs, func(a, b Value) int { return cmp.Compare(a.Node, b.Node) })
	return vs
}

// Members returns the members this node knows, itself included, sorted by
// name: live ones, and dead or left ones for Config.ForgetAfter.
func (n *Node) Members() []Member {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.forgetLocked(time.Now())
	ms := make([]Member, 0, len(n.members))
	for _, r := range n.members {
		ms = append(ms, n.memberLocked(r))
	}
	slices.SortFunc(ms, func(a, b Member) int { return cmp.Compare(a.Name, b.Name) })
	return ms
}

// NumLive returns the alive and suspect members, this node included.
func (n *Node) NumLive() int { return int(n.live.Load()) }

// QueuedBroadcasts returns the state broadcasts waiting to be gossiped.
func (n *Node) QueuedBroadcasts() int { return n.queue.NumQueued() }

func (n *Node) memberLocked(r *memberRec) Member {
	return Member{
		Name: r.name, Addr: net.JoinHostPort(r.addr.String(), strconv.Itoa(int(r.port))),
		Region: r.meta.Region, AgentID: r.meta.AgentID, HTTPAddr: r.meta.HTTPAddr, Version: r.meta.Version,
		KeyFingerprints: slices.Clone(r.meta.Keys),
		State:           r.state, Since: r.since, RTT: r.rtt, Self: r.name == n.name,
	}
}

func (n *Node) forgetLocked(now time.Time) {
	for name, r := range n.members {
		if !r.state.live() && now.Sub(r.since) > n.cfg.ForgetAfter {
			delete(n.members, name)
		}
	}
	for name, at := range n.leaving {
		if now.Sub(at) > leaveNoticeTTL {
			delete(n.leaving, name)
		}
	}
}

// ReloadKeys re-reads the key file and makes the keyring match it: new keys
// installed, the first key made primary, unlisted keys removed (docs/gossip.md has
// the rotation procedure). A bad file changes nothing. The node then
// re-advertises its metadata so peers see its key fingerprints.
func (n *Node) ReloadKeys() error {
	if n.keyring == nil {
		return ErrNoKeyFile
	}
	if n.closed.Load() {
		return ErrClosed
	}
	n.keysMu.Lock()
	defer n.keysMu.Unlock()
	keys, err := LoadKeyFile(n.cfg.KeyFile)
	if err == nil {
		err = reconcileKeyring(n.keyring, keys)
	}
	if err != nil {
		n.stats.KeyFailures.Add(1)
		return fmt.Errorf("cannot reload gossip keys: %w", err)
	}
	n.stats.KeyReloads.Add(1)
	installed := fingerprints(n.keyring.GetKeys())
	meta := Meta{Region: n.cfg.Region, AgentID: n.cfg.AgentID, HTTPAddr: n.cfg.HTTPAddr, Version: n.cfg.Version, Keys: installed}
	mb, err := encodeMeta(meta)
	if err != nil {
		return fmt.Errorf("cannot reload gossip keys: %w", err)
	}
	n.meta.Store(&mb)
	if err := n.ml.UpdateNode(n.timeout); err != nil {
		// The new metadata still spreads with the next push/pull.
		n.logger.Debug("gossip metadata update not confirmed", "err", err)
	}
	n.logger.Info("gossip keys reloaded", "primary", installed[0], "installed", installed)
	return nil
}

// KeyFingerprints returns the fingerprints of the installed keys, primary
// first (nil when gossip is not encrypted).
func (n *Node) KeyFingerprints() []string {
	if n.keyring == nil {
		return nil
	}
	return fingerprints(n.keyring.GetKeys())
}

// apply stores e if it is newer than what the node holds for (origin, key)
// and e's origin is a live member; when it came by UDP gossip and was
// applied, it is queued again for gossip (epidemic forwarding).
func (n *Node) apply(e entry, forward bool) {
	now := time.Now()
	n.mu.Lock()
	if e.Origin == n.name {
		// Our own value coming back. A newer version means a previous
		// incarnation of this node published later than our clock says:
		// move the clock past it so the next Publish wins.
		n.clock = max(n.clock, e.Version)
		n.mu.Unlock()
		n.stats.UpdatesDuplicate.Add(1)
		return
	}
	m := n.members[e.Origin]
	if m == nil || !m.state.live() {
		n.mu.Unlock()
		n.stats.UpdatesRefused.Add(1)
		return
	}
	keys := n.peers[e.Origin]
	old, ok := keys[e.Key]
	switch {
	case ok && old.Version == e.Version:
		n.mu.Unlock()
		n.stats.UpdatesDuplicate.Add(1)
		return
	case ok && old.Version > e.Version:
		n.mu.Unlock()
		n.stats.UpdatesStale.Add(1)
		return
	case !ok && len(keys) >= n.cfg.MaxKeys:
		n.mu.Unlock()
		n.stats.UpdatesRefused.Add(1)
		return
	}
	if keys == nil {
		keys = make(map[string]peerEntry)
		n.peers[e.Origin] = keys
	}
	keys[e.Key] = peerEntry{entry: e, received: now}
	n.mu.Unlock()
	n.stats.UpdatesApplied.Add(1)
	if forward {
		if msg := encodeEntries(nil, []entry{e}); len(msg) <= n.budget {
			n.queue.QueueBroadcast(&broadcast{name: e.Origin + "\x00" + e.Key, msg: msg})
			n.stats.Broadcasts.Add(1)
		}
	}
}

// receive decodes and applies one state message.
func (n *Node) receive(buf []byte, forward bool) {
	n.stats.StateMessages.Add(1)
	msg, err := decodeMessage(buf, n.cfg.MaxValueBytes)
	if err != nil {
		if errors.Is(err, errOversized) {
			n.stats.StateOversized.Add(1)
		} else {
			n.stats.StateMalformed.Add(1)
		}
		n.logger.Debug("gossip state message dropped", "bytes", len(buf), "err", err)
		return
	}
	if msg.kind == kindQuery || msg.kind == kindAnswer {
		n.receiveQuery(msg)
		return
	}
	if msg.kind == kindLeave {
		n.mu.Lock()
		if m := n.members[msg.leaving]; m != nil && m.state.live() {
			n.leaving[msg.leaving] = time.Now()
		}
		n.mu.Unlock()
		return
	}
	for _, e := range msg.entries {
		n.apply(e, forward)
	}
}

// localState encodes every value the node holds, its own first, up to
// maxPushStateBytes.
func (n *Node) localState() []byte {
	n.mu.Lock()
	es := make([]entry, 0, len(n.own))
	for _, e := range n.own {
		es = append(es, e)
	}
	slices.SortFunc(es, func(a, b entry) int { return cmp.Compare(a.Key, b.Key) })
	start := len(es)
	for _, keys := range n.peers {
		for _, pe := range keys {
			es = append(es, pe.entry)
		}
	}
	n.mu.Unlock()
	slices.SortFunc(es[start:], func(a, b entry) int {
		return cmp.Or(cmp.Compare(a.Origin, b.Origin), cmp.Compare(a.Key, b.Key))
	})
	size := 16
	for i := range es {
		size += entrySize(&es[i])
		if size > maxPushStateBytes {
			n.stats.LocalStateTruncated.Add(1)
			es = es[:i]
			break
		}
	}
	return encodeEntries(make([]byte, 0, size), es)
}

// sendLoop sends the values too large for a packet to every live member
// over TCP, the latest per key.
func (n *Node) sendLoop() {
	defer n.wg.Done()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-n.wake:
		}
		n.mu.Lock()
		pending := n.pending
		n.pending = make(map[string][]byte)
		n.mu.Unlock()
		targets := n.targets()
		for _, key := range slices.Sorted(maps.Keys(pending)) {
			for _, t := range targets {
				if n.ctx.Err() != nil {
					return
				}
				if err := n.ml.SendReliable(t, pending[key]); err != nil {
					n.stats.ReliableErrors.Add(1)
					n.logger.Debug("gossip state send failed", "to", t.Name, "key", key, "err", err)
					continue
				}
				n.stats.ReliableSends.Add(1)
			}
		}
	}
}

// rejoinLoop joins the seeds again, every RejoinInterval, while the node
// is alone, until the node closes.
func (n *Node) rejoinLoop() {
	defer n.wg.Done()
	periodic.Run(n.ctx, n.cfg.RejoinInterval, n.rejoin)
}

// rejoin joins the seeds if the node is alone.
func (n *Node) rejoin() {
	if n.live.Load() > 1 {
		return
	}
	if k, err := n.Join(n.ctx, n.cfg.Seeds); err != nil {
		if n.ctx.Err() == nil {
			n.logger.Warn("gossip node is alone and cannot reach its seeds", "seeds", n.cfg.Seeds, "err", err)
		}
	} else {
		n.logger.Info("gossip node rejoined", "seeds_reached", k)
	}
}

// suspect is told by the log writer that this node's probe of name failed.
func (n *Node) suspect(name string) {
	n.mu.Lock()
	r := n.members[name]
	if r == nil || r.state != StateAlive {
		n.mu.Unlock()
		return
	}
	r.state, r.since = StateSuspect, time.Now()
	m := n.memberLocked(r)
	n.mu.Unlock()
	n.stats.Suspicions.Add(1)
	n.logger.Info("gossip member suspected", "node", name)
	n.emit(EventSuspect, m)
}

func (n *Node) emit(t EventType, m Member) {
	if n.cfg.OnEvent != nil {
		n.cfg.OnEvent(Event{Type: t, Member: m, Time: time.Now()})
	}
}

// broadcast is a state message in memberlist's broadcast queue, named by
// origin and key so that a newer value replaces an older one still queued.
type broadcast struct {
	name string
	msg  []byte
}

func (b *broadcast) Invalidates(memberlist.Broadcast) bool { return false }
func (b *broadcast) Name() string                          { return b.name }
func (b *broadcast) Message() []byte                       { return b.msg }
func (b *broadcast) Finished()                             {}
