package region

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/store"
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

// SerialReader is implemented by a ReactionStore whose GetReaction may
// return a row that a compare-and-set applied elsewhere has already
// replaced (Cassandra reading its own data centre while reactions are
// serial across data centres). The agent reads through it before it
// answers "unchanged" without writing: a stale row showing the action the
// user asks for would otherwise acknowledge a change that never happens.
type SerialReader interface {
	GetReactionSerial(ctx context.Context, userID, contentID string) (engagement.Reaction, bool, error)
}

// Delta is one change to a counter caused by a reaction transition.
type Delta struct {
	Counter string
	Region  string // region the delta is attributed to
	Delta   int64
}

// Transition returns the counter deltas for a user's reaction moving from
// prev (recorded by prevRegion) to next (recorded by region), following the
// table in docs/design.md: a removed reaction is subtracted from the region that
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
// compare-and-set re-reads and tries again, up to Config.ReactionAttempts
// times.
//
// With a log, the intent (the row as read and the row to write) is
// appended before the compare-and-set, and a resolution (applied or not,
// with the deltas) after the store answered; the deltas are added inside
// the resolution's AppendApply, and the answer goes out after it. A crash
// in between leaves an intent without a resolution, which Recover settles
// against the row.
//
// kc, when not nil, is the request's idempotency key: it goes into the
// intent and the resolution of the write that applies (or, when nothing
// changes, into a record of its own), see ReactOnce.
//
// The steps of an attempt: readReaction, then either reactUnchanged or
// planReaction and writeReaction.
func (a *Agent) react(ctx context.Context, kc *keyClaim, userID, contentID string, action engagement.Action) (ReactResult, error) {
	if a.log != nil && !a.log.recovered.Load() {
		return ReactResult{}, ErrRecovering
	}
	for attempt := 0; attempt < a.cfg.ReactionAttempts; attempt++ {
		cur, found, err := a.readReaction(ctx, userID, contentID, action)
		if err != nil {
			return ReactResult{}, err
		}
		prev := actionOf(cur, found)
		if prev == action {
			return a.reactUnchanged(ctx, kc, ReactResult{Previous: prev, Action: action, Version: cur.Version})
		}
		if full, _ := engagement.WritersFull(cur.Writers, a.now()); full {
			a.stats.ReactionsTooFrequent.Add(1)
			return ReactResult{}, ErrTooFrequent
		}
		w := a.planReaction(userID, contentID, action, cur, found)
		applied, err := a.writeReaction(ctx, kc, &w)
		if err != nil {
			if errors.Is(err, store.ErrContention) {
				// The writers' own race left the outcome open; the
				// intent is settled later and counted then. The
				// client retries.
				a.stats.ReactionsContended.Add(1)
				return ReactResult{}, fmt.Errorf("%w: %w", ErrContended, err)
			}
			return ReactResult{}, err
		}
		if !applied {
			a.stats.ReactionConflicts.Add(1)
			continue
		}
		a.stats.ReactionsChanged.Add(1)
		res := ReactResult{Previous: prev, Action: action, Version: w.next.Version, Changed: true}
		a.keyApplied(kc, res)
		return res, nil
	}
	a.stats.ReactionsContended.Add(1)
	return ReactResult{}, ErrContended
}

// actionOf is the action of a user's row as read: none when not found.
func actionOf(row engagement.Reaction, found bool) engagement.Action {
	if found {
		return row.Action
	}
	return engagement.ActionNone
}

// readReaction reads the user's row. When it already shows action and the
// store is a SerialReader, the row is read again at serial consistency:
// nothing is written on that way, so no compare-and-set catches a stale
// row. A serial read that timed out racing the row's writers
// (store.ErrContention) gives ErrContended alone: a 409 with nothing
// applied, not a 503.
func (a *Agent) readReaction(ctx context.Context, userID, contentID string, action engagement.Action) (engagement.Reaction, bool, error) {
	cur, found, err := a.reactions.GetReaction(ctx, userID, contentID)
	if err != nil {
		return cur, found, fmt.Errorf("cannot read reaction: %w", err)
	}
	if sr, ok := a.reactions.(SerialReader); ok && actionOf(cur, found) == action {
		if cur, found, err = sr.GetReactionSerial(ctx, userID, contentID); err != nil {
			if errors.Is(err, store.ErrContention) {
				// The row's writers raced the read: a conflict, and
				// nothing was written, so nothing is left to settle
				// (store.ErrContention is not passed on).
				a.stats.ReactionsContended.Add(1)
				return cur, found, fmt.Errorf("%w: the serial read of the row timed out in contention: %v", ErrContended, err)
			}
			return cur, found, fmt.Errorf("cannot read reaction: %w", err)
		}
	}
	return cur, found, nil
}

