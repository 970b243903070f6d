// Package cassandra is the store of multi-region deployments: UserLikes,
// ContentStats and trending lists in an Apache Cassandra (5.0) keyspace,
// through the Apache gocql driver (github.com/apache/cassandra-gocql-driver/v2).
// It passes the same conformance suite (store/storetest) as store/embedded.
//
// # Schema
//
// Open creates the keyspace (with Config.Replication) and four tables if
// missing; an existing keyspace is never altered.
//
//	user_likes            PRIMARY KEY ((user_id), content_id)
//	user_likes_by_content PRIMARY KEY ((content_id), user_id, incarnation)
//	content_stats         PRIMARY KEY ((content_id), scope)
//	trending_parts        PRIMARY KEY ((scope, counter_name, window_name), part)
//
// user_likes is partitioned by user: a user's rows for a page of items are
// one single-partition read, and the lightweight transactions of different
// users never contend for one Paxos state (one user's changes to several
// items do). All Stats rows of an item are one
// partition sorted by scope, so ReadStats of one item is one
// single-partition query. Times are bigint microseconds since the Unix epoch
// (CQL's timestamp type keeps only milliseconds); the uint64 Incarnation and
// LastSeq are stored as bigint through an int64 conversion, which
// round-trips exactly. Stats counters and trending items are frozen
// collections, written whole, so replacing a row leaves no collection
// tombstones.
//
// # Reactions: lightweight transactions
//
// Every change of a user_likes row is a lightweight transaction (INSERT … IF
// NOT EXISTS; UPDATE … IF version = ? AND incarnation = ?) at
// Config.SerialConsistency, committed at Config.Consistency; user_likes is
// never written any other way (mixing plain writes into LWT rows breaks
// their linearizability). These statements are not idempotent and are never
// retried. Once sent, a transaction runs to its answer even if the caller's
// ctx ends (an abandoned one would be an unknown outcome), bounded by
// Config.Timeout.
//
// When it fails in a way that leaves its outcome open — a write or read
// timeout from the server (of type CAS or not), CAS_WRITE_UNKNOWN, no answer
// within Config.Timeout, a lost connection — the store settles it: it reads
// the row at serial consistency, which first completes any proposal that a
// replica accepted but nobody committed, so the row it sees no longer depends
// on the failed transaction. If the client gave up rather than the server,
// the coordinator may still be running the transaction, so the read waits
// until Config.Timeout has passed since the request was sent; Config.Timeout
// must therefore exceed the cluster's cas_contention_timeout plus
// write_request_timeout. The transaction applied when the row is exactly what
// it wrote (for an insert: a live row of its incarnation, which no other
// insert creates; for an undo: a marker with its token, below); it did not
// apply when a competitor wrote the same version or the row can no longer
// satisfy its condition. When the row still satisfies the condition, the
// transaction has not applied *yet*: a serial read cannot see a request
// that has not started, and a node that stalls (a frozen JVM, a long GC
// pause) runs its queued requests after it resumes, possibly after the
// settling read. So the store fences the row: a transaction of its own,
// conditioned on the row it read, that bumps the version and keeps the
// content (or writes a marker where no row is). Once the fence applies, the
// original's condition can never hold again and "not applied" is final;
// when the fence loses, the row it reports is decided again (at most three
// fences). A fence is invisible to readers except as a version step.
// Otherwise the row moved on in a way that
// hides who wrote what (undone since, or past the version written, or a
// competitor's undo), and the call fails with ErrOutcomeUnknown wrapped with
// store.ErrUnavailable; the by-content entry then stays as it was until a
// recount. With one writer per row at a time an outcome is therefore always
// decided; only a competitor changing the row within the moments the outcome
// was open leaves it unknown. An insert whose outcome had to be settled is
// never retried over a marker: the marker may be an undo of that very
// insert. Settling runs even
// when ctx has ended and is bounded by twice Config.Timeout, as is the
// by-content write that follows an applied change, so a reaction write
// returns within about five times Config.Timeout. Counters reports how often
// settling and fencing happen.
//
// # Undo markers
//
// An undo (DeleteReaction) does not delete the row: it replaces it, in one
// transaction conditioned on the undone row's version and incarnation, with
// a marker: action 'none', version+1, updated_at the time of the undo, and
// as incarnation a random token of this call, never a live row's. A plain
// DELETE leaves nothing behind, so a lost answer could not tell this undo
// from a competitor's undo of the same version; the token can, exactly as an
// insert's incarnation does. Every read hides markers: GetReaction and
// GetReactions treat one as no row, CountReactions never counts one (it has
// no by-content entry; the undone row's entry is deleted as before), and no
// update or undo can match one (its token is no live incarnation).
//
// InsertReaction first tries INSERT … IF NOT EXISTS, which applies only on a
// key that never held a row. When the key holds a marker (the failed
// insert's answer shows the marker's version and token), it takes the marker
// over with UPDATE … IF action = 'none' AND version = ? AND incarnation = ?,
// writing the new row whole with its fresh incarnation and version 1. The
// condition names one marker, so of concurrent re-inserts exactly one
// applies and no undone row is ever revived twice; a row written by a
// re-insert is a new incarnation, and writers holding the undone one still
// cannot touch it. If competitors replace the marker meanwhile, the insert
// tries again with the new marker, up to three times, then reports false.
//
// Markers stay: a (user, item) pair that ever held a reaction keeps one
// small row, overwritten in place (no tombstones) by the next reaction. They
// carry no TTL: a TTL on the marker's UPDATE would expire only the cells it
// wrote, leaving the primary key of the original INSERT as a row of nulls.
// Rows undone by an older version of this package (plain DELETE) are simply
// absent, which reads and inserts handle as before.
//
// # The by-content table
//
// user_likes_by_content lets the recount job count one item's reactions
// without scanning users. It lives in other partitions than the user_likes
// row, and Cassandra cannot put a lightweight transaction and a write to
// another partition in one atomic batch, so the store writes the entry
// after the transaction applied, as a plain, idempotent write (retried by
// the driver), and accepts that a crash between the two leaves the entry
// behind until the recount job repairs it. Two rules keep entries correct
// whatever order concurrent writers' entries arrive in, and make every
// retry harmless:
//
//   - An entry's write timestamp is the row's version (USING TIMESTAMP
//     version); the delete of a row deletes its entry at version+1. Within
//     one incarnation the newest version therefore always wins, and no late
//     write of a deleted row can bring its entry back.
//   - The entry's key includes the incarnation, so a row re-created after an
//     undo has an entry of its own that the old incarnation's delete cannot
//     touch. A user left with entries of two incarnations (a crash between a
//     delete and its entry's removal) is counted once by CountReactions, by
//     the incarnation user_likes holds.
//
// A follow-up write that fails after retries is reported as ErrIndexBehind
// wrapped with store.ErrUnavailable, together with applied = true. Because
// these timestamps are tiny, nothing but this package may write the table,
// and a cluster must not enable the minimum_timestamp guardrail for it.
// An item's entries are one partition, and undone reactions leave
// tombstones there for gc_grace_seconds; an item with hundreds of thousands
// of undos within that period would exceed Cassandra's tombstone failure
// threshold when counted.
//
// # Stats and trending
//
// Stats rows are plain values, never counter columns (counters are not
// idempotent and cannot be conditioned): the rollup, one writer per
// partition, computes totals and the store writes what it is given. The
// rows of one item go in one unlogged single-partition batch, applied
// atomically and in isolation; different items are written in parallel and
// independently (each row's LastSeq makes the rollup's re-apply safe). Plain
// writes carry one client timestamp per call, strictly above every earlier
// one of the same Store, so a retried write keeps its timestamp and a later
// call always wins. ReadStats reads one id with a single-partition query and
// a batch of ids with one IN query (cheaper for a busy node than parallel
// single-partition queries; see ReadStats).
//
// # Consistency
//
// Reads and plain writes use Config.Consistency (LOCAL_QUORUM by default),
// which together with serial transactions gives each region
// read-your-writes; reads are marked idempotent and retried on another
// replica. Requests go to a replica of the row's token, in Config.LocalDC
// first when set.
//
// # Errors
//
// A node that cannot be reached, a timeout, overload, or a closed Store
// gives an error wrapping store.ErrUnavailable. A call that breaks the
// contract gives ErrInvalid and writes nothing; a stored value that cannot
// be read gives ErrCorrupt.
//
// # Concurrency
//
// A Store is safe for concurrent use by many goroutines; its session pools
// connections. Close closes the session; calls after Close fail with
// store.ErrUnavailable.
package cassandra
