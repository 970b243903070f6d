// Package partial is the wire format of the partial sums that edge agents
// publish and the rollup consumes: one message per (flush, partition), in the
// protobuf wire format, versioned, decoded without reflection.
//
// Schema (proto3; field numbers are the contract, see partial.proto):
//
//	message Batch {
//	  uint32 version    = 1;  // schema version, currently 1; others are rejected
//	  string agent      = 2;  // agent id
//	  string region     = 3;  // region of the agent
//	  uint64 epoch      = 4;  // agent incarnation (changes on every start)
//	  uint64 seq        = 5;  // per-agent message sequence within the epoch
//	  uint32 partition  = 6;  // partition = xxhash64(content_id) mod partitions
//	  int64  flushed_at = 7;  // unix milliseconds of the flush
//	  repeated Sum sums = 8;
//	}
//	message Sum {
//	  string content_id = 1;
//	  string counter    = 2;
//	  string region     = 3;  // region the delta is attributed to; empty = Batch.region
//	  sint64 delta      = 4;  // may be negative (undo, switch)
//	}
//
// Unknown fields are skipped, as protobuf readers do, so fields can be added
// without breaking older rollups. Decode validates every id and counter name
// with the store's key rules and rejects a message that breaks them.
//
// The broker message id is MsgID: agent/epoch/seq/partition; the broker
// de-duplicates a retried publish by it.
package partial
