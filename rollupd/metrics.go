package rollupd

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgecount/edgecount/natsjs"
)

// registerCoalescing exports what coalescing and the row pushes do: row
// writes (one per batch), batches and batches held back at a takeover, and
// the pushes to the agents' read caches.
func (p *Process) registerCoalescing(reg prometheus.Registerer) error {
	ru := p.ru.Stats()
	consumerStats := func() natsjs.ConsumerStats {
		if p.group != nil {
			return p.group.Stats().ConsumerStats
		}
		return p.consumer.Stats()
	}
	counter := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "edgecount", Subsystem: "rollup", Name: name, Help: help}, f)
	}
	cs := []prometheus.Collector{
		counter("row_writes_total", "Store writes of rows: one per batch of coalesced messages.", func() float64 { return float64(ru.RowWrites.Load()) }),
		counter("batches_total", "Batches of consecutive messages of a partition applied together.", func() float64 { return float64(consumerStats().Batches) }),
		counter("batches_held_back_total", "Batches held back at a takeover until the messages a previous consumer left unacknowledged came again.",
			func() float64 { return float64(consumerStats().HeldBack) }),
		counter("delivery_gaps_total", "Jumps of a partition consumer's delivery sequence (deliveries lost in transit, e.g. across a hub leader failover); the next batch is held back until they come again.",
			func() float64 { return float64(consumerStats().Gaps) }),
	}
	if p.pusher != nil {
		cs = append(cs,
			counter("row_pushes_total", "Row pushes published to the agents' read caches.", func() float64 { return float64(p.pusher.Stats().Pushes) }),
			counter("rows_pushed_total", "Rows published to the agents' read caches.", func() float64 { return float64(p.pusher.Stats().Rows) }),
			counter("row_push_errors_total", "Row pushes that could not be published (lost; the agents refresh within their cache ttl).",
				func() float64 { return float64(p.pusher.Stats().Errors) }))
	}
	var errs []error
	for _, c := range cs {
		errs = append(errs, reg.Register(c))
	}
	return errors.Join(errs...)
}
