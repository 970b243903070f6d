package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgecount/edgecount/natsjs"
	"github.com/edgecount/edgecount/region"
)

// RegisterReadCache exports an agent's read cache of warm items and the
// row pushes that keep it fresh (docs/read-cache.md); hits and misses are
// the agent's edgecount_agent_read_cache_{hits,misses}_total.
func RegisterReadCache(reg prometheus.Registerer, a *region.Agent, sub *natsjs.RowSubscription) error {
	st := func() region.ReadCacheStats { return a.ReadCacheStats() }
	return register(reg, []metricFunc{
		{"edgecount_agent_read_cache_warm_items", "Items whose totals the read cache holds.", true, func() float64 { return float64(st().Items) }},
		{"edgecount_agent_read_cache_evicted_total", "Warm items dropped to keep the read cache under its limit.", false, func() float64 { return float64(st().Evicted) }},
		{"edgecount_agent_row_pushes_received_total", "Row pushes received from the rollups.", false, func() float64 { return float64(st().Pushes) }},
		{"edgecount_agent_row_push_rows_total", "Rows received in row pushes.", false, func() float64 { return float64(st().PushRows) }},
		{"edgecount_agent_row_push_rows_applied_total", "Pushed rows that changed a warm item.", false, func() float64 { return float64(st().PushRowsApplied) }},
		{"edgecount_agent_row_push_lag_seconds", "Age of the last row push on arrival: from the rollup's write to here.", true, func() float64 { return st().PushLag.Seconds() }},
		{"edgecount_agent_row_push_gaps_total", "Gaps seen in the partitions' push sequences (a lost push, a new rollup, a first push); each sends warm items back to the store within cache_ttl.",
			false, func() float64 { return float64(st().PushGaps) }},
		{"edgecount_agent_row_push_feed_whole", "1 while every partition's row pushes arrive in sequence and recently (warm items are then served for cache_ttl_pushed), else 0.",
			true, func() float64 {
				if st().FeedWhole {
					return 1
				}
				return 0
			}},
		{"edgecount_agent_row_pushes_malformed_total", "Row pushes dropped because they did not decode.", false, func() float64 { return float64(sub.Malformed()) }},
		{"edgecount_agent_row_pushes_dropped_total", "Row pushes the connection dropped because the agent was slow (repaired by the refresh).",
			false, func() float64 { return float64(sub.Dropped()) }},
	}, nil)
}
