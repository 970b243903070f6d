package cassandra

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/cespare/xxhash/v2"
	"golang.org/x/sync/errgroup"

	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/store"
)

// The by-content index (user_likes_by_bucket) splits each item's entries
// over the keyspace's index_buckets partitions by a hash of user_id; a
// user's entries are all in one bucket. See docs/data-model.md.

// indexPage is the most entries one query of the index returns. With
// entries clustered by user it also bounds the tombstones one query scans
// to about indexPage × (undone ÷ live) (Cassandra warns at 1,000).
const indexPage = 1000

// minIndexPage is the smallest page a budget can ask for.
const minIndexPage = 16

// bucketOf returns the bucket of userID's entries among n. The function is
// part of the stored layout: it never changes.
func bucketOf(userID string, n int) int {
	return int(xxhash.Sum64String(userID) % uint64(n))
}

// ErrBucketUnreadable is wrapped (with store.ErrUnavailable) by the error
// of a count that could not read a bucket of the item: the count is not
// finished, never taken as zero for that bucket.
var ErrBucketUnreadable = errors.New("a bucket of the by-content index cannot be read")

// bucketPos is a scan's position in one bucket.
type bucketPos struct {
	state uint8  // posStart, posAfter or posDone
	after string // with posAfter: every entry of users up to it is counted
}

const (
	posStart uint8 = iota
	posAfter
	posDone
)

// recountCursor is the state of a count of one item: where each bucket's
// scan stands and what the counted entries add up to. It is a pure value:
// the store keeps nothing between calls.
type recountCursor struct {
	item    uint64 // xxhash64 of the content id
	pos     []bucketPos
	tallies []engagement.RegionTally
}

// cursorMagic starts an encoded recount cursor.
const cursorMagic = "rc1"

