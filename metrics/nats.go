package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgecount/edgecount/natsjs"
)

// RegisterNATSClient exports the state of a process's broker connection:
// whether it is up and how often it came back after a broker restart or a
// network cut. A process registers it once for its one connection.
func RegisterNATSClient(reg prometheus.Registerer, c *natsjs.Client) error {
	return register(reg, []metricFunc{
		{"edgecount_nats_connected", "1 while the broker connection is up, 0 while it reconnects.", true, func() float64 {
			if c.Stats().Connected {
				return 1
			}
			return 0
		}},
		{"edgecount_nats_reconnects_total", "Reconnections to the broker after the connection was lost.", false, func() float64 { return float64(c.Stats().Reconnects) }},
	}, nil)
}

// RegisterPublisher exports an agent publisher's recovery counters (the
// agent's own metrics count messages and publish errors).
func RegisterPublisher(reg prometheus.Registerer, p *natsjs.Publisher) error {
	return register(reg, []metricFunc{
		{"edgecount_publisher_duplicates_total", "Publishes the broker had stored before (a retry after a lost acknowledgement), kept once.", false, func() float64 { return float64(p.Stats().Duplicates) }},
		{"edgecount_publisher_streams_recreated_total", "Creations of the partial-sum stream after the broker had lost it.", false, func() float64 { return float64(p.Stats().StreamsRecreated) }},
	}, nil)
}
