package cassandra

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"
	"unicode/utf8"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/cespare/xxhash/v2"

	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/store"
)

// maxInList bounds the ids of one IN query.
const maxInList = 100

// maxRevives bounds the attempts of one InsertReaction to take over the
// marker of an undone reaction when competitors keep replacing it.
const maxRevives = 3

// markerAction is the action column of a marker: the row of an undone
// reaction, which every read treats as no row. It is
// engagement.ActionNone.String().
const markerAction = "none"

// GetReaction returns the row of (userID, contentID) and whether it exists.
func (s *Store) GetReaction(ctx context.Context, userID, contentID string) (engagement.Reaction, bool, error) {
	return s.getReaction(ctx, "get reaction", s.cons, userID, contentID)
}

// GetReactionSerial is GetReaction at the serial consistency of the
// reactions' transactions (region.SerialReader). A read at the local
// consistency sees one data centre's replicas, which a transaction that
// applied through another data centre reaches only later (its commit is
// written at the local quorum of the coordinator's DC): a caller that
// would act on the row without a compare-and-set of its own must read it
// this way.
//
// A serial read that times out racing the row's writers (a Paxos contention
// timeout) fails with store.ErrContention as well as store.ErrUnavailable:
// the writers' own race, not an outage. It wrote nothing, so it leaves no
// outcome open.
func (s *Store) GetReactionSerial(ctx context.Context, userID, contentID string) (engagement.Reaction, bool, error) {
	r, found, err := s.getReaction(ctx, "get reaction (serial)", s.serialCons, userID, contentID)
	if err != nil && contended(err) {
		err = fmt.Errorf("%w: %w", store.ErrContention, err)
	}
	return r, found, err
}

func (s *Store) getReaction(ctx context.Context, op string, c gocql.Consistency, userID, contentID string) (engagement.Reaction, bool, error) {
	if err := store.CheckCall(ctx, op, validKeyPart, userID, contentID); err != nil {
		return engagement.Reaction{}, false, err
	}
	r, found, err := s.readReaction(ctx, c, userID, contentID)
	if err != nil {
		return engagement.Reaction{}, false, fmt.Errorf("cannot %s: %w", op, err)
	}
	if !found {
		return engagement.Reaction{}, false, nil
	}
	if r.Action == engagement.ActionNone {
		// An undone row: no row, with the undone row's history.
		return engagement.Reaction{UserID: userID, ContentID: contentID, Writers: r.Writers}, false, nil
	}
	return r, true, nil
}

// readReaction reads one row at consistency c. A marker is a found row with
// action ActionNone.
func (s *Store) readReaction(ctx context.Context, c gocql.Consistency, userID, contentID string) (engagement.Reaction, bool, error) {
	var (
		row    rawReaction
		r      = engagement.Reaction{UserID: userID, ContentID: contentID}
		q      = s.session.Query(s.q.getReaction, userID, contentID).Consistency(c).Idempotent(true)
		scanTo = []any{&row.action, &row.region, &r.Version, &row.incarnation, &row.updatedAt, &row.writers}
	)
	err := q.ScanContext(ctx, scanTo...)
	if errors.Is(err, gocql.ErrNotFound) {
		return engagement.Reaction{}, false, nil
	}
	if err != nil {
		return engagement.Reaction{}, false, unavailable(err)
	}
	if err := row.decode(&r); err != nil {
		return engagement.Reaction{}, false, err
	}
	return r, true, nil
}

// rawReaction holds the columns of a user_likes row that need decoding.
type rawReaction struct {
	action, region string
	incarnation    int64
	updatedAt      int64
	writers        []int64
}

func (raw *rawReaction) decode(r *engagement.Reaction) error {
	a, ok := engagement.ParseAction(raw.action)
	if !ok {
		return fmt.Errorf("%w: reaction (%q, %q) has action %q", ErrCorrupt, r.UserID, r.ContentID, raw.action)
	}
	r.Action = a
	r.Region = raw.region
	r.Incarnation = uint64(raw.incarnation)
	r.UpdatedAt = fromMicros(raw.updatedAt)
	r.Writers = fromBigints(raw.writers)
	return nil
}

