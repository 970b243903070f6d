// Package pbwire holds the steps that edgecount's hand-written protobuf
// codecs share, on top of google.golang.org/protobuf/encoding/protowire:
// walking the fields of a message (Walk) and appending a proto3 scalar
// field that is left out when it holds its zero value (AppendString,
// AppendUint). The codecs themselves (topk's summaries, the agents'
// held-deltas exchange, the rollup's row pushes, the HTTP API's protobuf
// bodies, the partial sums) keep their schemas and their checks; this
// package knows no schema.
//
// Invariants: Walk never panics and never reads past data, whatever data
// holds (FuzzWalk); the raw bytes it passes alias data. The Append
// functions only append to dst.
//
// The package holds no state; its functions are safe for concurrent use.
package pbwire
