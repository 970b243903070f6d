// Package cassandra is the store of multi-region deployments: UserLikes,
// ContentStats and trending lists (the records of package engagement) in an
// Apache Cassandra 5.0 keyspace, through the Apache gocql driver
// (github.com/apache/cassandra-gocql-driver/v2). It passes the same
// conformance suite (store/storetest) as store/embedded. Open creates the
// keyspace and its tables if missing and never alters them.
//
// Invariants:
//   - A user_likes row changes only by lightweight transaction, never by a
//     plain write. An outcome left open (timeout, lost connection) is settled
//     by a serial read and, while the row still allows the transaction, by a
//     fence of its own; what stays undecided fails with ErrOutcomeUnknown.
//   - An undo writes a marker with a fresh token instead of deleting, so a
//     lost answer can be decided and a re-created row is a new incarnation;
//     reads hide markers.
//   - A by-content entry is written after its change into the item's bucket
//     of the user (one of the keyspace's fixed index_buckets), with the row's
//     version as write timestamp, so entries converge in any order; one that
//     could not be written gives ErrIndexBehind with applied = true.
//   - Stats rows are plain values written whole, one item per batch.
//   - A rollup high-water mark (rollup_marks, one row per agent run in one
//     partition per partial-sum partition) is a plain value written after its message's stats rows,
//     under the same lease fence and write timestamp: a crash in between
//     leaves the mark behind, never ahead of the rows.
//
// Errors wrap store.ErrUnavailable (unreachable, timeout, overload, closed),
// ErrInvalid (a call that breaks the contract; nothing written) or
// ErrCorrupt (a stored value that cannot be read). A Store is safe for
// concurrent use; Close closes the session. Design notes: docs/fence.md,
// docs/cassandra.md and docs/data-model.md (partition bounds, tombstones).
package cassandra
