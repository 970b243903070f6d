package cassandra

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/cespare/xxhash/v2"
	"golang.org/x/sync/errgroup"

	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/store"
)

// MaxScanLimit bounds the rows one ScanStats call returns.
const MaxScanLimit = store.MaxScanLimit

// cursorVersion is the first byte of a ScanStats cursor.
const cursorVersion = 1

// ScanStats returns up to limit ContentStats rows that follow cursor in
// scan order — partitions by token, the rows of one partition by scope —
// and the cursor to pass next. An empty cursor starts at the lowest token;
// an empty next cursor means the scan passed the highest token (the next
// call with "" starts over).
//
// It pages by token range, so a scan resumes where it stopped whatever was
// written meanwhile, and uses no server-side paging state (which does not
// survive a node restart or an upgrade). The cursor holds the token, content
// id and scope of the last row returned: a call first reads the rest of that
// partition (scope > last scope), then the partitions above its token, so
// an item whose rows span two calls is neither skipped nor repeated. Two
// different ids with the same 64-bit Murmur3 token would make the scan skip
// the second one's rows after a page ends inside the first; with random
// 64-bit tokens this is negligible. Rows are read at Config.Consistency;
// any filter (by updated_at, say) is the caller's.
//
// A cursor that no ScanStats call could have returned, or a limit outside
// 1..MaxScanLimit, gives ErrInvalid.
func (s *Store) ScanStats(ctx context.Context, cursor string, limit int) ([]engagement.Stats, string, error) {
	const op = "scan stats"
	if err := store.CheckScan(ctx, op, limit); err != nil {
		return nil, "", err
	}
	from := scanPos{token: math.MinInt64}
	if cursor != "" {
		var ok bool
		if from, ok = decodeCursor(cursor); !ok {
			return nil, "", invalidCall(op, "cursor %q was not made by ScanStats", cursor)
		}
	}
	var (
		rows []engagement.Stats
		last scanPos
		err  error
	)
	if cursor != "" {
		rows, last, err = s.scanPage(ctx, rows, limit, s.q.scanStatsItem, from.id, from.scope, limit)
		if err != nil {
			return nil, "", fmt.Errorf("cannot %s: %w", op, err)
		}
	}
	end := false
	if n := limit - len(rows); n > 0 {
		before := len(rows)
		var l scanPos
		rows, l, err = s.scanPage(ctx, rows, n, s.q.scanStats, from.token, n)
		if err != nil {
			return nil, "", fmt.Errorf("cannot %s: %w", op, err)
		}
		if len(rows) > before {
			last = l
		}
		end = len(rows)-before < n
	}
	if end || len(rows) == 0 {
		return rows, "", nil
	}
	return rows, last.encode(), nil
}

// scanPage runs one scan statement (one page of at most limit rows) and
// appends its rows to rows; last is the position of the last row read.
func (s *Store) scanPage(ctx context.Context, rows []engagement.Stats, limit int, stmt string, values ...any) ([]engagement.Stats, scanPos, error) {
	iter := s.query(stmt, values...).PageSize(limit).Idempotent(true).IterContext(ctx)
	var (
		last scanPos
		row  engagement.Stats
		raw  rawStats
	)
	for iter.Scan(&last.token, &row.ContentID, &row.Scope, &row.Likes, &row.Dislikes, &row.Counters, &raw.updatedAt, &raw.lastSeq) {
		raw.decode(&row)
		rows = append(rows, row)
		last.id, last.scope = row.ContentID, row.Scope
		row = engagement.Stats{}
	}
	if err := iter.Close(); err != nil {
		return nil, scanPos{}, unavailable(err)
	}
	return rows, last, nil
}

// scanPos is a position in the scan: a row's partition token and key.
type scanPos struct {
	token     int64
	id, scope string
}

// encode returns the cursor of p: a version byte, the token (8 bytes, big
// endian), the id's length (uvarint), the id and the scope.
func (p scanPos) encode() string {
	b := make([]byte, 0, 1+8+2+len(p.id)+len(p.scope))
	b = append(b, cursorVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(p.token))
	b = binary.AppendUvarint(b, uint64(len(p.id)))
	b = append(b, p.id...)
	b = append(b, p.scope...)
	return string(b)
}

// decodeCursor parses a cursor made by scanPos.encode.
func decodeCursor(c string) (scanPos, bool) {
	b := []byte(c)
	if len(b) < 1+8+1 || b[0] != cursorVersion {
		return scanPos{}, false
	}
	p := scanPos{token: int64(binary.BigEndian.Uint64(b[1:9]))}
	n, w := binary.Uvarint(b[9:])
	rest := b[9+max(w, 0):]
	if w <= 0 || n > uint64(len(rest)) {
		return scanPos{}, false
	}
	p.id, p.scope = string(rest[:n]), string(rest[n:])
	if !validKeyPart(p.id) || !validKeyPart(p.scope) {
		return scanPos{}, false
	}
	return p, true
}

