package metrics

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgecount/edgecount/rollup"
)

// RegisterRecount exports the recount job's totals. Alert rules (see the
// README):
//
//	increase(edgecount_recount_drift_repaired_total[1h]) > 0       totals drift: deltas are being lost
//	increase(edgecount_recount_rows_unrepaired_total[1h]) > 0      drift the job may not repair (Cassandra index behind)
//	increase(edgecount_recount_errors_total[15m]) > 0              the job cannot read or write the store
//	time() - edgecount_recount_last_pass_timestamp_seconds > 600   no pass for 10 minutes (interval 1m)
//	edgecount_recount_count_complete == 0                          the index is not known complete: run index-migrate -repair
func RegisterRecount(reg prometheus.Registerer, rc *rollup.Recounter) error {
	s := rc.Stats()
	return register(reg, []metricFunc{
		{"edgecount_recount_passes_total", "Recount passes completed.", false, u64(&s.Passes)},
		{"edgecount_recount_scan_cycles_total", "Recount passes that reached the end of the totals table (full cycles).", false, u64(&s.ScanCycles)},
		{"edgecount_recount_items_checked_total", "Items whose totals were compared with their reactions.", false, u64(&s.ItemsChecked)},
		{"edgecount_recount_rows_checked_total", "Totals rows (global and regional) compared with a count of the reactions.", false, u64(&s.RowsChecked)},
		{"edgecount_recount_rows_repaired_total", "Totals rows rewritten because they differed from the count.", false, u64(&s.RowsRepaired)},
		{"edgecount_recount_rows_raised_total", "Repaired totals rows with a cell raised to the count (lost deltas).", false, u64(&s.RowsRaised)},
		{"edgecount_recount_rows_lowered_total", "Repaired totals rows with a cell lowered to the count (deltas no reaction backs).", false, u64(&s.RowsLowered)},
		{"edgecount_recount_drift_repaired_total", "Sum of |likes change| + |dislikes change| over the rows repaired.", false, u64(&s.DriftRepaired)},
		{"edgecount_recount_rows_deferred_total", "Rows with drift left for a later pass: the item changed while counted, or the pipeline was behind.", false, u64(&s.RowsDeferred)},
		{"edgecount_recount_rows_unrepaired_total", "Rows left above a count that may be short (a by-content entry may be missing); lower them on demand with allow_lower.", false, u64(&s.RowsUnrepaired)},
		{"edgecount_recount_counts_unfinished_total", "Item counts that stopped before the end (item_timeout, or an index read failed: item unrepaired); they resume.", false, u64(&s.CountsUnfinished)},
		{"edgecount_recount_counts_resumed_total", "Item counts continued from a kept cursor.", false, u64(&s.CountsResumed)},
		{"edgecount_recount_verifies_total", "Counts verified by the reaction rows before raising a total (Cassandra).", false, u64(&s.Verifies)},
		{"edgecount_recount_counts_in_progress", "Unfinished item counts kept (memory and progress file).", true, func() float64 { return float64(s.InProgress.Load()) }},
		{"edgecount_recount_errors_total", "Recount store failures (a pass or an item); retried by the next pass.", false, u64(&s.Errors)},
		{"edgecount_recount_count_complete", "1 when the last finished count of an item was complete, so totals are lowered as well as raised to it; 0 when not (a Cassandra keyspace of an older version until index-migrate -repair ran: totals are only raised); -1 before the first.", true,
			func() float64 { return float64(s.CountComplete.Load()) }},
		{"edgecount_recount_last_pass_timestamp_seconds", "Unix time at which the last recount pass ended (0 before the first).", true,
			func() float64 { return float64(s.LastPassMillis.Load()) / 1e3 }},
	}, nil)
}

// RegisterStoreDeletes exports the applied undos of a store (embedded or
// Cassandra: Counters().Deletes). In Cassandra each leaves a tombstone in
// the item's by-content partition; undos per minute are
// increase(edgecount_store_deletes_total[1m]).
func RegisterStoreDeletes(reg prometheus.Registerer, deletes *atomic.Int64) error {
	return register(reg, []metricFunc{
		{"edgecount_store_deletes_total", "Reactions undone (applied deletes; tombstones in Cassandra).", false, i64(deletes)},
	}, nil)
}

// RegisterEmbeddedCommits exports the embedded store's write calls and the
// bbolt transactions that carried them: their ratio is how many writes the
// group commit shares a transaction (and an fsync) between.
func RegisterEmbeddedCommits(reg prometheus.Registerer, writes, commits *atomic.Int64) error {
	return register(reg, []metricFunc{
		{"edgecount_store_writes_total", "Embedded store write calls (rows, marks, trending lists, reaction changes).", false, i64(writes)},
		{"edgecount_store_commits_total", "Embedded store write transactions; writes_total ÷ commits_total is how many writes share one.", false, i64(commits)},
	}, nil)
}
