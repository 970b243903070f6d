package region

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/edgecount/edgecount/engagement"
)

// ReactionStore is what the agent needs of UserLikes. Each write is a
// compare-and-set: it applies only if the row is still as the caller read it
// (version and incarnation), and reports whether it applied. A write may
// report applied together with an error (the row changed, something after
// it failed): the agent then counts the change. An error with applied false
// means nothing is known to have changed; the agent answers the error.
type ReactionStore interface {
	GetReaction(ctx context.Context, userID, contentID string) (engagement.Reaction, bool, error)
	GetReactions(ctx context.Context, userID string, contentIDs []string) (map[string]engagement.Reaction, error)
	InsertReaction(ctx context.Context, r engagement.Reaction) (bool, error)
	UpdateReaction(ctx context.Context, prev, next engagement.Reaction) (bool, error)
	DeleteReaction(ctx context.Context, prev engagement.Reaction) (bool, error)
}

// Delta is one change to a counter caused by a reaction transition.
type Delta struct {
	Counter string
	Region  string // region the delta is attributed to
	Delta   int64
}

// Transition returns the counter deltas for a user's reaction moving from
// prev (recorded by prevRegion) to next (recorded by region), following the
// table in DESIGN.md: a removed reaction is subtracted from the region that
// recorded it, an added one is counted in the region recording it now.
// same → same yields no delta. The result has at most two entries and is
// written into buf to avoid allocation.
func Transition(prev engagement.Action, prevRegion string, next engagement.Action, region string, buf *[2]Delta) []Delta {
	if prev == next {
		return buf[:0]
	}
	n := 0
	if c := counterOf(prev); c != "" {
		buf[n] = Delta{Counter: c, Region: prevRegion, Delta: -1}
		n++
	}
	if c := counterOf(next); c != "" {
		buf[n] = Delta{Counter: c, Region: region, Delta: +1}
		n++
	}
	return buf[:n]
}

func counterOf(a engagement.Action) string {
	switch a {
	case engagement.ActionLike:
		return engagement.CounterLike
	case engagement.ActionDislike:
		return engagement.CounterDislike
	}
	return ""
}

// react runs one reaction: read the row, decide, compare-and-set, and on
// success add the transition's deltas to the counters. A lost
// compare-and-set re-reads and tries again, up to maxAttempts times.
func (a *Agent) react(ctx context.Context, userID, contentID string, action engagement.Action) (ReactResult, error) {
	for attempt := 0; attempt < a.cfg.ReactionAttempts; attempt++ {
		cur, found, err := a.reactions.GetReaction(ctx, userID, contentID)
		if err != nil {
			return ReactResult{}, fmt.Errorf("cannot read reaction: %w", err)
		}
		prev := engagement.ActionNone
		if found {
			prev = cur.Action
		}
		if prev == action {
			a.stats.ReactionsUnchanged.Add(1)
			return ReactResult{Previous: prev, Action: action, Version: cur.Version}, nil
		}
		now := a.now()
		var applied bool
		var next engagement.Reaction
		switch {
		case action == engagement.ActionNone:
			applied, err = a.reactions.DeleteReaction(ctx, cur)
		case !found:
			next = engagement.Reaction{
				UserID: userID, ContentID: contentID, Action: action, Region: a.cfg.Region,
				Version: 1, Incarnation: newIncarnation(), UpdatedAt: now,
			}
			applied, err = a.reactions.InsertReaction(ctx, next)
		default:
			next = cur
			next.Action, next.Region, next.Version, next.UpdatedAt = action, a.cfg.Region, cur.Version+1, now
			applied, err = a.reactions.UpdateReaction(ctx, cur, next)
		}
		if err != nil && !applied {
			return ReactResult{}, fmt.Errorf("cannot write reaction: %w", err)
		}
		if err != nil {
			// The row changed but the store reports a follow-up failure
			// (e.g. its by-content index lags). The change happened, so
			// its deltas must be counted; the recount repairs the index.
			a.logger.Warn("reaction applied with a store warning", "user", userID, "content", contentID, "err", err)
		}
		if !applied {
			a.stats.ReactionConflicts.Add(1)
			continue
		}
		var buf [2]Delta
		for _, d := range Transition(prev, cur.Region, action, a.cfg.Region, &buf) {
			a.counters.Add(Key{ContentID: contentID, Counter: d.Counter, Region: d.Region}, d.Delta)
		}
		a.stats.ReactionsChanged.Add(1)
		return ReactResult{Previous: prev, Action: action, Version: next.Version, Changed: true}, nil
	}
	a.stats.ReactionsContended.Add(1)
	return ReactResult{}, ErrContended
}

// newIncarnation returns a random non-zero incarnation for a new row.
func newIncarnation() uint64 {
	for {
		if v := rand.Uint64(); v != 0 {
			return v
		}
	}
}
