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

// ReadMarks returns the high-water marks of partition p, one per (agent,
// epoch), sorted by agent and epoch, read in one transaction. None is an
// empty slice.
func (s *Store) ReadMarks(ctx context.Context, p uint32) ([]store.Mark, error) {
	const op = "read marks"
	if err := store.CheckPartition(ctx, op, p); err != nil {
		return nil, err
	}
	out := []store.Mark{}
	pfx := markPrefix(p)
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketMarks).Cursor()
		for k, v := c.Seek(pfx); k != nil && bytes.HasPrefix(k, pfx); k, v = c.Next() {
			rest := k[len(pfx):]
			i := len(rest) - 9
			if i < 1 || rest[i] != sep {
				return fmt.Errorf("%w: mark key %q", ErrCorrupt, k)
			}
			m := store.Mark{Partition: p, Agent: string(rest[:i]), Epoch: binary.BigEndian.Uint64(rest[i+1:])}
			if err := decodeMark(v, &m); err != nil {
				return fmt.Errorf("mark %q: %w", k, err)
			}
			out = append(out, m)
		}
		return nil
	})
	if err != nil {
		return nil, wrap(op, err)
	}
	return out, nil
}

// WriteStatsMark stores rows as WriteStats does and mark m, replacing the
// mark of (m.Partition, m.Agent, m.Epoch), all in one transaction: either the rows
// and the mark are written or nothing is. rows may be empty.
func (s *Store) WriteStatsMark(ctx context.Context, rows []engagement.Stats, m store.Mark) error {
	const op = "write stats and mark"
	if err := store.CheckStats(ctx, op, validKeyPart, rows, false); err != nil {
		return err
	}
	if err := store.CheckMark(ctx, op, validKeyPart, &m); err != nil {
		return err
	}
	keys := make([][]byte, len(rows))
	vals := make([][]byte, len(rows))
	for i := range rows {
		keys[i], vals[i] = key(rows[i].ContentID, rows[i].Scope), encodeStats(&rows[i])
	}
	mk, mv := markKey(m.Partition, m.Key()), encodeMark(&m)
	err := s.write(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketStats)
		for i := range keys {
			if err := b.Put(keys[i], vals[i]); err != nil {
				return err
			}
		}
		return tx.Bucket(bucketMarks).Put(mk, mv)
	})
	return wrap(op, err)
}

// DeleteMarks removes the marks keys of partition p (a prune of marks no
// message moved for long). Keys without a mark are ignored.
func (s *Store) DeleteMarks(ctx context.Context, p uint32, keys []store.MarkKey) error {
	const op = "delete marks"
	if err := store.CheckMarkKeys(ctx, op, validKeyPart, p, keys); err != nil || len(keys) == 0 {
		return err
	}
	err := s.write(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketMarks)
		for _, k := range keys {
			if err := b.Delete(markKey(p, k)); err != nil {
				return err
			}
		}
		return nil
	})
	return wrap(op, err)
}

// markPrefix is the common prefix of partition p's mark keys: p as 4
// big-endian bytes (a fixed length, so no partition's prefix starts
// another's keys).
func markPrefix(p uint32) []byte {
	return binary.BigEndian.AppendUint32(make([]byte, 0, 4+32), p)
}

// markKey is the partition as 4 big-endian bytes, the agent, 0x00 and the
// epoch as 8 big-endian bytes: an agent's runs sort by epoch.
func markKey(p uint32, k store.MarkKey) []byte {
	b := append(markPrefix(p), k.Agent...)
	return binary.BigEndian.AppendUint64(append(b, sep), k.Epoch)
}

// Mark: format, uvarint seq, flush time, update time.
func encodeMark(m *store.Mark) []byte {
	dst := make([]byte, 0, 1+5*binary.MaxVarintLen64)
	dst = append(dst, formatV1)
	dst = binary.AppendUvarint(dst, m.Seq)
	dst = appendTime(dst, m.FlushedAt)
	return appendTime(dst, m.UpdatedAt)
}

// decodeMark fills the stored fields of m (not its key) from v.
func decodeMark(v []byte, m *store.Mark) error {
	d := decoder{buf: v}
	d.format()
	m.Seq = d.uvarint()
	m.FlushedAt = d.time()
	m.UpdatedAt = d.time()
	return d.done("mark")
}
