// Package embedded is the single-file store of standalone mode: UserLikes,
// ContentStats and trending lists in one bbolt database on local disk.
//
// # Layout
//
// One bbolt file holds five buckets. Keys join their parts with a 0x00 byte,
// which no id contains, so a key never reads two ways and one item's keys
// share a prefix that no other item's keys start with:
//
//	user_likes            user_id 0x00 content_id  → reaction row
//	user_likes_by_content content_id 0x00 user_id  → action + region
//	content_stats         content_id 0x00 scope    → stats row
//	trending              scope 0x00 counter 0x00 window [0x00 partition (4 bytes BE), absent for 0] → Top-K list
//	meta                  "schema"                 → layout version (1)
//
// Every value starts with a format byte (currently 1) followed by a compact
// encoding/binary layout; a value with an unknown format byte is reported as
// ErrCorrupt rather than misread. Times are stored as Unix seconds plus
// nanoseconds, so they round-trip exactly (as instants, returned in UTC).
//
// # Invariants
//
//   - A reaction changes only inside one bbolt write transaction that reads the
//     row, checks its Version and Incarnation and writes the row together with
//     its by-content index entry. The two buckets therefore never disagree,
//     and CountReactions reads only the item's index range.
//   - All Stats rows of one item are adjacent, so ReadStats is one cursor seek
//     per id inside one read transaction.
//   - The store stores what it is given: it never adds to a Stats row.
//
// Writes go through a group commit without a timer: a writer that finds no
// commit running commits at once, and writers arriving meanwhile share the
// next transaction and fsync. bbolt's own DB.Batch holds each batch for a fixed
// delay instead, which with 16 writers and fsync made it 4–25× slower here
// (see bench_test.go). A write function may run more than once (when another
// write of its group fails), so each sets its results afresh on every run.
// A write waits for at most the commit in progress and its own; ctx is
// checked before it queues.
//
// # Errors
//
// bbolt failures are local I/O failures (or a closed store); they are wrapped
// together with store.ErrUnavailable. A value that cannot be decoded is
// reported with ErrCorrupt. A second Open of a file that is already open, in
// this or another process, fails with ErrLocked once Config.Timeout has
// passed.
//
// # Concurrency
//
// A Store is safe for concurrent use by many goroutines. Reads run in parallel
// with each other and with the single writer transaction. Close waits for
// running transactions; calls after Close fail with store.ErrUnavailable.
package embedded
