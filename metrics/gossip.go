package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgecount/edgecount/gossip"
)

// RegisterGossip exports a gossip node's totals.
func RegisterGossip(reg prometheus.Registerer, g *gossip.Node) error {
	s := g.Stats()
	members := func(state gossip.State) func() float64 {
		return func() float64 {
			n := 0
			for _, m := range g.Members() {
				if m.State == state {
					n++
				}
			}
			return float64(n)
		}
	}
	return register(reg, []metricFunc{
		{"edgecount_gossip_members_alive", "Members of the region's gossip cluster that answer, this node included.", true, members(gossip.StateAlive)},
		{"edgecount_gossip_members_suspect", "Members whose last probe by this node got no answer.", true, members(gossip.StateSuspect)},
		{"edgecount_gossip_members_dead", "Members declared dead, still listed.", true, members(gossip.StateDead)},
		{"edgecount_gossip_members_left", "Members that left, still listed.", true, members(gossip.StateLeft)},
		{"edgecount_gossip_label_rejected_total", "Gossip packets and streams dropped for carrying another cluster's label (another region or system).", false, u64(&s.LabelRejected)},
		{"edgecount_gossip_key_rejected_total", "Gossip packets and streams dropped because no installed key decrypts them or they are not encrypted.", false, u64(&s.KeyRejected)},
		{"edgecount_gossip_malformed_packets_total", "Gossip packets and streams dropped because they do not parse.", false, u64(&s.MalformedPackets)},
		{"edgecount_gossip_refused_nodes_total", "Alive messages and joins refused: invalid metadata or another region.", false, u64(&s.RefusedNodes)},
		{"edgecount_gossip_name_conflicts_total", "Two addresses claiming one node name.", false, u64(&s.NameConflicts)},
		{"edgecount_gossip_state_messages_total", "State messages received.", false, u64(&s.StateMessages)},
		{"edgecount_gossip_state_malformed_total", "State messages dropped because they do not parse.", false, u64(&s.StateMalformed)},
		{"edgecount_gossip_state_oversized_total", "State messages dropped for exceeding a size limit.", false, u64(&s.StateOversized)},
		{"edgecount_gossip_updates_applied_total", "Peer values stored (newer than the one held).", false, u64(&s.UpdatesApplied)},
		{"edgecount_gossip_updates_duplicate_total", "Peer values received again at the version held.", false, u64(&s.UpdatesDuplicate)},
		{"edgecount_gossip_updates_stale_total", "Peer values older than the one held, ignored.", false, u64(&s.UpdatesStale)},
		{"edgecount_gossip_updates_refused_total", "Peer values refused: not from a live member, or one key too many.", false, u64(&s.UpdatesRefused)},
		{"edgecount_gossip_publishes_total", "Values published by this node.", false, u64(&s.Publishes)},
		{"edgecount_gossip_broadcasts_total", "Values queued for UDP gossip (own and forwarded).", false, u64(&s.Broadcasts)},
		{"edgecount_gossip_broadcasts_queued", "Values waiting in the gossip queue.", true, func() float64 { return float64(g.QueuedBroadcasts()) }},
		{"edgecount_gossip_reliable_sends_total", "Values too large for a packet sent to a member over TCP.", false, u64(&s.ReliableSends)},
		{"edgecount_gossip_reliable_errors_total", "Failed TCP sends of values (repaired by the next push/pull).", false, u64(&s.ReliableErrors)},
		{"edgecount_gossip_local_state_truncated_total", "Push/pull states cut at the size limit.", false, u64(&s.LocalStateTruncated)},
		{"edgecount_gossip_joins_total", "Members seen joining.", false, u64(&s.Joins)},
		{"edgecount_gossip_leaves_total", "Members seen leaving.", false, u64(&s.Leaves)},
		{"edgecount_gossip_failures_total", "Members declared dead.", false, u64(&s.Failures)},
		{"edgecount_gossip_suspicions_total", "Probes of a member by this node that got no answer.", false, u64(&s.Suspicions)},
		{"edgecount_gossip_join_errors_total", "Joins that reached no seed.", false, u64(&s.JoinErrors)},
		{"edgecount_gossip_key_reloads_total", "Successful reloads of the gossip key file.", false, u64(&s.KeyReloads)},
		{"edgecount_gossip_key_reload_errors_total", "Failed reloads of the gossip key file (keyring unchanged).", false, u64(&s.KeyFailures)},
	}, prometheus.Labels{"region": g.Region()})
}
