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
//	  repeated TopList tops = 9;  // added after version 1 shipped; older readers skip it
//	  bool more = 10;             // another message of this flush and partition follows
//	}
//	message Sum {
//	  string content_id = 1;
//	  string counter    = 2;
//	  string region     = 3;  // region the delta is attributed to; empty = Batch.region
//	  sint64 delta      = 4;  // may be negative (undo, switch)
//	}
//	message TopList {     // one agent's trending list, cut to this partition's items
//	  string counter = 1;
//	  string window  = 2;   // "5m", "1h", "24h"
//	  uint64 floor   = 3;   // bounds the agent's count of every unnamed item of the partition
//	  repeated TopItem items = 4;
//	}
//	message TopItem {
//	  string content_id = 1;
//	  uint64 count      = 2;  // 1..2^63-1; the true count is in [count-error, count]
//	  uint64 error      = 3;  // 0..count
//	}
//
// Unknown fields are skipped, as protobuf readers do, so fields can be added
// without breaking older rollups: the trending lists (field 9) and the
// "more" flag (field 10, set on every message of a flush but the last of
// its partition, so a reader can wait for the lists) were added that way, under the same schema version, and a message without them is
// exactly a message of the first release. Decode validates every id and
// counter name with the store's key rules and rejects a message that breaks
// them; a top list must also name a valid window (1-8 lower-case letters or
// digits), bound every error by its count, name an item at most once, and
// a batch may carry one list per (counter, window). Which partition a list
// item belongs to is checked by the reader, which knows the partition count.
//
// The lists travel with the sums: the agent puts a partition's lists after
// its sums of the same flush, in the last message of that partition, so
// that a reader that has applied a list has applied every sum it counts.
//
// The broker message id is MsgID: agent/epoch/seq/partition; the broker
// de-duplicates a retried publish by it.
package partial
