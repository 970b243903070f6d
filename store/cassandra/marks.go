package cassandra

import (
	"context"
	"fmt"
	"slices"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/store"
)

// ReadMarks returns the high-water marks of partition p, one per (agent,
// epoch), sorted by agent and epoch (epochs as the signed bigint they are
// stored as: one of 2^63 or more sorts first): one single-partition query.
// None is an empty slice.
func (s *Store) ReadMarks(ctx context.Context, p uint32) ([]store.Mark, error) {
	const op = "read marks"
	if err := store.CheckPartition(ctx, op, p); err != nil {
		return nil, err
	}
	iter := s.query(s.q.readMarks, int32(p)).Idempotent(true).IterContext(ctx)
	out := []store.Mark{}
	var (
		m                          = store.Mark{Partition: p}
		epoch, seq, flushed, updAt int64
		written                    int64
	)
	for iter.Scan(&m.Agent, &epoch, &seq, &flushed, &updAt, &written) {
		s.observeTimestamp(written)
		m.Epoch, m.Seq = uint64(epoch), uint64(seq)
		m.FlushedAt, m.UpdatedAt = fromMicros(flushed), fromMicros(updAt)
		out = append(out, m)
		m = store.Mark{Partition: p}
	}
	if err := iter.Close(); err != nil {
		return nil, fmt.Errorf("cannot %s: %w", op, unavailable(err))
	}
	return out, nil
}

// WriteStatsMark stores rows as WriteStats does and then mark m, replacing
// the mark of (m.Partition, m.Agent, m.Epoch), all with one write timestamp under
// the same lease fence. The mark is written only after every row was: an
// error may leave rows written without their mark (never a mark without
// its rows), and the rollup's retry of the same message skips those rows by
// their LastSeq and writes the mark. rows may be empty.
func (s *Store) WriteStatsMark(ctx context.Context, rows []engagement.Stats, m store.Mark) error {
	const op = "write stats and mark"
	if err := store.CheckStats(ctx, op, validKeyPart, rows, true); err != nil {
		return err
	}
	if err := store.CheckMark(ctx, op, validKeyPart, &m); err != nil {
		return err
	}
	ts, err := s.writeRows(ctx, rows)
	if err != nil {
		return fmt.Errorf("cannot %s: %w", op, err)
	}
	err = s.query(s.q.writeMark, int32(m.Partition), m.Agent, int64(m.Epoch), int64(m.Seq), micros(m.FlushedAt), micros(m.UpdatedAt)).
		WithTimestamp(ts).Idempotent(true).ExecContext(ctx)
	if err != nil {
		return fmt.Errorf("cannot %s: %w", op, unavailable(err))
	}
	return nil
}

// DeleteMarks removes the marks keys of partition p (a prune of marks no
// message moved for long): one unlogged batch per 100 keys, each a
// single-partition write, under the lease fence. Keys without a mark are
// ignored.
func (s *Store) DeleteMarks(ctx context.Context, p uint32, keys []store.MarkKey) error {
	const op = "delete marks"
	if err := store.CheckMarkKeys(ctx, op, validKeyPart, p, keys); err != nil || len(keys) == 0 {
		return err
	}
	ts, err := s.fencedTimestamp(ctx)
	if err != nil {
		return fmt.Errorf("cannot %s: %w", op, err)
	}
	for chunk := range slices.Chunk(keys, maxInList) {
		b := s.session.Batch(gocql.UnloggedBatch).Consistency(s.cons).WithTimestamp(ts)
		for _, k := range chunk {
			b.Entries = append(b.Entries, gocql.BatchEntry{Stmt: s.q.deleteMarks, Args: []any{int32(p), k.Agent, int64(k.Epoch)}, Idempotent: true})
		}
		if err := b.ExecContext(ctx); err != nil {
			return fmt.Errorf("cannot %s: %w", op, unavailable(err))
		}
	}
	return nil
}