// fromBigints returns tokens stored as bigint as uint64s (nil for none).
func fromBigints(v []int64) []uint64 {
	if len(v) == 0 {
		return nil
	}
	out := make([]uint64, len(v))
	for i, x := range v {
		out[i] = uint64(x)
	}
	return out
}

// toBigints returns tokens as Cassandra bigints.
func toBigints(v []uint64) []int64 {
	out := make([]int64, len(v))
	for i, x := range v {
		out[i] = int64(x)
	}
	return out
}

// writeToken returns the token that names a write of r: r.Token, or a new
// one when the caller left it zero.
func writeToken(r *engagement.Reaction) uint64 {
	if r.Token != 0 {
		return r.Token
	}
	return engagement.NewToken(time.Now())
}

// GetReactions returns the rows of userID for contentIDs that exist, keyed by
// content id. The rows are in one partition, read with one query per 100
// ids. The map is never nil.
func (s *Store) GetReactions(ctx context.Context, userID string, contentIDs []string) (map[string]engagement.Reaction, error) {
	const op = "get reactions"
	if err := store.CheckUserCall(ctx, op, validKeyPart, userID, contentIDs); err != nil {
		return nil, err
	}
	ids := slices.Compact(slices.Sorted(slices.Values(contentIDs)))
	out := make(map[string]engagement.Reaction, len(ids))
	for chunk := range slices.Chunk(ids, maxInList) {
		iter := s.query(s.q.getReactions, userID, chunk).Idempotent(true).IterContext(ctx)
		var (
			row rawReaction
			r   = engagement.Reaction{UserID: userID}
		)
		for iter.Scan(&r.ContentID, &row.action, &row.region, &r.Version, &row.incarnation, &row.updatedAt, &row.writers) {
			if err := row.decode(&r); err != nil {
				_ = iter.Close() // the decode error is the one to report
				return nil, fmt.Errorf("cannot %s: %w", op, err)
			}
			if r.Action != engagement.ActionNone {
				out[r.ContentID] = r
			}
		}
		if err := iter.Close(); err != nil {
			return nil, fmt.Errorf("cannot %s: %w", op, unavailable(err))
		}
	}
	return out, nil
}

// checkRow validates a row about to be stored.
func checkRow(ctx context.Context, op string, r *engagement.Reaction) error {
	if err := store.CheckRow(ctx, op, validKeyPart, r); err != nil {
		return err
	}
	if !utf8.ValidString(r.Region) {
		return invalidCall(op, "region %q is not UTF-8", r.Region)
	}
	return nil
}

// InsertReaction stores r if no row exists for (r.UserID, r.ContentID) and
// reports whether it did. r.Version should be 1 and r.Incarnation fresh: an
// unknown outcome is settled by looking for it.
//
// A key that never held a row is written with INSERT … IF NOT EXISTS; the
// marker of an undone reaction is taken over with an UPDATE conditioned on
// that marker's version and incarnation (see docs/fence.md), retried a few times
// if competitors keep replacing the marker.
func (s *Store) InsertReaction(ctx context.Context, r engagement.Reaction) (bool, error) {
	const op = "insert reaction"
	if err := checkRow(ctx, op, &r); err != nil {
		return false, err
	}
	token := writeToken(&r)
	if err := s.preIndex(ctx, &r); err != nil {
		return false, fmt.Errorf("cannot %s: %w", op, err)
	}
	decide := func(over *engagement.Reaction) func(engagement.Reaction, bool) outcome {
		return func(cur engagement.Reaction, found bool) outcome { return decideInsert(r, token, over, cur, found) }
	}
	res, err := s.lwt(ctx, r.UserID, r.ContentID, decide(nil),
		s.q.insertReaction, r.UserID, r.ContentID, r.Action.String(), r.Region, r.Version, int64(r.Incarnation), micros(r.UpdatedAt),
		toBigints([]uint64{token}))
	// A settled outcome is not retried: its row may be this insert's,
	// undone by a competitor since.
	for i := range maxRevives {
		if err != nil || res.applied || res.settled || !res.found || res.cur.Action != engagement.ActionNone {
			break
		}
		marker := res.cur
		if i > 0 {
			// A failed revive reports only the columns of its condition:
			// read the marker's writers, which the revive must extend (a
			// list started afresh would drop the tokens of the writes
			// before, and their settles would take them as not applied).
			cur, found, rerr := s.readReaction(ctx, s.serialCons, r.UserID, r.ContentID)
			if rerr != nil {
				res, err = casResult{}, rerr
				break
			}
			if !found || cur.Action != engagement.ActionNone {
				res = casResult{cur: cur, found: found}
				break
			}
			marker = cur
		}
		if marker.WrittenBy(token) {
			// The marker's writers name this very write: sent again (an
			// agent's redo of a lost answer), it applied before and was
			// undone since. Applying it again would revive an undone
			// reaction and count it twice.
			res = casResult{applied: true, settled: true}
			break
		}
		if s.beforeRevive != nil {
			s.beforeRevive(i)
		}
		res, err = s.lwt(ctx, r.UserID, r.ContentID, decide(&marker),
			s.q.reviveReaction, r.Action.String(), r.Region, r.Version, int64(r.Incarnation), micros(r.UpdatedAt),
			toBigints(engagement.NextWriters(marker.Writers, token, time.Now())),
			r.UserID, r.ContentID, markerAction, marker.Version, int64(marker.Incarnation))
	}
	return indexApplied(op, res, err, func() error { return s.putIndex(ctx, &r) })
}