// encode returns the cursor as URL-safe base64 text.
func (c *recountCursor) encode() string {
	b := []byte(cursorMagic)
	b = binary.BigEndian.AppendUint64(b, c.item)
	b = binary.AppendUvarint(b, uint64(len(c.pos)))
	for _, p := range c.pos {
		b = append(b, p.state)
		if p.state == posAfter {
			b = binary.AppendUvarint(b, uint64(len(p.after)))
			b = append(b, p.after...)
		}
	}
	b = binary.AppendUvarint(b, uint64(len(c.tallies)))
	for _, t := range c.tallies {
		b = binary.AppendUvarint(b, uint64(len(t.Region)))
		b = append(b, t.Region...)
		b = binary.AppendUvarint(b, uint64(t.Likes))
		b = binary.AppendUvarint(b, uint64(t.Dislikes))
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeRecountCursor parses a cursor made by encode for contentID in a
// keyspace of n buckets.
func decodeRecountCursor(s, contentID string, n int) (*recountCursor, error) {
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || !strings.HasPrefix(string(raw), cursorMagic) {
		return nil, errors.New("not a recount cursor")
	}
	d := decoder{b: raw[len(cursorMagic):]}
	c := &recountCursor{item: d.u64()}
	if !d.ok || c.item != xxhash.Sum64String(contentID) {
		return nil, errors.New("the cursor is of another item")
	}
	if nb := d.uvarint(); !d.ok || nb != uint64(n) {
		return nil, fmt.Errorf("the cursor is of an index of %d buckets, not %d", nb, n)
	}
	c.pos = make([]bucketPos, n)
	for i := range c.pos {
		p := &c.pos[i]
		p.state = d.byte()
		switch p.state {
		case posStart, posDone:
		case posAfter:
			p.after = d.str()
			if d.ok && !validKeyPart(p.after) {
				return nil, errors.New("the cursor names an invalid user id")
			}
		default:
			return nil, errors.New("the cursor has an unknown bucket state")
		}
	}
	nt := d.uvarint()
	if nt > uint64(len(d.b)) {
		return nil, errors.New("the cursor is truncated")
	}
	for range nt {
		t := engagement.RegionTally{Region: d.str(), Likes: d.count(), Dislikes: d.count()}
		if !d.ok {
			break
		}
		c.tallies = append(c.tallies, t)
	}
	if !d.ok || len(d.b) != 0 {
		return nil, errors.New("the cursor is truncated or has trailing bytes")
	}
	return c, nil
}

// decoder reads the fields of a cursor; ok turns false at the first
// malformed one and stays false.
type decoder struct {
	b  []byte
	ok bool
}

func (d *decoder) u64() uint64 {
	if len(d.b) < 8 {
		d.b, d.ok = nil, false
		return 0
	}
	d.ok = true
	v := binary.BigEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

func (d *decoder) uvarint() uint64 {
	if !d.ok {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.ok = false
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) byte() uint8 {
	if !d.ok || len(d.b) == 0 {
		d.ok = false
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoder) str() string {
	n := d.uvarint()
	if !d.ok || n > uint64(len(d.b)) {
		d.ok = false
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

func (d *decoder) count() int64 {
	v := d.uvarint()
	if v > math.MaxInt64 {
		d.ok = false
		return 0
	}
	return int64(v)
}

// done reports whether every bucket has been read to its end.
func (c *recountCursor) done() bool {
	for _, p := range c.pos {
		if p.state != posDone {
			return false
		}
	}
	return true
}

// indexEntry is one by-content entry as a scan reads it.
type indexEntry struct {
	user, action, region string
	incarnation          int64
	// pending marks an entry written or marked before its row's change
	// (preIndex, markIndex) and not yet written after it: its action and
	// region may not be the row's (see "Pending entries" below).
	pending bool
}

// bucketPage is what reading one page of a bucket found.
type bucketPage struct {
	pos     bucketPos
	tallies []engagement.RegionTally
	rows    int
}

// count advances c by reading the item's buckets, up to fanOut pages at a
// time, until every bucket is read or about budget entries were read. On
// an error c holds every page read before it and stays a valid cursor.
func (s *Store) count(ctx context.Context, contentID string, c *recountCursor, budget int) error {
	page := min(indexPage, max(minIndexPage, budget))
	read := 0
	for !c.done() && read < budget {
		var todo []int
		for b, p := range c.pos {
			if p.state != posDone {
				todo = append(todo, b)
			}
		}
		// One page of each unfinished bucket, but no more pages than the
		// budget left allows.
		todo = todo[:min(len(todo), max(1, (budget-read+page-1)/page))]
		pages := make([]bucketPage, len(todo))
		errs := make([]error, len(todo))
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(fanOut)
		for i, b := range todo {
			g.Go(func() error {
				pages[i], errs[i] = s.readBucketPage(gctx, contentID, b, c.pos[b], page)
				if errs[i] != nil {
					errs[i] = fmt.Errorf("bucket %d: %w", b, errs[i])
				}
				return nil
			})
		}
		_ = g.Wait() // the errors are in errs
		var failed []error
		for i, b := range todo {
			if errs[i] != nil {
				failed = append(failed, errs[i])
				continue
			}
			c.pos[b] = pages[i].pos
			for _, t := range pages[i].tallies {
				c.tallies = addTallies(c.tallies, t)
			}
			read += pages[i].rows
		}
		if len(failed) > 0 {
			err := errors.Join(failed...)
			if ctx.Err() != nil {
				return fmt.Errorf("%w (%w)", ctx.Err(), err)
			}
			if errors.Is(err, ErrCorrupt) {
				return err
			}
			return fmt.Errorf("%w: %w: %w", store.ErrUnavailable, ErrBucketUnreadable, err)
		}
	}
	return nil
}

// addTallies adds t to the tally of its region in ts.
func addTallies(ts []engagement.RegionTally, t engagement.RegionTally) []engagement.RegionTally {
	for i := range ts {
		if ts[i].Region == t.Region {
			ts[i].Likes += t.Likes
			ts[i].Dislikes += t.Dislikes
			return ts
		}
	}
	return append(ts, t)
}

// readBucketPage reads the page of bucket b that follows pos and counts its
// entries. A user's entries are adjacent (clustered by user_id, then
// incarnation); a full page may end inside a user's, so its last user is
// left for the next page, whose query starts after the user before it. A
// page holding only one user's entries reads all of that user's.
func (s *Store) readBucketPage(ctx context.Context, contentID string, b int, pos bucketPos, limit int) (bucketPage, error) {
	q := s.query(s.q.indexFirst, contentID, b, limit)
	if pos.state == posAfter {
		q = s.query(s.q.indexAfter, contentID, b, pos.after, limit)
	}
	entries, err := s.scanEntries(ctx, q.Consistency(s.indexCons).PageSize(limit))
	if err != nil {
		return bucketPage{}, err
	}
	out := bucketPage{pos: bucketPos{state: posDone}, rows: len(entries)}
	if len(entries) == limit {
		last := entries[len(entries)-1].user
		keep := len(entries)
		for keep > 0 && entries[keep-1].user == last {
			keep--
		}
		if keep > 0 {
			entries = entries[:keep]
		} else if entries, err = s.scanEntries(ctx, s.query(s.q.indexUser, contentID, b, last).Consistency(s.indexCons).PageSize(indexPage)); err != nil {
			// One user filled the page: the next query reads all of
			// that user's entries.
			return bucketPage{}, err
		}
		out.pos = bucketPos{state: posAfter, after: entries[len(entries)-1].user}
	}
	out.tallies, err = s.tallyEntries(ctx, contentID, entries)
	return out, err
}

// scanEntries runs one query of the index (paging through its result when
// it is longer than its page size) and returns its entries.
func (s *Store) scanEntries(ctx context.Context, q *gocql.Query) ([]indexEntry, error) {
	iter := q.Idempotent(true).IterContext(ctx)
	var (
		out []indexEntry
		e   indexEntry
	)
	for iter.Scan(&e.user, &e.incarnation, &e.action, &e.region, &e.pending) {
		out = append(out, e)
	}
	warnings := iter.Warnings()
	if err := iter.Close(); err != nil {
		return nil, unavailable(err)
	}
	s.counters.IndexPages.Add(1)
	s.counters.IndexRowsRead.Add(int64(len(out)))
	for _, w := range warnings {
		if strings.Contains(strings.ToLower(w), "tombstone") {
			s.counters.TombstoneWarnings.Add(1)
			break
		}
	}
	return out, nil
}

// Pending entries. Every change of a user_likes row is preceded by a
// write to its by-content entry, and refused if that write fails: an
// insert writes the new incarnation's entry marked pending (preIndex), an
// update or an undo marks the entry of the row's incarnation pending
// (markIndex). Once the change applied, the entry is written (putIndex:
// pending false, the row's action and region) or deleted (delIndex). The
// write timestamps (pendingStamp, entryStamp, deleteStamp, by the row
// version each follows) order them whatever order they arrive in. So
// whatever fails after the transaction (the follow-up write, the process),
// every row's incarnation has an entry, and an entry that may not hold its
// row's action and region is pending: the index is complete, and a count
// that reads the row of each pending entry is exact (as of its reads).

// tallyEntries counts entries, which hold whole groups of users' entries
// in clustering order. A user with one entry, not pending, is counted by
// it. Otherwise (a pending entry, or entries of more than one incarnation
// left by a change whose follow-up failed) the user's row is read and
// counted if one of the entries is of its incarnation; an entry of that
// incarnation that does not hold the row's action and region is written
// again from the row (counted in Counters.IndexRepaired). Entries of other
// incarnations count nothing and are left: deleting one safely needs a
// serial read, which the count does not pay for.
func (s *Store) tallyEntries(ctx context.Context, contentID string, entries []indexEntry) ([]engagement.RegionTally, error) {
	var out []engagement.RegionTally
	for i := 0; i < len(entries); {
		j := i + 1
		for j < len(entries) && entries[j].user == entries[i].user {
			j++
		}
		group := entries[i:j]
		i = j
		if len(group) == 1 && !group[0].pending {
			e := &group[0]
			a, ok := engagement.ParseAction(e.action)
			if !ok || a == engagement.ActionNone {
				return nil, fmt.Errorf("%w: by-content entry of %q has action %q", ErrCorrupt, contentID, e.action)
			}
			out = store.AddTally(out, e.region, a)
			continue
		}
		// At serial consistency: a row one data centre has not yet seen
		// change would be counted as it was (see VerifyReactions).
		cur, found, err := s.readReaction(ctx, s.serialCons, group[0].user, contentID)
		if err != nil {
			return nil, err
		}
		if !found || cur.Action == engagement.ActionNone {
			continue
		}
		k := slices.IndexFunc(group, func(e indexEntry) bool { return e.incarnation == int64(cur.Incarnation) })
		if k < 0 {
			continue
		}
		out = store.AddTally(out, cur.Region, cur.Action)
		if e := &group[k]; e.pending || e.action != cur.Action.String() || e.region != cur.Region {
			// The row as read may be behind a change still in flight;
			// its entry's timestamp is then below that change's mark.
			if err := s.putIndex(ctx, &cur); err == nil {
				s.counters.IndexRepaired.Add(1)
			}
		}
	}
	return out, nil
}

// hashID is the item hash a cursor carries.
func hashID(contentID string) uint64 { return xxhash.Sum64String(contentID) }