// reactUnchanged answers a reaction that changes nothing (res), after
// logging its idempotency key kc, if any, in a record of its own.
func (a *Agent) reactUnchanged(ctx context.Context, kc *keyClaim, res ReactResult) (ReactResult, error) {
	if kc != nil {
		if err := a.keyUnchanged(ctx, kc, res); err != nil {
			return ReactResult{}, err
		}
	}
	a.stats.ReactionsUnchanged.Add(1)
	return res, nil
}

// reactionWrite is one attempt's compare-and-set of a user's row: its
// intent (which names the write), the row as read and the row to write.
type reactionWrite struct {
	in   intent
	prev engagement.Action   // the action of the row as read
	cur  engagement.Reaction // the row as read; for a delete, named by the intent
	next engagement.Reaction // the row to write; zero for a delete
}

// planReaction decides the compare-and-set that moves the row as read
// (cur, found) to action: a delete, an insert of a new incarnation or an
// update to the next version, named by a new intent id as its token, so
// that a lost answer is settled by looking for the id among the row's
// writers.
func (a *Agent) planReaction(userID, contentID string, action engagement.Action, cur engagement.Reaction, found bool) reactionWrite {
	now := a.now()
	w := reactionWrite{prev: actionOf(cur, found), cur: cur}
	w.in = intent{id: engagement.NewToken(now), user: userID, content: contentID, region: a.cfg.Region, action: action,
		prev: cur, prevFound: found, named: true}
	switch {
	case action == engagement.ActionNone:
		w.in.op = opDelete
		w.cur.Token = w.in.id
	case !found:
		w.in.op = opInsert
		w.in.prevWriters = cur.Writers
		w.next = engagement.Reaction{
			UserID: userID, ContentID: contentID, Action: action, Region: a.cfg.Region,
			Version: 1, Incarnation: newIncarnation(), UpdatedAt: now, Token: w.in.id,
		}
	default:
		w.in.op = opUpdate
		w.next = cur
		w.next.Action, w.next.Region, w.next.Version, w.next.UpdatedAt, w.next.Token = action, a.cfg.Region, cur.Version+1, now, w.in.id
	}
	w.in.next = w.next
	return w
}

// writeReaction logs w's intent (with a log), sends the compare-and-set,
// and counts its outcome (countReaction); it reports whether the write
// applied. An error with the write not applied is decided at once when
// the store refused it, else settled (failedReaction); an error with the
// write applied is logged and the change counted.
func (a *Agent) writeReaction(ctx context.Context, kc *keyClaim, w *reactionWrite) (bool, error) {
	var pi *pendingIntent
	if a.log != nil {
		var err error
		if pi, err = a.logIntent(ctx, &w.in, kc); err != nil {
			return false, err
		}
	}
	applied, err := a.compareAndSet(ctx, w)
	if err != nil && !applied {
		if decided, applied := a.failedReaction(ctx, pi, w, err); decided {
			// Settled at once: the client gets the outcome, not the
			// error (a write that did not apply is tried again).
			if applied {
				a.logger.Info("reaction applied after an error; settled from the row", "user", w.in.user, "content", w.in.content, "err", err)
			}
			return applied, nil
		}
		return false, fmt.Errorf("cannot write reaction: %w", err)
	}
	if err != nil {
		// The row changed but the store reports a follow-up failure
		// (e.g. its by-content index lags). The change happened, so
		// its deltas must be counted; the recount repairs the index.
		a.logger.Warn("reaction applied with a store warning", "user", w.in.user, "content", w.in.content, "err", err)
	}
	return applied, a.countReaction(ctx, pi, w, applied)
}

// compareAndSet sends w's compare-and-set to the store.
func (a *Agent) compareAndSet(ctx context.Context, w *reactionWrite) (bool, error) {
	switch w.in.op {
	case opDelete:
		return a.reactions.DeleteReaction(ctx, w.cur)
	case opInsert:
		return a.reactions.InsertReaction(ctx, w.next)
	default:
		return a.reactions.UpdateReaction(ctx, w.cur, w.next)
	}
}