// UpdateReaction replaces the row of (prev.UserID, prev.ContentID) with next
// if the stored row still has prev.Version and prev.Incarnation, and reports
// whether it did. next must name the same row, keep the incarnation and have
// version prev.Version+1.
func (s *Store) UpdateReaction(ctx context.Context, prev, next engagement.Reaction) (bool, error) {
	const op = "update reaction"
	if err := checkRow(ctx, op, &next); err != nil {
		return false, err
	}
	if err := store.CheckUpdate(&prev, &next); err != nil {
		return false, fmt.Errorf("cannot %s: %w", op, err)
	}
	token := writeToken(&next)
	if err := s.markIndex(ctx, &prev, next.Version); err != nil {
		return false, fmt.Errorf("cannot %s: %w", op, err)
	}
	res, err := s.lwt(ctx, next.UserID, next.ContentID, func(cur engagement.Reaction, found bool) outcome {
		return decideUpdate(prev, next, token, cur, found)
	}, s.q.updateReaction, next.Action.String(), next.Region, next.Version, micros(next.UpdatedAt),
		toBigints(engagement.NextWriters(prev.Writers, token, time.Now())),
		next.UserID, next.ContentID, prev.Version, int64(prev.Incarnation))
	return indexApplied(op, res, err, func() error { return s.putIndex(ctx, &next) })
}

// DeleteReaction removes the row of (prev.UserID, prev.ContentID) if it
// still has prev.Version and prev.Incarnation, and reports whether it did.
// It replaces the row with a marker (see docs/fence.md) whose incarnation is a
// random token of this call, so a lost answer is settled by looking for it.
func (s *Store) DeleteReaction(ctx context.Context, prev engagement.Reaction) (bool, error) {
	const op = "delete reaction"
	if err := store.CheckCall(ctx, op, validKeyPart, prev.UserID, prev.ContentID); err != nil {
		return false, err
	}
	marker, token := markerToken(prev.Incarnation), writeToken(&prev)
	if err := s.markIndex(ctx, &prev, prev.Version+1); err != nil {
		return false, fmt.Errorf("cannot %s: %w", op, err)
	}
	res, err := s.lwt(ctx, prev.UserID, prev.ContentID, func(cur engagement.Reaction, found bool) outcome {
		return decideDelete(prev, marker, token, cur, found)
	}, s.q.delReact, markerAction, prev.Version+1, int64(marker), micros(time.Now()),
		toBigints(engagement.NextWriters(prev.Writers, token, time.Now())),
		prev.UserID, prev.ContentID, prev.Version, int64(prev.Incarnation))
	return indexApplied(op, res, err, func() error {
		s.counters.Deletes.Add(1)
		return s.delIndex(ctx, &prev)
	})
}

