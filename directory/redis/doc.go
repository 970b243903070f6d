// Package redis is the Redis-backed shard directory of a region, cached in
// each edge agent and invalidated by push. Every key of a region carries the
// region as a hash tag; Set and Delete change an entry and publish an
// invalidation in one MULTI, and every Directory of the region subscribes
// to it and re-reads what it names. It is the only package that imports
// go-redis (as goredis).
//
// Invariants:
//   - Shards returns at least 1, never blocks on I/O, never takes a lock
//     other than the short one guarding the set of queued misses, and does
//     not allocate on a hit; a miss answers Config.DefaultShards at once and
//     queues a bounded fetch. With Redis down, cached answers stay.
//   - The last answer applied for a counter was read after its last change
//     was published; the whole cache is re-read after every (re)subscription
//     and every Config.RefreshInterval, since pub/sub may lose messages.
//   - A stored entry is never modified (except its used flag); changes
//     replace it under the write lock, which also orders OnChange calls.
//     Lock order: write lock, then the queued-miss lock. Shards takes only
//     the latter, so OnChange may call Shards, and an agent may call Shards
//     while holding its own locks that OnChange also takes.
//
// All methods are safe for concurrent use. OnChange runs on the directory's
// goroutines, one call at a time, in change order. Close stops and waits
// for every goroutine the directory started (one subscriber,
// Config.Fetchers fetchers, one maintainer). Design note: docs/directory.md.
package redis