// failedReaction decides the logged intent pi (nil without a log) of a
// compare-and-set that answered err and did not apply: not applied when
// the store refused it before it ran, else by resolveAfterError. It
// reports whether the outcome was decided and logged (its deltas, if it
// applied, counted), and whether it applied. A refused write is decided
// but reported undecided: the store's error is the answer.
func (a *Agent) failedReaction(ctx context.Context, pi *pendingIntent, w *reactionWrite, err error) (decided, applied bool) {
	switch {
	case pi == nil:
	case errors.Is(err, store.ErrRefused):
		// Refused before it ran: not applied, for good. Deciding
		// it now keeps a store outage from leaving an open intent
		// per request, whose later settles find rows moved on by
		// then (ambiguous, counted by no one).
		a.logStats.IntentsRefused.Add(1)
		if lerr := a.logResolution(ctx, pi, &resolution{id: w.in.id, content: w.in.content}); lerr != nil {
			a.logger.Warn("cannot log a refused reaction's outcome; retried later", "err", lerr)
		}
	default:
		return a.resolveAfterError(ctx, pi)
	}
	return false, false
}

// countReaction counts the outcome of w's compare-and-set: with a log, it
// appends the resolution of intent pi, which adds the transition's deltas
// when the write applied (logResolution); without one, it adds them
// directly.
func (a *Agent) countReaction(ctx context.Context, pi *pendingIntent, w *reactionWrite, applied bool) error {
	var buf [2]Delta
	deltas := Transition(w.prev, w.cur.Region, w.in.action, a.cfg.Region, &buf)
	if pi == nil {
		if applied {
			a.addDeltas(w.in.content, deltas)
		}
		return nil
	}
	rs := resolution{id: w.in.id, applied: applied, content: w.in.content}
	if applied {
		rs.deltas = deltas
	}
	return a.logResolution(ctx, pi, &rs)
}

// logIntent appends in to the intake log and registers it as pending,
// inside the append's apply so that a checkpoint never sees the record
// without the registration.
func (a *Agent) logIntent(ctx context.Context, in *intent, kc *keyClaim) (*pendingIntent, error) {
	pi := &pendingIntent{payload: wrapIntent(kc, appendIntent(nil, in)), in: *in, since: time.Now(), key: kc, owned: true}
	d := a.log
	_, err := d.intake.AppendApply(context.WithoutCancel(ctx), pi.payload, func(i uint64) {
		d.mu.Lock()
		pi.index = i
		d.pending[in.id] = pi
		d.mu.Unlock()
		a.logStats.IntentsPending.Add(1)
	})
	if err != nil {
		return nil, fmt.Errorf("cannot log reaction: %w", a.mapLogErr(err))
	}
	return pi, nil
}

// logResolution appends rs and, inside its apply, counts its deltas and
// forgets the intent. When the append fails the outcome is kept with the
// pending intent: the flusher retries the append, and a restart settles the
// intent from the row; either way the change is counted once.
func (a *Agent) logResolution(ctx context.Context, pi *pendingIntent, rs *resolution) error {
	d := a.log
	rec, keep := a.keyedResolution(pi, rs, appendResolution(nil, rs))
	_, err := d.intake.AppendApply(context.WithoutCancel(ctx), rec, func(i uint64) {
		a.addDeltas(rs.content, rs.deltas)
		keep(i)
		d.mu.Lock()
		delete(d.pending, rs.id)
		d.mu.Unlock()
		a.logStats.IntentsPending.Add(-1)
	})
	if err != nil {
		d.mu.Lock()
		c := *rs
		c.deltas = append([]Delta(nil), rs.deltas...)
		pi.decided = &c
		pi.owned = false // the flusher appends it
		d.mu.Unlock()
		return fmt.Errorf("cannot log reaction outcome (it is kept and counted once later): %w", a.mapLogErr(err))
	}
	return nil
}

// resolveAfterError decides an intent whose compare-and-set answered an
// error by settle (the row's writers, or the same compare-and-set sent
// again when the row is unchanged: the store may have failed to settle the
// lost answer itself); if that fails too the intent stays pending, and the
// flusher settles it from then on (retryPending). It reports whether the
// outcome was decided and logged, and whether the write applied.
func (a *Agent) resolveAfterError(ctx context.Context, pi *pendingIntent) (decided, applied bool) {
	rs, err := a.settle(ctx, &pi.in)
	if err != nil {
		a.logger.Warn("reaction outcome unknown; kept in the log and settled later", "user", pi.in.user, "content", pi.in.content, "err", err)
		a.releasePending(pi)
		return false, false
	}
	if err := a.logResolution(ctx, pi, &rs); err != nil {
		a.logger.Warn("cannot log a reaction outcome; retried later", "err", err)
		return false, false
	}
	return !rs.ambiguous, rs.applied
}

