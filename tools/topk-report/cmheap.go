package main

import (
	"cmp"
	"runtime"
	"slices"
	"strings"

	"github.com/cespare/xxhash/v2"

	"github.com/edgecount/edgecount/topk"
)

// cmHeap is the baseline: a plain Count-Min sketch (Cormode and
// Muthukrishnan 2005; rows × width 32-bit counters, every row incremented)
// and a min-heap of the heapSize items with the largest estimates, found
// through a map. It is what one writes first; it is not mergeable into a
// top list with bounds (a merged heap misses items that were in no heap).
type cmHeap struct {
	rows, width int
	cells       []uint32
	heap        []cmEntry
	pos         map[string]int
	heapSize    int
	heapBytes   int // measured memory of a full heap, its map and ids
}

type cmEntry struct {
	id  string
	est int64
}

const (
	cmRows     = 4
	cmHeapSize = 128
)

// newCMHeap returns the baseline that fits in bytes: the heap, its map and
// ids take heapBytes (candidateBytes), the counters the rest.
func newCMHeap(bytes, heapBytes int) *cmHeap {
	width := (bytes - heapBytes) / 4 / cmRows
	return &cmHeap{
		heapBytes: heapBytes,
		rows:      cmRows,
		width:     width,
		cells:     make([]uint32, cmRows*width),
		heap:      make([]cmEntry, 0, cmHeapSize),
		pos:       make(map[string]int, cmHeapSize),
		heapSize:  cmHeapSize,
	}
}

// Bytes is the counters plus the measured cost of a full heap and map.
func (c *cmHeap) Bytes() int {
	return 4*len(c.cells) + c.heapBytes
}

// candidateBytes measures the heap memory of n heap entries, their map
// and their id strings: the smallest of five measurements.
func candidateBytes(n, idLen int) int {
	best := 0
	for range 5 {
		if b := candidateBytesOnce(n, idLen); best == 0 || b < best {
			best = b
		}
	}
	return best
}

func candidateBytesOnce(n, idLen int) int {
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	h := make([]cmEntry, 0, n)
	pos := make(map[string]int, n)
	var b [128]byte
	for i := range n {
		for j := range idLen {
			b[j] = byte('a' + (i>>(j%8))%26)
		}
		b[0], b[1] = byte('A'+i%26), byte('A'+i/26%26)
		id := string(b[:idLen])
		h = append(h, cmEntry{id: id})
		pos[id] = i
	}
	runtime.ReadMemStats(&m1)
	runtime.KeepAlive(h)
	runtime.KeepAlive(pos)
	return int(m1.HeapAlloc - m0.HeapAlloc)
}

func (c *cmHeap) Add(id string, w int64) {
	h := xxhash.Sum64String(id)
	est := int64(-1)
	for r := 0; r < c.rows; r++ {
		x := uint32(h) + uint32(r)*uint32(h>>32)
		i := r*c.width + int(uint64(x)*uint64(c.width)>>32)
		c.cells[i] += uint32(w)
		if v := int64(c.cells[i]); est < 0 || v < est {
			est = v
		}
	}
	if p, ok := c.pos[id]; ok {
		c.heap[p].est = est
		c.down(p)
		return
	}
	if len(c.heap) < c.heapSize {
		id = strings.Clone(id)
		c.heap = append(c.heap, cmEntry{id, est})
		c.pos[id] = len(c.heap) - 1
		c.up(len(c.heap) - 1)
		return
	}
	if est > c.heap[0].est {
		delete(c.pos, c.heap[0].id)
		id = strings.Clone(id)
		c.heap[0] = cmEntry{id, est}
		c.pos[id] = 0
		c.down(0)
	}
}

func (c *cmHeap) Top(k int) []topk.Item {
	items := make([]topk.Item, len(c.heap))
	for i, e := range c.heap {
		items[i] = topk.Item{ID: e.id, Count: e.est}
	}
	slices.SortFunc(items, func(a, b topk.Item) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), strings.Compare(a.ID, b.ID))
	})
	if k >= 0 && k < len(items) {
		items = items[:k]
	}
	return items
}

func (c *cmHeap) swap(i, j int) {
	c.heap[i], c.heap[j] = c.heap[j], c.heap[i]
	c.pos[c.heap[i].id] = i
	c.pos[c.heap[j].id] = j
}

func (c *cmHeap) down(p int) {
	n := len(c.heap)
	for {
		m := 2*p + 1
		if m >= n {
			return
		}
		if m+1 < n && c.heap[m+1].est < c.heap[m].est {
			m++
		}
		if c.heap[p].est <= c.heap[m].est {
			return
		}
		c.swap(p, m)
		p = m
	}
}

func (c *cmHeap) up(p int) {
	for p > 0 {
		q := (p - 1) / 2
		if c.heap[q].est <= c.heap[p].est {
			return
		}
		c.swap(p, q)
		p = q
	}
}
