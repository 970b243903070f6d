package engagement

import (
	"fmt"
	"slices"
	"time"
)

// GlobalScope is the Stats scope of an item's global total. Every other scope
// is a region name, and no region may be called "global".
const GlobalScope = "global"

// Action is a user's reaction to an item.
type Action uint8

// The reactions a user can hold. ActionNone means "no row".
const (
	ActionNone Action = iota
	ActionLike
	ActionDislike
)

// String returns the wire name of a: "none", "like" or "dislike".
func (a Action) String() string {
	switch a {
	case ActionNone:
		return "none"
	case ActionLike:
		return "like"
	case ActionDislike:
		return "dislike"
	}
	return fmt.Sprintf("action(%d)", uint8(a))
}

// ParseAction parses a wire name produced by Action.String.
func ParseAction(s string) (Action, bool) {
	switch s {
	case "none":
		return ActionNone, true
	case "like":
		return ActionLike, true
	case "dislike":
		return ActionDislike, true
	}
	return ActionNone, false
}

// Counter names of the two reaction counters. They are changed only through
// reactions, never through increments.
const (
	CounterLike    = "like"
	CounterDislike = "dislike"
)

// Reaction is one UserLikes row: what one user holds on one item.
type Reaction struct {
	UserID    string
	ContentID string
	Action    Action // never ActionNone in a stored row
	// Region is the region that recorded the current action. Undoing or
	// switching it subtracts from this region's totals.
	Region string
	// Version is 1 when the row is created and grows by one on every change.
	Version int64
	// Incarnation is chosen at random when the row is created and never
	// changes afterwards. A compare-and-set matches it together with Version,
	// so a row re-created after an undo is never taken for the deleted one.
	Incarnation uint64
	UpdatedAt   time.Time
	// Token names a write: on the row passed to InsertReaction or
	// UpdateReaction it names that write, on the row passed to
	// DeleteReaction the undo. The writer picks it at random (non-zero)
	// and logs it before the write, so that it can settle a lost answer by
	// looking for it in Writers; zero lets the store pick one. Reads leave
	// it zero.
	Token uint64
	// Writers are the tokens of the row's last writes, oldest first, at
	// most MaxWriters, as a read returns them. A row keeps them across an
	// undo: a read that finds no row returns the undone row's Writers.
	// Writes ignore the field of the row they are given, except that
	// UpdateReaction and DeleteReaction extend prev's (pass prev as read).
	Writers []uint64
}

// MaxWriters bounds Reaction.Writers. A write whose token is not among a
// row's Writers did not apply, unless MaxWriters later writes pushed it
// out.
const MaxWriters = 8

// WrittenBy reports whether the write named token is among r's Writers.
func (r *Reaction) WrittenBy(token uint64) bool {
	return token != 0 && slices.Contains(r.Writers, token)
}

// NextWriters returns writers extended by token, dropping the oldest
// beyond MaxWriters. It never modifies writers' array.
func NextWriters(writers []uint64, token uint64) []uint64 {
	if n := len(writers) + 1 - MaxWriters; n > 0 {
		writers = writers[n:]
	}
	out := make([]uint64, len(writers), len(writers)+1)
	copy(out, writers)
	return append(out, token)
}

// RegionTally is one region's share of an item's reactions, counted from the
// UserLikes rows (by the region that recorded each row).
type RegionTally struct {
	Region   string
	Likes    int64
	Dislikes int64
}

// Stats is one ContentStats row: the derived totals of one item in one scope
// (GlobalScope or a region).
type Stats struct {
	ContentID string
	Scope     string
	Likes     int64
	Dislikes  int64
	// Counters holds every other counter (view, share, …) by name. It never
	// holds "like" or "dislike". It may be nil when all are zero.
	Counters  map[string]int64
	UpdatedAt time.Time
	// LastSeq is the broker sequence of the last partial-sum message applied
	// to this row; the rollup skips a message whose sequence is not above it.
	LastSeq uint64
}

// TrendingKey names one stored trending list: the ranked items of one
// partial-sum partition in one scope, counter and window. Items belong to
// exactly one partition, so the lists of the partitions of a (Scope,
// Counter, Window) are disjoint; each has one writer (the rollup that owns
// the partition) and a reader merges them (see ReadTrending of the stores).
type TrendingKey struct {
	Scope     string // GlobalScope or a region
	Counter   string
	Window    string // e.g. "5m", "1h", "24h"
	Partition uint32 // the partial-sum partition whose items the list ranks
}

// Trending is a computed Top-K list.
type Trending struct {
	TrendingKey
	AsOf  time.Time
	Items []TrendingItem
}

// TrendingItem is one entry of a trending list: the true count is in
// [Count-Error, Count].
type TrendingItem struct {
	ContentID string
	Count     int64
	Error     int64
}

// Trending windows: the values of TrendingKey.Window. A window of span S
// counts the last S of time in time buckets (one minute for 5m and 1h, one
// hour for 24h; see topk.DefaultWindowConfig).
const (
	Window5m  = "5m"
	Window1h  = "1h"
	Window24h = "24h"
)

// TrendingWindows returns the trending window names, shortest first.
func TrendingWindows() []string { return []string{Window5m, Window1h, Window24h} }

// WindowSpan returns the time a trending window covers, and false for a
// name that is not a trending window.
func WindowSpan(window string) (time.Duration, bool) {
	switch window {
	case Window5m:
		return 5 * time.Minute, true
	case Window1h:
		return time.Hour, true
	case Window24h:
		return 24 * time.Hour, true
	}
	return 0, false
}
