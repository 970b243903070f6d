package topk

import (
	"bytes"
	"slices"

	"github.com/cespare/xxhash/v2"
)

// Merge adds other's stream to s: afterwards s summarizes the union of
// both streams, with the same guarantees, and other is unchanged. other
// may be s itself.
//
// Every item of either summary gets the sum of its bounds in both (an item
// one side does not track counts as [0, that side's cell estimate]); the
// cells add up element by element (when both have the same Rows and Cells;
// otherwise every cell of s grows by other's largest cell). Then s keeps
// the Capacity items with the largest counts, ties broken by id, and lifts
// the cells of every item it drops to that item's count. The result does
// not depend on which side is s (merging is commutative); how far it is
// associative is in the package documentation. In every order the bounds
// hold.
//
// Merge allocates scratch space for Capacity + other.Len() items on first
// use and keeps it for later merges (see Bytes).
func (s *Summary) Merge(other *Summary) {
	s.merge(other, &s.cand)
}

// merge is Merge with the scratch space in *scratch.
func (s *Summary) merge(o *Summary, scratch *[]candidate) {
	if need := s.n + o.n; cap(*scratch) < need {
		*scratch = slices.Grow([]candidate(nil), max(need, len(s.entries)+len(o.entries)))
	}
	cand := (*scratch)[:0]
	for i := 0; i < s.n; i++ {
		e := &s.entries[i]
		id := s.id(e.off)
		h := xxhash.Sum64(id)
		c := candidate{count: e.count, err: e.err, h: h, off: e.off}
		if j := lookup(o, id, h); j >= 0 {
			c.count = SatAdd(c.count, o.entries[j].count)
			c.err = SatAdd(c.err, o.entries[j].err)
		} else {
			est := o.estimate(h)
			c.count = SatAdd(c.count, est)
			c.err = SatAdd(c.err, est)
		}
		cand = append(cand, c)
	}
	for j := 0; j < o.n; j++ {
		e := &o.entries[j]
		id := o.id(e.off)
		h := xxhash.Sum64(id)
		if lookup(s, id, h) >= 0 {
			continue
		}
		est := s.estimate(h) // before the cells add up
		cand = append(cand, candidate{count: SatAdd(e.count, est), err: SatAdd(e.err, est), h: h, off: e.off, src: true})
	}
	*scratch = cand

	if s.rows == o.rows && s.cols == o.cols {
		for i, v := range o.cells {
			s.cells[i] = SatAdd(s.cells[i], v)
		}
	} else if f := o.Floor(); f > 0 {
		for i := range s.cells {
			s.cells[i] = SatAdd(s.cells[i], f)
		}
	}

	ord := mergeOrder{s, o}
	candID := ord.id
	keep := min(len(cand), len(s.entries))
	if keep < len(cand) {
		selectFirst(cand, keep, ord)
	}
	size, room := 0, len(s.arena)-len(s.arena)/8 // as hasRoom
	for i := range keep {
		size += recordHeader + len(candID(&cand[i]))
	}
	if size > room && keep > 1 {
		// Ids longer than the arena was planned for: keep fewer.
		slices.SortFunc(cand[:keep], func(a, b candidate) int {
			if ord.before(&a, &b) {
				return -1
			}
			return 1
		})
		for size > room && keep > 1 {
			keep--
			size -= recordHeader + len(candID(&cand[keep]))
		}
	}
	for i := keep; i < len(cand); i++ {
		s.raise(cand[i].h, cand[i].count)
	}
	kept := cand[:keep]

	// Rebuild: the kept items of s first (their ids stay in the arena,
	// which is compacted around them), then the kept items of other.
	t := 0
	for i := range kept {
		if c := &kept[i]; !c.src {
			s.entries[t] = entry{count: c.count, err: c.err, off: c.off}
			s.setRecordEntry(c.off, t)
			t++
		}
	}
	s.n = t
	s.compact()
	for i := range kept {
		if c := &kept[i]; c.src {
			s.entries[t] = entry{count: c.count, err: c.err, off: write(s, o.id(c.off), t)}
			t++
		}
	}
	s.n = t
	clear(s.index)
	t = 0
	for pass := range 2 {
		for i := range kept {
			if c := &kept[i]; c.src == (pass == 1) {
				s.indexInsert(s.fp(c.h), t)
				t++
			}
		}
	}
	s.heapify()
}

// heapify rebuilds the heap of entries[:n].
func (s *Summary) heapify() {
	for i := range s.n {
		place(s.heap, s.entries, i, int32(i))
	}
	for p := s.n/2 - 1; p >= 0; p-- {
		s.down(p)
	}
}

// lookup returns the entry index of id in s, or -1.
func lookup[T string | []byte](s *Summary, id T, h uint64) int {
	fp := s.fp(h)
	n := uint32(len(s.index))
	i := fastrange(fp, n)
	for {
		sl := s.index[i]
		if sl.idx == 0 {
			return -1
		}
		if sl.fp == fp && string(s.id(s.entries[sl.idx-1].off)) == string(id) {
			return int(sl.idx - 1)
		}
		if i++; i == n {
			i = 0
		}
	}
}

// mergeOrder orders the candidates of a merge of o into s.
type mergeOrder struct{ s, o *Summary }

// id returns the id of a candidate.
func (m mergeOrder) id(c *candidate) []byte {
	if c.src {
		return m.o.id(c.off)
	}
	return m.s.id(c.off)
}

// before orders candidates by count descending, then id ascending. The
// order is total (ids are distinct), so the set of the first k does not
// depend on how it is found.
func (m mergeOrder) before(a, b *candidate) bool {
	if a.count != b.count {
		return a.count > b.count
	}
	return bytes.Compare(m.id(a), m.id(b)) < 0
}

// selectFirst reorders c so that c[:k] are the k first candidates in the
// order m.before, in no particular order among themselves: quickselect
// with a median-of-three pivot.
func selectFirst(c []candidate, k int, m mergeOrder) {
	before := func(a, b *candidate) bool { return m.before(a, b) }
	lo, hi := 0, len(c) // c[lo:hi] holds the k-th position
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		// Median of three to c[lo].
		if before(&c[mid], &c[lo]) {
			c[mid], c[lo] = c[lo], c[mid]
		}
		if before(&c[hi-1], &c[mid]) {
			c[hi-1], c[mid] = c[mid], c[hi-1]
			if before(&c[mid], &c[lo]) {
				c[mid], c[lo] = c[lo], c[mid]
			}
		}
		c[lo], c[mid] = c[mid], c[lo]
		// Partition c[lo+1:hi] around the pivot c[lo]: before it first.
		i := lo + 1
		for j := lo + 1; j < hi; j++ {
			if before(&c[j], &c[lo]) {
				c[i], c[j] = c[j], c[i]
				i++
			}
		}
		c[lo], c[i-1] = c[i-1], c[lo] // the pivot to its final place, i-1
		switch {
		case k < i-1:
			hi = i - 1
		case k > i-1:
			lo = i
		default:
			return
		}
	}
}
