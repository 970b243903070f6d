// Package rollup merges the partial sums that edge agents publish into the
// derived totals (ContentStats rows): one row per item for the global total
// and one per region.
//
// Exactly-once apply rests on three facts, each kept elsewhere and relied on
// here:
//   - All sums for one item travel in one partition, and one partition has
//     one writer at a time which hands messages over strictly in broker
//     order (natsjs: one pull consumer per partition, MaxAckPending 1).
//   - Broker sequences grow along a partition.
//   - Every row stores the sequence of the last message applied to it
//     (Stats.LastSeq). Apply skips a row whose LastSeq is not below the
//     message's sequence, so a message redelivered after a crash between
//     writing rows and acknowledging it changes nothing it already changed,
//     and completes what it had not.
//
// Regional rows sum to the global row because every sum is added to the
// global row and to exactly one regional row (the region it is attributed
// to) under the same sequence check.
//
// # Recount: finding and repairing drift
//
// Totals derive from the reactions (UserLikes), and the Recounter makes that
// hold after a loss: an agent killed with deltas in memory, a reaction that
// applied while its client got an error, a row damaged by hand. It compares
// an item's likes and dislikes — global and per region — with a count of
// its reactions and rewrites the rows that differ (other counters have no
// source to be recounted from and are kept). A pass scans the next
// RecountConfig.Batch rows from a cursor that survives between passes (a
// full cycle covers the table) and checks, among the items of partitions
// this rollup owns, every stale one (no row updated for StaleAfter) and
// Sample others at random; Recount checks given ids on demand.
//
// A total lags its reactions by the deltas in flight: in an agent's
// counters (up to one flush interval), its outbox, the stream, the apply. A
// count taken meanwhile already holds changes the total does not, and
// writing it would count them twice when their deltas land. So a repair
// follows one rule:
//
//  1. read the item's rows (R1);
//  2. count its reactions (C); equal to R1: clean, nothing to do;
//  3. wait until Quiet has passed since the count;
//  4. holding the apply lock, which every Handle takes shared, read the rows
//     again (R2); write C only if R2 equals R1 (same rows, LastSeq,
//     UpdatedAt and values), the partition is still owned and the pipeline
//     is not seen to be behind. Otherwise the item is deferred: left as it
//     is for a later pass.
//
// This never makes a correct total wrong, under two assumptions:
//
//   - A: every reaction change committed at time t has its delta applied
//     by t + Quiet. Quiet must cover the flush interval plus the publish and
//     rollup lag tolerated (config validation demands more than the flush
//     interval; the default is 30 s).
//   - B: only this rollup writes the item's rows — it owns the partition
//     (one writer per partition) and applies every message through
//     Recounter.Handle.
//
// Every change in C committed before the count ended, so by A its delta was
// applied before R2 was read; R2 = R1 means none was applied after R1 was
// read, so every counted change is already in R1 and C − R1 is true drift.
// A change committed after the count is not in C; its delta is applied after
// the write (the lock keeps every apply out of the read-compare-write) and
// adds to the repaired value once. A correct row equals C and is never
// written. The repair goes through the partition's single writer rather than
// a conditional write: stats rows are plain values, and in Cassandra a
// lightweight transaction mixed with plain writes of the same row is unsafe.
// The repair and the applies share one store, whose write timestamps only
// grow, so an apply after a repair always wins in Cassandra too.
//
// A repaired row keeps its other counters, is stamped with the current time
// and takes the highest LastSeq of the item's rows: every message up to it
// was applied to the item before the count (messages apply in order, all
// rows of an item in one write), so a redelivered one must skip the row and
// a later one must not.
//
// The job checks what it can see of assumption A: it defers every repair
// while the last message failed to apply and none has been applied since
// (it is being retried, its deltas in flight), or when, from Quiet before
// the count until the repair, a message failed or one was applied more
// than Quiet after its flush. It cannot see deltas
// held longer than Quiet by an agent that cannot reach the broker (its
// outbox keeps them): a repair of the same item during such an outage counts
// them twice when the outbox drains. Set Quiet above the longest broker
// outage an agent is expected to ride out, and pause the job (interval 0)
// during a longer one.
//
// Counts: RecountReactions of the store. The embedded store's index changes
// with the rows in one transaction, so its count is complete. Cassandra's
// by-content entries are written after the reaction and can lag it
// (ErrIndexBehind): there the count reads every user_likes row the entries
// name, so a stale entry counts as what the row holds, but a missing entry
// (an insert whose entry write failed) cannot be found from the item. Such a
// count is a lower bound of every cell, so the job raises totals to it but
// never lowers one (RecountStats.RowsUnrepaired), unless an on-demand
// recount is given RecountOptions.AllowLower by an operator who checked the
// index. A cell below such a count is below the truth, so raising it never
// makes a correct total wrong.
//
// Recounter is safe for concurrent use: passes run one at a time, on-demand
// recounts run beside them, and Handle runs on every partition's goroutine.
//
// # Trending
//
// With EnableTrending, the rollup also keeps trending lists. The choices,
// and why:
//
// Who writes which row. A stored list is one partition's:
// engagement.TrendingKey carries the partition, and the rollup that owns
// partition p is the only writer of p's lists, for every scope (each
// region and global), counter and window. An item belongs to one
// partition, so the partitions' lists are disjoint and a reader merges
// them by ranking their union (one single-partition read in Cassandra,
// one prefix scan in the embedded store). A global row per (counter,
// window) would need one writer for all partitions, which disjoint owners
// (rollup.owned) cannot provide without a second pass; per-partition rows
// keep "one writer per row" with no coordination. A reader ranks the top k
// exactly for k up to TrendingConfig.RowItems.
//
// How lists travel. Each agent cuts its lists by partition and sends p's
// cut with p's partial sums (region doc). So the owner of p receives, in
// stream order, both the exact sums of p's items and every agent's
// candidates and bounds for them.
//
// What the rollup keeps per partition, region and counter: the latest list
// of every agent run (agent, epoch) per window, and for every item that a
// list names (the candidates), its exact counts per minute (last 60) and
// per hour (last 24), summed from the positive sums it applies from then
// on, bucketed by the flush time the message carries (the same buckets as
// the agents' windows). Memory is bounded by the candidates: agents ×
// ListLen items per list, spread over the partitions.
//
// The bounds of item x over window W, as of the partition's newest flush
// time T (agents' clocks), at minute m. T never goes back, so a message
// flushed more than ten minutes ahead of the rollup's own clock (an agent
// clock that jumped) has its trending part ignored and counted
// (TrendingStats.FutureSkips); its sums still go to the totals.
//
//   - Lists: an agent's list of minute m adds [count-error, count] if it
//     names x and [0, floor] if not; a list of an earlier minute still
//     overlapping W adds only upper bounds (its window has moved since, so
//     part of what it counts may have left W); a list no longer
//     overlapping W is dropped. The agents' streams are disjoint, so the
//     bounds add up.
//   - Exact counts: where available they rank the candidates. x's count
//     since it became a candidate is a lower bound; once that covers all of
//     W it is x's count (error 0), whatever the lists say. Global is the sum
//     of the regions' bounds.
//
// Every agent must keep lists for the same counters (one configuration):
// an agent that sends a counter's sums but no lists is in the exact counts
// but not in the lists' upper bounds.
//
// A list is applied only after its message's rows are written, so every
// sum it counts has been applied; the count the bounds hold for is that of
// the sums applied. Items are ranked by their upper bound (the count of an
// exact item), ties by id; an item whose upper bound is 0 is not listed.
// Every Interval (default 5 s), when a message of p is applied, the rollup
// recomputes p's lists and stores them (a list that empties is stored
// empty once); WriteTrending does the same at once (a final write at
// stop). A failed write is counted and left for the next interval: it
// never holds back the message.
//
// Handover. When partitions move between rollups (a consumer group), the
// new owner starts p's state as after a restart; the old one must drop its
// own (ForgetTrending), or its exact counts would miss what the other
// applied, should p come back. The old owner writes p's lists only while
// applying p's messages (and in WriteTrending), so after a handover its
// last write can at worst briefly replace the new owner's, until the new
// owner's next interval.
//
// Redelivery. Trending state counts a message at most once: a partition
// remembers the last sequence it counted and skips anything at or below
// it (a message whose ack was lost is redelivered after it was counted).
//
// Restart. The window state is not persisted; it is rebuilt. The agents'
// lists are cumulative (each is the agent's whole window), so every agent
// that is alive re-sends its lists within a minute and the rollup's lists
// are whole again; stored lists are meanwhile kept as they were (a reader
// leaves out a list older than its window). Exact
// counts start empty and count from the minute after the newer of the
// newest flush seen and the process start plus one minute of clock skew
// (a previous process may have applied flushes up to its end), so they
// cover 5m about 7 minutes after a start, 1h after an hour and 24h after a
// day; until then the lists bound the counts. Known gap: an agent that
// stopped for good before a rollup restart is not re-sent, so its share of
// the 1h and 24h windows drops out of trending at the restart (its counts
// stay in the totals). Persisting the per-agent lists would close it; the
// cost is a store write per list.
//
// Rollup is safe for concurrent use by one goroutine per partition; the
// store it is given must be too. It imports no client library: the store
// and the broker are reached through the interfaces declared here and in
// the caller.
package rollup
