package engagement_test

import (
	"slices"
	"testing"

	"github.com/edgecount/edgecount/engagement"
)

func TestRankTrending(t *testing.T) {
	item := func(id string, count, errBound int64) engagement.TrendingItem {
		return engagement.TrendingItem{ContentID: id, Count: count, Error: errBound}
	}
	tests := []struct {
		name     string
		in, want []engagement.TrendingItem
	}{
		{"empty", nil, nil},
		{"one", []engagement.TrendingItem{item("a", 1, 0)}, []engagement.TrendingItem{item("a", 1, 0)}},
		{
			"count descending",
			[]engagement.TrendingItem{item("a", 1, 0), item("b", 3, 0), item("c", 2, 0)},
			[]engagement.TrendingItem{item("b", 3, 0), item("c", 2, 0), item("a", 1, 0)},
		},
		{
			"a tie goes to the smaller id",
			[]engagement.TrendingItem{item("b", 5, 0), item("c", 5, 0), item("a", 5, 0)},
			[]engagement.TrendingItem{item("a", 5, 0), item("b", 5, 0), item("c", 5, 0)},
		},
		{
			// Ids compare byte-wise, as topk orders its items: "B" < "a"
			// and "a" < "a0" < "b".
			"ids byte-wise",
			[]engagement.TrendingItem{item("b", 5, 0), item("a0", 5, 0), item("a", 5, 0), item("B", 5, 0)},
			[]engagement.TrendingItem{item("B", 5, 0), item("a", 5, 0), item("a0", 5, 0), item("b", 5, 0)},
		},
		{
			"the error bound does not rank",
			[]engagement.TrendingItem{item("b", 5, 0), item("a", 5, 4), item("c", 6, 6)},
			[]engagement.TrendingItem{item("c", 6, 6), item("a", 5, 4), item("b", 5, 0)},
		},
		{
			"extreme counts",
			[]engagement.TrendingItem{item("a", 0, 0), item("b", 1<<63-1, 0), item("c", -1, 0)},
			[]engagement.TrendingItem{item("b", 1<<63-1, 0), item("a", 0, 0), item("c", -1, 0)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Every input order gives the same list.
			for _, in := range [][]engagement.TrendingItem{tt.in, reversed(tt.in)} {
				got := slices.Clone(in)
				engagement.RankTrending(got)
				if !slices.Equal(got, tt.want) {
					t.Errorf("RankTrending(%v) = %v, want %v", in, got, tt.want)
				}
			}
		})
	}
}

func reversed(s []engagement.TrendingItem) []engagement.TrendingItem {
	r := slices.Clone(s)
	slices.Reverse(r)
	return r
}
