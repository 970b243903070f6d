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
//     still held by the table), also across removal and Reshard (sealing).
//   - A key is in its stripe's read table or its dirty map, never in both,
//     and a removed (sealed) counter is in neither.
//   - Add does not allocate once its counter exists; trending costs the
//     increment path nothing (the flusher feeds the windows).
//
// All methods of Counters, Counter and Agent are safe for concurrent use.
// Drain calls emit, and Add calls Directory.Shards when it creates a
// counter, with a stripe lock held: neither may call into the table, and
// both should be quick; a stripe lock is taken alone. The trending windows
// belong to the flusher (flushMu); queries read snapshots of the last
// flush. The hot rule's goroutine is started by Start, and Stop cancels it
// and waits for it. Design notes: docs/counters.md, docs/trending.md.
package region
