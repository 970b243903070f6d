package gossip

import (
	"cmp"
	"slices"
	"time"
)

// ClusterView is the region's members as this node sees them and the values
// each published. Its JSON form (field names as tagged) is the answer of the
// agent's GET /v1/cluster, which httpapi serves.
type ClusterView struct {
	Region string `json:"region"`
	// Self is this node's name.
	Self string `json:"self"`
	// KeyFingerprints are this node's installed gossip keys, primary
	// first (empty when gossip is not encrypted).
	KeyFingerprints []string        `json:"key_fingerprints"`
	Members         []ClusterMember `json:"members"`
}

// ClusterMember is a member and what it published.
type ClusterMember struct {
	Member
	// Published lists the keys the member published, as this node holds
	// them (empty for a dead or left member, whose values are dropped).
	Published []PublishedKey `json:"published"`
}

// PublishedKey describes one published value without its bytes.
type PublishedKey struct {
	Key       string    `json:"key"`
	Bytes     int       `json:"bytes"`
	Version   uint64    `json:"version"`
	Published time.Time `json:"published_at"`
}

// Cluster returns the cluster as this node sees it now (the body of GET
// /v1/cluster). It is safe for concurrent use.
func (n *Node) Cluster() ClusterView {
	members := n.Members()
	v := ClusterView{Region: n.cfg.Region, Self: n.name, KeyFingerprints: n.KeyFingerprints(), Members: make([]ClusterMember, 0, len(members))}
	if v.KeyFingerprints == nil {
		v.KeyFingerprints = []string{}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, m := range members {
		cm := ClusterMember{Member: m, Published: []PublishedKey{}}
		add := func(e entry) {
			cm.Published = append(cm.Published, PublishedKey{Key: e.Key, Bytes: len(e.Data), Version: e.Version, Published: time.UnixMilli(e.Millis).UTC()})
		}
		if m.Self {
			for _, e := range n.own {
				add(e)
			}
		} else {
			for _, pe := range n.peers[m.Name] {
				add(pe.entry)
			}
		}
		slices.SortFunc(cm.Published, func(a, b PublishedKey) int { return cmp.Compare(a.Key, b.Key) })
		v.Members = append(v.Members, cm)
	}
	return v
}
