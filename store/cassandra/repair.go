package cassandra

import (
	"context"
	"fmt"
	"math"

	"github.com/edgecount/edgecount/engagement"
)

// RepairReport is what RepairIndex did.
type RepairReport struct {
	// Rows is the user_likes rows read, Entries the by-content entries.
	Rows, Entries int64
	// Written counts entries written from their row: missing, or holding
	// another action or region than the row (a follow-up write lost
	// before pending entries, or an entry damaged by hand).
	Written int64
	// Removed counts entries deleted: of an incarnation no row holds any
	// more (an undo's follow-up lost), or in a bucket that is not their
	// user's.
	Removed int64
}

// removedStamp is the write timestamp of RepairIndex's deletions: above
// every write an entry's key can ever take, since the keys it deletes are
// never written again (an undone incarnation never comes back, and a
// wrong bucket is never a user's).
const removedStamp = math.MaxInt64 / 2

// RepairIndex brings the by-content index in line with user_likes and
// records it complete (IndexComplete), in two scans:
//
//  1. every live user_likes row without an entry of its incarnation gets
//     its entry written from the row (putIndex, at the row version's
//     timestamp: a change made meanwhile wins);
//  2. every entry that is not pending is checked against its row, read at
//     serial consistency: an entry in a bucket not its user's, or of an
//     incarnation the row no longer holds, is deleted; one of the row's
//     incarnation that holds another action or region is written again
//     from the row, or, when it was written outside the timestamp scheme
//     (by hand, at a wall-clock timestamp no version's write can pass),
//     marked pending for good, so that counts read its row. A pending
//     entry is left: it may belong to a change in flight, and counts read
//     its row anyway.
//
// It is idempotent and safe while the store serves writes. Run it once
// every writer runs this version (a writer that does not write pending
// entries can leave a row without an entry after the scan passed it): a
// keyspace made by an older version then becomes complete, and the recount
// lowers totals as well as raises them. Also run it after damage to the
// index (entries edited or restored by hand). progress, when set, is
// called after every page of either scan.
func (s *Store) RepairIndex(ctx context.Context, progress func(RepairReport)) (RepairReport, error) {
	var rep RepairReport
	if err := s.repairFromRows(ctx, &rep, progress); err != nil {
		return rep, fmt.Errorf("cannot repair the index after %d rows: %w", rep.Rows, err)
	}
	if err := s.repairEntries(ctx, &rep, progress); err != nil {
		return rep, fmt.Errorf("cannot repair the index after %d entries: %w", rep.Entries, err)
	}
	err := s.session.Query(`INSERT INTO `+s.keyspace+`.layout (name, value) VALUES (?, 1)`, layoutComplete).
		Consistency(s.indexCons).Idempotent(true).ExecContext(ctx)
	if err != nil {
		return rep, fmt.Errorf("cannot record the index as complete: %w", unavailable(err))
	}
	s.complete.Store(true)
	return rep, nil
}

// repairFromRows is RepairIndex's first scan.
func (s *Store) repairFromRows(ctx context.Context, rep *RepairReport, progress func(RepairReport)) error {
	iter := s.query(`SELECT user_id, content_id, action, region, version, incarnation FROM ` + s.keyspace + `.user_likes`).
		PageSize(indexPage).Idempotent(true).IterContext(ctx)
	var (
		r      engagement.Reaction
		action string
		inc    int64
	)
	for iter.Scan(&r.UserID, &r.ContentID, &action, &r.Region, &r.Version, &inc) {
		rep.Rows++
		a, ok := engagement.ParseAction(action)
		if ok && a != engagement.ActionNone {
			r.Action, r.Incarnation = a, uint64(inc)
			if err := s.repairRow(ctx, &r, rep); err != nil {
				_ = iter.Close() // the repair's error is the one to report
				return err
			}
		}
		if progress != nil && rep.Rows%indexPage == 0 {
			progress(*rep)
		}
	}
	return unavailable(iter.Close())
}

