package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgecount/edgecount/region"
	"github.com/edgecount/edgecount/wal"
)

// FsyncObserver registers the agent log's fsync latency histogram and
// returns the function to pass as region.LogConfig.ObserveFsync.
func FsyncObserver(reg prometheus.Registerer, regionName string) (func(time.Duration), error) {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:        "edgecount_agent_log_fsync_seconds",
		Help:        "Duration of the agent logs' fsyncs (intake and outbox).",
		Buckets:     prometheus.ExponentialBuckets(50e-6, 2, 14), // 50 µs … 0.4 s
		ConstLabels: prometheus.Labels{"region": regionName},
	})
	if err := reg.Register(h); err != nil {
		return nil, err
	}
	return func(d time.Duration) { h.Observe(d.Seconds()) }, nil
}

// RegisterAgentLog exports the agent's durable logs: their size, what they
// hold unacknowledged and for how long, what the last start replayed and
// dropped, and the reaction intents. Without a log (durability none) the
// log gauges read 0.
func RegisterAgentLog(reg prometheus.Registerer, a *region.Agent) error {
	ls := a.LogStats()
	in := func(f func(wal.Stats) float64) func() float64 {
		return func() float64 {
			s, ok := a.IntakeLogStats()
			if !ok {
				return 0
			}
			return f(s)
		}
	}
	out := func(f func(wal.Stats) float64) func() float64 {
		return func() float64 {
			s, ok := a.OutboxLogStats()
			if !ok {
				return 0
			}
			return f(s)
		}
	}
	age := func(s wal.Stats) float64 {
		if s.OldestAppended.IsZero() {
			return 0
		}
		return time.Since(s.OldestAppended).Seconds()
	}
	dropped := func(s wal.Stats) float64 {
		return float64(s.TornTails + s.CorruptRecords + s.BadSegments + s.ForeignSegments)
	}
	return register(reg, []metricFunc{
		{"edgecount_agent_log_bytes", "Bytes in the intake log's segment files.", true, in(func(s wal.Stats) float64 { return float64(s.Bytes) })},
		{"edgecount_agent_log_records", "Intake records not yet carried by an acknowledged flush.", true, in(func(s wal.Stats) float64 { return float64(s.Unacknowledged) })},
		{"edgecount_agent_log_oldest_unacknowledged_seconds", "Age of the oldest intake record no acknowledged flush carries.", true, in(age)},
		{"edgecount_agent_log_full_total", "Appends the intake log refused for its byte budget.", false, in(func(s wal.Stats) float64 { return float64(s.Full) })},
		{"edgecount_agent_log_failed", "1 when an fsync of a log failed: the agent takes no writes until restarted.", true, func() float64 {
			si, _ := a.IntakeLogStats()
			so, _ := a.OutboxLogStats()
			if si.Failed != nil || so.Failed != nil {
				return 1
			}
			return 0
		}},
		{"edgecount_agent_log_damaged_total", "Torn tails, corrupt records and bad or foreign segments the intake log dropped at start.", false, in(dropped)},
		{"edgecount_agent_log_dropped_bytes_total", "Bytes of damaged intake records dropped at start.", false, in(func(s wal.Stats) float64 { return float64(s.DroppedBytes) })},
		{"edgecount_agent_outbox_log_bytes", "Bytes in the outbox log (flushed messages not yet stored by the broker).", true, out(func(s wal.Stats) float64 { return float64(s.Bytes) })},
		{"edgecount_agent_outbox_log_records", "Flushed messages in the outbox log not yet stored by the broker.", true, out(func(s wal.Stats) float64 { return float64(s.Unacknowledged) })},
		{"edgecount_agent_outbox_log_oldest_unacknowledged_seconds", "Age of the oldest message the broker has not stored.", true, out(age)},
		{"edgecount_agent_outbox_log_damaged_total", "Torn tails, corrupt records and bad or foreign segments the outbox log dropped at start.", false, out(dropped)},
		{"edgecount_agent_log_records_replayed_total", "Intake records replayed at start.", false, u64(&ls.RecordsReplayed)},
		{"edgecount_agent_log_messages_replayed_total", "Outbox messages re-published at start with their original ids.", false, u64(&ls.MessagesReplayed)},
		{"edgecount_agent_log_records_malformed_total", "Log records whose checksum held but whose content did not decode (not applied).", false, u64(&ls.RecordsMalformed)},
		{"edgecount_agent_log_writes_refused_total", "Writes answered 503 because a log was full or failed.", false, u64(&ls.WritesRefused)},
		{"edgecount_agent_log_flushes_failed_total", "Flushes that could not be logged (their deltas were kept for the next).", false, u64(&ls.FlushesFailed)},
		{"edgecount_agent_log_truncate_errors_total", "Failed log truncations (the records are dropped at the next start).", false, u64(&ls.TruncateErrors)},
		{"edgecount_agent_intents_replayed_total", "Reaction intents without an outcome found at start.", false, u64(&ls.IntentsReplayed)},
		{"edgecount_agent_intents_settled_total", "Reaction intents decided by reading the row.", false, u64(&ls.IntentsSettled)},
		{"edgecount_agent_intents_applied_total", "Settled reaction intents counted as applied.", false, u64(&ls.IntentsApplied)},
		{"edgecount_agent_intents_ambiguous_total", "Settled reaction intents whose row had moved on (not counted; the recount repairs the item).", false, u64(&ls.IntentsAmbiguous)},
		{"edgecount_agent_intents_refused_total", "Reaction intents decided not applied at once: the store refused the write before running it (store.ErrRefused).", false, u64(&ls.IntentsRefused)},
		{"edgecount_agent_intents_pending", "Reaction intents logged whose outcome is not yet logged.", true, i64(&ls.IntentsPending)},
	}, prometheus.Labels{"region": a.Config().Region})
}