// indexApplied finishes a write whose transaction ended with res and err:
// when it applied, index brings the by-content table up to date. An index
// failure is reported with applied true: the row changed.
func indexApplied(op string, res casResult, err error, index func() error) (bool, error) {
	if err != nil {
		return false, fmt.Errorf("cannot %s: %w", op, err)
	}
	if !res.applied {
		return false, nil
	}
	if err := index(); err != nil {
		return true, fmt.Errorf("cannot %s: %w", op, err)
	}
	return true, nil
}

// markerToken returns a random non-zero marker incarnation other than
// live's.
func markerToken(live uint64) uint64 {
	for {
		if v := rand.Uint64(); v != 0 && v != live {
			return v
		}
	}
}

// decideInsert settles an insert of r named token, sent as INSERT … IF
// NOT EXISTS (over nil) or as the revive of the marker over. Its token in
// the row's writers (of a row or of a marker: applied, then undone) or a
// row of r's incarnation means it applied. The row its condition names (no
// row, or the marker over) means it has not applied yet but still could.
// Any other row or marker means that the row moved on: it did not apply if
// the row's writers reach back far enough to tell, else the outcome is
// unknown (MaxWriters later writes may have pushed its token out).
func decideInsert(r engagement.Reaction, token uint64, over *engagement.Reaction, cur engagement.Reaction, found bool) outcome {
	switch {
	case found && cur.WrittenBy(token):
		return outcomeApplied
	case found && cur.Action != engagement.ActionNone && cur.Incarnation == r.Incarnation:
		return outcomeApplied
	case over == nil && !found:
		return outcomeOpen
	case over != nil && found && cur.Action == engagement.ActionNone && cur.Version == over.Version && cur.Incarnation == over.Incarnation:
		return outcomeOpen
	}
	return unknownUnless(cur, found, token)
}

// decideUpdate settles an update of prev to next named token.
func decideUpdate(prev, next engagement.Reaction, token uint64, cur engagement.Reaction, found bool) outcome {
	switch {
	case found && cur.WrittenBy(token):
		return outcomeApplied
	case !found || cur.Action == engagement.ActionNone || cur.Incarnation != next.Incarnation:
		// Deleted since: from next (after this update) or from prev (by a
		// competitor, instead of it). The writers tell, if they reach back.
		return unknownUnless(cur, found, token)
	case cur.Version == prev.Version:
		return outcomeOpen // the condition still holds: nothing applied yet
	case cur.Version < prev.Version:
		return outcomeNotApplied
	case cur.Version == next.Version && sameContent(cur, next):
		return outcomeApplied
	case cur.Version == next.Version:
		return outcomeNotApplied // a competitor made this version
	}
	return unknownUnless(cur, found, token) // moved past next: was next.Version this update's?
}

// decideDelete settles a delete of prev named token that wrote a marker
// with incarnation marker.
func decideDelete(prev engagement.Reaction, marker, token uint64, cur engagement.Reaction, found bool) outcome {
	switch {
	case found && cur.WrittenBy(token):
		return outcomeApplied
	case !found:
		return outcomeUnknown // a marked row never vanishes
	case cur.Action == engagement.ActionNone && cur.Incarnation == marker:
		return outcomeApplied // only this call writes its marker
	case cur.Action != engagement.ActionNone && cur.Incarnation == prev.Incarnation && cur.Version == prev.Version:
		return outcomeOpen // the condition still holds: nothing applied yet
	case cur.Action != engagement.ActionNone && cur.Incarnation == prev.Incarnation:
		return outcomeNotApplied // an undone incarnation never comes back
	}
	// Another marker, or a row inserted over one: undone by a competitor
	// instead of this call, or by this call and re-created since.
	return unknownUnless(cur, found, token)
}

// unknownUnless decides a write named token whose row moved on: the row's
// writers (which a write extends and nothing but later writes shortens)
// lack the token, so it did not apply, unless a later write may have
// dropped it (engagement.NotWrittenBy: only once it is older than
// engagement.WriterHistory).
func unknownUnless(cur engagement.Reaction, found bool, token uint64) outcome {
	if found && cur.NotWrittenBy(token, time.Now()) {
		return outcomeNotApplied
	}
	return outcomeUnknown
}

