package region

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/cespare/xxhash/v2"

	"github.com/edgecount/edgecount/engagement"
)

// statsCache keeps the totals of recently read (warm) items: what the
// store returned, updated by the rows the rollup pushes (Agent.ApplyRows).
// See docs/read-cache.md.
//
// A read (get) of a warm item takes no lock: the id is hashed once
// (xxhash), the hash picks the shard and the slot of the shard's
// open-addressing table (an atomic pointer to a table whose slots are
// atomic pointers), and one atomic load gives the entry's value; it
// allocates nothing. Inserts and sweeps take the shard's mutex, readers
// never do: an insert stores a new entry into a free slot of the current
// table or, past half full, publishes a larger copy; a sweep publishes a
// copy without the evicted entries. Values are immutable (but for their
// Memo): a push or a store read makes a new one and swaps it in
// (compare-and-swap), so rows handed out are shared and must not be
// modified. A nil rows slice is a cached "no rows yet".
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

// cacheShards is a power of two: the hash's low bits pick the shard, the
// others the slot.
const (
	cacheShardBits = 6
	cacheShards    = 1 << cacheShardBits
	minTableSlots  = 16
)

type cacheShard struct {
	tab atomic.Pointer[cacheTable]
	mu  sync.Mutex // inserts and sweeps
	_   [48]byte   // keep neighbouring shards off one cache line
}

// cacheTable is an open-addressing hash table with linear probing, at
// most half full, so that a probe always ends at an empty slot. A slot,
// once set, keeps its entry for the table's life; removing an entry
// publishes a new table.
type cacheTable struct {
	slots []atomic.Pointer[cacheEntry]
	mask  uint64
	used  int // entries stored; guarded by the shard's mu
}

func newCacheTable(entries int) *cacheTable {
	n := minTableSlots
	for n < 2*entries+2 {
		n *= 2
	}
	return &cacheTable{slots: make([]atomic.Pointer[cacheEntry], n), mask: uint64(n - 1)}
}

// find returns the entry of id (hash h), or the index of the empty slot
// where it would go.
func (t *cacheTable) find(id string, h uint64) (*cacheEntry, uint64) {
	for i := (h >> cacheShardBits) & t.mask; ; i = (i + 1) & t.mask {
		e := t.slots[i].Load()
		if e == nil {
			return nil, i
		}
		if e.hash == h && e.key == id {
			return e, i
		}
	}
}

// add stores e, whose key the table does not hold. The shard's mu is held.
func (t *cacheTable) add(e *cacheEntry) {
	_, i := t.find(e.key, e.hash)
	t.slots[i].Store(e)
	t.used++
}

func hashID(id string) uint64 { return xxhash.Sum64String(id) }

// lookup returns the entry of id.
func (c *statsCache) lookup(id string) (*cacheEntry, bool) {
	h := hashID(id)
	e, _ := c.shards[h&(cacheShards-1)].tab.Load().find(id, h)
	return e, e != nil
}

// insert adds e as id's entry unless id has one, and returns the entry.
func (c *statsCache) insert(id string, e *cacheEntry) (*cacheEntry, bool) {
	h := hashID(id)
	s := &c.shards[h&(cacheShards-1)]
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.tab.Load()
	if old, _ := t.find(id, h); old != nil {
		return old, false
	}
	e.setKey(id)
	e.hash = h
	if 2*(t.used+1) > len(t.slots) {
		next := newCacheTable(t.used + 1)
		t.each(next.add)
		next.add(e)
		s.tab.Store(next)
		return e, true
	}
	t.add(e)
	return e, true
}

// each calls fn with every entry of t.
func (t *cacheTable) each(fn func(*cacheEntry)) {
	for i := range t.slots {
		if e := t.slots[i].Load(); e != nil {
			fn(e)
		}
	}
}

// cacheEntry is one warm item.
type cacheEntry struct {
	hash uint64
	v    atomic.Pointer[cacheValue]
	key  string // in inline when it fits
	// read is set by a read and cleared by a sweep: an entry not read
	// between two sweeps is evicted (second chance).
	read atomic.Bool
	// inline holds a short key, so that a lookup finds the entry's hash,
	// key and value pointer in one cache line instead of following the
	// key to a separate allocation (one CPU-cache miss fewer a lookup).
	inline [inlineKey]byte
}

// inlineKey is the longest key a cacheEntry holds inline: the entry is
// then 64 bytes, a size class whose objects are aligned to a cache line.
const inlineKey = 28

