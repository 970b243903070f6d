// Package region is the edge agent's core: it validates writes, applies the
// reaction rules (one compare-and-set on the user's row, then the counter
// deltas of the transition), adds increments to in-memory sharded counters,
// and periodically flushes the accumulated deltas as partial sums. It imports
// no network or client library; it talks to stores, the directory and the
// publisher only through the small interfaces it declares (api.go).
//
// # Sharded counters
//
// Counters is the table of in-memory counters, keyed by Key (item, counter,
// region). A counter has N shards; N comes from the Directory when the
// counter is created (1 when there is no directory), clamped to
// 1..CountersConfig.MaxShards. A one-shard (cold) counter is a single
// unpadded int64, so a table of a million cold counters stays small; a
// multi-shard (hot) counter has 128-byte padded shards. The shard of an add
// is chosen without shared state and without a random number: a hash of the
// calling goroutine's stack address, salted afresh on every Drain. A
// goroutine keeps adding to one shard, whose cache line stays in its core's
// cache; a fresh random shard per add (even from math/rand/v2's per-thread
// generator) costs more than the add and moves the line between cores on
// about half of the adds (see shardIndex and the benchmarks). Counter is the
// same sharded counter on its own.
//
// The table is split into 256 stripes by a seeded hash of the key (wyhash's
// mixing over the three strings, about twice as fast as the AES hash Go's
// maps would chain over them; the seed is random per table, so clients
// cannot choose colliding ids). Each stripe has an immutable read table,
// replaced atomically and never modified: open addressing with linear
// probing, at most half full, one 64-byte slot (hash, key, counter) per
// entry. Counters created since the read table was last rebuilt live in a
// dirty map guarded by the stripe's mutex. Add hashes the key once, finds
// the counter in the read table without a lock and adds to one shard with
// one atomic add; only a miss (a new counter, or one not yet promoted) takes
// the stripe mutex. The dirty map is promoted into a new read table by every
// Drain, and between drains as soon as the misses of a stripe exceed its
// size, so the copies cost O(1) per miss. A cold counter costs about 200
// bytes (its cache line, two to four table slots' worth) plus its key's
// strings.
//
// Drain visits one stripe at a time under its mutex. For each counter it
// atomically swaps every shard with zero and emits the sum if it is not zero.
// An Add that races with the swap of its shard lands either before it (and
// is emitted now) or after it (and is emitted by the next Drain): never lost,
// never doubled. Drain never blocks an Add to an existing counter; it blocks
// the creation of counters in the stripe it is visiting, for the time it
// takes to drain that stripe.
//
// # Removal without losing an add: sealing
//
// A counter with nothing to drain for CountersConfig.IdleDrains consecutive
// drains is removed. The danger is a writer that found the counter in the
// read table just before it was removed and adds just after: a lock on the
// add path would rule that out but would make every add write to a shared
// lock word. Instead removal seals the counter: under the stripe mutex, Drain
// first publishes tables without the counter, then swaps a seal value (-2^62)
// into every shard with an atomic swap, and emits whatever the swaps returned.
// An Add learns from its own atomic add's result which side of the seal it
// fell on. The seal band is everything at or below -2^61: a result above it
// means the add came before the seal, so the delta counted and the seal's
// swap returned it; a result in the band means the counter was already
// sealed, the delta is not counted anywhere, and Add looks the key up again.
// Go's atomics are sequentially consistent and the new table was stored
// before the seal, so an Add that saw the seal sees the new table: its second
// lookup finds a successor or creates a new counter. Reshard uses the same
// seal to replace a counter by one with another shard count, moving the
// sealed sum into the replacement instead of emitting it. Promotion from the
// dirty map moves the same counter object into the read table, so it needs
// no seal.
//
// The seal band is safe because a live shard holds one flush interval's sum
// of deltas, each of magnitude at most MaxDelta (2^32), and a sealed shard
// only drifts by the few in-flight adds that raced with its seal.
//
// # Trending
//
// With TrendingConfig.Counters set, the agent keeps, per trending counter,
// a topk.Window (60 one-minute and 24 one-hour summaries) of its own
// region's counts. The window is fed by the flusher, not by Add: every
// flush adds each drained (item, counter) delta of the agent's region that
// is positive, at the flush time (milliseconds, the time the message
// carries). So the increment path is exactly the same code with trending
// on or off (BenchmarkIncrementTrending), the summaries see one add per
// item per flush instead of one per write, and they count what the
// partial sums carry: the net increase per flush interval (a like undone
// within the same interval is not counted; one undone later is not taken
// back, since a summary cannot subtract).
//
// Each flush then merges the window's 5m, 1h and 24h views (each from two
// parts: its closed buckets, merged once a minute, and the current minute,
// kept beside the window; so a flush merges two summaries per view, not
// sixty) and keeps the first ListLen items of each (more than the K a reader asks for) and the
// bound of every other item (the larger of the summary's floor and the
// first count left out). Those lists travel to the rollup with the partial
// sums: each list is cut by partition, and partition p's cut goes after
// p's sums, in the last message of p for that flush (or in a message of
// its own), so the rollup that owns p sees the sums and the candidates of
// p's items together. A cut that would not fit in one message keeps its
// largest items and raises its floor to the largest count it drops. A
// partition's lists are shipped when they changed, and once per minute
// while they are not empty (so the rollup sees them current); an empty
// list is shipped once, when a window has emptied.
//
// Trending answers a query for the agent's own region from its own last
// flushed lists merged with its region peers' broadcast summaries, when a
// PeerSummaries source is set (SetPeers; gossip implements it, and
// TrendingSummaries gives what to broadcast). The agents' streams are
// disjoint, so the merge bounds the region's counts, as of the oldest
// summary merged. Without peers, and for every other scope, it reads the
// rollup's stored lists (TrendingReader) and ranks the union of their
// partitions, leaving out a partition's list whose as-of time is older
// than its window (nothing it counts can still be in the window). The agent does not add its own summary to the stored
// regional list: that list already counts this agent up to its as-of
// time, and adding the agent again would double its share and break the
// lower bounds. Answers are cached for CacheTTL.
//
// # Hot counters
//
// The hot-counter rule (HotConfig) reads, every Interval, its region's
// list of each trending counter over Window (default 5m) as above, and:
//
//   - an item in the top N (Top) that is not hot becomes hot: its counter
//     gets Shards shards (default CountersConfig.MaxShards);
//   - a hot item seen in the top 2N stays hot (seen now);
//   - a hot item not seen in the top 2N for CoolAfter (default 5m) cools:
//     back to one shard.
//
// The band between N and 2N and the cool-down are the hysteresis: an item
// that hovers around rank N does not flap. A list that cannot be read
// changes nothing (no item cools on missing data). A change reshards the
// agent's live counter at once (without losing a delta) and is written to
// the ShardWriter: the in-process directory in standalone mode (so that
// counters created later get it), or the Redis directory, whose
// invalidation reaches every agent of the region, which reshards its own
// live counter (directory.OnChange → Agent.Reshard). Every agent of a
// region runs the rule on nearly the same list; an agent writes only a
// count the directory does not already answer, so the writes are not
// repeated. The hot set is bounded: at most N items enter per round and
// each leaves CoolAfter after it drops out of the top 2N.
//
// # Invariants and thread-safety
//
//   - Every delta passed to Counters.Add is emitted by exactly one Drain
//     (or still held by the table).
//   - A key is in its stripe's read table or its dirty map, never in both,
//     and a removed (sealed) counter is in neither.
//   - Add does not allocate once its counter exists.
//   - The trending windows belong to the flusher (flushMu); queries and
//     broadcasts read immutable snapshots of the last flush. The hot rule's
//     state belongs to its goroutine, which Start starts and Stop waits for.
//   - All methods of Counters and Counter are safe for concurrent use. Drain
//     calls emit, and Add calls Directory.Shards when it creates a counter,
//     with a stripe lock held: neither may call into the table, and both
//     should be quick. A stripe lock is taken alone, never with another.
package region
