package cassandra

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"

	"golang.org/x/sync/errgroup"

	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/store"
)

// MaxScanLimit bounds the rows one ScanStats call returns.
const MaxScanLimit = store.MaxScanLimit

// recountChunk is how many users' rows RecountReactions reads before it
// tallies them (at most fanOut at a time).
const recountChunk = 256

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
// recount job, by the user_likes rows rather than by the by-content
// entries: for every user that has an entry it reads the user's row (at
// Config.Consistency, up to fanOut at a time) and counts the row's action
// and region, or nothing when the row is a marker or gone. An entry left
// stale because its follow-up write failed (ErrIndexBehind after an update
// or an undo) therefore counts as what user_likes holds. Entries are read,
// never changed.
//
// complete is always false: the by-content entry of an insert whose
// follow-up write failed does not exist, and the user_likes row it should
// name cannot be found from the item's side without scanning every user.
// The tallies are thus exact for every user with an entry and never count
// a reaction that is not in user_likes: each region's likes and dislikes
// are at most the true ones. The recount job relies on exactly this (it
// raises totals to such a count, and lowers them only when told to).
func (s *Store) RecountReactions(ctx context.Context, contentID string) (tallies []engagement.RegionTally, complete bool, err error) {
	const op = "recount reactions"
	if err := store.CheckCall(ctx, op, validKeyPart, contentID); err != nil {
		return nil, false, err
	}
	var (
		out   []engagement.RegionTally
		users = make([]string, 0, recountChunk)
		rows  = make([]engagement.Reaction, recountChunk)
		found = make([]bool, recountChunk)
	)
	tally := func() error {
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(fanOut)
		for i, u := range users {
			g.Go(func() error {
				r, ok, err := s.readReaction(gctx, s.cons, u, contentID)
				rows[i], found[i] = r, ok
				return err
			})
		}
		if err := g.Wait(); err != nil {
			return err
		}
		for i := range users {
			r := &rows[i]
			if !found[i] || r.Action == engagement.ActionNone {
				continue
			}
			out = store.AddTally(out, r.Region, r.Action)
		}
		users = users[:0]
		return nil
	}
	iter := s.query(s.q.countIndex, contentID).Idempotent(true).IterContext(ctx)
	var (
		user, action, region, prev string
		incarnation                int64
	)
	for iter.Scan(&user, &incarnation, &action, &region) {
		// Entries are clustered by user: a user with entries of several
		// incarnations is read once.
		if user == prev {
			continue
		}
		prev = user
		if len(users) == recountChunk {
			if err := tally(); err != nil {
				_ = iter.Close() // the read error is the one to report
				return nil, false, fmt.Errorf("cannot %s: %w", op, err)
			}
		}
		users = append(users, user)
	}
	if err := iter.Close(); err != nil {
		return nil, false, fmt.Errorf("cannot %s: %w", op, unavailable(err))
	}
	if err := tally(); err != nil {
		return nil, false, fmt.Errorf("cannot %s: %w", op, err)
	}
	store.SortTallies(out)
	return out, false, nil
}