// repairRow writes the entry of the live row r if the index holds none of
// its incarnation.
func (s *Store) repairRow(ctx context.Context, r *engagement.Reaction, rep *RepairReport) error {
	entries, err := s.scanEntries(ctx, s.query(s.q.indexUser, r.ContentID, bucketOf(r.UserID, s.buckets), r.UserID).
		Consistency(s.indexCons).PageSize(indexPage))
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.incarnation == int64(r.Incarnation) {
			return nil // pending or stale entries are the second scan's
		}
	}
	if err := s.putIndex(ctx, r); err != nil {
		return err
	}
	rep.Written++
	s.counters.IndexRepaired.Add(1)
	return nil
}

// repairEntries is RepairIndex's second scan.
func (s *Store) repairEntries(ctx context.Context, rep *RepairReport, progress func(RepairReport)) error {
	iter := s.query(`SELECT content_id, bucket, user_id, incarnation, action, region, pending, WRITETIME(action), WRITETIME(region) FROM ` +
		s.keyspace + `.` + indexTable).PageSize(indexPage).Idempotent(true).IterContext(ctx)
	var (
		content string
		bucket  int
		e       indexEntry
		ts, ts2 int64
	)
	for iter.Scan(&content, &bucket, &e.user, &e.incarnation, &e.action, &e.region, &e.pending, &ts, &ts2) {
		rep.Entries++
		if err := s.repairEntry(ctx, content, bucket, &e, max(ts, ts2), rep); err != nil {
			_ = iter.Close()
			return err
		}
		if progress != nil && rep.Entries%indexPage == 0 {
			progress(*rep)
		}
	}
	return unavailable(iter.Close())
}

// repairEntry checks one entry that is not pending against its row; ts is
// the latest write timestamp of its action and region.
func (s *Store) repairEntry(ctx context.Context, content string, bucket int, e *indexEntry, ts int64, rep *RepairReport) error {
	if e.pending {
		return nil
	}
	remove := func() error {
		err := s.session.Query(`DELETE FROM `+s.keyspace+`.`+indexTable+` USING TIMESTAMP ?`+
			` WHERE content_id = ? AND bucket = ? AND user_id = ? AND incarnation = ?`,
			int64(removedStamp), content, bucket, e.user, e.incarnation).Consistency(s.indexCons).Idempotent(true).ExecContext(ctx)
		if err != nil {
			return unavailable(err)
		}
		rep.Removed++
		s.counters.IndexRemoved.Add(1)
		return nil
	}
	if bucket != bucketOf(e.user, s.buckets) {
		// A copy in another bucket: never counted with its user's
		// (the count reads the user's bucket), but counted as a user of
		// that bucket.
		return remove()
	}
	row, found, err := s.readReaction(ctx, s.serialCons, e.user, content)
	if err != nil {
		return err
	}
	if !found || row.Action == engagement.ActionNone || row.Incarnation != uint64(e.incarnation) {
		// Written after its change applied (it is not pending), so its
		// incarnation existed; the row no longer holds it, and an
		// undone incarnation never comes back.
		return remove()
	}
	if e.action == row.Action.String() && e.region == row.Region {
		return nil
	}
	var err2 error
	if ts <= entryStamp(row.Version) {
		err2 = s.putIndex(ctx, &row)
	} else {
		// Written outside the timestamp scheme (by hand: a wall-clock
		// timestamp), so no entry at the row's timestamp can replace
		// it: mark it pending for good instead, and counts read its row.
		err2 = s.session.Query(`UPDATE `+s.keyspace+`.`+indexTable+` USING TIMESTAMP ? SET pending = true`+
			` WHERE content_id = ? AND bucket = ? AND user_id = ? AND incarnation = ?`,
			int64(removedStamp), content, bucket, e.user, e.incarnation).Consistency(s.indexCons).Idempotent(true).ExecContext(ctx)
		err2 = unavailable(err2)
	}
	if err2 != nil {
		return err2
	}
	rep.Written++
	s.counters.IndexRepaired.Add(1)
	return nil
}
