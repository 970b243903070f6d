package embedded

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"math"

	bolt "go.etcd.io/bbolt"

	"github.com/cespare/xxhash/v2"

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
// CountReactions does, for the recount job, and resumably: cursor "" starts
// a count, a call reads up to budget index entries in one transaction and
// returns the tallies so far and the cursor to pass next ("" when the count
// is finished). The cursor carries the partial tallies and the last index
// key read, so a count costs one read per reaction however it is split.
// The by-content index changes in the same transaction as the rows, so a
// finished count is exact: complete is always true.
//
// A cursor of another item, or a budget below 1, gives ErrInvalid.
func (s *Store) RecountReactions(ctx context.Context, contentID, cursor string, budget int) (tallies []engagement.RegionTally, next string, complete bool, err error) {
	const op = "recount reactions"
	if err := store.CheckCall(ctx, op, validKeyPart, contentID); err != nil {
		return nil, "", false, err
	}
	if budget < 1 {
		return nil, "", false, invalid(op, "budget %d: want 1 or more entries", budget)
	}
	var after string
	if cursor != "" {
		var ok bool
		if after, tallies, ok = decodeRecountCursor(cursor, contentID); !ok {
			return nil, "", false, invalid(op, "cursor %q was not made by RecountReactions of %q", cursor, contentID)
		}
	}
	var (
		out  []engagement.RegionTally
		more bool
	)
	err = s.db.View(func(tx *bolt.Tx) error {
		out, more = append(out[:0], tallies...), false
		p := prefix(contentID)
		c := tx.Bucket(bucketByContent).Cursor()
		k, v := c.Seek(p)
		if after != "" {
			k, v = c.Seek(key(contentID, after))
			if k != nil && bytes.Equal(k, key(contentID, after)) {
				k, v = c.Next()
			}
		}
		for n := 0; k != nil && bytes.HasPrefix(k, p); k, v = c.Next() {
			if n == budget {
				more = true
				return nil
			}
			a, region, err := decodeIndex(v)
			if err != nil {
				return err
			}
			out = store.AddTally(out, region, a)
			n++
			after = string(k[len(p):])
		}
		return nil
	})
	if err != nil {
		return nil, "", false, wrap(op, err)
	}
	if more {
		// The cursor names the last user counted.
		next = encodeRecountCursor(contentID, after, out)
	}
	store.SortTallies(out)
	return out, next, true, nil
}

// recountMagic starts an encoded recount cursor.
const recountMagic = "rc1"

// encodeRecountCursor returns a cursor after user of contentID's index with
// tallies so far: base64 of the magic, the id's hash, the user and the
// tallies.
func encodeRecountCursor(contentID, user string, tallies []engagement.RegionTally) string {
	b := []byte(recountMagic)
	b = binary.BigEndian.AppendUint64(b, xxhash.Sum64String(contentID))
	b = binary.AppendUvarint(b, uint64(len(user)))
	b = append(b, user...)
	for _, t := range tallies {
		b = binary.AppendUvarint(b, uint64(len(t.Region)))
		b = append(b, t.Region...)
		b = binary.AppendUvarint(b, uint64(t.Likes))
		b = binary.AppendUvarint(b, uint64(t.Dislikes))
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeRecountCursor parses a cursor made by encodeRecountCursor for
// contentID.
func decodeRecountCursor(cursor, contentID string) (string, []engagement.RegionTally, bool) {
	b, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil || len(b) < len(recountMagic)+8 || string(b[:len(recountMagic)]) != recountMagic {
		return "", nil, false
	}
	b = b[len(recountMagic):]
	if binary.BigEndian.Uint64(b) != xxhash.Sum64String(contentID) {
		return "", nil, false
	}
	b = b[8:]
	str := func() (string, bool) {
		n, w := binary.Uvarint(b)
		if w <= 0 || n > uint64(len(b)-w) {
			return "", false
		}
		s := string(b[w : w+int(n)])
		b = b[w+int(n):]
		return s, true
	}
	num := func() (int64, bool) {
		n, w := binary.Uvarint(b)
		if w <= 0 || n > math.MaxInt64 {
			return 0, false
		}
		b = b[w:]
		return int64(n), true
	}
	user, ok := str()
	if !ok || !validKeyPart(user) {
		return "", nil, false
	}
	var tallies []engagement.RegionTally
	for len(b) > 0 {
		region, ok1 := str()
		likes, ok2 := num()
		dislikes, ok3 := num()
		if !ok1 || !ok2 || !ok3 {
			return "", nil, false
		}
		tallies = append(tallies, engagement.RegionTally{Region: region, Likes: likes, Dislikes: dislikes})
	}
	return user, tallies, true
}
