// Package region is the edge agent's core: it validates writes, applies the
// reaction rules (one compare-and-set on the user's row, then the counter
// deltas of the transition), adds increments to in-memory sharded counters,
// flushes the accumulated deltas as partial sums with the agent's trending
// lists, answers trending queries and runs the hot-counter rule. It imports
// no network or client library: it reaches stores, the directory, the
// publisher and its peers through small interfaces it declares beside their
// use (Directory, ReactionStore, StatsReader, Publisher, TrendingReader,
// PeerSummaries, ShardWriter); the records are package engagement's.
//
// Invariants:
//   - Every delta passed to Counters.Add is emitted by exactly one Drain (or
//     still held by the table), also across removal, Reshard and the table
//     rebuilds that move cold counters' values from slot to slot (sealing).
//   - A key is in its stripe's read table or its dirty map, never in both,
//     and a removed (sealed) counter is in neither.
//   - Add does not allocate once its counter exists; trending costs the
//     increment path nothing (the flusher feeds the windows).
//
// With a durable log (Config.Log, package wal), two more hold:
//   - An acknowledged write is in the intake log (fsynced in fsync mode)
//     before Increment or React returns; its in-memory add runs inside
//     wal.Log.AppendApply, so a flush's Checkpoint drains exactly the
//     records below its next index.
//   - A record leaves the intake log only once the flush that carries it is
//     in the outbox log (each message with the next index it covers), and a
//     message leaves the outbox log only once the broker stored it. Recover
//     re-queues the outbox (original ids, before any new flush, so that the
//     messages of one agent and partition reach the stream in increasing
//     (epoch, seq)), adds the intake records at or above the highest covered
//     index, settles every reaction intent without a resolution against the
//     row, and only then truncates the intake log below that index. An
//     intent still pending at a checkpoint is appended again before the
//     truncation, so it is never dropped.
//   - An idempotency key is in the intake record of the write it guards, and
//     a flush writes the keys of the records it truncates to the keys log
//     first (docs/idempotency.md); the key table's mutex comes after the
//     wal's gate.
//
// The agent id and the epoch come from the data directory (LoadIdentity):
// the id is made once, the epoch strictly increases from run to run.
//
// All methods of Counters, Counter and Agent are safe for concurrent use.
// Drain calls emit, and Add calls Directory.Shards when it creates a
// counter, with a stripe lock held: neither may call into the table, and
// both should be quick; a stripe lock is taken alone. The trending windows
// belong to the flusher (flushMu); queries read snapshots of the last
// flush. The hot rule's goroutine is started by Start, and Stop cancels it
// and waits for it. Lock order of the log: the wal's Checkpoint gate, then
// the pending-intent mutex; the flusher's flushMu before both, and
// the fresh-read lock (heldState.mu, docs/consistency.md) between them. Design
// notes: docs/counters.md, docs/trending.md, docs/wal.md.
package region