// sameContent reports whether two rows of one key hold the same change.
func sameContent(a, b engagement.Reaction) bool {
	return a.Action == b.Action && a.Region == b.Region && a.Version == b.Version &&
		a.Incarnation == b.Incarnation && micros(a.UpdatedAt) == micros(b.UpdatedAt)
}

// casResult is the outcome of a lightweight transaction.
type casResult struct {
	applied bool
	// settled reports that the outcome was open and decided by a serial
	// read.
	settled bool
	// cur and found are the row's action, version and incarnation as the
	// transaction or the settling read saw them, when it did not apply
	// (found is false when they were not reported).
	cur   engagement.Reaction
	found bool
}

// lwt runs a lightweight transaction on the row (userID, contentID) and
// reports whether it applied. The statement is not marked idempotent, so
// the driver never retries it. It runs to its end even if ctx ends first (an
// abandoned transaction is an unknown outcome), bounded by the request
// timeout. When it fails in a way that leaves the outcome open, settle
// decides with decide.
func (s *Store) lwt(ctx context.Context, userID, contentID string, decide func(cur engagement.Reaction, found bool) outcome,
	stmt string, values ...any) (casResult, error) {
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*s.timeout)
	defer cancel()
	sent := time.Now()
	q := s.query(stmt, values...).SerialConsistency(s.serialCons).Idempotent(false)
	prev := make(map[string]any, 8)
	applied, err := q.MapScanCASContext(lctx, prev)
	if err == nil {
		if applied {
			return casResult{applied: true}, nil
		}
		cur, found := casRow(prev)
		return casResult{cur: cur, found: found}, nil
	}
	if !unknownOutcome(err) {
		if s.refusedBeforeRun(err) {
			return casResult{}, fmt.Errorf("%w: %w", store.ErrRefused, unavailable(err))
		}
		return casResult{}, unavailable(err)
	}
	var answered gocql.RequestError
	if !errors.As(err, &answered) {
		// The client gave up (no answer in time, connection lost): the
		// coordinator may still be running the transaction and could apply
		// it after the settling read. Wait until it must have given up: the
		// request timeout is above the server's LWT timeouts.
		time.Sleep(time.Until(sent.Add(s.timeout)))
	}
	res, serr := s.settle(ctx, userID, contentID, err, decide)
	if serr != nil && contended(serr) {
		s.counters.Contended.Add(1)
		serr = fmt.Errorf("%w: %w", store.ErrContention, serr)
	}
	return res, serr
}

// contended reports whether err holds a Paxos contention timeout: a
// compare-and-set that timed out at its CAS phase (Cassandra retries a
// contended round until cas_contention_timeout) or a serial read that
// timed out, both outcomes of writers racing on one row.
func contended(err error) bool {
	var (
		wt *gocql.RequestErrWriteTimeout
		wu *gocql.RequestErrCASWriteUnknown
		rt *gocql.RequestErrReadTimeout
	)
	switch {
	case errors.As(err, &wt):
		return wt.WriteType == "CAS"
	case errors.As(err, &wu):
		return true
	case errors.As(err, &rt):
		return rt.Consistency == gocql.Serial || rt.Consistency == gocql.LocalSerial
	}
	return false
}

// casRow reads the action, version and incarnation that a transaction
// which did not apply reports, and whether it reported them all.
func casRow(m map[string]any) (engagement.Reaction, bool) {
	action, ok1 := m["action"].(string)
	version, ok2 := m["version"].(int64)
	inc, ok3 := m["incarnation"].(int64)
	a, ok4 := engagement.ParseAction(action)
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return engagement.Reaction{}, false
	}
	// writers is null (absent) on rows written before writer tokens.
	writers, _ := m["writers"].([]int64)
	return engagement.Reaction{Action: a, Version: version, Incarnation: uint64(inc), Writers: fromBigints(writers)}, true
}

