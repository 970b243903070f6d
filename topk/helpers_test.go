package topk

import (
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cespare/xxhash/v2"
)

// event is one arrival of a test stream.
type event struct {
	id string
	w  int64
}

// zipfStream returns n unit arrivals over items ids ("i0", "i1", …) with
// Zipf exponent s, drawn by inverse transform from seed.
func zipfStream(seed uint64, n, items int, s float64) []event {
	cdf := make([]float64, items)
	sum := 0.0
	for i := range cdf {
		sum += math.Pow(float64(i+1), -s)
		cdf[i] = sum
	}
	ids := make([]string, items)
	for i := range ids {
		ids[i] = "i" + strconv.Itoa(i)
	}
	r := rand.New(rand.NewPCG(seed, 1))
	out := make([]event, n)
	for k := range out {
		i, _ := slices.BinarySearch(cdf, r.Float64()*sum)
		out[k] = event{id: ids[min(i, items-1)], w: 1}
	}
	return out
}

// exactCounts returns the true count of every item of the streams.
func exactCounts(streams ...[]event) map[string]int64 {
	m := map[string]int64{}
	for _, st := range streams {
		for _, e := range st {
			if e.w > 0 && len(e.id) > 0 && len(e.id) <= MaxIDLen {
				m[e.id] += e.w
			}
		}
	}
	return m
}

func feed(s *Summary, st []event) *Summary {
	for _, e := range st {
		s.Add(e.id, e.w)
	}
	return s
}

func mustNew(t testing.TB, cfg Config) *Summary {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New(%+v): %v", cfg, err)
	}
	return s
}

// checkExact fails unless s tracks exactly the items of exact, each with
// its true count and error 0.
func checkExact(t testing.TB, s *Summary, exact map[string]int64) {
	t.Helper()
	if got, want := s.Len(), len(exact); got != want {
		t.Fatalf("Len() = %d, want %d", got, want)
	}
	for _, it := range s.Top(-1) {
		if it.Count != exact[it.ID] || it.Error != 0 {
			t.Fatalf("item %q = count %d error %d, want count %d error 0", it.ID, it.Count, it.Error, exact[it.ID])
		}
	}
}

// checkBounds fails unless every item of exact, and every tracked item,
// has its true count within the summary's bounds.
func checkBounds(t testing.TB, s *Summary, exact map[string]int64) {
	t.Helper()
	for id, n := range exact {
		lo, hi := s.Bounds(id)
		if n < lo || n > hi {
			t.Fatalf("Bounds(%q) = [%d, %d], true count %d", id, lo, hi, n)
		}
	}
	for _, it := range s.Top(-1) {
		n := exact[it.ID]
		if it.Error < 0 || n < it.Count-it.Error || n > it.Count {
			t.Fatalf("item %q: count %d error %d, true count %d", it.ID, it.Count, it.Error, n)
		}
	}
}

// checkInvariants fails unless the summary's structures agree.
func checkInvariants(t testing.TB, s *Summary) {
	t.Helper()
	if s.n < 0 || s.n > len(s.entries) {
		t.Fatalf("n = %d, capacity %d", s.n, len(s.entries))
	}
	seen := map[string]bool{}
	live := 0
	for i := 0; i < s.n; i++ {
		e := &s.entries[i]
		if int(e.off)+recordHeader > s.bump {
			t.Fatalf("entry %d: offset %d beyond bump %d", i, e.off, s.bump)
		}
		if got := s.recordEntry(int(e.off)); got != i {
			t.Fatalf("entry %d: its record names entry %d", i, got)
		}
		id := string(s.id(e.off))
		if seen[id] {
			t.Fatalf("id %q tracked twice", id)
		}
		seen[id] = true
		live += recordHeader + len(id)
		if e.count < 1 || e.err < 0 || e.err > e.count {
			t.Fatalf("entry %q: count %d error %d", id, e.count, e.err)
		}
		if int(e.pos) >= s.n || int(s.heap[e.pos]) != i {
			t.Fatalf("entry %d: heap position %d holds %d", i, e.pos, s.heap[e.pos])
		}
		if p := int(e.pos); p > 0 && s.entries[s.heap[(p-1)/2]].count > e.count {
			t.Fatalf("heap order broken at %d", p)
		}
		if j := lookup(s, id, xxhash.Sum64String(id)); j != i {
			t.Fatalf("lookup(%q) = %d, want %d", id, j, i)
		}
	}
	if live != s.live {
		t.Fatalf("live arena bytes = %d, want %d", s.live, live)
	}
	used := 0
	for _, sl := range s.index {
		if sl.idx != 0 {
			used++
		}
	}
	if used != s.n {
		t.Fatalf("index holds %d entries, want %d", used, s.n)
	}
	for _, c := range s.cells {
		if c < 0 {
			t.Fatalf("negative cell %d", c)
		}
	}
}

// weighted returns n arrivals over items ids with weights 1..1e6.
func weighted(seed uint64, n, items int) []event {
	r := rand.New(rand.NewPCG(seed, 2))
	out := make([]event, n)
	for k := range out {
		out[k] = event{id: "w" + strconv.Itoa(r.IntN(items)), w: 1 + r.Int64N(1_000_000)}
	}
	return out
}

// longIDs returns n arrivals of ids of 1..MaxIDLen bytes.
func longIDs(seed uint64, n int) []event {
	r := rand.New(rand.NewPCG(seed, 3))
	out := make([]event, n)
	for k := range out {
		i := r.IntN(400)
		id := strconv.Itoa(i)
		id += strings.Repeat("-", (i*37)%(MaxIDLen-len(id)+1))
		out[k] = event{id: id, w: 1 + int64(r.IntN(3))}
	}
	return out
}

// rising returns the stream where item k arrives k times, items in turn:
// every new item overtakes the old ones, the worst case for eviction.
func rising(items int) []event {
	var out []event
	for k := 1; k <= items; k++ {
		for range k {
			out = append(out, event{id: "r" + strconv.Itoa(k), w: 1})
		}
	}
	return out
}
