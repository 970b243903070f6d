// Package redis is the Redis-backed shard directory of a region, cached in
// each edge agent and invalidated by push. It is the only package that
// imports go-redis (as goredis).
//
// # Data model
//
// Every key of a region carries the region as a hash tag, so that on a
// Redis Cluster they share a slot and one MULTI may span them:
//
//	ec:{<region>}:content:<content_id>           SET  of counter names with an entry
//	ec:{<region>}:counter:<content_id>:<counter> HASH shards=<n> updated_at=<unix ms>
//	ec:{<region>}:directory                      pub/sub channel of invalidations
//
// Counter names contain no ':', so the last ':' of a counter key separates
// the ids. A counter without an entry, or whose shards field is not a
// number in 1..MaxShards, gets Config.DefaultShards. Set writes SADD +
// HSET + PUBLISH in one MULTI and Delete SREM + DEL + PUBLISH; an operator
// may write the keys by hand and PUBLISH "<counter> <content_id>" on the
// channel.
//
// # The two lookups
//
// A miss asks for both lookups of the seed's design, content → counter ids
// and counter → shards, in one MULTI: SMEMBERS of the content key and HGET
// of the counter key, one round trip, batched with whatever other misses
// are queued (up to Config.BatchSize). The counter set is cached with the
// item, so every other counter of the item that has no entry is answered
// from the cache afterwards without a round trip.
//
// # Cache and invalidation
//
// Shards never waits for Redis. It answers from an in-process cache
// (sync.Map of content id → immutable entry, read without a lock; a hit
// is one map load and a scan of the item's few counters, and allocates
// nothing); on a miss it
// answers the default at once and queues a fetch. The queue is bounded
// (Config.QueueSize): a miss that finds it full is answered with the
// default, counted (Stats.Dropped) and not fetched. A counter already
// queued or being fetched is not queued twice. When a fetch, an
// invalidation or a resync changes an answer, OnChange (SetOnChange) is
// told, so the agent can reshard the live counter.
//
// Every Directory of a region subscribes to the region's channel. An
// invalidation names a counter and carries no value: the receiver re-reads
// the entry. Messages and fetches travel on different connections, so a
// message may arrive after a fetch that already saw its change; a value in
// the message would then undo a newer one, a re-read cannot. A fetch
// applies what it read only if no invalidation arrived since it sent its
// commands (a generation number checked under the write lock), otherwise
// it queues its counters again. So the last answer applied for a counter
// was read after its last change was published, and every change reaches
// every subscribed agent in about one message delivery plus one round trip
// (milliseconds on a LAN; the tests require under a second).
//
// Pub/sub delivers at most once, so the directory re-reads its whole cache
// (Stats.Resyncs): after every confirmed subscription (the first one, and
// each one go-redis makes after reconnecting: messages may have been lost
// in between) and every Config.RefreshInterval. The periodic pass first
// evicts the items nobody asked for since the previous pass and that hold
// no explicit count; items with an explicit count stay cached, so that a
// missed message cannot leave a live hot counter wrong beyond one refresh.
// While re-reading, the directory keeps answering what it has cached.
//
// # Redis down
//
// With Redis unreachable (at start or later) nothing on the write path
// changes: cached entries keep their answers, everything else gets the
// default. A failed fetch marks its items not loaded, so they are read again
// on the next miss and by the resync when the subscription comes back;
// fetchers back off (50 ms doubling to 1 s) between failed round trips.
// Healthy reports whether the subscription is confirmed and its connection
// answers (a ping every Config.PingInterval when idle); Stats.Up is the same
// for a gauge; Ping sends a fresh PING for a readiness probe.
//
// # Invariants and thread-safety
//
//   - Shards returns at least 1, never blocks on I/O, never takes a lock
//     other than the short one guarding the set of queued misses, and does
//     not allocate on a hit.
//   - A stored entry is never modified (except its used flag); changes
//     replace it under the write lock, which also orders OnChange calls.
//     Lock order: write lock, then the queued-miss lock. Shards takes only
//     the latter, so OnChange may call Shards, and an agent may call
//     Shards while holding its own locks that OnChange also takes.
//   - OnChange runs on the directory's goroutines, one call at a time, in
//     the order the changes were made.
//   - All methods are safe for concurrent use. Close stops and waits for
//     every goroutine the directory started (one subscriber, Config.Fetchers
//     fetchers, one maintainer).
package redis