// unknownOutcome reports whether a lightweight transaction that failed with
// err may nevertheless have applied: every error except those with which
// the coordinator refuses a request before running it.
func unknownOutcome(err error) bool {
	var (
		unavail   *gocql.RequestErrUnavailable
		overload  *gocql.RequestErrOverloaded
		bootstrap *gocql.RequestErrBootstrapping
		syntax    *gocql.RequestErrSyntax
		invalid   *gocql.RequestErrInvalid
		cfgErr    *gocql.RequestErrConfig
		unauth    *gocql.RequestErrUnauthorized
		unprep    *gocql.RequestErrUnprepared
	)
	switch {
	case errors.Is(err, gocql.ErrNoConnections), errors.Is(err, gocql.ErrSessionClosed),
		errors.As(err, &unavail), errors.As(err, &overload), errors.As(err, &bootstrap),
		errors.As(err, &syntax), errors.As(err, &invalid), errors.As(err, &cfgErr),
		errors.As(err, &unauth), errors.As(err, &unprep):
		return false
	}
	// Write and read timeouts (of type CAS or not), CAS_WRITE_UNKNOWN, a
	// connection lost or a request abandoned after it was sent.
	return true
}

// refusedBeforeRun reports whether a lightweight transaction that failed
// with err (unknownOutcome false) provably proposed nothing, so that no
// replica holds a value of it that a later round could complete: it was
// never sent, or the cluster runs Paxos v2 and refused it as unavailable.
// Paxos v2 (Cassandra 5.0, Paxos.cas and begin) checks for live replicas
// only before each round's prepare, and starts another round only after
// one in which no replica accepted its proposal; its propose and commit
// phases fail with timeouts, never as unavailable. Paxos v1 checks again
// for the commit, after a quorum accepted, so there an unavailable answer
// leaves the outcome open.
func (s *Store) refusedBeforeRun(err error) bool {
	if errors.Is(err, gocql.ErrNoConnections) || errors.Is(err, gocql.ErrSessionClosed) {
		return true
	}
	var unavail *gocql.RequestErrUnavailable
	return s.paxosV2 && errors.As(err, &unavail)
}

// outcome is what a settled row says about a lightweight transaction.
type outcome uint8

const (
	outcomeNotApplied outcome = iota
	outcomeApplied
	outcomeUnknown
	// outcomeOpen: not applied so far, but the row still satisfies the
	// transaction's condition, so a copy of it that the cluster has not
	// yet run (queued on a stalled node) could still apply. settle fences
	// the row to make "not applied" final.
	outcomeOpen
)

// maxFences bounds the fencing attempts of one settle.
const maxFences = 3

// settle decides whether a lightweight transaction on (userID, contentID)
// that failed with cause applied. It reads the row at serial consistency,
// which first completes any proposal that a replica accepted but nobody
// committed, so the row it returns no longer depends on a transaction that
// had started; decide then compares it with what the transaction would have
// written. The read runs even when ctx has ended (the caller must learn
// what happened), bounded by twice the request timeout.
//
// A serial read cannot see a transaction that has not started yet: one
// queued behind a stalled node (a long GC pause, a frozen process) can
// still run, and apply, after the read said "not applied". So when the row
// still satisfies the transaction's condition (outcomeOpen), settle fences
// it: a transaction of its own that bumps the row's version and keeps its
// content (or, where no row is, writes a marker), conditioned on the row
// it read. If the fence applies, the original's condition can never hold
// again and "not applied" is final; if it does not, the row it reports
// (or a fresh serial read) is decided again.
func (s *Store) settle(ctx context.Context, userID, contentID string, cause error,
	decide func(cur engagement.Reaction, found bool) outcome) (casResult, error) {
	s.counters.Settled.Add(1)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*s.timeout)
	defer cancel()
	cur, found, err := s.readReaction(rctx, s.serialCons, userID, contentID)
	if err != nil {
		s.counters.Unknown.Add(1)
		return casResult{}, fmt.Errorf("%w: %w: after %w: serial read failed: %w", store.ErrUnavailable, ErrOutcomeUnknown, cause, err)
	}
	for fences := 0; ; fences++ {
		switch decide(cur, found) {
		case outcomeApplied:
			return casResult{applied: true, settled: true}, nil
		case outcomeNotApplied:
			return casResult{settled: true, cur: cur, found: found}, nil
		case outcomeOpen:
			if fences == maxFences {
				break
			}
			fenced, now, nowFound, err := s.fence(rctx, userID, contentID, cur, found)
			if err != nil {
				s.counters.Unknown.Add(1)
				return casResult{}, fmt.Errorf("%w: %w: after %w: cannot fence the row: %w", store.ErrUnavailable, ErrOutcomeUnknown, cause, err)
			}
			if fenced {
				s.counters.Fenced.Add(1)
				return casResult{settled: true, cur: now, found: nowFound}, nil
			}
			cur, found = now, nowFound
			continue
		}
		s.counters.Unknown.Add(1)
		return casResult{}, fmt.Errorf("%w: %w: after %w: the row moved on (found %v, action %v, version %d)",
			store.ErrUnavailable, ErrOutcomeUnknown, cause, found, cur.Action, cur.Version)
	}
}

