package store

import (
	"errors"
	"fmt"

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
