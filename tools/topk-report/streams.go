package main

import (
	"cmp"
	"encoding/binary"
	"encoding/hex"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
	"unsafe"
)

// stream is a sequence of arrivals of unit weight, with its exact counts.
type stream struct {
	name  string
	idLen int
	ids   []string // item index → id
	items []int32  // arrival → item index
	buf   []byte   // the arrivals' ids, one after another, idLen bytes each
	exact []int64  // item index → true count
	// span is the simulated time the arrivals cover, evenly spaced; zero
	// for streams without time.
	span time.Duration
}

// id returns the id of arrival i, pointing into buf: as an id parsed from
// a request, it is in cache and costs no allocation.
func (s *stream) id(i int) string {
	return unsafe.String(&s.buf[i*s.idLen], s.idLen)
}

// at returns the simulated time of arrival i.
func (s *stream) at(start time.Time, i int) time.Time {
	return start.Add(time.Duration(float64(s.span) * float64(i) / float64(len(s.items))))
}

// aliasTable samples an index with probability proportional to its weight
// in O(1) (Vose's alias method).
type aliasTable struct {
	thresh []uint32
	alias  []int32
}

func newAlias(w []float64) *aliasTable {
	n := len(w)
	sum := 0.0
	for _, x := range w {
		sum += x
	}
	p := make([]float64, n)
	for i, x := range w {
		p[i] = x * float64(n) / sum
	}
	a := &aliasTable{thresh: make([]uint32, n), alias: make([]int32, n)}
	var small, large []int32
	for i := range p {
		if p[i] < 1 {
			small = append(small, int32(i))
		} else {
			large = append(large, int32(i))
		}
	}
	for len(small) > 0 && len(large) > 0 {
		s := small[len(small)-1]
		small = small[:len(small)-1]
		l := large[len(large)-1]
		a.thresh[s] = uint32(p[s] * (1 << 32))
		a.alias[s] = l
		p[l] -= 1 - p[s]
		if p[l] < 1 {
			large = large[:len(large)-1]
			small = append(small, l)
		}
	}
	for _, i := range append(small, large...) {
		a.thresh[i] = math.MaxUint32
		a.alias[i] = i
	}
	return a
}

func (a *aliasTable) sample(r *rand.Rand) int32 {
	u := r.Uint64()
	i := int32(uint64(uint32(u>>32)) * uint64(len(a.thresh)) >> 32)
	if uint32(u) < a.thresh[i] {
		return i
	}
	return a.alias[i]
}

func zipfWeights(n int, s float64) []float64 {
	w := make([]float64, n)
	for i := range w {
		w[i] = math.Pow(float64(i+1), -s)
	}
	return w
}

// makeIDs returns n distinct random-looking ids of idLen bytes (16: hex of
// a 64-bit hash, as short content ids; 36: UUID-shaped), so that an id says
// nothing about its item's rank.
func makeIDs(n, idLen int, seed uint64) []string {
	ids := make([]string, n)
	seen := make(map[string]bool, n)
	r := rand.New(rand.NewPCG(seed, 0x1d5))
	var raw [16]byte
	for i := 0; i < n; {
		binary.LittleEndian.PutUint64(raw[:8], r.Uint64())
		binary.LittleEndian.PutUint64(raw[8:], r.Uint64())
		var id string
		switch idLen {
		case 16:
			id = hex.EncodeToString(raw[:8])
		case 36:
			h := hex.EncodeToString(raw[:])
			id = h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
		default:
			panic("id length must be 16 or 36")
		}
		if !seen[id] {
			seen[id] = true
			ids[i] = id
			i++
		}
	}
	return ids
}

func (s *stream) fill(ids []string) {
	s.ids = ids
	s.idLen = len(ids[0])
	s.buf = make([]byte, 0, len(s.items)*s.idLen)
	s.exact = make([]int64, len(ids))
	for _, it := range s.items {
		s.buf = append(s.buf, ids[it]...)
		s.exact[it]++
	}
}

// zipfStream draws events arrivals from a Zipf law of exponent sk over
// the items of ids (index = rank - 1).
func zipfStream(name string, ids []string, events int, sk float64, seed uint64) *stream {
	a := newAlias(zipfWeights(len(ids), sk))
	r := rand.New(rand.NewPCG(seed, math.Float64bits(sk)))
	s := &stream{name: name, items: make([]int32, events)}
	for i := range s.items {
		s.items[i] = a.sample(r)
	}
	s.fill(ids)
	return s
}

// Bursty stream shape: one simulated hour in 12 phases of 5 minutes; in
// phase p (0..11) a share of the arrivals growing from burstLow to
// burstHigh goes to that phase's burstItems new items (Zipf 1 among them),
// the rest to a Zipf 1.0 background over the other items. The leaders of
// one phase are nobody in the next, and each phase's leaders outdo the
// last's.
const (
	burstPhases = 12
	burstItems  = 20
	burstLow    = 0.1
	burstHigh   = 0.5
	burstSpan   = time.Hour
)

func burstShare(phase int) float64 {
	return burstLow + (burstHigh-burstLow)*float64(phase)/float64(burstPhases-1)
}

func burstyStream(ids []string, events int, seed uint64) *stream {
	background := len(ids) - burstPhases*burstItems
	bg := newAlias(zipfWeights(background, 1.0))
	burst := newAlias(zipfWeights(burstItems, 1.0))
	r := rand.New(rand.NewPCG(seed, 0xb0))
	s := &stream{name: "bursty", items: make([]int32, events), span: burstSpan}
	for i := range s.items {
		phase := i * burstPhases / events
		if r.Float64() < burstShare(phase) {
			s.items[i] = int32(background + phase*burstItems + int(burst.sample(r)))
		} else {
			s.items[i] = bg.sample(r)
		}
	}
	s.fill(ids)
	return s
}

// truth is the exact ranking of a count vector.
type truth struct {
	exact []int64
	index map[string]int32 // id → item index
	order []int32          // item indices by count descending, then id
	ids   []string
}

func newTruth(ids []string, index map[string]int32, exact []int64) *truth {
	t := &truth{exact: exact, index: index, ids: ids}
	for i, c := range exact {
		if c > 0 {
			t.order = append(t.order, int32(i))
		}
	}
	slices.SortFunc(t.order, func(a, b int32) int {
		return cmp.Or(cmp.Compare(exact[b], exact[a]), strings.Compare(ids[a], ids[b]))
	})
	return t
}

func (t *truth) count(id string) int64 {
	if i, ok := t.index[id]; ok && int(i) < len(t.exact) {
		return t.exact[i]
	}
	return 0
}

// kth returns the k-th largest true count.
func (t *truth) kth(k int) int64 {
	if k > len(t.order) {
		return 1
	}
	return t.exact[t.order[k-1]]
}

func indexOf(ids []string) map[string]int32 {
	m := make(map[string]int32, len(ids))
	for i, id := range ids {
		m[id] = int32(i)
	}
	return m
}