// fence makes the row (userID, contentID) differ from cur, which a serial
// read returned, without changing what it holds: it bumps the version of a
// row or a marker, or writes a marker where no row is, in a transaction
// conditioned on cur. It reports whether the fence applied and the row as
// it is now: the fenced row, or the one that made the fence fail (read at
// serial consistency when the transaction did not report it). A fence whose
// own answer is lost is settled by a serial read too: it applied if the
// row shows it.
func (s *Store) fence(ctx context.Context, userID, contentID string, cur engagement.Reaction, found bool) (bool, engagement.Reaction, bool, error) {
	var q *gocql.Query
	want := cur
	if found {
		want.Version = cur.Version + 1
		q = s.query(s.q.fenceBump, want.Version, userID, contentID, cur.Version, int64(cur.Incarnation))
	} else {
		want = engagement.Reaction{UserID: userID, ContentID: contentID, Action: engagement.ActionNone, Version: 1,
			Incarnation: markerToken(0), UpdatedAt: time.Now()}
		q = s.query(s.q.fenceInsert, userID, contentID, markerAction, int64(want.Incarnation), micros(want.UpdatedAt))
	}
	m := make(map[string]any, 8)
	applied, err := q.SerialConsistency(s.serialCons).Idempotent(false).MapScanCASContext(ctx, m)
	if err == nil && applied {
		return true, want, true, nil
	}
	if err == nil {
		if now, ok := casRow(m); ok {
			return false, now, true, nil
		}
	} else if !unknownOutcome(err) {
		return false, engagement.Reaction{}, false, unavailable(err)
	}
	now, nowFound, rerr := s.readReaction(ctx, s.serialCons, userID, contentID)
	if rerr != nil {
		return false, engagement.Reaction{}, false, errors.Join(err, rerr)
	}
	if nowFound && now.Action == want.Action && now.Version == want.Version && now.Incarnation == want.Incarnation {
		return true, now, true, nil
	}
	return false, now, nowFound, nil
}

// followUp returns the context of a write that follows an applied
// transaction: it must be attempted even if ctx ended meanwhile.
func (s *Store) followUp(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 2*s.timeout)
}

// preIndex writes the by-content entry of r, a new incarnation, marked
// pending, before the transaction that inserts it, with write timestamp
// 2·r.Version − 1: below the entry putIndex writes once the row exists.
// A failure refuses the insert (nothing was sent): a row without an entry
// would be missed by every count.
func (s *Store) preIndex(ctx context.Context, r *engagement.Reaction) error {
	err := s.query(s.q.preIndex, r.ContentID, bucketOf(r.UserID, s.buckets), r.UserID, int64(r.Incarnation),
		r.Action.String(), r.Region, r.Version, pendingStamp(r.Version)).
		Consistency(s.indexCons).Idempotent(true).ExecContext(ctx)
	if err != nil {
		return fmt.Errorf("%w: cannot write the pending by-content entry: %w", store.ErrRefused, unavailable(err))
	}
	return nil
}

