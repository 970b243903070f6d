package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgecount/edgecount/store/cassandra"
)

// RegisterCassandra exports the rare events of a Cassandra store: reaction
// writes whose answer was lost and had to be settled, fenced or left
// unknown, and by-content entries left behind. Applied undos are exported
// with the store-neutral delete metrics.
func RegisterCassandra(reg prometheus.Registerer, s *cassandra.Store) error {
	c := s.Counters()
	return register(reg, []metricFunc{
		{"edgecount_cassandra_settled_total", "Reaction writes whose outcome was open (timeout, lost connection) and was settled by a serial read.", false, i64(&c.Settled)},
		{"edgecount_cassandra_fenced_total", "Settled reaction writes whose row was fenced so a queued copy can never apply.", false, i64(&c.Fenced)},
		{"edgecount_cassandra_outcome_unknown_total", "Reaction writes whose outcome stayed unknown (answered 503; a recount repairs totals).", false, i64(&c.Unknown)},
		{"edgecount_cassandra_index_behind_total", "Applied reaction writes whose by-content entry could not be written.", false, i64(&c.IndexBehind)},
	}, nil)
}
