package topk

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// split deals the arrivals of st to n streams in turn.
func split(st []event, n int) [][]event {
	out := make([][]event, n)
	for i, e := range st {
		out[i%n] = append(out[i%n], e)
	}
	return out
}

func encode(t testing.TB, s *Summary) []byte {
	t.Helper()
	b, err := s.AppendBinary(nil)
	if err != nil {
		t.Fatalf("AppendBinary: %v", err)
	}
	return b
}

func TestMergeExactWhenItFits(t *testing.T) {
	st := zipfStream(11, 6000, 50, 1.0)
	parts := split(st, 3)
	m := NewSummary(64)
	for _, p := range parts {
		m.Merge(feed(NewSummary(64), p))
	}
	checkExact(t, m, exactCounts(st))
	checkInvariants(t, m)
}

func TestMergeBoundsHold(t *testing.T) {
	streams := []struct {
		name string
		st   []event
	}{
		{"zipf-0.8", zipfStream(12, 30000, 3000, 0.8)},
		{"zipf-1.1", zipfStream(13, 30000, 3000, 1.1)},
		{"weighted", weighted(14, 6000, 500)},
		{"long-ids", longIDs(15, 6000)},
	}
	for _, c := range configs {
		for _, st := range streams {
			for _, n := range []int{2, 6} {
				t.Run(c.name+"/"+st.name+"/"+strconv.Itoa(n), func(t *testing.T) {
					m := mustNew(t, c.cfg)
					for _, p := range split(st.st, n) {
						m.Merge(feed(mustNew(t, c.cfg), p))
						checkInvariants(t, m)
					}
					checkBounds(t, m, exactCounts(st.st))
				})
			}
		}
	}
}

func TestMergeSelf(t *testing.T) {
	st := zipfStream(16, 20000, 2000, 1.0)
	s := feed(NewSummary(40), st)
	s.Merge(s)
	checkInvariants(t, s)
	checkBounds(t, s, exactCounts(st, st))
}

// TestMergeAcrossLayouts merges summaries whose cells differ, both ways.
func TestMergeAcrossLayouts(t *testing.T) {
	st := zipfStream(17, 20000, 2000, 0.9)
	parts := split(st, 2)
	exact := exactCounts(st)
	layouts := []Config{DefaultConfig(40), {Capacity: 25, Rows: 1, Cells: 1}, {Capacity: 60, Rows: 3, Cells: 300}}
	for _, a := range layouts {
		for _, b := range layouts {
			m := feed(mustNew(t, a), parts[0])
			m.Merge(feed(mustNew(t, b), parts[1]))
			checkInvariants(t, m)
			checkBounds(t, m, exact)
		}
	}
}

func TestMergeCommutative(t *testing.T) {
	for _, c := range configs {
		t.Run(c.name, func(t *testing.T) {
			parts := split(zipfStream(18, 20000, 1500, 0.9), 2)
			a, b := feed(mustNew(t, c.cfg), parts[0]), feed(mustNew(t, c.cfg), parts[1])
			ab, ba := a.Clone(), b.Clone()
			ab.Merge(b)
			ba.Merge(a)
			if x, y := encode(t, ab), encode(t, ba); !bytes.Equal(x, y) {
				t.Fatalf("A+B encodes to %d bytes, B+A to %d different ones", len(x), len(y))
			}
		})
	}
}

func TestCloneIsIndependent(t *testing.T) {
	st := zipfStream(19, 5000, 500, 1)
	s := feed(NewSummary(30), st)
	c := s.Clone()
	if !bytes.Equal(encode(t, s), encode(t, c)) {
		t.Fatal("Clone encodes differently from its source")
	}
	feed(c, zipfStream(20, 5000, 500, 1))
	checkInvariants(t, c)
	checkInvariants(t, s)
	checkBounds(t, s, exactCounts(st))
}

// FuzzMergeLaws builds three small summaries from the input and checks
// that merging is commutative, associative while nothing is dropped, and
// keeps every bound in any grouping.
func FuzzMergeLaws(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10})
	f.Add([]byte{1, 200, 17, 17, 17, 3, 99, 4, 4, 4, 4, 250, 1, 2, 3, 60, 61, 62})
	f.Add([]byte{2, 5, 5, 5, 5, 5, 5, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53})
	f.Add([]byte{3, 0xff, 0xfe, 0xfd, 0x10, 0x20, 0x30, 0x11, 0x21, 0x31})
	f.Add([]byte{4, 1, 1, 2, 2, 3, 3, 9, 9, 9, 9, 9, 9, 9, 9})
	layouts := []Config{
		{Capacity: 4, Rows: 1, Cells: 1},
		{Capacity: 4, Rows: 1, Cells: 8},
		{Capacity: 5, Rows: 2, Cells: 8},
		{Capacity: 8, Rows: 2, Cells: 6},
		{Capacity: 3, Rows: 3, Cells: 9},
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		cfg := layouts[int(data[0])%len(layouts)]
		var st [3][]event
		for i, b := range data[1:] {
			// 24 ids, weights 1..8.
			st[i%3] = append(st[i%3], event{id: "x" + strconv.Itoa(int(b%24)), w: 1 + int64(b>>5)})
		}
		var s [3]*Summary
		for i := range s {
			s[i] = feed(mustNew(t, cfg), st[i])
		}
		a, b, c := s[0], s[1], s[2]

		ab, ba := a.Clone(), b.Clone()
		ab.Merge(b)
		ba.Merge(a)
		if x, y := encode(t, ab), encode(t, ba); !bytes.Equal(x, y) {
			t.Fatalf("A+B = %v, B+A = %v", ab.Top(-1), ba.Top(-1))
		}
		checkInvariants(t, ab)
		checkBounds(t, ab, exactCounts(st[0], st[1]))

		left := ab.Clone() // (A+B)+C
		left.Merge(c)
		bc := b.Clone()
		bc.Merge(c)
		right := a.Clone() // A+(B+C)
		right.Merge(bc)
		exact := exactCounts(st[0], st[1], st[2])
		for _, m := range []*Summary{left, right} {
			checkInvariants(t, m)
			checkBounds(t, m, exact)
		}

		union := map[string]bool{}
		for _, x := range s {
			for _, it := range x.Top(-1) {
				union[it.ID] = true
			}
		}
		if len(union) > cfg.Capacity {
			return // some merge dropped items: only the bounds are promised
		}
		if cfg.Rows == 1 {
			if x, y := encode(t, left), encode(t, right); !bytes.Equal(x, y) {
				t.Fatalf("(A+B)+C = %v, A+(B+C) = %v", left.Top(-1), right.Top(-1))
			}
			return
		}
		lower := func(m *Summary) []Item {
			items := m.Top(-1)
			for i := range items {
				items[i].Count -= items[i].Error
				items[i].Error = 0
			}
			slices.SortFunc(items, func(x, y Item) int { return strings.Compare(x.ID, y.ID) })
			return items
		}
		if x, y := lower(left), lower(right); !slices.Equal(x, y) {
			t.Fatalf("lower bounds: (A+B)+C = %v, A+(B+C) = %v", x, y)
		}
	})
}
