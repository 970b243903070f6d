package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgecount/edgecount/natsjs"
)

// RegisterGroupConsumer exports a rollup group member's totals: the same
// edgecount_consumer_* counters as RegisterConsumer (register one or the
// other in a process, not both), and its share of the partitions,
// handovers and fenced messages, labelled with the member id.
func RegisterGroupConsumer(reg prometheus.Registerer, g *natsjs.GroupConsumer) error {
	stat := func(f func(natsjs.GroupStats) float64) func() float64 {
		return func() float64 { return f(g.Stats()) }
	}
	u := func(f func(natsjs.GroupStats) uint64) func() float64 {
		return stat(func(s natsjs.GroupStats) float64 { return float64(f(s)) })
	}
	i := func(f func(natsjs.GroupStats) int) func() float64 {
		return stat(func(s natsjs.GroupStats) float64 { return float64(f(s)) })
	}
	if err := register(reg, consumerMetrics(func() natsjs.ConsumerStats { return g.Stats().ConsumerStats }), nil); err != nil {
		return err
	}
	return register(reg, []metricFunc{
		{"edgecount_group_members", "Live rollup group members in this member's view, itself included.", true, i(func(s natsjs.GroupStats) int { return s.Members })},
		{"edgecount_group_partitions_assigned", "Partitions the membership view assigns to this member.", true, i(func(s natsjs.GroupStats) int { return s.Assigned })},
		{"edgecount_group_partitions_owned", "Partitions pinned to this member: it is their one writer.", true, i(func(s natsjs.GroupStats) int { return s.Pinned })},
		{"edgecount_group_handovers_total", "Partitions handed over to this member (pins received).", false, u(func(s natsjs.GroupStats) uint64 { return s.Acquired })},
		{"edgecount_group_released_total", "Partition pins handed back on purpose (rebalancing, stop).", false, u(func(s natsjs.GroupStats) uint64 { return s.Released })},
		{"edgecount_group_pins_lost_total", "Partition pins the broker moved away because this member did not pull for the pinned TTL.", false, u(func(s natsjs.GroupStats) uint64 { return s.Lost })},
		{"edgecount_group_fenced_total", "Messages given up because their lease ran out before the handler finished (left for redelivery).", false, u(func(s natsjs.GroupStats) uint64 { return s.Fenced })},
		{"edgecount_group_lease_renewals_total", "Confirmed progress signals that extended a message lease.", false, u(func(s natsjs.GroupStats) uint64 { return s.LeaseRenewals })},
		{"edgecount_group_lease_errors_total", "Progress signals not confirmed while the lease held.", false, u(func(s natsjs.GroupStats) uint64 { return s.LeaseErrors })},
		{"edgecount_group_membership_errors_total", "Failed membership renewals or reads (the last view is kept).", false, u(func(s natsjs.GroupStats) uint64 { return s.MembershipErrors })},
		{"edgecount_group_membership_rejoins_total", "Creations of the membership stream after the broker had lost it, each followed by joining again.", false, u(func(s natsjs.GroupStats) uint64 { return s.MembershipRejoins })},
	}, prometheus.Labels{"member": g.MemberID()})
}
