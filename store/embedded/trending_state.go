package embedded

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"

	bolt "go.etcd.io/bbolt"

	"github.com/edgecount/edgecount/engagement"
)

// bucketTrendingState holds one value per partition, keyed by the
// partition as 4 big-endian bytes (so a cursor walks them in order). It is
// created by the first PutTrendingState.
var bucketTrendingState = []byte("trending_state")

// PutTrendingState stores s, replacing the trending state of s.Partition.
func (s *Store) PutTrendingState(ctx context.Context, st engagement.TrendingState) error {
	const op = "put trending state"
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("cannot %s: %w", op, err)
	}
	for i, r := range st.Regions {
		if !validKeyPart(r.Region) {
			return invalid(op, "region %d: %q", i, r.Region)
		}
	}
	k := binary.BigEndian.AppendUint32(nil, st.Partition)
	v := encodeTrendingState(&st)
	return wrap(op, s.write(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketTrendingState)
		if err != nil {
			return err
		}
		return b.Put(k, v)
	}))
}

// GetTrendingState returns the trending state of partition p and whether
// one is stored.
func (s *Store) GetTrendingState(ctx context.Context, p uint32) (engagement.TrendingState, bool, error) {
	const op = "get trending state"
	if err := ctx.Err(); err != nil {
		return engagement.TrendingState{}, false, fmt.Errorf("cannot %s: %w", op, err)
	}
	st := engagement.TrendingState{Partition: p}
	var found bool
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketTrendingState)
		if b == nil {
			return nil
		}
		v := b.Get(binary.BigEndian.AppendUint32(nil, p))
		if v == nil {
			return nil
		}
		found = true
		return decodeTrendingState(v, &st, true)
	})
	if err != nil || !found {
		return engagement.TrendingState{}, false, wrap(op, err)
	}
	return st, true, nil
}

// ReadTrendingCoverage returns the trending state of every partition
// without its Data, sorted by partition; none is an empty slice.
func (s *Store) ReadTrendingCoverage(ctx context.Context) ([]engagement.TrendingState, error) {
	const op = "read trending coverage"
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("cannot %s: %w", op, err)
	}
	out := []engagement.TrendingState{}
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketTrendingState)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			if len(k) != 4 {
				return fmt.Errorf("%w: trending state key %q", ErrCorrupt, k)
			}
			st := engagement.TrendingState{Partition: binary.BigEndian.Uint32(k)}
			if err := decodeTrendingState(v, &st, false); err != nil {
				return fmt.Errorf("partition %d: %w", st.Partition, err)
			}
			out = append(out, st)
			return nil
		})
	})
	if err != nil {
		return nil, wrap(op, err)
	}
	return out, nil
}

// Trending state: format, as-of time, uvarint region count, then per
// region its length-prefixed name and time, then the data to the end.
func encodeTrendingState(st *engagement.TrendingState) []byte {
	n := 1 + 2*binary.MaxVarintLen64 + binary.MaxVarintLen64 + len(st.Data)
	for _, r := range st.Regions {
		n += binary.MaxVarintLen64 + len(r.Region) + 2*binary.MaxVarintLen64
	}
	regions := slices.Clone(st.Regions)
	slices.SortFunc(regions, func(a, b engagement.RegionAsOf) int { return strings.Compare(a.Region, b.Region) })
	dst := make([]byte, 0, n)
	dst = append(dst, formatV1)
	dst = appendTime(dst, st.AsOf)
	dst = binary.AppendUvarint(dst, uint64(len(regions)))
	for _, r := range regions {
		dst = appendString(dst, r.Region)
		dst = appendTime(dst, r.AsOf)
	}
	return append(dst, st.Data...)
}

// decodeTrendingState fills AsOf, Regions and, with data, Data of st from
// v. Regions and Data are nil when empty.
func decodeTrendingState(v []byte, st *engagement.TrendingState, data bool) error {
	d := decoder{buf: v}
	d.format()
	st.AsOf = d.time()
	st.Regions = nil
	// Each region takes at least three bytes.
	if n := d.count(3); n > 0 {
		st.Regions = make([]engagement.RegionAsOf, n)
		for i := range st.Regions {
			st.Regions[i].Region = d.string()
			st.Regions[i].AsOf = d.time()
		}
	}
	rest := d.restBytes()
	st.Data = nil
	if data && len(rest) > 0 {
		st.Data = slices.Clone(rest)
	}
	return d.done("trending state")
}
