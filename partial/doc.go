// Package partial is the wire format of the partial sums that edge agents
// publish and the rollup consumes: one message (Batch) per (flush,
// partition), in the protobuf wire format, versioned, written by Append and
// read by Decode without reflection. partial.proto is the schema; its field
// numbers are the contract.
//
// Invariants:
//   - Unknown fields are skipped, as protobuf readers do, so fields can be
//     added without breaking older rollups: the trending lists (field 9) and
//     the "more" flag (field 10, set on every message of a flush but the
//     last of its partition, so a reader can wait for the lists) were added
//     that way, under the same schema version, and a message without them is
//     exactly a message of the first release.
//   - Decode rejects, wrapping ErrMalformed: another schema version, a known
//     field with the wrong wire type, ids, counter and region names
//     that break engagement's rules, zero deltas, an invalid window (1-8
//     lower-case letters or digits), an error bound above its count, an item
//     named twice in a list, and two lists of one (counter, window). Which
//     partition a list item belongs to is checked by the reader, which knows
//     the partition count.
//   - The agent puts a partition's lists after its sums of the same flush, in
//     the last message of that partition, so that a reader that has applied a
//     list has applied every sum it counts.
//   - The broker message id is MsgID (agent/epoch/seq/partition); the broker
//     de-duplicates a retried publish by it.
//
// The package holds no state; its functions are safe for concurrent use.
package partial
