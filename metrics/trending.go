package metrics

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgecount/edgecount/region"
	"github.com/edgecount/edgecount/rollup"
)

// RegisterAgentTrending exports an agent's trending and hot-counter totals.
func RegisterAgentTrending(reg prometheus.Registerer, a *region.Agent) error {
	s := a.Stats()
	return register(reg, []metricFunc{
		{"edgecount_agent_trending_seconds_total", "Time flushes spent on trending summaries and lists.", false, func() float64 { return float64(s.TrendingNanos.Load()) / 1e9 }},
		{"edgecount_agent_trending_lists_shipped_total", "Per-partition trending lists put in partial-sum messages.", false, u64(&s.TopListsShipped)},
		{"edgecount_agent_trending_peer_errors_total", "Peer trending summaries that did not decode and were left out.", false, u64(&s.PeerSummaryErrors)},
		{"edgecount_agent_hot_counters", "Items the hot-counter rule holds hot (more shards).", true, i64(&s.HotCounters)},
		{"edgecount_agent_hot_promoted_total", "Items the hot-counter rule made hot.", false, u64(&s.HotPromoted)},
		{"edgecount_agent_hot_cooled_total", "Items the hot-counter rule sent back to one shard.", false, u64(&s.HotCooled)},
		{"edgecount_agent_hot_read_errors_total", "Regional trending lists the hot-counter rule could not read (nothing cools on missing data).", false, u64(&s.HotReadErrors)},
		{"edgecount_agent_hot_write_errors_total", "Shard counts the directory did not take.", false, u64(&s.HotWriteErrors)},
	}, prometheus.Labels{"region": a.Config().Region})
}

// RegisterRollupTrending exports a rollup's trending totals. Trending must
// be enabled (rollup.EnableTrending) first.
func RegisterRollupTrending(reg prometheus.Registerer, r *rollup.Rollup) error {
	s := r.TrendingStats()
	if s == nil {
		return errors.New("cannot register rollup trending metrics: trending is not enabled")
	}
	return register(reg, []metricFunc{
		{"edgecount_rollup_trending_lists_total", "Agent trending lists applied.", false, u64(&s.Lists)},
		{"edgecount_rollup_trending_bad_lists_total", "Agent trending lists of an unknown window, dropped.", false, u64(&s.BadLists)},
		{"edgecount_rollup_trending_bad_items_total", "Trending list items of another partition than their message's, dropped.", false, u64(&s.BadItems)},
		{"edgecount_rollup_trending_future_skips_total", "Messages flushed more than 10 minutes ahead of the rollup's clock: totals applied, trending part ignored.", false, u64(&s.FutureSkips)},
		{"edgecount_rollup_trending_redelivered_total", "Redelivered messages whose trending data was already counted.", false, u64(&s.Redelivered)},
		{"edgecount_rollup_trending_rows_written_total", "Trending lists stored (one partition's each).", false, u64(&s.RowsWritten)},
		{"edgecount_rollup_trending_write_errors_total", "Trending lists the store did not take (written again at the next interval).", false, u64(&s.WriteErrors)},
		{"edgecount_rollup_trending_candidates", "Items the rollup counts exactly for trending.", true, i64(&s.Candidates)},
		{"edgecount_rollup_trending_compute_seconds_total", "Time spent computing trending lists.", false, func() float64 { return float64(s.ComputeNanos.Load()) / 1e9 }},
		{"edgecount_rollup_trending_states_written_total", "Partition trending window states stored (after each partition's lists).", false, u64(&s.StatesWritten)},
		{"edgecount_rollup_trending_state_bytes_total", "Bytes of the trending window states stored.", false, u64(&s.StateBytes)},
		{"edgecount_rollup_trending_states_loaded_total", "Partitions taken over from a stored trending window state.", false, u64(&s.StatesLoaded)},
		{"edgecount_rollup_trending_state_gaps_total", "Partitions taken over whose previous owner counted messages after its last stored state (those minutes became bounds).", false, u64(&s.StateGaps)},
		{"edgecount_rollup_trending_state_load_errors_total", "Stored trending window states that could not be read or decoded (the partition starts afresh).", false, u64(&s.StateLoadErrors)},
	}, nil)
}
