package main

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// hist is a log-linear latency histogram: exact below 128 ns, then 64
// buckets per power of two (a value is off by at most 1/64 ≈ 1.6%). Record
// is one uncontended atomic add, so a reader (the progress line) may sum
// it while its worker records; it never allocates.
type hist struct {
	counts [histBuckets]atomic.Uint64
}

const histBuckets = 64*40 + 128 // up to ~2^46 ns, far past any bounded run

func histIndex(ns int64) int {
	if ns < 128 {
		return int(max(ns, 0))
	}
	e := bits.Len64(uint64(ns)) - 7
	i := 64*e + int(uint64(ns)>>e)
	return min(i, histBuckets-1)
}

// histValue is the middle of bucket i, in ns.
func histValue(i int) int64 {
	if i < 128 {
		return int64(i)
	}
	e := i/64 - 1
	m := int64(i - 64*e)
	return m<<e + (int64(1)<<e)/2
}

func (h *hist) record(d time.Duration) { h.counts[histIndex(int64(d))].Add(1) }

// snapshot is a plain copy of a histogram (or a sum or difference of some).
type snapshot [histBuckets]uint64

func (s *snapshot) add(h *hist) {
	for i := range h.counts {
		s[i] += h.counts[i].Load()
	}
}

func (s *snapshot) sub(o *snapshot) {
	for i := range s {
		s[i] -= o[i]
	}
}

func (s *snapshot) total() uint64 {
	var n uint64
	for _, c := range s {
		n += c
	}
	return n
}

// quantile returns the q-quantile (0 < q < 1); 0 when empty.
func (s *snapshot) quantile(q float64) time.Duration {
	n := s.total()
	if n == 0 {
		return 0
	}
	rank := uint64(q * float64(n)) // the rank-th value, counting from 0
	var seen uint64
	for i, c := range s {
		seen += c
		if seen > rank {
			return time.Duration(histValue(i))
		}
	}
	return time.Duration(histValue(histBuckets - 1))
}

// maximum returns the highest recorded bucket's value.
func (s *snapshot) maximum() time.Duration {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] > 0 {
			return time.Duration(histValue(i))
		}
	}
	return 0
}
