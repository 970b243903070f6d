// Package rollup merges the partial sums that edge agents publish into the
// derived totals (ContentStats rows): one row per item for the global total
// and one per region.
//
// Exactly-once apply rests on three facts, each kept elsewhere and relied on
// here:
//   - All sums for one item travel in one partition, and one partition has
//     one writer at a time which hands messages over strictly in broker
//     order (natsjs: one pull consumer per partition, MaxAckPending 1).
//   - Broker sequences grow along a partition.
//   - Every row stores the sequence of the last message applied to it
//     (Stats.LastSeq). Apply skips a row whose LastSeq is not below the
//     message's sequence, so a message redelivered after a crash between
//     writing rows and acknowledging it changes nothing it already changed,
//     and completes what it had not.
//
// Regional rows sum to the global row because every sum is added to the
// global row and to exactly one regional row (the region it is attributed
// to) under the same sequence check.
//
// Rollup is safe for concurrent use by one goroutine per partition; the
// store it is given must be too. It imports no client library: the store
// and the broker are reached through the interfaces declared here and in
// the caller.
package rollup