// setKey sets e's key to a copy of id.
func (e *cacheEntry) setKey(id string) {
	if len(id) > inlineKey || len(id) == 0 {
		e.key = strings.Clone(id)
		return
	}
	n := copy(e.inline[:], id)
	// The key's bytes live, and die, with the entry.
	e.key = unsafe.String(&e.inline[0], n)
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
	// memo is where readers keep what they derive from this state (the
	// HTTP API: its encoded answers).
	memo Memo
}

// Memo is a place beside one state of a warm item where a reader keeps
// what it derives from that state's rows and times (the HTTP API keeps
// the item's encoded answers), so that the reads of one state derive it
// once. It has MemoSlots slots; each holds bytes under a tag the reader
// chooses (say, a format and a scope), and a Store under another tag
// replaces them. Every change of the item (a push that changes it, a store
// read) makes a new state with an empty Memo. A nil *Memo holds nothing
// and keeps nothing. Safe for concurrent use: what Load returns must not
// be modified.
type Memo struct {
	slots [MemoSlots]atomic.Pointer[memoBytes]
}

// MemoSlots is the number of slots of a Memo.
const MemoSlots = 2

type memoBytes struct {
	tag uint64
	b   []byte // into the same allocation when it fits (newMemoBytes)
}

// memoBytes with their bytes in one allocation, by size: a reader finds
// the tag and the bytes in one stretch of memory, one CPU-cache miss fewer
// than a header pointing to a separate array. (A kept protobuf Count is
// ~50 bytes, a JSON one ~190.)
type (
	memoBytes64 struct {
		memoBytes
		buf [64]byte
	}
	memoBytes128 struct {
		memoBytes
		buf [128]byte
	}
	memoBytes256 struct {
		memoBytes
		buf [256]byte
	}
)

func newMemoBytes(tag uint64, b []byte) *memoBytes {
	switch n := len(b); {
	case n <= 64:
		m := new(memoBytes64)
		m.tag, m.b = tag, append(m.buf[:0], b...)
		return &m.memoBytes
	case n <= 128:
		m := new(memoBytes128)
		m.tag, m.b = tag, append(m.buf[:0], b...)
		return &m.memoBytes
	case n <= 256:
		m := new(memoBytes256)
		m.tag, m.b = tag, append(m.buf[:0], b...)
		return &m.memoBytes
	}
	return &memoBytes{tag: tag, b: slices.Clone(b)}
}

// Load returns the bytes of slot kept under tag.
func (m *Memo) Load(slot int, tag uint64) ([]byte, bool) {
	if m == nil {
		return nil, false
	}
	if p := m.slots[slot].Load(); p != nil && p.tag == tag {
		return p.b, true
	}
	return nil, false
}

// Drop empties slot.
func (m *Memo) Drop(slot int) {
	if m != nil {
		m.slots[slot].Store(nil)
	}
}

// Store keeps a copy of b in slot under tag and returns the copy, which
// must not be modified.
func (m *Memo) Store(slot int, tag uint64, b []byte) []byte {
	if m == nil {
		return slices.Clone(b)
	}
	p := newMemoBytes(tag, b)
	m.slots[slot].Store(p)
	return p.b
}

// newStatsCache returns a cache of at most entries items whose values are
// served for ttl after their store read, or for ttlPushed (if longer)
// while the push feed is whole. ttl 0 turns the cache off.
func newStatsCache(entries int, ttl, ttlPushed time.Duration) *statsCache {
	c := &statsCache{ttl: ttl, ttlPushed: max(ttl, ttlPushed), limit: max(1, entries)}
	for i := range c.shards {
		c.shards[i].tab.Store(newCacheTable(0))
	}
	return c
}

// get returns the state of id (its rows, when they were last known
// current) if its last store read is younger than ttl, or than ttlPushed
// while the push feed is whole and has had no gap since; now is in Unix
// nanoseconds.
func (c *statsCache) get(id string, now int64) (*cacheValue, bool) {
	if c.ttl == 0 {
		return nil, false
	}
	e, ok := c.lookup(id)
	if !ok {
		return nil, false
	}
	v := e.v.Load()
	if !c.serves(e, v, now, c.epoch.Load(), now < c.pushedUntil.Load()) {
		return nil, false
	}
	return v, true
}

// serves tells whether e's value v is served at now (within its term: the
// cache's epoch and whether the push feed is whole are given), and marks e
// read if so.
func (c *statsCache) serves(e *cacheEntry, v *cacheValue, now int64, epoch uint64, pushed bool) bool {
	ttl := c.ttl
	if pushed && v.epoch == epoch {
		ttl = c.ttlPushed
	}
	if v.loaded == 0 || now-v.loaded >= int64(ttl) {
		return false
	}
	if !e.read.Load() {
		e.read.Store(true)
	}
	return true
}

