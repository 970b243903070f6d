// Package engagement is edgecount's shared vocabulary: the reactions a user
// can hold, the counters and their names, the records every part passes
// around (Reaction, Stats, Trending) and the rules ids, counters and regions
// obey.
//
// It holds types, constants, pure validation and the order of a trending
// list (RankTrending: count descending, then id) only: no I/O, no state,
// safe for concurrent use. Importing it says nothing about storage; only the
// store contract (package store) and its implementations persist these
// records.
package engagement
