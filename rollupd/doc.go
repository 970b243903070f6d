// Package rollupd is one rollup process's worth of parts, wired once: the
// rollup with trending, its recount job, the broker consumer that feeds it,
// the periodic trending writer and the final trending write at stop. The
// standalone edge-agent and the rollup command both run it.
//
// The consumer is either a plain natsjs.Consumer over fixed partitions
// (Config.Partitions), the one writer of each, or a member of a
// natsjs.GroupConsumer sharing every partition with the other rollups: a
// partition handed back to the group has its trending lists written first
// and its trending state dropped, and the recount job repairs only the
// partitions the membership assigns to this process.
//
// Messages reach the rollup in batches of what the broker has ready (up
// to DefaultBatch) through Rollup.HandleBatch, which writes each row once
// per batch under the apply lock that keeps recount repairs out of the way
// (see the rollup package); a poison message is terminated by the consumer
// because rollup.ErrPoison says it is permanent. Every write's rows are
// pushed to the agents' read caches (docs/read-cache.md).
//
// A broker restart does not end Run: the consumer waits for the broker,
// pulls again and creates again what a broker that lost its state no
// longer has (stream, durable consumers, membership); every partition
// released on the way, including one that comes back under a new pin,
// has the rollup's in-memory state of it dropped. Run returns the
// consumer's error only when its connection is closed.
//
// It lives outside package rollup because it imports the NATS adapter and
// Prometheus; rollup imports no client library. A Process is safe for
// concurrent use; Run runs once.
package rollupd
