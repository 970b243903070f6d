// Package store is the contract every persistence implementation keeps: the
// errors callers act on (ErrUnavailable, ErrInvalid), the checks every
// implementation makes before it touches its database (CheckCall,
// CheckUserCall, CheckRow, CheckAction, CheckUpdate, CheckScan,
// CheckStats, CheckMark, CheckPartition), how counts are tallied
// (AddTally) and the rollup's high-water marks (Mark). The records it
// persists — per-user reactions (UserLikes), derived totals (ContentStats),
// trending lists — are the vocabulary of package engagement.
//
// Implementations live in sub-packages (store/embedded on bbolt,
// store/cassandra on gocql) and pass one shared conformance suite
// (store/storetest). The interfaces that use a store are declared by their
// consumers (region, rollup), each with just the methods it needs.
//
// Invariants every implementation keeps:
//   - A reaction row changes only through a compare-and-set on its version
//     and incarnation; a row re-created after an undo gets a fresh incarnation,
//     so a writer holding the deleted row can never match the new one (ABA).
//   - A by-content index of reactions follows the rows, so one item's
//     reactions can be counted without scanning users (in Cassandra it is
//     written after the row and may lag it: ErrIndexBehind).
//   - All Stats rows of one item (the global row and one per region) are read
//     together in one lookup.
//   - Stats rows are plain values written by one writer per partition; the
//     store never adds, it stores what it is given.
//   - A rollup high-water mark (Mark) is one small row per (partition,
//     agent, epoch), a plain value written by the partition's one writer with the
//     Stats rows of its message: in the same transaction, or after them so
//     that a crash leaves the mark behind the rows, never ahead.
//   - A call that breaks the contract fails with ErrInvalid and writes nothing.
//
// The package holds no state; its functions are safe for concurrent use.
package store
