package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgecount/edgecount/gossip"
	"github.com/edgecount/edgecount/region"
)

// RegisterFresh exports what an agent's fresh reads do and hold
// (docs/consistency.md); g is nil when the agent runs no gossip.
func RegisterFresh(reg prometheus.Registerer, a *region.Agent, g *gossip.Node) error {
	s := a.Stats()
	ms := []metricFunc{
		{"edgecount_agent_fresh_reads_total", "Count reads with consistency=fresh.", false, u64(&s.FreshReads)},
		{"edgecount_agent_fresh_peer_misses_total", "Region peers that did not answer a fresh read in time (the answer names them).", false, u64(&s.FreshPeerMisses)},
		{"edgecount_agent_fresh_held_messages", "Flushed messages remembered for fresh reads until seen applied.", true, func() float64 { return float64(a.HeldStats().Messages) }},
		{"edgecount_agent_fresh_held_sums", "Partial sums in the flushed messages remembered for fresh reads.", true, func() float64 { return float64(a.HeldStats().Sums) }},
		{"edgecount_agent_fresh_held_dropped_total", "Flushed messages forgotten past the bound before they were seen applied (fresh reads miss them).",
			false, func() float64 { return float64(a.HeldStats().Dropped) }},
	}
	if g != nil {
		q := func() gossip.QueryStats { return g.QueryStats() }
		ms = append(ms,
			metricFunc{"edgecount_agent_fresh_peer_queries_served_total", "Held-delta queries of region peers this agent answered.", false, func() float64 { return float64(q().Served) }},
			metricFunc{"edgecount_agent_fresh_peer_queries_dropped_total", "Held-delta queries of region peers dropped (queue full or not a live member).",
				false, func() float64 { return float64(q().Dropped) }},
		)
	}
	return register(reg, ms, nil)
}
