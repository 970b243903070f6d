package engagement

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
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
	// Writers are the tokens of the row's last writes, oldest first (its
	// writer history, see MaxWriters), as a read returns them. A row keeps them across an
	// undo: a read that finds no row returns the undone row's Writers.
	// Writes ignore the field of the row they are given, except that
	// UpdateReaction and DeleteReaction extend prev's (pass prev as read).
	Writers []uint64
}

// A row's Writers is its writer history: the tokens of its last writes,
// oldest first. A write whose token is not among them did not apply, as
// long as no later write can have dropped the token. A token carries the
// second it was made (NewToken), and a write drops a token only when the
// history holds more than MaxWriters and the token is older than
// WriterHistory, or, as a safety net no writer of this version reaches,
// when it holds MaxWritersKept: a writer refuses to write a row whose
// history is full (WritersFull) rather than drop a young token. So a
// settle that reads the row within WriterHistory − WriterSkew of the
// token's making always tells applied from not applied
// (Reaction.NotWrittenBy). See docs/fence.md.
const (
	// MaxWriters is how many tokens a row keeps whatever their age.
	MaxWriters = 8
	// MaxWritersKept bounds a row's history: at most this many tokens,
	// all younger than WriterHistory, that is this many writes of one
	// (user, item) in WriterHistory.
	MaxWritersKept = 256
	// WriterHistory is how long a token is kept at least.
	WriterHistory = 10 * time.Minute
	// WriterSkew is how far the clocks of the processes that write one row
	// may disagree.
	WriterSkew = time.Minute
)

// tokenSeq makes the low half of tokens: a counter from a random start,
// so that the tokens of one process never repeat within a second.
var tokenSeq atomic.Uint32

func init() { tokenSeq.Store(rand.Uint32()) }

// NewToken returns a non-zero write token made at now: the Unix second in
// its high 32 bits, a per-process counter from a random start in its low
// 32.
func NewToken(now time.Time) uint64 {
	for {
		if t := uint64(uint32(now.Unix()))<<32 | uint64(tokenSeq.Add(1)); t != 0 {
			return t
		}
	}
}

// TokenTime returns the second token was made (NewToken). Tokens made
// before writer histories were kept by time are random: their "time" is
// anywhere, and expired reads it as expired.
func TokenTime(token uint64) time.Time {
	return time.Unix(int64(token>>32), 0)
}

// expired reports whether a writer at now may drop token: made more than
// WriterHistory ago, or a random token of an older version (its time is
// over a day ahead of now).
func expired(token uint64, now time.Time) bool {
	t := TokenTime(token)
	return now.Sub(t) > WriterHistory || t.Sub(now) > 24*time.Hour
}

// WrittenBy reports whether the write named token is among r's Writers.
func (r *Reaction) WrittenBy(token uint64) bool {
	return token != 0 && slices.Contains(r.Writers, token)
}

// NotWrittenBy reports whether r, read at now, proves that the write named
// token did not apply: the token is not among r's Writers, and no write
// can have dropped it since it was made (it is younger than
// WriterHistory − WriterSkew by the reader's clock, and the history is not
// full). r is the row as a read returns it, found or not.
func (r *Reaction) NotWrittenBy(token uint64, now time.Time) bool {
	if token == 0 || r.WrittenBy(token) || len(r.Writers) >= MaxWritersKept {
		return false
	}
	t := TokenTime(token)
	return now.Sub(t) < WriterHistory-WriterSkew && t.Sub(now) < WriterSkew
}

// NextWriters returns writers extended by token at now, dropping the
// oldest beyond MaxWriters that are expired, and the oldest beyond
// MaxWritersKept. It never modifies writers' array.
func NextWriters(writers []uint64, token uint64, now time.Time) []uint64 {
	for len(writers)+1 > MaxWriters && expired(writers[0], now) {
		writers = writers[1:]
	}
	if n := len(writers) + 1 - MaxWritersKept; n > 0 {
		writers = writers[n:]
	}
	out := make([]uint64, len(writers), len(writers)+1)
	copy(out, writers)
	return append(out, token)
}

// WritersFull reports whether a write at now would fill writers to
// MaxWritersKept tokens that are not expired: the row has taken that many
// writes in WriterHistory. It then returns how long until the oldest token
// expires. A writer refuses such a write (too many writes of one
// reaction), so that a history never reaches MaxWritersKept, no token is
// dropped young, and NotWrittenBy holds.
func WritersFull(writers []uint64, now time.Time) (bool, time.Duration) {
	for len(writers)+1 > MaxWriters && expired(writers[0], now) {
		writers = writers[1:]
	}
	if len(writers)+1 < MaxWritersKept {
		return false, 0
	}
	return true, TokenTime(writers[0]).Add(WriterHistory + time.Second).Sub(now)
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
