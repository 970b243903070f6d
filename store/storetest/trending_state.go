package storetest

import (
	"bytes"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/store"
)

func equalTrendingState(a, b engagement.TrendingState) bool {
	return a.Partition == b.Partition && a.AsOf.Equal(b.AsOf) && bytes.Equal(a.Data, b.Data) &&
		slices.EqualFunc(a.Regions, b.Regions, func(x, y engagement.RegionAsOf) bool { return x.Region == y.Region && x.AsOf.Equal(y.AsOf) })
}

// testTrendingState checks the rollup's trending state: a put replaces
// the partition's state, Get returns it with its data, ReadTrendingCoverage
// returns every partition's without data in partition order, regions
// sorted whatever order they were given in, and a region that cannot be a
// key is refused and writes nothing.
func testTrendingState(t *testing.T, s Store) {
	ctx := t.Context()
	p := uniqPartition()
	q := p + 1
	if q >= store.MaxPartition {
		p, q = p-1, p
	}
	at := now()
	if got, ok, err := s.GetTrendingState(ctx, p); err != nil || ok {
		t.Fatalf("GetTrendingState of a missing partition = %+v, %v, %v; want none", got, ok, err)
	}
	first := engagement.TrendingState{Partition: p, AsOf: at, Data: []byte{1, 0, 2, 0xff},
		Regions: []engagement.RegionAsOf{{Region: "us-east", AsOf: at}, {Region: "eu-west", AsOf: at.Add(-time.Second)}}}
	second := engagement.TrendingState{Partition: p, AsOf: at.Add(time.Minute), Data: bytes.Repeat([]byte{7}, 100_000),
		Regions: []engagement.RegionAsOf{{Region: "ap-south", AsOf: at.Add(time.Minute)}}}
	other := engagement.TrendingState{Partition: q, AsOf: at} // no regions, no data
	for _, st := range []engagement.TrendingState{first, other} {
		if err := s.PutTrendingState(ctx, st); err != nil {
			t.Fatalf("PutTrendingState(%d): %v", st.Partition, err)
		}
	}
	sorted := first
	sorted.Regions = []engagement.RegionAsOf{first.Regions[1], first.Regions[0]}
	if got, ok, err := s.GetTrendingState(ctx, p); err != nil || !ok || !equalTrendingState(got, sorted) {
		t.Fatalf("GetTrendingState = %+v, %v, %v; want %+v", got, ok, err, sorted)
	}
	if err := s.PutTrendingState(ctx, second); err != nil {
		t.Fatalf("PutTrendingState: %v", err)
	}
	if got, ok, err := s.GetTrendingState(ctx, p); err != nil || !ok || !equalTrendingState(got, second) {
		t.Fatalf("GetTrendingState after overwrite = %v, %v, %v; want the second state", got.AsOf, ok, err)
	}
	if got, ok, err := s.GetTrendingState(ctx, q); err != nil || !ok || !equalTrendingState(got, other) {
		t.Fatalf("GetTrendingState(%d) = %+v, %v, %v; want %+v", q, got, ok, err, other)
	}
	bad := engagement.TrendingState{Partition: p, AsOf: at, Regions: []engagement.RegionAsOf{{Region: ""}}}
	if err := s.PutTrendingState(ctx, bad); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("PutTrendingState with an empty region = %v; want ErrInvalid", err)
	}
	all, err := s.ReadTrendingCoverage(ctx)
	if err != nil {
		t.Fatalf("ReadTrendingCoverage: %v", err)
	}
	if !slices.IsSortedFunc(all, func(a, b engagement.TrendingState) int { return int(a.Partition) - int(b.Partition) }) {
		t.Errorf("ReadTrendingCoverage is not in partition order")
	}
	var mine []engagement.TrendingState
	for _, st := range all {
		if st.Data != nil {
			t.Errorf("ReadTrendingCoverage: partition %d has %d bytes of data; want none", st.Partition, len(st.Data))
		}
		if st.Partition == p || st.Partition == q {
			mine = append(mine, st)
		}
	}
	noData := second
	noData.Data = nil
	if want := []engagement.TrendingState{noData, other}; !slices.EqualFunc(mine, want, equalTrendingState) {
		t.Fatalf("ReadTrendingCoverage of this test's partitions = %+v; want %+v", mine, want)
	}
}