// releasePending hands an intent that its owner could not decide to the
// flusher's retries, the next one after a pause that doubles with each
// failure (pendingRetryMin to pendingRetryMax).
func (a *Agent) releasePending(pi *pendingIntent) {
	d := a.log
	d.mu.Lock()
	defer d.mu.Unlock()
	wait := pendingRetryMin << min(pi.retries, 8)
	pi.retries++
	pi.retryAt = time.Now().Add(min(wait, pendingRetryMax))
	pi.owned = false
}

// retryPending runs in the flusher: it starts the settler of pending
// intents, unless it runs already or the flusher stops (the intents stay in
// the log; the next start settles them). The settler appends the
// resolutions that could not be appended, and settles the intents that
// their reactions left undecided, as soon as they did (a reaction owns its
// intent until it returns, so no intent is ever settled twice at once: two
// settles could each count it), oldest first, pendingSettlers at a time.
// It runs beside the flushes, which it never holds up, until no intent is
// due.
//
// A change whose outcome was left open can apply later: Cassandra
// completes an accepted Paxos proposal at the row's next serial read or
// write, possibly after a data centre's outage. Its delta must follow
// within the recount's Quiet (docs/recount.md, assumption A), or a repair
// of the item meanwhile counts it twice; so the retries are frequent
// (pendingRetryMax), not once a minute.
func (a *Agent) retryPending(ctx context.Context) {
	f := a.flusher
	select {
	case <-f.stopFlush:
		return
	default:
	}
	if !a.log.settling.CompareAndSwap(false, true) {
		return
	}
	f.wg.Go(func() {
		defer a.log.settling.Store(false)
		for a.settleDue(ctx, f.stopFlush) {
		}
	})
}

// settleDue settles the intents that are due, and reports whether there
// were any and the flusher is not stopping.
func (a *Agent) settleDue(ctx context.Context, stop <-chan struct{}) bool {
	d := a.log
	now := time.Now()
	d.mu.Lock()
	var todo []*pendingIntent
	for _, pi := range d.pending {
		if !pi.owned && !now.Before(pi.retryAt) {
			pi.owned = true
			todo = append(todo, pi)
		}
	}
	d.mu.Unlock()
	if len(todo) == 0 {
		return false
	}
	slices.SortFunc(todo, func(x, y *pendingIntent) int { return x.since.Compare(y.since) })
	next := make(chan *pendingIntent)
	var wg sync.WaitGroup
	for range min(pendingSettlers, len(todo)) {
		wg.Go(func() {
			for pi := range next {
				a.settleOne(ctx, pi)
			}
		})
	}
	stopped := false
	for i, pi := range todo {
		select {
		case next <- pi:
			continue
		case <-stop:
		}
		// Stopping: hand the rest back (the next start settles them).
		stopped = true
		d.mu.Lock()
		for _, p := range todo[i:] {
			p.owned = false
		}
		d.mu.Unlock()
		break
	}
	close(next)
	wg.Wait()
	return !stopped
}

// settleOne decides an intent the settler owns and logs its resolution;
// if it cannot, it hands the intent back for a later try.
func (a *Agent) settleOne(ctx context.Context, pi *pendingIntent) {
	d := a.log
	d.mu.Lock()
	_, still := d.pending[pi.in.id]
	rs := pi.decided
	d.mu.Unlock()
	if !still {
		return
	}
	if rs == nil {
		r, err := a.settle(ctx, &pi.in)
		if err != nil {
			a.releasePending(pi)
			return
		}
		rs = &r
	}
	if err := a.logResolution(ctx, pi, rs); err != nil {
		// The outcome is kept as decided; a later round appends it.
		a.releasePending(pi)
	}
}

const (
	// pendingRetryMin and pendingRetryMax bound the pause before each of
	// the settler's tries of one undecided intent: long enough that a
	// settle (which may send the write again) does not crowd the user's own
	// next tries, short enough that a delta follows its change well within
	// the recount's Quiet (30 s by default).
	pendingRetryMin = 2 * time.Second
	pendingRetryMax = 5 * time.Second
	// pendingSettlers is how many intents the settler decides at once
	// (each a read and maybe a compare-and-set across data centres).
	pendingSettlers = 8
)

// newIncarnation returns a random non-zero incarnation for a new row.
func newIncarnation() uint64 {
	for {
		if v := rand.Uint64(); v != 0 {
			return v
		}
	}
}
