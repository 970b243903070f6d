package region

import (
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/edgecount/edgecount/engagement"
)

// statsCache keeps the totals of recently read (warm) items: what the
// store returned, updated by the rows the rollup pushes (Agent.ApplyRows).
// See docs/read-cache.md.
//
// A read (get) of a warm item takes no lock: one lookup in its shard's
// read-only map (an atomic pointer to a map never modified once stored)
// and one atomic load of the entry's value; it allocates nothing. Items
// made warm since the shard's last promotion sit in a small map under the
// shard's mutex until the next one (when it reaches 1/8 of the read-only
// map), so a read of one of those takes that mutex, which only inserts and
// sweeps share. Values are immutable: a push or a store read makes a new one
// and swaps it in (compare-and-swap), so rows handed out are shared and
// must not be modified. A nil rows slice is a cached "no rows yet".
//
// Bound: a value is served only while its last store read is younger than
// ttl; a push may make it newer meanwhile, never older (a row is replaced
// only by one with a higher LastSeq, or the same and a later UpdatedAt).
// So a warm item is never staler than ttl plus a store read, even if
// every push is lost. While the push feed is whole (pushedUntil: every
// partition heard from recently, no gap in its pushes since the value's
// store read began, which the epoch tells), a value is served for
// ttlPushed instead: the feed would have shown a lost push as a gap, and a
// gap moves the epoch on, which ends the longer term of every value read
// before it (docs/read-cache.md).
type statsCache struct {
	ttl       time.Duration
	ttlPushed time.Duration
	// epoch moves on at every gap in the push feed; pushedUntil is when
	// the feed stops being whole unless pushes arrive (Unix nanoseconds;
	// 0: not whole).
	epoch       atomic.Uint64
	pushedUntil atomic.Int64
	limit       int // entries kept at most, give or take a sweep
	shards      [cacheShards]cacheShard
	n           atomic.Int64 // entries in every shard
	// sweeping is held by the one goroutine that evicts.
	sweeping sync.Mutex

	pushRows, pushApplied, evicted atomic.Uint64
}

const cacheShards = 64

type cacheShard struct {
	ro atomic.Pointer[map[string]*cacheEntry] // never modified once stored
	mu sync.Mutex
	// dirty holds the entries added since ro was last replaced.
	dirty map[string]*cacheEntry
	_     [32]byte // keep neighbouring shards off one cache line
}

func (c *statsCache) shard(id string) *cacheShard {
	return &c.shards[xxhash.Sum64String(id)%cacheShards]
}

// lookup returns the entry of id.
func (c *statsCache) lookup(id string) (*cacheEntry, bool) {
	s := c.shard(id)
	if e, ok := (*s.ro.Load())[id]; ok {
		return e, true
	}
	s.mu.Lock()
	e, ok := s.dirty[id]
	s.mu.Unlock()
	return e, ok
}

// insert adds e as id's entry unless id has one, and returns the entry.
func (c *statsCache) insert(id string, e *cacheEntry) (*cacheEntry, bool) {
	s := c.shard(id)
	s.mu.Lock()
	ro := *s.ro.Load()
	if old, ok := ro[id]; ok {
		s.mu.Unlock()
		return old, false
	}
	if old, ok := s.dirty[id]; ok {
		s.mu.Unlock()
		return old, false
	}
	if s.dirty == nil {
		s.dirty = make(map[string]*cacheEntry)
	}
	s.dirty[strings.Clone(id)] = e
	if len(s.dirty) >= max(16, len(ro)/8) {
		s.promote(ro)
	}
	s.mu.Unlock()
	return e, true
}

// promote replaces ro with ro and the dirty entries. s.mu is held.
func (s *cacheShard) promote(ro map[string]*cacheEntry) {
	next := make(map[string]*cacheEntry, len(ro)+len(s.dirty))
	for k, e := range ro {
		next[k] = e
	}
	for k, e := range s.dirty {
		next[k] = e
	}
	s.ro.Store(&next)
	s.dirty = nil
}

// cacheEntry is one warm item.
type cacheEntry struct {
	v atomic.Pointer[cacheValue]
	// read is set by a read and cleared by a sweep: an entry not read
	// between two sweeps is evicted (second chance).
	read atomic.Bool
}

// cacheValue is an immutable state of an entry.
type cacheValue struct {
	rows []engagement.Stats
	// loaded is when the store read whose result the rows include began
	// (Unix nanoseconds); 0 while the first read is under way. epoch is
	// the cache's epoch at that time.
	loaded int64
	epoch  uint64
	// current is when the rows were last known current (Unix
	// nanoseconds): loaded, or the arrival of a later push that changed
	// them.
	current int64
}

// newStatsCache returns a cache of at most entries items whose values are
// served for ttl after their store read, or for ttlPushed (if longer)
// while the push feed is whole. ttl 0 turns the cache off.
func newStatsCache(entries int, ttl, ttlPushed time.Duration) *statsCache {
	c := &statsCache{ttl: ttl, ttlPushed: max(ttl, ttlPushed), limit: max(1, entries)}
	for i := range c.shards {
		empty := map[string]*cacheEntry{}
		c.shards[i].ro.Store(&empty)
	}
	return c
}

