// Package natsjs is edgecount's NATS JetStream adapter: an embedded server for
// standalone mode and tests, connections to an external server, the stream
// that carries partial sums, a publisher for the edge agents, an ordered
// per-partition consumer for the rollup, and a consumer group that shares
// the partitions among several rollup processes with one fenced writer per
// partition. It is the only package that imports nats.go and nats-server.
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
// # Partition ownership and fencing
//
// Consumer serves a fixed list of partitions (rollup.owned). GroupConsumer
// lets several rollup processes share all partitions: each partition has
// one writer at a time, the partitions are spread evenly over the live
// members, and when a member dies its partitions move to the survivors
// within a stated bound. Three mechanisms, each for one job:
//
//  1. Exclusivity — JetStream priority groups with the pinned-client policy
//     (nats-server 2.11+). Every member pulls with the group on the same
//     durable consumers <durable>-p<p>, which carry PriorityPolicy pinned,
//     PriorityGroups [Group] and PinnedTTL = MemberTTL. The server pins each
//     consumer to one pull request's client and delivers only to it (the
//     pin id travels in the Nats-Pin-Id header and in the next pulls);
//     others' requests wait. A pin moves only when its holder sent no pull
//     request for PinnedTTL (its next pull then gets 423, counted as Lost)
//     or when it is handed back (UnpinConsumer, counted as Released). With
//     MaxAckPending 1 the server never has two messages of a partition out
//     at once, pin or no pin: message k+1 is delivered, to anyone, only
//     after k was acknowledged or its AckWait ran out.
//  2. Placement — the pinned policy does not balance: it pins whoever pulls
//     first and keeps that pin while it pulls, so one early member would
//     own everything and a member that joins later would get nothing
//     (with both members of a test pulling every partition the split was
//     7/9 and depended on who pulled first). So each member announces itself every MemberTTL/4 in a small
//     membership stream (<stream>_MEMBERS, memory storage, one subject per
//     member, MaxAge = MemberTTL: an entry not renewed within MemberTTL is
//     dropped by the server within another 250ms) and reads the member list
//     back in the same round. From the list every member computes the same
//     assignment (rendezvous hashing with bounded load: each member gets
//     ⌊P/n⌋ or ⌈P/n⌉ partitions; a join or leave moves about one partition
//     more than must move) and pulls only the partitions assigned to it. A
//     member that is no longer assigned a partition finishes the message it
//     holds, stops pulling it and hands its pin back, so the new owner gets
//     the next message at once. Views that briefly disagree are harmless:
//     the pin still gives one member at a time. NATS rather than gossip/
//     holds the membership because a member that cannot reach NATS cannot
//     consume either: the membership fails exactly when consuming does, and
//     the rollup needs no second cluster protocol.
//  3. Fencing — a member may act on a message only while it holds the
//     message's lease. The broker delivers a message again only after
//     AckWait has passed since the later of its delivery and the last
//     progress signal it processed. The member notes the time t it sent the
//     pull request (before the delivery), so it holds the message at least
//     until t + AckWait − FenceMargin; the lease is renewed with confirmed
//     progress signals (+WPI sent as a request, answered once the server
//     processed it): one sent at t and answered while the lease still holds
//     extends it to t + AckWait − FenceMargin. A lease that ran out is never
//     renewed (the server answers progress signals even for a message it
//     has handed to someone else). Each handler call gets a context whose
//     deadline is the lease end at the call's start (at least
//     (AckWait − FenceMargin)/2 away; the cause is ErrLeaseExpired), and a
//     message whose lease ran out before the handler returned is neither
//     acknowledged nor handed back, only counted (Fenced): the broker
//     delivers it again, and the per-row LastSeq check of the rollup makes
//     that second application a no-op for every row the first one wrote.
//     The rule for a handler is: check ctx.Err() and the clock against
//     ctx.Deadline() immediately before each write (after a process pause
//     the deadline timer may not have fired yet; the clock is right), and
//     never write after the deadline. The new owner can receive the message
//     no earlier than FenceMargin after that deadline.
//
// What the fence assumes. Lease and broker measure AckWait with clocks that
// run at the same rate (a drift of a few ppm, covered by FenceMargin), and
// a write that the last check let through takes effect within FenceMargin.
// A pause between that check and the write landing (a GC stop, SIGSTOP, a
// slow network) longer than FenceMargin breaks the second assumption; a
// store can close that window itself, which a timed lease cannot: Cassandra
// resolves cells by write timestamp, so a stale write whose timestamp was
// taken before the last lease check loses against the new owner's later
// writes whatever it lands (given host clocks within FenceMargin), and a
// conditional write (UPDATE … IF last_seq < seq) rejects it outright at
// the cost of a Paxos round per row. The embedded store runs in one process
// only and never has two writers.
//
// Handover bound. After a member dies, its membership expires within
// MemberTTL + 250ms, the survivors see that within MemberTTL/4, and by then
// its pins (PinnedTTL = MemberTTL since its last pull) have expired, so the
// new owners pull and get their pins at once: at most 1.25·MemberTTL +
// 250ms plus a round trip. A message the dead member was applying comes
// back after at most AckWait (counted from its last progress signal), so
// the bound is max(1.25·MemberTTL + 250ms, AckWait) (HandoverBound).
// Measured on this machine (BenchmarkGroupHandover, 2 members, 16
// partitions, connection closed without a goodbye): MemberTTL 1s → 1.19s
// (bound 1.5s); MemberTTL 5s → 6.2s (bound 6.5s); dying mid-message with
// AckWait 2s → 2.0s. A member that stops cleanly hands its pins back and
// leaves the membership at once; the others take over within MemberTTL/4.
// Defaults: MemberTTL 5s, FenceMargin AckWait/3 (10s of the default 30s),
// so a dead member's partitions move within 6.5s and a message it was
// applying within 30s; a shorter AckWait shortens the latter.
//
// Operational notes. Members pull every partition they are assigned at
// least every MemberTTL/3, so a pin never expires under a healthy member;
// a handler call that runs longer than MemberTTL lets the pin lapse, which
// is harmless (nothing else is deliverable before the message is
// acknowledged) and costs one 423 round trip. Do not run a plain Consumer
// on a group's durable consumers: it removes the priority policy. A group
// takes over durable consumers that a plain Consumer created (they keep
// their position). Every member of a group must use the same MemberTTL
// (it is both the stream's MaxAge and the consumers' PinnedTTL).
//
// # Thread-safety
//
// Server, Publisher, Consumer and GroupConsumer are safe for concurrent use.
// Consumer.Run starts one goroutine per partition (plus one keep-alive
// goroutine each) and returns only after all of them have exited. A
// partition must be consumed by one Run at a time; running two on the same
// partition keeps order (the server hands out one message at a time) but
// not the single-writer rule. GroupConsumer.Run (one at a time per
// GroupConsumer) starts one goroutine per partition of the stream, one
// lease keeper each and one membership goroutine, and returns only after all
// of them have exited. The Handler runs on the partition's goroutine and may
// keep the data slice.
package natsjs
