package metrics

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/edgecount/edgecount/buildinfo"
	redisdir "github.com/edgecount/edgecount/directory/redis"
	"github.com/edgecount/edgecount/natsjs"
	"github.com/edgecount/edgecount/region"
	"github.com/edgecount/edgecount/rollup"
)

// NewRegistry returns a process's metrics registry, with the Go runtime's
// and the process's collectors and edgecount_build_info of the running
// binary (buildinfo.Read).
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		buildInfo(buildinfo.Read()))
	return reg
}

type metricFunc struct {
	name, help string
	gauge      bool
	value      func() float64
}

func u64(v *atomic.Uint64) func() float64 { return func() float64 { return float64(v.Load()) } }
func i64(v *atomic.Int64) func() float64  { return func() float64 { return float64(v.Load()) } }

func register(reg prometheus.Registerer, ms []metricFunc, labels prometheus.Labels) error {
	var errs []error
	for _, m := range ms {
		var c prometheus.Collector
		if m.gauge {
			c = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: m.name, Help: m.help, ConstLabels: labels}, m.value)
		} else {
			c = prometheus.NewCounterFunc(prometheus.CounterOpts{Name: m.name, Help: m.help, ConstLabels: labels}, m.value)
		}
		if err := reg.Register(c); err != nil {
			errs = append(errs, fmt.Errorf("cannot register %s: %w", m.name, err))
		}
	}
	return errors.Join(errs...)
}

// RegisterAgent exports an agent's totals.
func RegisterAgent(reg prometheus.Registerer, a *region.Agent) error {
	s := a.Stats()
	return register(reg, []metricFunc{
		{"edgecount_agent_increments_total", "Increments accepted.", false, u64(&s.IncrementsAccepted)},
		{"edgecount_agent_reactions_changed_total", "Reactions that changed a row.", false, u64(&s.ReactionsChanged)},
		{"edgecount_agent_reactions_unchanged_total", "Reactions that repeated the current action (idempotent).", false, u64(&s.ReactionsUnchanged)},
		{"edgecount_agent_reaction_conflicts_total", "Compare-and-set attempts lost to a concurrent writer (re-read and retried).", false, u64(&s.ReactionConflicts)},
		{"edgecount_agent_reactions_contended_total", "Reactions answered 409: too many lost compare-and-sets, or a Paxos contention timeout (settled later).", false, u64(&s.ReactionsContended)},
		{"edgecount_agent_reactions_too_frequent_total", "Reactions answered 429: the row took too many changes within the writer history window.", false, u64(&s.ReactionsTooFrequent)},
		{"edgecount_agent_flushes_total", "Counter flushes.", false, u64(&s.Flushes)},
		{"edgecount_agent_flushes_deferred_total", "Flushes skipped because the outbox was full (broker slow or down).", false, u64(&s.FlushesDeferred)},
		{"edgecount_agent_flush_seconds_total", "Time spent draining and encoding flushes.", false, func() float64 { return float64(s.FlushNanos.Load()) / 1e9 }},
		{"edgecount_agent_partial_sums_flushed_total", "Partial sums handed to the outbox.", false, u64(&s.SumsFlushed)},
		{"edgecount_agent_messages_enqueued_total", "Partial-sum messages put in the outbox.", false, u64(&s.MessagesEnqueued)},
		{"edgecount_agent_messages_published_total", "Partial-sum messages stored by the broker.", false, u64(&s.MessagesPublished)},
		{"edgecount_agent_publish_errors_total", "Failed publish attempts (each is retried).", false, u64(&s.PublishErrors)},
		{"edgecount_agent_outbox_bytes", "Encoded partial sums waiting to be published.", true, i64(&s.OutboxBytes)},
		{"edgecount_agent_outbox_messages", "Partial-sum messages waiting to be published.", true, i64(&s.OutboxMessages)},
		{"edgecount_agent_read_cache_hits_total", "Count reads served from the cache.", false, u64(&s.CacheHits)},
		{"edgecount_agent_read_cache_misses_total", "Count reads that went to the store.", false, u64(&s.CacheMisses)},
		{"edgecount_agent_live_counters", "Counters holding state in memory.", true, func() float64 { return float64(a.LiveCounters()) }},
	}, prometheus.Labels{"region": a.Config().Region})
}

