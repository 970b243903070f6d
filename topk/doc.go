// Package topk keeps mergeable heavy-hitter summaries of fixed memory and
// windows of them over time. It is pure: no I/O, no goroutines, no
// package-level state.
//
// # Summary
//
// A Summary is Space-Saving (Metwally et al. 2005) with a filter of bound
// cells in front, in the manner of Filtered Space-Saving (Homem and
// Carvalho 2010) with the cells kept as a conservative-update Count-Min
// sketch (Estan and Varghese 2002). It tracks up to Capacity items, each
// with a count and an error bound; Rows × (Cells/Rows) cells bound every
// item it does not track. An arrival of weight w of item x:
//
//   - x tracked: its count grows by w.
//   - x not tracked: let e be the smallest of x's cells (one per row) and
//     c = e + w. If there is a free entry (and room for the id), or c
//     exceeds the smallest tracked count, x is tracked with count c and
//     error e; the item it replaces leaves its count in its own cells (each
//     lifted to at least that count). Otherwise x's cells are lifted to at
//     least c.
//
// With one cell (Rows 1, Cells 1) this is plain Space-Saving. The cells keep
// the long tail from churning the tracked list, which plain Space-Saving
// suffers on long tails (Zipf s ≤ 1, or little memory): the report (docs/topk-report.md,
// `go run ./cmd/topk-report`) measures both, and a Count-Min-plus-heap
// baseline, at the same memory.
//
// Guarantees, for any stream of positive weights:
//
//   - A tracked item's true count is in [Count-Error, Count]; Bounds gives
//     [0, estimate] for an untracked one. Merging keeps both.
//   - Built by Add alone (ids that fit the arena), a summary tracks every
//     item whose true count exceeds N/Capacity, N the total weight, and
//     every Error is at most N/Capacity: the Space-Saving bound, which the
//     cells do not weaken.
//
// # Memory
//
// A summary allocates everything when it is built, in one block, and never
// grows: entries (24 bytes), heap (4 bytes) and index (8 bytes per slot, 4
// slots per 3 items) per item, an arena holding the ids (each with a 4-byte
// header; it also gets what the allocator's rounding adds), and 8 bytes
// per cell. Bytes reports what the heap holds. ConfigForBytes turns a
// byte budget into a layout (half cells, half items, ids of a given mean
// length); when the ids turn out longer than planned, the summary tracks
// fewer items instead of allocating. Add allocates nothing: a new item's id
// is copied into the arena, which is compacted in place when it fills.
// Merge allocates scratch space once (Capacity + the other's Len
// candidates) and keeps it.
//
// Weights below 1 are ignored (and counted): a summary counts arrivals and
// cannot take them back, so trending of a counter that also goes down (a
// like undone) counts the ups.
//
// # Merging
//
// Merge follows Agarwal et al., "Mergeable Summaries" (PODS 2012): the two
// counts and the two error bounds of an item add up, an item one side does
// not track counts as [0, that side's cell estimate], cells add up, and the
// Capacity largest counts (ties by id) are kept; a dropped item leaves its
// count in the cells. Merging is commutative (equal results, byte for
// byte). As long as no merge drops items it is associative in the tracked
// items and their lower bounds; the upper bound of an item that some side
// did not track can differ with the grouping when Rows > 1 (the smallest of
// summed cells is not the sum of the smallest cells), and with Rows 1 the
// results are equal byte for byte. In any order the bounds hold.
// Summaries with the same Rows and Cells merge cell by cell; otherwise the
// other side's largest cell is added to every cell, which is valid but
// looser. Use one Config (or ConfigForBytes with one budget) for summaries
// that will be merged.
//
// # Windows
//
// A Window keeps rings of summaries by time bucket: by default 60 buckets
// of one minute and 24 of one hour (DefaultWindowConfig). Adds go to the
// current minute; when a minute closes it is merged into the current hour.
// Merged(now, 5m) merges the last 5 minute buckets, Merged(now, 1h) the
// last 60, Merged(now, 24h) the last 24 hour buckets and the current
// minute. Memory is Σ Buckets summaries, allocated by NewWindow.
//
// # Encoding
//
// AppendBinary writes a whole summary, AppendTop a short list (the n
// largest items and one cell that bounds every other item); DecodeSummary
// reads both. Protobuf wire format, decoded without reflection, field
// numbers are the contract:
//
//	message Summary {
//	  uint32 version = 1;            // 1; others are rejected
//	  repeated Item items = 2;       // in Top order when written here
//	  uint32 rows = 3;               // rows of cells, 1..8
//	  repeated uint64 cells = 4;     // packed, row-major, rows × cols values
//	}
//	message Item {
//	  bytes  id    = 1;              // 1..128 bytes
//	  uint64 count = 2;              // 1..2^63-1
//	  uint64 error = 3;              // 0..count
//	}
//
// Cells are only meaningful to a summary with the same layout and the
// same hash (xxhash64 of the id, seed 0); the index hash is salted per
// summary, so ids chosen to collide in one summary's index do not collide
// in another's.
//
// # Invariants and thread-safety
//
//   - entries[:n] are the tracked items; each is in the index exactly once
//     and owns the arena record at its offset; heap[:n] is a min-heap of
//     them by count.
//   - Every cell of an untracked item is at least its true count.
//   - Counts, error bounds and cells saturate at 2^63-1 instead of
//     wrapping.
//
// Summary and Window are not safe for concurrent use: the owner (the
// agent's trending loop, the rollup's partition writer) serializes every
// call on one value, Merge's argument and encoding calls included. Distinct
// values are independent.
package topk
