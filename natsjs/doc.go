// Package natsjs is edgecount's NATS JetStream adapter: an embedded server for
// standalone mode and tests, connections to an external server, the stream
// that carries partial sums, a publisher for the edge agents and an ordered
// per-partition consumer for the rollup. It is the only package that imports
// nats.go and nats-server.
//
// # Stream
//
// One stream (default EDGECOUNT_SUMS, file storage) holds one subject per
// partition, <prefix>.<partition> (default edgecount.sums.0 … .15), listed
// explicitly so that a publish to a partition the stream does not have fails
// instead of being stored where no consumer reads. Retention is work-queue:
// each partition subject has exactly one durable consumer, and a message is
// removed once that consumer acknowledges (or terminates) it, so the stream
// holds the rollup backlog and nothing else. The broker de-duplicates a
// retried publish by its Nats-Msg-Id header within DuplicateWindow.
// Messages older than MaxAge are dropped even if unconsumed: MaxAge is the
// longest rollup outage the pipeline survives without losing counts (the
// recount job repairs what is lost beyond it).
//
// # Durability
//
// JetStream's file store syncs to disk only every two minutes by default, and
// acknowledged messages have been lost that way (nats-server issue 7564). The
// embedded server therefore runs with server.Options.SyncAlways (the
// embedded form of `jetstream { sync_interval: always }`): every write is
// synced before the publish is acknowledged (Server.SyncAlways reports the
// setting in force). An external server must be configured the same way.
// In a cluster, nats-server relaxes sync-always for replicated streams to a
// sync when the Raft log flushes. Publisher.Publish returns only after the
// broker stored the message. Acks are cheap to lose: a lost ack only causes
// a redelivery, which the handler skips by sequence.
//
// # Ordering and exactly-once apply
//
// The consumer of a partition is a durable pull consumer named
// <durable>-p<partition> with explicit acks and MaxAckPending = 1: the server
// never hands out message k+1 before k is acknowledged or terminated, not even
// to another process and not after a crash. Messages reach the Handler in
// stream order, one at a time. A handler error is retried in-process with
// capped exponential backoff, and the message is kept alive with
// InProgress so that AckWait does not expire while it is retried or while a
// slow handler runs; message k+1 is never handled before k succeeded or was
// declared Permanent (then it is terminated, counted and logged). After a
// success the message is acknowledged with a confirmed (double) ack.
//
// When Run stops while a message is failing, the message is handed back
// (nak) so the next owner gets it at once. A pull request lost with a broker
// restart or reconnect is noticed within two seconds (server heartbeats),
// and a deleted durable consumer is created again; with work-queue
// retention it resumes at the oldest message left, so nothing is skipped.
//
// A crash between a successful handler and the ack makes the server deliver
// the same message again, with the same stream sequence, after AckWait. The
// handler receives that sequence and must skip what it already applied (the
// rollup keeps, per row, the stream sequence of the last message applied).
// Stream sequences grow monotonically across the whole stream, so they are
// comparable across partitions and across repartitioning.
//
// # Thread-safety
//
// Server, Publisher and Consumer are safe for concurrent use. Consumer.Run
// starts one goroutine per partition (plus one keep-alive goroutine each) and
// returns only after all of them have exited. A partition must be consumed by
// one Run at a time; running two on the same partition keeps order (the
// server hands out one message at a time) but not the single-writer rule.
// The Handler runs on the partition's goroutine and may keep the data slice.
package natsjs