// RecountReactions counts the reactions on contentID by region for the
// recount job, from the by-content entries alone (one read per reaction),
// as CountReactions does, and resumably: cursor "" starts a count, and a
// call reads about budget entries (at least one page of every bucket it
// touches) before it returns the tallies so far and the cursor to pass
// next; a next of "" means the count is finished and tallies are the
// item's. The cursor carries the partial tallies and each bucket's
// position, so a count can stop (a deadline, a restart) and continue. On
// an error, next is still a cursor that resumes after every page read:
// a bucket that cannot be read (ErrBucketUnreadable, wrapped with
// store.ErrUnavailable) is never counted as empty.
//
// complete reports that a finished count is exact: the keyspace's index
// is complete (IndexComplete: every change wrote its pending entry before
// it applied, so no row lacks an entry, and a pending entry is counted by
// its row; see index.go). On an older keyspace not yet repaired
// (RepairIndex) the entry of a change whose follow-up write failed
// (ErrIndexBehind) may be missing or stale, and complete is false; see
// docs/recount.md for how the job handles each.
//
// A cursor of another item or keyspace layout, or a budget below 1, gives
// ErrInvalid.
func (s *Store) RecountReactions(ctx context.Context, contentID, cursor string, budget int) (tallies []engagement.RegionTally, next string, complete bool, err error) {
	const op = "recount reactions"
	if err := store.CheckCall(ctx, op, validKeyPart, contentID); err != nil {
		return nil, "", false, err
	}
	if budget < 1 {
		return nil, "", false, invalidCall(op, "budget %d: want 1 or more entries", budget)
	}
	c := &recountCursor{item: xxhash.Sum64String(contentID), pos: make([]bucketPos, s.buckets)}
	if cursor != "" {
		if c, err = decodeRecountCursor(cursor, contentID, s.buckets); err != nil {
			return nil, "", false, invalidCall(op, "cursor: %v", err)
		}
	}
	err = s.count(ctx, contentID, c, budget)
	store.SortTallies(c.tallies)
	if !c.done() {
		next = c.encode()
	}
	if err != nil {
		return c.tallies, next, false, fmt.Errorf("cannot %s: %w", op, err)
	}
	return c.tallies, next, next == "" && s.IndexComplete(ctx), nil
}

// VerifyReactions counts the reactions on contentID by region by the
// user_likes rows rather than by the by-content entries: for every user
// with an entry it reads the user's row (at Config.SerialConsistency, up
// to fanOut at a time) and counts the row's action and region, or nothing
// for a marker or no row. A stale entry (a follow-up write that failed
// after an update or an undo) thus counts as what user_likes holds; a
// missing one cannot be found from the item. The tallies never count a
// reaction that is not in user_likes: each cell is at most the true one.
// That needs the row as Paxos has it: a LOCAL_QUORUM read in one data
// centre can return a row another DC's transaction has since replaced (its
// commit reaches this DC later, by a hint after an outage), and counting
// that old row would raise a correct total. It reads two rows per
// reaction; the recount job calls it only before it raises a total.
func (s *Store) VerifyReactions(ctx context.Context, contentID string) ([]engagement.RegionTally, error) {
	const op = "verify reactions"
	if err := store.CheckCall(ctx, op, validKeyPart, contentID); err != nil {
		return nil, err
	}
	var out []engagement.RegionTally
	for b := range s.buckets {
		pos := bucketPos{}
		for pos.state != posDone {
			q := s.query(s.q.indexFirst, contentID, b, indexPage)
			if pos.state == posAfter {
				q = s.query(s.q.indexAfter, contentID, b, pos.after, indexPage)
			}
			entries, err := s.scanEntries(ctx, q.PageSize(indexPage))
			if err != nil {
				return nil, fmt.Errorf("cannot %s: %w: bucket %d: %w", op, ErrBucketUnreadable, b, err)
			}
			pos.state = posDone
			if len(entries) == indexPage {
				pos = bucketPos{state: posAfter, after: entries[len(entries)-1].user}
			}
			// A user is read once, whatever its entries (the next page
			// starts after the last user of this one).
			users := make([]string, 0, len(entries))
			for _, e := range entries {
				if len(users) == 0 || users[len(users)-1] != e.user {
					users = append(users, e.user)
				}
			}
			rows := make([]engagement.Reaction, len(users))
			found := make([]bool, len(users))
			g, gctx := errgroup.WithContext(ctx)
			g.SetLimit(fanOut)
			for i, u := range users {
				g.Go(func() error {
					var err error
					rows[i], found[i], err = s.readReaction(gctx, s.serialCons, u, contentID)
					return err
				})
			}
			if err := g.Wait(); err != nil {
				return nil, fmt.Errorf("cannot %s: %w", op, err)
			}
			for i := range users {
				if found[i] && rows[i].Action != engagement.ActionNone {
					out = store.AddTally(out, rows[i].Region, rows[i].Action)
				}
			}
		}
	}
	store.SortTallies(out)
	return out, nil
}