// get returns the rows of id, and when they were last known current, if
// its last store read is younger than ttl, or than ttlPushed while the
// push feed is whole and has had no gap since.
func (c *statsCache) get(id string, now time.Time) ([]engagement.Stats, time.Time, bool) {
	if c.ttl == 0 {
		return nil, time.Time{}, false
	}
	e, ok := c.lookup(id)
	if !ok {
		return nil, time.Time{}, false
	}
	v := e.v.Load()
	n := now.UnixNano()
	ttl := c.ttl
	if v.epoch == c.epoch.Load() && n < c.pushedUntil.Load() {
		ttl = c.ttlPushed
	}
	if v.loaded == 0 || n-v.loaded >= int64(ttl) {
		return nil, time.Time{}, false
	}
	if !e.read.Load() {
		e.read.Store(true)
	}
	return v.rows, time.Unix(0, v.current), true
}

// expect makes id warm before its store read begins, so that a push that
// lands during the read is kept (the read may return the rows before it).
// id may point into a request buffer: the cache keeps a copy.
func (c *statsCache) expect(id string) {
	if c.ttl == 0 {
		return
	}
	if _, ok := c.lookup(id); ok {
		return
	}
	e := new(cacheEntry)
	e.v.Store(&cacheValue{})
	e.read.Store(true)
	if _, added := c.insert(id, e); added {
		if c.n.Add(1) > int64(c.limit) {
			c.sweep()
		}
	}
}

// put records rows, read from the store by a read that began at start in
// epoch, as id's, keeping any newer row a push brought meanwhile, and
// returns the rows id has now and when they were last known current.
func (c *statsCache) put(id string, rows []engagement.Stats, start time.Time, epoch uint64) ([]engagement.Stats, time.Time) {
	if c.ttl == 0 {
		return rows, start
	}
	c.expect(id)
	e, ok := c.lookup(id)
	if !ok {
		return rows, start // evicted meanwhile
	}
	for {
		old := e.v.Load()
		merged, _ := mergeRows(old.rows, rows)
		next := &cacheValue{rows: merged, loaded: start.UnixNano(), epoch: epoch}
		if old.loaded > next.loaded { // a later read finished first
			next.loaded, next.epoch = old.loaded, old.epoch
		}
		next.current = max(old.current, next.loaded)
		if e.v.CompareAndSwap(old, next) {
			return merged, time.Unix(0, next.current)
		}
	}
}

// push applies rows the rollup wrote, arriving at now, to the warm items
// among them and returns how many rows changed an item. rows are grouped
// by item (in any order of items); items that are not warm are left alone.
func (c *statsCache) push(rows []engagement.Stats, now time.Time) int {
	c.pushRows.Add(uint64(len(rows)))
	applied := 0
	for i := 0; i < len(rows); {
		j := i + 1
		for j < len(rows) && rows[j].ContentID == rows[i].ContentID {
			j++
		}
		if e, ok := c.lookup(rows[i].ContentID); ok {
			for {
				old := e.v.Load()
				merged, n := mergeRows(old.rows, rows[i:j])
				if n == 0 || e.v.CompareAndSwap(old, &cacheValue{rows: merged, loaded: old.loaded, epoch: old.epoch, current: max(old.current, now.UnixNano())}) {
					applied += n
					break
				}
			}
		}
		i = j
	}
	c.pushApplied.Add(uint64(applied))
	return applied
}

// newer reports whether row a is a later state of its row than b.
func newer(a, b *engagement.Stats) bool {
	return a.LastSeq > b.LastSeq || (a.LastSeq == b.LastSeq && a.UpdatedAt.After(b.UpdatedAt))
}

// mergeRows returns old with every row of in that is newer than old's row
// of the same scope (or has none), as a new slice, and how many rows of in
// it took; when it took none it returns old unchanged.
func mergeRows(old, in []engagement.Stats) ([]engagement.Stats, int) {
	var out []engagement.Stats
	took := 0
	for k := range in {
		r := &in[k]
		cur := old
		if out != nil {
			cur = out
		}
		idx := -1
		for i := range cur {
			if cur[i].Scope == r.Scope {
				idx = i
				break
			}
		}
		if idx >= 0 && !newer(r, &cur[idx]) {
			continue
		}
		if out == nil {
			out = make([]engagement.Stats, len(old), len(old)+len(in))
			copy(out, old)
		}
		if idx >= 0 {
			out[idx] = *r
		} else {
			out = append(out, *r)
		}
		took++
	}
	if took == 0 {
		return old, 0
	}
	return out, took
}

// sweep evicts entries not read since the last sweep until the cache is
// back under 90% of its limit; if every entry was read, arbitrary ones. One
// goroutine sweeps at a time; the others go on.
func (c *statsCache) sweep() {
	if !c.sweeping.TryLock() {
		return
	}
	defer c.sweeping.Unlock()
	target := int64(c.limit) * 9 / 10
	for pass := 0; pass < 2 && c.n.Load() > target; pass++ {
		for i := range c.shards {
			s := &c.shards[i]
			s.mu.Lock()
			s.promote(*s.ro.Load())
			next := *s.ro.Load()
			kept := make(map[string]*cacheEntry, len(next))
			for k, e := range next {
				if (pass == 0 && e.read.Swap(false)) || c.n.Load() <= target {
					kept[k] = e
					continue
				}
				c.n.Add(-1)
				c.evicted.Add(1)
			}
			s.ro.Store(&kept)
			s.mu.Unlock()
		}
	}
}

// len returns the number of warm items.
func (c *statsCache) len() int { return int(c.n.Load()) }
