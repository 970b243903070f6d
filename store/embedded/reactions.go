package embedded

import (
	"bytes"
	"context"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/store"
)

// GetReaction returns the row of (userID, contentID) and whether it exists.
func (s *Store) GetReaction(ctx context.Context, userID, contentID string) (engagement.Reaction, bool, error) {
	const op = "get reaction"
	if err := store.CheckCall(ctx, op, validKeyPart, userID, contentID); err != nil {
		return engagement.Reaction{}, false, err
	}
	r := engagement.Reaction{UserID: userID, ContentID: contentID}
	var found bool
	err := s.db.View(func(tx *bolt.Tx) error {
		k := key(userID, contentID)
		v := tx.Bucket(bucketLikes).Get(k)
		if v == nil {
			// No row: an undone row's writers, if any.
			var err error
			if u := tx.Bucket(bucketUndone).Get(k); u != nil {
				r.Writers, err = decodeUndone(u)
			}
			return err
		}
		found = true
		return decodeReaction(v, &r)
	})
	if err != nil {
		return engagement.Reaction{}, false, wrap(op, err)
	}
	return r, found, nil
}

// GetReactions returns the rows of userID for contentIDs that exist, keyed by
// content id, read in one transaction. The map is never nil.
func (s *Store) GetReactions(ctx context.Context, userID string, contentIDs []string) (map[string]engagement.Reaction, error) {
	const op = "get reactions"
	if err := store.CheckUserCall(ctx, op, validKeyPart, userID, contentIDs); err != nil {
		return nil, err
	}
	out := make(map[string]engagement.Reaction, len(contentIDs))
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketLikes)
		k := prefix(userID)
		n := len(k)
		for _, c := range contentIDs {
			k = append(k[:n], c...)
			v := b.Get(k)
			if v == nil {
				continue
			}
			r := engagement.Reaction{UserID: userID, ContentID: c}
			if err := decodeReaction(v, &r); err != nil {
				return err
			}
			out[c] = r
		}
		return nil
	})
	if err != nil {
		return nil, wrap(op, err)
	}
	return out, nil
}

// InsertReaction stores r if no row exists for (r.UserID, r.ContentID) and
// reports whether it did. r.Version should be 1 and r.Incarnation fresh.
func (s *Store) InsertReaction(ctx context.Context, r engagement.Reaction) (bool, error) {
	const op = "insert reaction"
	if err := store.CheckRow(ctx, op, validKeyPart, &r); err != nil {
		return false, err
	}
	return s.changeRow(op, &r, func(cur []byte) (bool, error) { return cur == nil, nil }, false)
}

// UpdateReaction replaces the row of (prev.UserID, prev.ContentID) with next
// if the stored row still has prev.Version and prev.Incarnation, and reports
// whether it did. next must name the same row, keep the incarnation and have
// version prev.Version+1.
func (s *Store) UpdateReaction(ctx context.Context, prev, next engagement.Reaction) (bool, error) {
	const op = "update reaction"
	if err := store.CheckRow(ctx, op, validKeyPart, &next); err != nil {
		return false, err
	}
	if err := store.CheckUpdate(&prev, &next); err != nil {
		return false, fmt.Errorf("cannot %s: %w", op, err)
	}
	return s.changeRow(op, &next, func(cur []byte) (bool, error) { return matches(cur, &prev) }, false)
}

// DeleteReaction removes the row of (prev.UserID, prev.ContentID) if it
// still has prev.Version and prev.Incarnation, and reports whether it did.
func (s *Store) DeleteReaction(ctx context.Context, prev engagement.Reaction) (bool, error) {
	const op = "delete reaction"
	if err := store.CheckCall(ctx, op, validKeyPart, prev.UserID, prev.ContentID); err != nil {
		return false, err
	}
	applied, err := s.changeRow(op, &prev, func(cur []byte) (bool, error) { return matches(cur, &prev) }, true)
	if applied {
		// Counted after the commit: the write function may run more than
		// once.
		s.counters.Deletes.Add(1)
	}
	return applied, err
}

// changeRow writes r's row and its by-content index entry (or, with del,
// deletes both) in one group-committed transaction, if cond accepts the
// stored value of the row (nil when there is none), and reports whether it
// did. The write, named r.Token (or a random token), extends the row's
// writers: the stored row's, or for a new row those of the undone row it
// replaces; a delete keeps them in bucketUndone.
func (s *Store) changeRow(op string, r *engagement.Reaction, cond func(cur []byte) (bool, error), del bool) (bool, error) {
	k, ik := key(r.UserID, r.ContentID), key(r.ContentID, r.UserID)
	token := r.Token
	if token == 0 {
		token = engagement.NewToken(time.Now())
	}
	var iv []byte
	if !del {
		iv = encodeIndex(r)
	}
	var applied bool
	err := s.write(func(tx *bolt.Tx) error {
		applied = false
		b, index, undone := tx.Bucket(bucketLikes), tx.Bucket(bucketByContent), tx.Bucket(bucketUndone)
		cur := b.Get(k)
		ok, err := cond(cur)
		if err != nil || !ok {
			return err
		}
		var row engagement.Reaction
		if cur != nil {
			err = decodeReaction(cur, &row)
		} else if u := undone.Get(k); u != nil {
			row.Writers, err = decodeUndone(u)
		}
		if err != nil {
			return err
		}
		writers := engagement.NextWriters(row.Writers, token, time.Now())
		switch {
		case del:
			if err = b.Delete(k); err == nil {
				err = index.Delete(ik)
			}
			if err == nil {
				err = undone.Put(k, encodeUndone(writers))
			}
		default:
			next := *r
			next.Writers = writers
			if err = b.Put(k, encodeReaction(&next)); err == nil {
				err = index.Put(ik, iv)
			}
			if err == nil && cur == nil {
				err = undone.Delete(k)
			}
		}
		applied = err == nil
		return err
	})
	if err != nil {
		return false, wrap(op, err)
	}
	return applied, nil
}

// matches reports whether the stored value v is a row with prev's version
// and incarnation.
func matches(v []byte, prev *engagement.Reaction) (bool, error) {
	if v == nil {
		return false, nil
	}
	var cur engagement.Reaction
	if err := decodeReaction(v, &cur); err != nil {
		return false, err
	}
	return cur.Version == prev.Version && cur.Incarnation == prev.Incarnation, nil
}

// CountReactions counts the reactions on contentID by the region that
// recorded each row, from the by-content index. Regions are sorted; an item
// without reactions has none.
func (s *Store) CountReactions(ctx context.Context, contentID string) ([]engagement.RegionTally, error) {
	const op = "count reactions"
	if err := store.CheckCall(ctx, op, validKeyPart, contentID); err != nil {
		return nil, err
	}
	var out []engagement.RegionTally
	err := s.db.View(func(tx *bolt.Tx) error {
		out = out[:0]
		p := prefix(contentID)
		c := tx.Bucket(bucketByContent).Cursor()
		for k, v := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, v = c.Next() {
			a, region, err := decodeIndex(v)
			if err != nil {
				return err
			}
			out = store.AddTally(out, region, a)
		}
		return nil
	})
	if err != nil {
		return nil, wrap(op, err)
	}
	store.SortTallies(out)
	return out, nil
}
