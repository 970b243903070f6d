package engagement

import (
	"cmp"
	"slices"
	"strings"
)

// RankTrending sorts items into the order of a trending list: count
// descending, then content id ascending (byte-wise), the order of
// topk.Summary.Top. The error bound does not rank. Ids are unique within a
// list, so the order is total: a ranked list does not depend on the order
// its items came in.
func RankTrending(items []TrendingItem) {
	slices.SortFunc(items, func(a, b TrendingItem) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), strings.Compare(a.ContentID, b.ContentID))
	})
}
