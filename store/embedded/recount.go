package embedded

import (
	"bytes"
	"context"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/store"
)

// MaxScanLimit bounds the rows one ScanStats call returns.
const MaxScanLimit = store.MaxScanLimit

// ScanStats returns up to limit ContentStats rows that follow cursor in key
// order (content id, then scope), read in one transaction, and the cursor
// to pass next. An empty cursor starts at the first row; an empty next
// cursor means the scan reached the last row (the next call with "" starts
// over). The cursor is the key of the last row returned, so a scan resumes
// where it stopped even when rows were written or removed in between: rows
// written behind it are seen on the next round. The rows of one item are
// adjacent but may be split between two calls.
//
// A cursor that no ScanStats call could have returned, or a limit outside
// 1..MaxScanLimit, gives ErrInvalid.
func (s *Store) ScanStats(ctx context.Context, cursor string, limit int) ([]engagement.Stats, string, error) {
	const op = "scan stats"
	if err := store.CheckScan(ctx, op, limit); err != nil {
		return nil, "", err
	}
	if cursor != "" {
		if _, _, ok := splitStatsKey([]byte(cursor)); !ok {
			return nil, "", invalid(op, "cursor %q is not a stats key", cursor)
		}
	}
	var (
		rows []engagement.Stats
		next string
	)
	err := s.db.View(func(tx *bolt.Tx) error {
		rows, next = rows[:0], ""
		c := tx.Bucket(bucketStats).Cursor()
		var k, v []byte
		if cursor == "" {
			k, v = c.First()
		} else if k, v = c.Seek([]byte(cursor)); k != nil && bytes.Equal(k, []byte(cursor)) {
			k, v = c.Next()
		}
		for ; k != nil && len(rows) < limit; k, v = c.Next() {
			id, scope, ok := splitStatsKey(k)
			if !ok {
				return fmt.Errorf("%w: stats key %q", ErrCorrupt, k)
			}
			row := engagement.Stats{ContentID: id, Scope: scope}
			if err := decodeStats(v, &row); err != nil {
				return fmt.Errorf("row %q: %w", k, err)
			}
			rows = append(rows, row)
		}
		if k != nil && len(rows) > 0 {
			last := &rows[len(rows)-1]
			next = string(key(last.ContentID, last.Scope))
		}
		return nil
	})
	if err != nil {
		return nil, "", wrap(op, err)
	}
	return rows, next, nil
}

// splitStatsKey splits a content_stats key into content id and scope.
func splitStatsKey(k []byte) (id, scope string, ok bool) {
	i := bytes.IndexByte(k, sep)
	if i < 0 {
		return "", "", false
	}
	id, scope = string(k[:i]), string(k[i+1:])
	return id, scope, validKeyPart(id) && validKeyPart(scope)
}

// RecountReactions counts the reactions on contentID by region, as
// CountReactions does, for the recount job. The by-content index changes in
// the same transaction as the rows, so the count is exact: complete is
// always true.
func (s *Store) RecountReactions(ctx context.Context, contentID string) (tallies []engagement.RegionTally, complete bool, err error) {
	tallies, err = s.CountReactions(ctx, contentID)
	if err != nil {
		return nil, false, err
	}
	return tallies, true, nil
}
