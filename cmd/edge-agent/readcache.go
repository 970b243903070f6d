package main

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgecount/edgecount/natsjs"
	"github.com/edgecount/edgecount/region"
)

// registerReadCache exports the read cache of warm items and the row
// pushes that keep it fresh (docs/read-cache.md); hits and misses are the
// agent's edgecount_agent_read_cache_{hits,misses}_total.
func registerReadCache(reg prometheus.Registerer, a *region.Agent, sub *natsjs.RowSubscription) error {
	opts := func(name, help string) prometheus.Opts {
		return prometheus.Opts{Namespace: "edgecount", Subsystem: "agent", Name: name, Help: help}
	}
	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts(opts(name, help)), f)
	}
	counter := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts(opts(name, help)), f)
	}
	st := func() region.ReadCacheStats { return a.ReadCacheStats() }
	var errs []error
	for _, c := range []prometheus.Collector{
		gauge("read_cache_warm_items", "Items whose totals the read cache holds.", func() float64 { return float64(st().Items) }),
		counter("read_cache_evicted_total", "Warm items dropped to keep the read cache under its limit.", func() float64 { return float64(st().Evicted) }),
		counter("row_pushes_received_total", "Row pushes received from the rollups.", func() float64 { return float64(st().Pushes) }),
		counter("row_push_rows_total", "Rows received in row pushes.", func() float64 { return float64(st().PushRows) }),
		counter("row_push_rows_applied_total", "Pushed rows that changed a warm item.", func() float64 { return float64(st().PushRowsApplied) }),
		gauge("row_push_lag_seconds", "Age of the last row push on arrival: from the rollup's write to here.", func() float64 { return st().PushLag.Seconds() }),
		counter("row_push_gaps_total", "Gaps seen in the partitions' push sequences (a lost push, a new rollup, a first push); each sends warm items back to the store within cache_ttl.",
			func() float64 { return float64(st().PushGaps) }),
		gauge("row_push_feed_whole", "1 while every partition's row pushes arrive in sequence and recently (warm items are then served for cache_ttl_pushed), else 0.",
			func() float64 {
				if st().FeedWhole {
					return 1
				}
				return 0
			}),
		counter("row_pushes_malformed_total", "Row pushes dropped because they did not decode.", func() float64 { return float64(sub.Malformed()) }),
		counter("row_pushes_dropped_total", "Row pushes the connection dropped because the agent was slow (repaired by the refresh).",
			func() float64 { return float64(sub.Dropped()) }),
	} {
		errs = append(errs, reg.Register(c))
	}
	return errors.Join(errs...)
}
