// Package topk keeps mergeable heavy-hitter summaries of fixed memory and
// windows of them over time: a Summary is Space-Saving with a
// conservative-update Count-Min filter of cells in front; a Window keeps
// rings of summaries by minute and hour; AppendBinary, AppendTop and
// DecodeSummary are its protobuf wire format. It is pure: no I/O, no
// goroutines, no package-level state.
//
// Invariants:
//   - A tracked item's true count is in [Count-Error, Count]; an untracked
//     one's is in [0, its cell estimate] (Bounds). Merging keeps both.
//   - Built by Add alone, a summary tracks every item whose count exceeds
//     N/Capacity (N the total weight), each Error at most N/Capacity.
//   - entries[:n] are the tracked items; each is in the index exactly once
//     and owns the arena record at its offset; heap[:n] is a min-heap of
//     them by count. Every cell of an untracked item is at least its true
//     count. Counts, error bounds and cells saturate at 2^63-1 (SatAdd).
//   - Window buckets are numbered floor(t/Width) from the epoch, also before
//     it (FloorDiv); the agent's and the rollup's trending minutes use the
//     same numbering.
//   - Memory is allocated when a summary is built and never grows; Add
//     allocates nothing. Merge is commutative, byte for byte.
//
// Summary and Window are not safe for concurrent use: the owner (the
// agent's trending loop, the rollup's partition writer) serializes every
// call on one value, Merge's argument and encoding calls included. Distinct
// values are independent. Design note: docs/topk.md (algorithm, memory,
// merging laws, windows, encoding); measurements: docs/topk-report.md.
package topk
