// Package embedded is the single-file store of standalone mode: UserLikes,
// ContentStats and trending lists (the records of package engagement) and
// the rollup's high-water marks (store.Mark) in one bbolt database on local
// disk, in six buckets whose keys join their parts with a 0x00 byte (which
// no id contains); a mark's key is its partition as 4 big-endian bytes,
// the agent, 0x00 and the epoch as 8 big-endian bytes. It passes the same conformance suite
// (store/storetest) as store/cassandra.
//
// Invariants:
//   - A reaction changes only inside one bbolt write transaction that reads
//     the row, checks its Version and Incarnation and writes the row together
//     with its by-content index entry: the two buckets never disagree, and
//     CountReactions reads only the item's index range.
//   - All Stats rows of one item are adjacent: ReadStats is one cursor seek
//     per id inside one read transaction. The store never adds to a Stats row.
//   - WriteStatsMark writes the Stats rows and the mark in one
//     transaction: a mark is never ahead of its rows, nor behind them.
//   - Every value starts with a format byte; an unknown one is ErrCorrupt,
//     never misread.
//   - Writes share transactions and fsyncs through a group commit without a
//     timer; a write function may run more than once, so each sets its
//     results afresh on every run.
//
// Errors: bbolt failures wrap store.ErrUnavailable; an undecodable value is
// ErrCorrupt; a second Open of an open file fails with ErrLocked after
// Config.Timeout. A Store is safe for concurrent use: reads run in parallel
// with each other and with the single writer transaction; Close waits for
// running transactions, and later calls fail with store.ErrUnavailable.
// Design note: docs/embedded.md (layout, encoding, group commit).
package embedded
