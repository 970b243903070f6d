package cassandra

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/edgecount/edgecount/engagement"
)

// trendingStateTable creates the rollups' trending state: every
// partial-sum partition's row in one Cassandra partition (bucket 0), so
// that an agent reads what every partition's lists cover (coverage, no
// data) in one single-partition query. Hooked into schema.
func trendingStateTable(ks string) string {
	return `CREATE TABLE IF NOT EXISTS ` + ks + `.trending_state (
			bucket int,
			part int,
			as_of bigint,
			regions frozen<map<text, bigint>>,
			data blob,
			PRIMARY KEY ((bucket), part)
		) WITH comment = 'Trending window state of the rollup, one row per partial-sum partition (one writer each), bucket always 0. regions maps a region to the newest flush time of its messages counted; as_of and the map values are microseconds since the Unix epoch; data is the rollup''s encoding, opaque here.'`
}

// PutTrendingState stores s, replacing the trending state of s.Partition.
func (s *Store) PutTrendingState(ctx context.Context, st engagement.TrendingState) error {
	const op = "put trending state"
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("cannot %s: %w", op, err)
	}
	if st.Partition > math.MaxInt32 {
		return invalidCall(op, "partition %d above %d", st.Partition, math.MaxInt32)
	}
	regions := make(map[string]int64, len(st.Regions))
	for i, r := range st.Regions {
		if !validKeyPart(r.Region) {
			return invalidCall(op, "region %d: %q", i, r.Region)
		}
		regions[r.Region] = micros(r.AsOf)
	}
	data := st.Data
	if data == nil {
		data = []byte{}
	}
	err := s.query(`INSERT INTO `+s.keyspace+`.trending_state (bucket, part, as_of, regions, data) VALUES (0, ?, ?, ?, ?)`,
		int32(st.Partition), micros(st.AsOf), regions, data).
		WithTimestamp(s.writeTimestamp()).Idempotent(true).ExecContext(ctx)
	if err != nil {
		return fmt.Errorf("cannot %s: %w", op, unavailable(err))
	}
	return nil
}

// GetTrendingState returns the trending state of partition p and whether
// one is stored.
func (s *Store) GetTrendingState(ctx context.Context, p uint32) (engagement.TrendingState, bool, error) {
	const op = "get trending state"
	if err := ctx.Err(); err != nil {
		return engagement.TrendingState{}, false, fmt.Errorf("cannot %s: %w", op, err)
	}
	if p > math.MaxInt32 {
		return engagement.TrendingState{}, false, invalidCall(op, "partition %d above %d", p, math.MaxInt32)
	}
	var (
		asOf    int64
		regions map[string]int64
		data    []byte
	)
	err := s.query(`SELECT as_of, regions, data FROM `+s.keyspace+`.trending_state WHERE bucket = 0 AND part = ?`, int32(p)).
		Idempotent(true).ScanContext(ctx, &asOf, &regions, &data)
	if errors.Is(err, gocql.ErrNotFound) {
		return engagement.TrendingState{}, false, nil
	}
	if err != nil {
		return engagement.TrendingState{}, false, fmt.Errorf("cannot %s: %w", op, unavailable(err))
	}
	st := trendingStateRow(p, asOf, regions)
	if len(data) > 0 {
		st.Data = data
	}
	return st, true, nil
}

// ReadTrendingCoverage returns the trending state of every partition
// without its Data, sorted by partition, with one single-partition query;
// none is an empty slice.
func (s *Store) ReadTrendingCoverage(ctx context.Context) ([]engagement.TrendingState, error) {
	const op = "read trending coverage"
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("cannot %s: %w", op, err)
	}
	iter := s.query(`SELECT part, as_of, regions FROM ` + s.keyspace + `.trending_state WHERE bucket = 0`).
		Idempotent(true).IterContext(ctx)
	var (
		part    int32
		asOf    int64
		regions map[string]int64
	)
	out := []engagement.TrendingState{}
	for iter.Scan(&part, &asOf, &regions) {
		out = append(out, trendingStateRow(uint32(part), asOf, regions))
		regions = nil
	}
	if err := iter.Close(); err != nil {
		return nil, fmt.Errorf("cannot %s: %w", op, unavailable(err))
	}
	return out, nil
}

// trendingStateRow builds a state without data from the columns of a row.
func trendingStateRow(p uint32, asOf int64, regions map[string]int64) engagement.TrendingState {
	st := engagement.TrendingState{Partition: p, AsOf: fromMicros(asOf)}
	for r, at := range regions {
		st.Regions = append(st.Regions, engagement.RegionAsOf{Region: r, AsOf: fromMicros(at)})
	}
	slices.SortFunc(st.Regions, func(a, b engagement.RegionAsOf) int { return strings.Compare(a.Region, b.Region) })
	return st
}
