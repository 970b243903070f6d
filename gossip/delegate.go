package gossip

import (
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/memberlist"
)

// delegate implements memberlist's delegates for a Node, keeping their
// methods off Node's API. memberlist calls them from its own goroutines:
// Delegate's concurrently, EventDelegate's one at a time (with its node
// lock held), Alive's and Merge's while handling a message. None blocks.
type delegate struct{ n *Node }

var (
	_ memberlist.Delegate      = (*delegate)(nil)
	_ memberlist.EventDelegate = (*delegate)(nil)
	_ memberlist.AliveDelegate = (*delegate)(nil)
	_ memberlist.MergeDelegate = (*delegate)(nil)
	_ memberlist.PingDelegate  = (*delegate)(nil)
)

// NodeMeta returns the encoded metadata (at most 422 bytes, under limit).
func (d *delegate) NodeMeta(limit int) []byte {
	b := *d.n.meta.Load()
	if len(b) > limit {
		return nil
	}
	return b
}

// NotifyMsg receives a state message by UDP gossip or a direct TCP send.
func (d *delegate) NotifyMsg(buf []byte) { d.n.receive(buf, true) }

// GetBroadcasts hands memberlist the queued state messages.
func (d *delegate) GetBroadcasts(overhead, limit int) [][]byte {
	return d.n.queue.GetBroadcasts(overhead, limit)
}

// LocalState is this node's side of a push/pull: every value it holds.
func (d *delegate) LocalState(bool) []byte { return d.n.localState() }

// MergeRemoteState applies the peer's side of a push/pull.
func (d *delegate) MergeRemoteState(buf []byte, _ bool) {
	if len(buf) > 0 {
		d.n.receive(buf, false)
	}
}

// NotifyAlive refuses nodes whose metadata is invalid or of another region.
func (d *delegate) NotifyAlive(peer *memberlist.Node) error {
	return d.n.admit(peer)
}

// NotifyMerge refuses a join or push/pull with a cluster that holds a node
// with invalid metadata or of another region.
func (d *delegate) NotifyMerge(peers []*memberlist.Node) error {
	for _, p := range peers {
		if err := d.n.admit(p); err != nil {
			return err
		}
	}
	return nil
}

func (n *Node) admit(p *memberlist.Node) error {
	m, err := decodeMeta(p.Meta)
	if err == nil && m.Region != n.cfg.Region {
		err = fmt.Errorf("node of region %q", m.Region)
	}
	if err != nil {
		n.stats.RefusedNodes.Add(1)
		return fmt.Errorf("refusing node %q: %w", p.Name, err)
	}
	return nil
}

func (d *delegate) NotifyJoin(node *memberlist.Node) {
	n := d.n
	meta, err := decodeMeta(node.Meta) // admitted, so valid
	if err != nil {
		n.logger.Warn("gossip member with invalid metadata", "node", node.Name, "err", err)
	}
	now := time.Now()
	n.mu.Lock()
	prev := n.members[node.Name]
	if prev == nil || !prev.state.live() {
		n.live.Add(1)
	}
	r := &memberRec{name: node.Name, addr: slices.Clone(node.Addr), port: node.Port, meta: meta, state: StateAlive, since: now}
	n.members[node.Name] = r
	delete(n.leaving, node.Name)
	m := n.memberLocked(r)
	n.mu.Unlock()
	if m.Self {
		return
	}
	n.stats.Joins.Add(1)
	n.logger.Info("gossip member joined", "node", m.Name, "agent", m.AgentID, "addr", m.Addr, "http", m.HTTPAddr, "version", m.Version)
	n.emit(EventJoin, m)
}

func (d *delegate) NotifyUpdate(node *memberlist.Node) {
	n := d.n
	meta, err := decodeMeta(node.Meta)
	if err != nil {
		n.logger.Warn("gossip member with invalid metadata", "node", node.Name, "err", err)
	}
	now := time.Now()
	n.mu.Lock()
	r := n.members[node.Name]
	if r == nil {
		n.mu.Unlock()
		return
	}
	r.meta, r.addr, r.port = meta, slices.Clone(node.Addr), node.Port
	if r.state == StateSuspect {
		r.state, r.since = StateAlive, now
	}
	m := n.memberLocked(r)
	n.mu.Unlock()
	if m.Self {
		return
	}
	n.logger.Info("gossip member updated", "node", m.Name, "agent", m.AgentID, "http", m.HTTPAddr, "version", m.Version, "keys", m.KeyFingerprints)
	n.emit(EventUpdate, m)
}

func (d *delegate) NotifyLeave(node *memberlist.Node) {
	n := d.n
	now := time.Now()
	n.mu.Lock()
	state, ev := StateDead, EventFail
	if at, ok := n.leaving[node.Name]; node.Name == n.name || ok && now.Sub(at) <= leaveNoticeTTL {
		state, ev = StateLeft, EventLeave
	}
	delete(n.leaving, node.Name)
	r := n.members[node.Name]
	if r == nil {
		meta, _ := decodeMeta(node.Meta)
		r = &memberRec{name: node.Name, addr: slices.Clone(node.Addr), port: node.Port, meta: meta}
		n.members[node.Name] = r
	}
	if r.state.live() {
		n.live.Add(-1)
	}
	r.state, r.since = state, now
	delete(n.peers, node.Name)
	m := n.memberLocked(r)
	n.mu.Unlock()
	if m.Self {
		return
	}
	if ev == EventLeave {
		n.stats.Leaves.Add(1)
		n.logger.Info("gossip member left", "node", m.Name, "agent", m.AgentID)
	} else {
		n.stats.Failures.Add(1)
		n.logger.Warn("gossip member failed", "node", m.Name, "agent", m.AgentID, "addr", m.Addr)
	}
	n.emit(ev, m)
}

// AckPayload adds nothing to acks.
func (d *delegate) AckPayload() []byte { return nil }

// NotifyPingComplete records a direct probe's round trip; a suspect member
// that answered is alive again.
func (d *delegate) NotifyPingComplete(other *memberlist.Node, rtt time.Duration, _ []byte) {
	n := d.n
	n.mu.Lock()
	r := n.members[other.Name]
	if r == nil {
		n.mu.Unlock()
		return
	}
	r.rtt = rtt
	recovered := r.state == StateSuspect
	if recovered {
		r.state, r.since = StateAlive, time.Now()
	}
	m := n.memberLocked(r)
	n.mu.Unlock()
	if recovered {
		n.logger.Info("gossip member answers again", "node", m.Name)
		n.emit(EventAlive, m)
	}
}
