package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/edgecount/edgecount/engagement"
)

// ErrInvalid is wrapped by a store's error for a call that breaks the
// write contract (an id the store cannot key, a row without an action, an
// update that is not the next version of its row). Such a call writes
// nothing; it is a programming error, never a conflict.
var ErrInvalid = errors.New("invalid store call")

// ErrUnavailable is returned (wrapped) when the backing database cannot be
// reached or did not answer in time. Callers answer 503 and retry later; the
// operation may or may not have been applied only where a method says so.
var ErrUnavailable = errors.New("store unavailable")

// ErrRefused is returned (wrapped, together with ErrUnavailable) by a
// conditional reaction write that the database refused before running any
// part of it: never sent, or turned down by the coordinator for want of
// live replicas before anything was proposed. Such a write did not apply
// and no copy of it can apply later, so the caller may take "not applied"
// as final instead of settling it from the row. A store returns it only
// where it can prove that; every other failure leaves the outcome open.
var ErrRefused = errors.New("write refused before it ran")

// ErrContention is returned (wrapped, together with ErrUnavailable) by a
// conditional reaction write that timed out racing other writes of the
// same row (a Paxos contention timeout), and whose outcome could not be
// settled at once. Like any timeout it leaves the outcome open (the caller
// settles it); unlike an outage it is the writers' own race, so the
// caller answers it as a conflict, not as the store being down. A serial
// read of a reaction row (GetReactionSerial) that timed out so returns it
// too; a read leaves no outcome open.
var ErrContention = errors.New("write timed out in contention with other writes of the row")

// CheckAction reports whether r can be stored as a row: a stored row holds
// a like or a dislike (no row means "none").
func CheckAction(r *engagement.Reaction) error {
	if r.Action != engagement.ActionLike && r.Action != engagement.ActionDislike {
		return fmt.Errorf("%w: action %v cannot be stored", ErrInvalid, r.Action)
	}
	return nil
}

// CheckUpdate reports whether next may replace prev: it must name the same
// row, keep its incarnation and carry version prev.Version+1.
func CheckUpdate(prev, next *engagement.Reaction) error {
	switch {
	case next.UserID != prev.UserID || next.ContentID != prev.ContentID:
		return fmt.Errorf("%w: next row (%q, %q) is not prev row (%q, %q)", ErrInvalid,
			next.UserID, next.ContentID, prev.UserID, prev.ContentID)
	case next.Incarnation != prev.Incarnation:
		return fmt.Errorf("%w: incarnation changes from %d to %d", ErrInvalid, prev.Incarnation, next.Incarnation)
	case next.Version != prev.Version+1:
		return fmt.Errorf("%w: version goes from %d to %d", ErrInvalid, prev.Version, next.Version)
	}
	return nil
}

// CheckCall is the check a store method makes before it touches the
// database: ctx must not be done, and validKey (the store's own rule for
// what it can key) must accept every id. The error, ctx's or one wrapping
// ErrInvalid, says "cannot <op>".
func CheckCall(ctx context.Context, op string, validKey func(id string) bool, ids ...string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("cannot %s: %w", op, err)
	}
	for _, id := range ids {
		if !validKey(id) {
			return fmt.Errorf("cannot %s: %w: id %q cannot be a key", op, ErrInvalid, id)
		}
	}
	return nil
}

// CheckUserCall is CheckCall for a method on userID's rows of contentIDs
// (GetReactions).
func CheckUserCall(ctx context.Context, op string, validKey func(id string) bool, userID string, contentIDs []string) error {
	if err := CheckCall(ctx, op, validKey, userID); err != nil {
		return err
	}
	return CheckCall(ctx, op, validKey, contentIDs...)
}

// CheckRow is CheckCall for a method that writes row r: its user and
// content ids must be keys, and it must hold an action a row can store
// (CheckAction).
func CheckRow(ctx context.Context, op string, validKey func(id string) bool, r *engagement.Reaction) error {
	if err := CheckCall(ctx, op, validKey, r.UserID, r.ContentID); err != nil {
		return err
	}
	if err := CheckAction(r); err != nil {
		return fmt.Errorf("cannot %s: %w", op, err)
	}
	return nil
}

// MaxScanLimit bounds the rows one ScanStats call of any store returns.
const MaxScanLimit = 10_000

// CheckScan is the check a ScanStats makes before it reads: ctx must not
// be done, and limit must be in 1..MaxScanLimit (else ErrInvalid). The
// error says "cannot <op>".
func CheckScan(ctx context.Context, op string, limit int) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("cannot %s: %w", op, err)
	}
	if limit < 1 || limit > MaxScanLimit {
		return fmt.Errorf("cannot %s: %w: limit %d is not in 1..%d", op, ErrInvalid, limit, MaxScanLimit)
	}
	return nil
}

// AddTally counts one reaction a (a like or a dislike) recorded in region
// into tallies, as CountReactions and RecountReactions return them, and
// returns the extended slice. An item has reactions from a handful of
// regions, so a linear search beats a map; a region of bytes is converted
// only when it is new.
func AddTally[R string | []byte](tallies []engagement.RegionTally, region R, a engagement.Action) []engagement.RegionTally {
	i := slices.IndexFunc(tallies, func(t engagement.RegionTally) bool { return t.Region == string(region) })
	if i < 0 {
		tallies = append(tallies, engagement.RegionTally{Region: string(region)})
		i = len(tallies) - 1
	}
	if a == engagement.ActionLike {
		tallies[i].Likes++
	} else {
		tallies[i].Dislikes++
	}
	return tallies
}

// SortTallies sorts tallies by region, the order stores return them in.
func SortTallies(tallies []engagement.RegionTally) {
	slices.SortFunc(tallies, func(a, b engagement.RegionTally) int { return cmp.Compare(a.Region, b.Region) })
}

// CheckStats is the check a WriteStats makes before it writes: ctx must not
// be done, and validKey must accept every row's content id and scope and,
// with counterKeys (a store that keys counters by name), every counter
// name. The error, ctx's or one wrapping ErrInvalid, says "cannot <op>".
func CheckStats(ctx context.Context, op string, validKey func(id string) bool, rows []engagement.Stats, counterKeys bool) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("cannot %s: %w", op, err)
	}
	for i := range rows {
		r := &rows[i]
		if !validKey(r.ContentID) || !validKey(r.Scope) {
			return fmt.Errorf("cannot %s: %w: row %d: content %q, scope %q", op, ErrInvalid, i, r.ContentID, r.Scope)
		}
		if !counterKeys {
			continue
		}
		for name := range r.Counters {
			if !validKey(name) {
				return fmt.Errorf("cannot %s: %w: row %d: counter %q", op, ErrInvalid, i, name)
			}
		}
	}
	return nil
}
