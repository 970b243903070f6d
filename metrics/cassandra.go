package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgecount/edgecount/store/cassandra"
)

// RegisterCassandra exports the rare events of a Cassandra store: reaction
// writes whose answer was lost and had to be settled, fenced or left
// unknown, and by-content entries left behind. Applied undos are exported
// with the store-neutral delete metrics.
func RegisterCassandra(reg prometheus.Registerer, s *cassandra.Store) error {
	c := s.Counters()
	// The bounds of docs/data-model.md as the node that answers measures
	// them (system_views), read at most every 30 s.
	h := &cassandra.HealthCache{Store: s, MaxAge: 30 * time.Second}
	skew := &cassandra.SkewCache{Store: s, MaxAge: 30 * time.Second}
	return register(reg, []metricFunc{
		{"edgecount_cassandra_user_likes_max_partition_mebibytes", "Largest user_likes partition (one user's reactions) on the answering node, MiB.", true,
			func() float64 { return float64(h.Table("user_likes").MaxPartitionMiB) }},
		{"edgecount_cassandra_index_max_partition_mebibytes", "Largest by-content index partition (one bucket of one item) on the answering node, MiB.", true,
			func() float64 { return float64(h.Table(cassandra.IndexTable).MaxPartitionMiB) }},
		{"edgecount_cassandra_index_tombstones_per_read_max", "Most tombstones one read of the by-content index scanned recently on the answering node (warns at 1000).", true,
			func() float64 { return h.Table(cassandra.IndexTable).TombstonesPerReadMax }},
		{"edgecount_cassandra_clock_skew_seconds", "This process's clock minus the answering Cassandra node's (now()), read at most every 30 s; totals, marks and trending rows are ordered by write timestamps that assume clocks agree within the fence margin.", true,
			skew.Seconds},
		{"edgecount_cassandra_settled_total", "Reaction writes whose outcome was open (timeout, lost connection) and was settled by a serial read.", false, i64(&c.Settled)},
		{"edgecount_cassandra_fenced_total", "Settled reaction writes whose row was fenced so a queued copy can never apply.", false, i64(&c.Fenced)},
		{"edgecount_cassandra_contended_total", "Reaction writes left open by a Paxos contention timeout (writers racing on one row) and settled later by the agent.", false, i64(&c.Contended)},
		{"edgecount_cassandra_outcome_unknown_total", "Reaction writes whose outcome stayed unknown (answered 503; a recount repairs totals).", false, i64(&c.Unknown)},
		{"edgecount_cassandra_index_behind_total", "Applied reaction writes whose by-content entry could not be written.", false, i64(&c.IndexBehind)},
		{"edgecount_cassandra_index_repaired_total", "By-content entries written again from their row: by a count (pending after a change whose follow-up write failed), or by the index repair (missing, stale or damaged).", false, i64(&c.IndexRepaired)},
		{"edgecount_cassandra_index_removed_total", "By-content entries the index repair deleted (of an undone incarnation, or in a wrong bucket).", false, i64(&c.IndexRemoved)},
		{"edgecount_cassandra_index_pages_total", "Pages (queries) of the by-content index read by counts and recounts.", false, i64(&c.IndexPages)},
		{"edgecount_cassandra_index_rows_read_total", "By-content entries read by counts and recounts (about one per reaction counted).", false, i64(&c.IndexRowsRead)},
		{"edgecount_cassandra_index_tombstone_warnings_total", "By-content index pages the node answered with a tombstone warning (over tombstone_warn_threshold).", false, i64(&c.TombstoneWarnings)},
	}, nil)
}
