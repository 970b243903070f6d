package embedded

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/store"
)

// ReadStats returns every Stats row (global and regional) of each of
// contentIDs, read in one transaction, keyed by content id with rows sorted by
// scope. Ids without rows are absent. The map is never nil.
func (s *Store) ReadStats(ctx context.Context, contentIDs []string) (map[string][]engagement.Stats, error) {
	const op = "read stats"
	if err := store.CheckCall(ctx, op, validKeyPart, contentIDs...); err != nil {
		return nil, err
	}
	out := make(map[string][]engagement.Stats, len(contentIDs))
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketStats).Cursor()
		var p []byte
		for _, id := range contentIDs {
			if _, seen := out[id]; seen {
				continue
			}
			p = append(append(p[:0], id...), sep)
			var rows []engagement.Stats
			for k, v := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, v = c.Next() {
				row := engagement.Stats{ContentID: id, Scope: string(k[len(p):])}
				if err := decodeStats(v, &row); err != nil {
					return fmt.Errorf("row %q: %w", k, err)
				}
				rows = append(rows, row)
			}
			if rows != nil {
				out[id] = rows
			}
		}
		return nil
	})
	if err != nil {
		return nil, wrap(op, err)
	}
	return out, nil
}

// WriteStats stores rows as given, each replacing the row of its (ContentID,
// Scope), all in one transaction: either every row is written or none is.
func (s *Store) WriteStats(ctx context.Context, rows []engagement.Stats) error {
	const op = "write stats"
	if err := store.CheckStats(ctx, op, validKeyPart, rows, false); err != nil || len(rows) == 0 {
		return err
	}
	keys := make([][]byte, len(rows))
	vals := make([][]byte, len(rows))
	for i := range rows {
		keys[i], vals[i] = key(rows[i].ContentID, rows[i].Scope), encodeStats(&rows[i])
	}
	err := s.write(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketStats)
		for i := range keys {
			if err := b.Put(keys[i], vals[i]); err != nil {
				return err
			}
		}
		return nil
	})
	return wrap(op, err)
}

// PutTrending stores t, replacing the list of t.TrendingKey (one
// partition's list).
func (s *Store) PutTrending(ctx context.Context, t engagement.Trending) error {
	const op = "put trending"
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("cannot %s: %w", op, err)
	}
	k, err := trendingKey(op, t.TrendingKey)
	if err != nil {
		return err
	}
	for i := range t.Items {
		if !validKeyPart(t.Items[i].ContentID) {
			return invalid(op, "item %d: content %q", i, t.Items[i].ContentID)
		}
	}
	v := encodeTrending(&t)
	return wrap(op, s.write(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketTrending).Put(k, v)
	}))
}

// GetTrending returns the list of k (one partition's) and whether it
// exists.
func (s *Store) GetTrending(ctx context.Context, k engagement.TrendingKey) (engagement.Trending, bool, error) {
	const op = "get trending"
	if err := ctx.Err(); err != nil {
		return engagement.Trending{}, false, fmt.Errorf("cannot %s: %w", op, err)
	}
	bk, err := trendingKey(op, k)
	if err != nil {
		return engagement.Trending{}, false, err
	}
	t := engagement.Trending{TrendingKey: k}
	var found bool
	err = s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketTrending).Get(bk)
		if v == nil {
			return nil
		}
		found = true
		return decodeTrending(v, &t)
	})
	if err != nil || !found {
		return engagement.Trending{}, false, wrap(op, err)
	}
	return t, true, nil
}

// ReadTrending returns the lists of every partition of (scope, counter,
// window), read in one transaction and sorted by partition; none is an
// empty slice.
func (s *Store) ReadTrending(ctx context.Context, scope, counter, window string) ([]engagement.Trending, error) {
	const op = "read trending"
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("cannot %s: %w", op, err)
	}
	base, err := trendingKey(op, engagement.TrendingKey{Scope: scope, Counter: counter, Window: window})
	if err != nil {
		return nil, err
	}
	out := []engagement.Trending{}
	err = s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketTrending).Cursor()
		for k, v := c.Seek(base); k != nil && bytes.HasPrefix(k, base); k, v = c.Next() {
			t := engagement.Trending{TrendingKey: engagement.TrendingKey{Scope: scope, Counter: counter, Window: window}}
			switch {
			case len(k) == len(base):
			case len(k) == len(base)+5 && k[len(base)] == sep:
				t.Partition = binary.BigEndian.Uint32(k[len(base)+1:])
			case k[len(base)] == sep:
				return fmt.Errorf("%w: trending key %q", ErrCorrupt, k)
			default:
				return nil // a longer window name: past every partition of this one
			}
			if err := decodeTrending(v, &t); err != nil {
				return fmt.Errorf("row %q: %w", k, err)
			}
			out = append(out, t)
		}
		return nil
	})
	if err != nil {
		return nil, wrap(op, err)
	}
	return out, nil
}

// trendingKey is scope 0x00 counter 0x00 window, followed for a partition
// above 0 by 0x00 and the partition as 4 big-endian bytes. Partition 0
// keeps the bare key, the layout of a store written before lists were kept
// per partition (and of a one-partition system), and the partitions of one
// list sort in order right after it.
func trendingKey(op string, k engagement.TrendingKey) ([]byte, error) {
	if !validKeyPart(k.Scope) || !validKeyPart(k.Counter) || !validKeyPart(k.Window) {
		return nil, invalid(op, "scope %q, counter %q, window %q", k.Scope, k.Counter, k.Window)
	}
	b := key(k.Scope, k.Counter, k.Window)
	if k.Partition > 0 {
		b = binary.BigEndian.AppendUint32(append(b, sep), k.Partition)
	}
	return b, nil
}
