// Package periodic runs a step at a fixed interval until a context ends:
// the loop of the agents' hot-counter rule, the rollup's trending writer,
// the row pushers' heartbeats, the consumer group's lease renewals and the
// gossip node's rejoin attempts.
//
// Invariants: Run calls its step on the caller's goroutine, one call at a
// time, never before the first interval has passed, and returns soon
// after ctx ends: at the latest after the step running then and, when a
// tick is due at the same moment, one more (select picks either; a step
// that must not run late checks ctx itself). It stops its ticker on
// return. Ticks that pass while a step runs are dropped, as time.Ticker
// drops them.
//
// The package holds no state; Run is safe for concurrent use.
package periodic
