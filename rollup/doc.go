// Package rollup merges the partial sums that edge agents publish into the
// derived totals (engagement.Stats rows): one row per item for the global
// total and one per region. With EnableTrending it also keeps each
// partition's trending lists, and the Recounter finds and repairs totals
// that drifted from the reactions they derive from.
//
// Invariants:
//   - A message is applied exactly once: one writer per partition takes
//     messages in broker order, and every row stores the sequence of the
//     last message applied to it (Stats.LastSeq), so a redelivery changes
//     nothing it already changed and completes what it had not.
//     HandleBatch coalesces consecutive messages of a partition: a row
//     takes, in order, those above its LastSeq and then the highest of
//     their sequences, in one write; each run's mark follows the rows.
//   - A message is applied once even when it reaches the stream twice
//     under two broker sequences (an agent re-publishes what it holds
//     unacknowledged, with its Nats-Msg-Id, possibly after the broker's
//     de-duplication window): the store keeps, per (partition, agent,
//     epoch), the highest flush seq applied (store.Mark), written with the
//     message's rows (atomically, or after them), and a message at or
//     below its run's mark is acknowledged and dropped
//     (Stats.DuplicatesDropped). This relies on each run of an agent
//     (agent id, epoch) publishing a partition's messages in increasing
//     seq order; runs need not be ordered among themselves. A partition's
//     marks are read once and kept in memory until ForgetPartition; marks
//     untouched for the mark TTL (30 days) are deleted, so a copy older
//     than that would count again.
//   - Every sum goes to the global row and to exactly one regional row under
//     the same sequence check, so the regional rows sum to the global one.
//   - A recount repair never makes a correct total wrong: it writes a count
//     only after Quiet, holding the apply lock that the apply path of every
//     message takes shared, and only if the rows did not change meanwhile.
//   - The owner of partition p is the only writer of p's trending lists;
//     a list is applied only after its message's rows are written.
//
// Rollup is safe for concurrent use by one goroutine per partition; the
// store it is given must be too. Recounter is safe for concurrent use. The
// package imports no client library: the store and the broker are reached
// through interfaces declared here and by the caller.
//
// The arguments are design notes: docs/recount.md (exactly-once apply and
// the recount) and docs/trending.md (the rollup's lists).
package rollup
