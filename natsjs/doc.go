// Package natsjs is edgecount's NATS JetStream adapter: an embedded server
// for standalone mode and tests, connections to an external server, the
// stream that carries partial sums (one subject per partition, work-queue
// retention), a publisher for the edge agents, an ordered per-partition
// Consumer for the rollup, and a GroupConsumer that shares the partitions
// among several rollup processes, and the row pushes that keep the agents'
// read caches fresh (rows.go). In a system of regions each region's
// agents publish to an origin stream on the region's own server, which
// the rollups' hub stream sources (StreamConfig.Domain and Hub;
// docs/regions.md). It is the only package that imports nats.go and
// nats-server.
//
// Invariants:
//   - A publish returns only once the broker stored the message (the
//     embedded server syncs every write; an external one must be set up so).
//   - Messages of a partition reach the handler in stream order: one at a
//     time (Batch 1, MaxAckPending 1), or in batches (Batch up to 1000)
//     that hold every message the durable consumer has out, so that k+1
//     is never handled before k succeeded or failed permanently (see
//     docs/delivery.md); other errors retry.
//   - A redelivered message carries its original stream sequence, so a
//     handler skips what it already applied.
//   - In a group each partition has one writer at a time: a pinned priority
//     group gives exclusivity, a membership stream spreads the partitions,
//     and the handler's ctx deadline is the lease end, after which it must
//     not write (the fence).
//   - Every part recovers from a broker restart without a process restart:
//     connections reconnect, a Run being set up waits for the broker,
//     consumers pull again, and what the broker lost (the partial-sum
//     stream, the durable consumers, the membership stream) is created
//     again. A stream created again starts above every sequence the lost
//     one used (see EnsureStream), so rows that skip sequences they applied
//     skip nothing new.
//
// Server, Publisher, Consumer and GroupConsumer are safe for concurrent use;
// Run waits for every goroutine it starts, and the Handler runs on its
// partition's. Design notes: docs/delivery.md (stream, durability, order)
// and docs/rollup-ownership.md (groups, leases, the handover bound).
package natsjs