// RegisterRollup exports a rollup's totals.
func RegisterRollup(reg prometheus.Registerer, r *rollup.Rollup) error {
	s := r.Stats()
	return register(reg, []metricFunc{
		{"edgecount_rollup_messages_total", "Partial-sum messages applied.", false, u64(&s.Messages)},
		{"edgecount_rollup_partial_sums_total", "Partial sums in applied messages.", false, u64(&s.Sums)},
		{"edgecount_rollup_rows_written_total", "ContentStats rows written.", false, u64(&s.RowsWritten)},
		{"edgecount_rollup_rows_skipped_total", "Rows that already held a redelivered message.", false, u64(&s.RowsSkipped)},
		{"edgecount_rollup_duplicates_dropped_total", "Messages dropped because their agent run's high-water mark covers them (a re-publish).", false, u64(&s.DuplicatesDropped)},
		{"edgecount_rollup_order_violations_total", "Messages dropped below their agent run's mark though flushed after it: two agents share an id and epoch, or a run's sequence went back (counts lost).", false, u64(&s.OrderViolations)},
		{"edgecount_rollup_marks", "High-water marks held in memory: one per agent run seen in each partition held.", true, func() float64 { return float64(s.Marks.Load()) }},
		{"edgecount_rollup_marks_pruned_total", "High-water marks removed after the mark TTL without a message.", false, u64(&s.MarksPruned)},
		{"edgecount_rollup_poison_messages_total", "Messages that could not be decoded and were dropped.", false, u64(&s.Poison)},
		{"edgecount_rollup_apply_errors_total", "Failed apply attempts (retried with backoff).", false, u64(&s.ApplyErrors)},
		{"edgecount_rollup_lag_seconds", "Age of the last applied message's flush when it was applied.", true, func() float64 { return float64(s.LagMillis.Load()) / 1e3 }},
	}, nil)
}

// RegisterConsumer exports a broker consumer's totals.
func RegisterConsumer(reg prometheus.Registerer, c *natsjs.Consumer) error {
	return register(reg, consumerMetrics(c.Stats), nil)
}

// consumerMetrics are the edgecount_consumer_* counters of a plain or a
// group consumer, read from stats at scrape time.
func consumerMetrics(stats func() natsjs.ConsumerStats) []metricFunc {
	stat := func(f func(natsjs.ConsumerStats) uint64) func() float64 {
		return func() float64 { return float64(f(stats())) }
	}
	return []metricFunc{
		{"edgecount_consumer_acked_total", "Messages handled and acknowledged.", false, stat(func(s natsjs.ConsumerStats) uint64 { return s.Applied })},
		{"edgecount_consumer_retries_total", "Handler failures retried with backoff.", false, stat(func(s natsjs.ConsumerStats) uint64 { return s.Retries })},
		{"edgecount_consumer_terminated_total", "Poison messages terminated.", false, stat(func(s natsjs.ConsumerStats) uint64 { return s.Terminated })},
		{"edgecount_consumer_redelivered_total", "Messages the broker delivered more than once.", false, stat(func(s natsjs.ConsumerStats) uint64 { return s.Redelivered })},
		{"edgecount_consumer_ack_errors_total", "Acknowledgements the broker did not confirm.", false, stat(func(s natsjs.ConsumerStats) uint64 { return s.AckErrors })},
		{"edgecount_consumer_fetch_errors_total", "Failed fetches from the broker.", false, stat(func(s natsjs.ConsumerStats) uint64 { return s.FetchErrors })},
		{"edgecount_consumer_consumers_recreated_total", "Durable consumers created again after the broker had lost them.", false, stat(func(s natsjs.ConsumerStats) uint64 { return s.ConsumersRecreated })},
		{"edgecount_consumer_streams_recreated_total", "Creations of the partial-sum stream by the consumer after the broker had lost it.", false, stat(func(s natsjs.ConsumerStats) uint64 { return s.StreamsRecreated })},
	}
}

// RegisterRedisDirectory exports the Redis shard directory's totals.
func RegisterRedisDirectory(reg prometheus.Registerer, d *redisdir.Directory) error {
	stat := func(f func(redisdir.Stats) uint64) func() float64 {
		return func() float64 { return float64(f(d.Stats())) }
	}
	return register(reg, []metricFunc{
		{"edgecount_directory_redis_up", "1 while the Redis directory answers and its subscription holds; writes go on without it.", true,
			func() float64 {
				if d.Stats().Up {
					return 1
				}
				return 0
			}},
		{"edgecount_directory_hits_total", "Shard lookups answered from the cache.", false, stat(func(s redisdir.Stats) uint64 { return s.Hits })},
		{"edgecount_directory_misses_total", "Shard lookups answered with the default while fetching.", false, stat(func(s redisdir.Stats) uint64 { return s.Misses })},
		{"edgecount_directory_fetch_errors_total", "Failed Redis fetches.", false, stat(func(s redisdir.Stats) uint64 { return s.FetchErrors })},
		{"edgecount_directory_invalidations_total", "Invalidations received over pub/sub.", false, stat(func(s redisdir.Stats) uint64 { return s.Invalidations })},
		{"edgecount_directory_dropped_total", "Misses not fetched because the queue was full.", false, stat(func(s redisdir.Stats) uint64 { return s.Dropped })},
		{"edgecount_directory_changes_total", "Shard counts changed (live counters resharded).", false, stat(func(s redisdir.Stats) uint64 { return s.Changes })},
	}, nil)
}