// markIndex marks the by-content entry of prev's incarnation pending
// before a transaction that moves prev to version next, with write
// timestamp 2·next − 1: above every write of the versions before, below
// the entry (or the deletion) written once the change applied. An entry
// a failure left behind (an older version's, or none) is thus never taken
// for the row's. A failure refuses the change (nothing was sent).
func (s *Store) markIndex(ctx context.Context, prev *engagement.Reaction, next int64) error {
	err := s.query(s.q.markIndex, pendingStamp(next), prev.ContentID, bucketOf(prev.UserID, s.buckets), prev.UserID, int64(prev.Incarnation)).
		Consistency(s.indexCons).Idempotent(true).ExecContext(ctx)
	if err != nil {
		return fmt.Errorf("%w: cannot mark the by-content entry pending: %w", store.ErrRefused, unavailable(err))
	}
	return nil
}

// Write timestamps of the by-content entries of one incarnation, by the
// row version they follow (see index.go, "pending entries"): a version's
// pending mark is above everything written for earlier versions and
// below its own entry, and a deletion is above all of them.
func pendingStamp(version int64) int64 { return 2*version - 1 }
func entryStamp(version int64) int64   { return 2 * version }
func deleteStamp(version int64) int64  { return 2 * (version + 1) }

// putIndex writes the by-content entry of row r, not pending, with write
// timestamp entryStamp(r.Version): a later version of the same incarnation
// always wins, in whatever order the writes arrive.
func (s *Store) putIndex(ctx context.Context, r *engagement.Reaction) error {
	if s.failFollowUp.Load() {
		s.counters.IndexBehind.Add(1)
		return fmt.Errorf("%w: %w: the follow-up write failed (a test's fault)", store.ErrUnavailable, ErrIndexBehind)
	}
	ctx, cancel := s.followUp(ctx)
	defer cancel()
	err := s.query(s.q.putIndex, r.ContentID, bucketOf(r.UserID, s.buckets), r.UserID, int64(r.Incarnation),
		r.Action.String(), r.Region, r.Version, entryStamp(r.Version)).
		Idempotent(true).ExecContext(ctx)
	if err != nil {
		s.counters.IndexBehind.Add(1)
		return fmt.Errorf("%w: %w: %w", store.ErrUnavailable, ErrIndexBehind, err)
	}
	return nil
}

// delIndex deletes the by-content entry of prev's incarnation, with write
// timestamp deleteStamp(prev.Version): above every entry and mark that
// incarnation ever wrote.
func (s *Store) delIndex(ctx context.Context, prev *engagement.Reaction) error {
	if s.failFollowUp.Load() {
		s.counters.IndexBehind.Add(1)
		return fmt.Errorf("%w: %w: the follow-up write failed (a test's fault)", store.ErrUnavailable, ErrIndexBehind)
	}
	ctx, cancel := s.followUp(ctx)
	defer cancel()
	err := s.query(s.q.delIndex, deleteStamp(prev.Version), prev.ContentID, bucketOf(prev.UserID, s.buckets), prev.UserID, int64(prev.Incarnation)).
		Idempotent(true).ExecContext(ctx)
	if err != nil {
		s.counters.IndexBehind.Add(1)
		return fmt.Errorf("%w: %w: %w", store.ErrUnavailable, ErrIndexBehind, err)
	}
	return nil
}

// CountReactions counts the reactions on contentID by the region that
// recorded each row, from the by-content entries: every bucket of the item,
// read in pages, up to fanOut queries at a time. Regions are sorted; an
// item without reactions has none.
//
// A user with entries of more than one incarnation (left by a crash between
// a delete and its entry's removal) is counted once, by the incarnation
// that user_likes holds, if any.
func (s *Store) CountReactions(ctx context.Context, contentID string) ([]engagement.RegionTally, error) {
	const op = "count reactions"
	if err := store.CheckCall(ctx, op, validKeyPart, contentID); err != nil {
		return nil, err
	}
	c := &recountCursor{item: xxhash.Sum64String(contentID), pos: make([]bucketPos, s.buckets)}
	if err := s.count(ctx, contentID, c, math.MaxInt); err != nil {
		return nil, fmt.Errorf("cannot %s: %w", op, err)
	}
	store.SortTallies(c.tallies)
	return c.tallies, nil
}
