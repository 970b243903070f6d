// Package directory tells the edge agent how many shards each counter gets:
// content id → counter → shards. Hot counters get many shards so concurrent
// adds do not fight over one cache line; everything else gets the default,
// normally one shard, so a cold counter costs little memory.
//
// Local is the in-process implementation, used in standalone mode and in
// tests. directory/redis keeps the directory in Redis, cached in the agent
// and invalidated by pub/sub.
//
// Implementations satisfy region.Directory structurally; this package does
// not import region. Invariants every implementation keeps: Shards never
// blocks, never fails and always answers at least 1; all methods are safe for
// concurrent use.
package directory