// getBatch is the most ids getAll looks up in one pass of stages.
const getBatch = 16

// getAll is get for every id: out[i] is ids[i]'s value, or nil where get
// would answer false. It looks the ids up getBatch at a time, in stages
// that each take one step down for all of them (the first slot, the entry
// and the first byte of its key, the value), so that the CPU-cache misses
// of different ids overlap: one id's lookup is a chain of four or five
// dependent loads into memory that writers, the kernel and other requests
// keep evicting, and looked up one after the other they add up (a 16-id
// read spent ~8 µs in the lookups, BenchmarkReadCounts16 and
// docs/read-cache.md).
func (c *statsCache) getAll(ids []string, now int64, out []*cacheValue) {
	if c.ttl == 0 {
		clear(out)
		return
	}
	if len(ids) == 1 { // nothing to overlap
		v, ok := c.get(ids[0], now)
		if !ok {
			v = nil
		}
		out[0] = v
		return
	}
	var (
		hs   [getBatch]uint64
		tabs [getBatch]*cacheTable
		es   [getBatch]*cacheEntry
	)
	epoch, pushed := c.epoch.Load(), now < c.pushedUntil.Load()
	for base := 0; base < len(ids); base += getBatch {
		batch := ids[base:min(base+getBatch, len(ids))]
		// The hashes and tables (no memory beyond the cache's own).
		for j, id := range batch {
			h := hashID(id)
			hs[j], tabs[j] = h, c.shards[h&(cacheShards-1)].tab.Load()
		}
		// Each id's first slot: loads independent of each other, in a
		// loop short enough for the CPU to have them all in flight.
		for j := range batch {
			t := tabs[j]
			es[j] = t.slots[(hs[j]>>cacheShardBits)&t.mask].Load()
		}
		// The entries in those slots (hash, and a short key inline): one
		// whose hash or first key byte differs is looked up in full.
		for j, id := range batch {
			e := es[j]
			if e == nil { // the probe ends at an empty first slot: not warm
				continue
			}
			if e.hash != hs[j] || len(e.key) != len(id) || (len(id) > 0 && e.key[0] != id[0]) {
				es[j], _ = tabs[j].find(id, hs[j])
			}
		}
		// The keys in full, and each entry's value.
		var vs [getBatch]*cacheValue
		for j, id := range batch {
			e := es[j]
			if e != nil && e.key != id { // a 64-bit hash shared: probe on
				e, _ = tabs[j].find(id, hs[j])
				es[j] = e
			}
			if e != nil {
				vs[j] = e.v.Load()
			}
		}
		// The values' terms.
		for j, v := range vs[:len(batch)] {
			if v != nil && !c.serves(es[j], v, now, epoch, pushed) {
				v = nil
			}
			out[base+j] = v
		}
	}
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
// returns the rows id has now, when they were last known current and the
// state's memo (nil when the cache does not keep id). The time is a wall
// clock reading only (no monotonic one), whichever way it is found, so that
// a reader's arithmetic on it (the HTTP API's staleness) does not change
// with the path the read took.
func (c *statsCache) put(id string, rows []engagement.Stats, start time.Time, epoch uint64) ([]engagement.Stats, time.Time, *Memo) {
	if c.ttl == 0 {
		return rows, start.Round(0), nil
	}
	c.expect(id)
	e, ok := c.lookup(id)
	if !ok {
		return rows, start.Round(0), nil // evicted meanwhile
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
			return merged, time.Unix(0, next.current), &next.memo
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
// goroutine sweeps at a time; the others go on, and reads never wait.
func (c *statsCache) sweep() {
	if !c.sweeping.TryLock() {
		return
	}
	defer c.sweeping.Unlock()
	target := int64(c.limit) * 9 / 10
	var kept []*cacheEntry
	for pass := 0; pass < 2 && c.n.Load() > target; pass++ {
		for i := range c.shards {
			s := &c.shards[i]
			s.mu.Lock()
			kept = kept[:0]
			s.tab.Load().each(func(e *cacheEntry) {
				if (pass == 0 && e.read.Swap(false)) || c.n.Load() <= target {
					kept = append(kept, e)
					return
				}
				c.n.Add(-1)
				c.evicted.Add(1)
			})
			next := newCacheTable(len(kept))
			for _, e := range kept {
				next.add(e)
			}
			s.tab.Store(next)
			s.mu.Unlock()
		}
	}
	clear(kept)
}

// len returns the number of warm items.
func (c *statsCache) len() int { return int(c.n.Load()) }
