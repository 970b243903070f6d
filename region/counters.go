package region

import (
	"errors"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"
)

// Key identifies one counter: one counter of one item, attributed to a region
// (reactions may attribute a -1 to the region that recorded the original like).
type Key struct{ ContentID, Counter, Region string }

// MaxDelta is the largest magnitude one Add may carry. It keeps every
// accumulated value far from the seal band (see docs/counters.md); the HTTP API's limit
// (1,000,000) is well below it.
const MaxDelta = 1 << 32

// maxShardsLimit bounds CountersConfig.MaxShards: 4096 shards of 128 bytes
// are 512 KiB for one counter, more than any core count can use.
const maxShardsLimit = 4096

// CountersConfig configures a Counters table.
type CountersConfig struct {
	// MaxShards caps the shards of one counter. The directory's answer is
	// clamped to 1..MaxShards. Zero means the default (64).
	MaxShards int
	// IdleDrains is how many consecutive Drain calls a counter may have
	// nothing to drain before it is removed from memory. Zero means the
	// default (3); 1 removes a counter at the first empty Drain.
	IdleDrains int
}

// DefaultCountersConfig returns the defaults: 64 shards at most, removal
// after 3 empty drains.
func DefaultCountersConfig() CountersConfig {
	return CountersConfig{MaxShards: 64, IdleDrains: 3}
}

// Validate reports every problem with c. Zero fields are valid: they mean
// the default.
func (c CountersConfig) Validate() error {
	var errs []error
	if c.MaxShards < 0 || c.MaxShards > maxShardsLimit {
		errs = append(errs, fmt.Errorf("counters max shards %d: want 1..%d (0 for the default)", c.MaxShards, maxShardsLimit))
	}
	if c.IdleDrains < 0 {
		errs = append(errs, fmt.Errorf("counters idle drains %d: want at least 1 (0 for the default)", c.IdleDrains))
	}
	return errors.Join(errs...)
}

// withDefaults fills zero fields from DefaultCountersConfig.
func (c CountersConfig) withDefaults() CountersConfig {
	d := DefaultCountersConfig()
	if c.MaxShards == 0 {
		c.MaxShards = d.MaxShards
	}
	if c.IdleDrains == 0 {
		c.IdleDrains = d.IdleDrains
	}
	return c
}

// CountersStats are running totals of a Counters table, for metrics.
type CountersStats struct {
	// Live is the number of counters in memory (same as Len).
	Live int
	// Created counts counters created since the table was built.
	Created uint64
	// Evicted counts counters removed after IdleDrains empty drains.
	Evicted uint64
	// Resharded counts counters whose shard count Reshard changed.
	Resharded uint64
	// Retried counts Adds that hit a counter sealed under them (removed or
	// resharded after they found it) and added to its successor instead.
	Retried uint64
}

// Seal band. Removing a counter swaps sealValue into each of its shards; an
// Add whose result lands at or below sealFloor knows it hit a removed counter
// and re-resolves the key. A live shard never gets near the band: it holds
// the sum of one flush interval's deltas, each at most MaxDelta (2^32) in
// magnitude, while the band starts 2^61 below zero. A sealed shard drifts
// from sealValue only by the in-flight Adds that raced with the seal, each at
// most MaxDelta, so it never leaves the band.
const (
	sealValue = -1 << 62
	sealFloor = -1 << 61
)

// shardSize is the room one shard of a multi-shard counter takes: two cache
// lines, so neither a neighbour nor the adjacent-line prefetcher makes two
// cores fight over one line.
const shardSize = 128

// shard is one padded slot of a sharded counter.
type shard struct {
	v atomic.Int64
	_ [shardSize - 8]byte
}

// counter is one sharded counter. A cold counter (one shard) keeps its value
// in one, inline, and takes one cache line; a hot counter spreads adds over
// its padded shards.
type counter struct {
	counterFields
	// Fill the cache line (the 64-byte size class is 64-byte aligned):
	// cold counters are written from every core, and one that shared a
	// line with its neighbour would move back and forth between caches
	// with the neighbour's adds.
	_ [cacheLine - unsafe.Sizeof(counterFields{})]byte
}

const cacheLine = 64

type counterFields struct {
	one    atomic.Int64
	shards []shard // nil for a one-shard counter
	// salt reshuffles which goroutine adds to which shard; swap changes it.
	salt atomic.Uint64
	// idle counts consecutive empty drains; guarded by the stripe lock.
	idle int32
	// removed is set under the stripe lock when the counter leaves the tables.
	removed bool
}

func newCounter(shards int) *counter {
	if shards <= 1 {
		return &counter{}
	}
	c := &counter{}
	c.shards = make([]shard, shards)
	c.salt.Store(rand.Uint64())
	return c
}

// numShards returns how many slots c spreads adds over.
func (c *counter) numShards() int {
	if len(c.shards) == 0 {
		return 1
	}
	return len(c.shards)
}

// slot returns the word the next add goes to.
func (c *counter) slot() *atomic.Int64 {
	n := len(c.shards)
	if n == 0 {
		return &c.one
	}
	return &c.shards[shardIndex(n, c.salt.Load())].v
}

// shardIndex picks a shard in [0, n) for the calling goroutine, with no
// shared state and no random number: it hashes the address of a local
// variable, which lies in the calling goroutine's stack. Goroutine stacks are
// at least 2 KiB and never overlap, so dropping the low 11 bits leaves a
// number that differs between goroutines and stays the same for one
// goroutine's successive adds. Each goroutine therefore keeps adding to the
// same shard, whose cache line stays in its core's cache, which is what makes
// a sharded add as cheap as an uncontended atomic add (DESIGN.md G3); a fresh
// random shard per add, even from math/rand/v2's per-thread generator, costs
// more than the add itself and moves the line between cores on about half of
// the adds. Two goroutines that land on the same shard only share a line,
// never lose a delta, and are separated by the next salt, which swap
// (every Drain) draws afresh.
func shardIndex(n int, salt uint64) int {
	var anchor byte
	g := uint64(uintptr(unsafe.Pointer(&anchor))) >> 11
	h := (g ^ salt) * 0x9E3779B97F4A7C15 // Fibonacci hashing spreads consecutive stacks
	// Lemire's multiply-shift: an index in [0, n) from the high bits, no division.
	return int(((h >> 32) * uint64(n)) >> 32)
}

// add adds d to one shard and reports whether it counted: false means the
// counter was sealed and the caller must add d elsewhere.
func (c *counter) add(d int64) bool {
	return c.slot().Add(d) > sealFloor
}

// swap returns the sum of all shards and zeroes them. An add racing with
// swap lands either before a shard's swap (and is returned) or after it (and
// stays for the next swap); never both, never neither.
func (c *counter) swap() int64 {
	if len(c.shards) == 0 {
		return c.one.Swap(0)
	}
	c.salt.Store(rand.Uint64())
	var sum int64
	for i := range c.shards {
		sum += c.shards[i].v.Swap(0)
	}
	return sum
}

// seal returns the sum of all shards and marks every shard sealed, so that
// any later add reports false. The caller must have removed c from the tables
// first, so that writers which see the seal find c gone.
func (c *counter) seal() int64 {
	if len(c.shards) == 0 {
		return c.one.Swap(sealValue)
	}
	var sum int64
	for i := range c.shards {
		sum += c.shards[i].v.Swap(sealValue)
	}
	return sum
}

// Counter is one sharded counter, safe for concurrent use. Each goroutine
// adds to its own cache-line-padded shard (see shardIndex), so concurrent
// writers on different cores seldom touch the same cache line. The zero
// value is not usable; use NewCounter.
type Counter struct {
	c *counter
}

// NewCounter returns a counter with the given number of shards, clamped to
// 1..4096.
func NewCounter(shards int) *Counter {
	return &Counter{c: newCounter(min(max(shards, 1), maxShardsLimit))}
}

// Add adds delta. It does not allocate. Unlike Counters.Add, any delta is
// accepted (a Counter is never sealed); the sum must not overflow int64.
func (c *Counter) Add(delta int64) { c.c.slot().Add(delta) }

// Swap returns the sum accumulated since the last Swap and zeroes it. A
// concurrent Add is returned by exactly one Swap.
func (c *Counter) Swap() int64 { return c.c.swap() }

// Shards returns the number of shards.
func (c *Counter) Shards() int { return c.c.numShards() }

// stripeBits is log2 of the number of stripes of a Counters table; a key's
// stripe is the top stripeBits of its hash.
const stripeBits = 8

// stripe is one lock domain of a Counters table. Writers find existing
// counters in read without a lock; new counters go to dirty under mu until
// they are promoted into a new read table. The read pointer, loaded by every
// Add, has a cache line of its own, away from the lock and the slow path's
// writes; a stripe is two cache lines.
type stripe struct {
	// read is an immutable table, replaced (never modified) under mu.
	read atomic.Pointer[table]
	_    [cacheLine - 8]byte
	stripeLocked
	_ [cacheLine - unsafe.Sizeof(stripeLocked{})]byte
}

// stripeLocked is the part of a stripe guarded by its mutex.
type stripeLocked struct {
	mu sync.Mutex
	// dirty holds the counters created since read was last rebuilt. A key
	// is in read or in dirty, never in both.
	dirty map[Key]*counter
	// misses counts lookups that went past read since it was last rebuilt.
	misses int
	// evict is Drain's scratch list, kept to avoid allocating per Drain.
	evict []slot
}

// Counters is the agent's table of sharded counters. Safe for concurrent use.
type Counters struct {
	stripes [1 << stripeBits]stripe // first: a Counters is a large, page-aligned allocation
	dir     Directory
	cfg     CountersConfig
	seed    uint64
	index   keyIndex // live keys by item, for fresh reads (counters_held.go)

	created, evicted, resharded, retried atomic.Uint64
}

// NewCounters returns an empty table. dir tells how many shards a new
// counter gets; it may be nil, and then every counter gets one shard. Zero
// fields of cfg take their defaults; NewCounters panics if cfg does not
// pass Validate.
func NewCounters(dir Directory, cfg CountersConfig) *Counters {
	if err := cfg.Validate(); err != nil {
		panic(fmt.Sprintf("region: invalid counters config: %v", err))
	}
	return &Counters{dir: dir, cfg: cfg.withDefaults(), seed: rand.Uint64()}
}

// locate returns k's hash and stripe.
func (c *Counters) locate(k *Key) (uint64, *stripe) {
	h := hashKey(c.seed, k)
	return h, &c.stripes[h>>(64-stripeBits)]
}

// Add adds delta to the counter k, creating it if needed. It does not
// allocate once the counter exists, and takes no lock once the counter has
// been promoted to its stripe's read table (after the next Drain, or after
// enough lookups). |delta| must not exceed MaxDelta; Add panics otherwise.
func (c *Counters) Add(k Key, delta int64) {
	if delta > MaxDelta || delta < -MaxDelta {
		panic(fmt.Sprintf("region: counter delta %d exceeds MaxDelta", delta))
	}
	h, s := c.locate(&k)
	for {
		ctr := s.read.Load().find(h, &k)
		if ctr == nil {
			ctr = c.slowLookup(s, h, k)
		}
		if ctr.add(delta) {
			return
		}
		c.retried.Add(1)
		// ctr was sealed by Drain or Reshard after we found it; they
		// removed it from the tables first, so the next lookup finds its
		// successor (or creates one).
	}
}

// slowLookup finds or creates k's counter under the stripe lock.
func (c *Counters) slowLookup(s *stripe, h uint64, k Key) *counter {
	s.mu.Lock()
	defer s.mu.Unlock()
	read := s.read.Load()
	if ctr := read.find(h, &k); ctr != nil {
		return ctr
	}
	s.misses++
	ctr := s.dirty[k]
	if ctr == nil {
		// The caller's strings may point into a request buffer; the table
		// keeps the key for as long as the counter lives.
		k = Key{ContentID: strings.Clone(k.ContentID), Counter: strings.Clone(k.Counter), Region: strings.Clone(k.Region)}
		ctr = newCounter(c.shardsFor(k))
		if s.dirty == nil {
			s.dirty = make(map[Key]*counter)
		}
		s.dirty[k] = ctr
		c.index.add(k)
		c.created.Add(1)
	}
	// Promote once the misses have paid for the copy, so that a key that
	// turns hot between two drains stops taking the lock.
	if s.misses >= read.len()+len(s.dirty) {
		c.rebuild(s, read)
	}
	return ctr
}

// rebuild publishes a new read table holding the live counters of read and
// dirty, and empties dirty. Called with s.mu held.
func (c *Counters) rebuild(s *stripe, read *table) {
	t := newTable(read.len() + len(s.dirty))
	if read != nil {
		for i := range read.slots {
			if sl := &read.slots[i]; sl.h != 0 && !sl.c.removed {
				t.insert(sl.h, sl.key, sl.c)
			}
		}
	}
	for k, ctr := range s.dirty {
		if !ctr.removed {
			t.insert(hashKey(c.seed, &k), k, ctr)
		}
	}
	s.read.Store(t)
	clear(s.dirty)
	s.misses = 0
}

func (c *Counters) shardsFor(k Key) int {
	if c.dir == nil {
		return 1
	}
	return min(max(c.dir.Shards(k.ContentID, k.Counter), 1), c.cfg.MaxShards)
}

// Drain hands every non-zero delta accumulated since the last Drain to emit
// and resets it, and removes counters that have had nothing to drain for
// IdleDrains consecutive calls. Each delta of every Add, including Adds that
// race with Drain, is emitted by exactly one Drain; emit is called at most
// once per key per Drain.
//
// Drain works one stripe at a time and calls emit with that stripe's lock
// held: emit must be quick and must not call into c. Adds to existing
// counters never wait for Drain; creating a counter in the stripe being
// drained waits for that stripe only. Concurrent Drain calls are safe.
func (c *Counters) Drain(emit func(k Key, delta int64)) {
	for i := range c.stripes {
		c.drainStripe(&c.stripes[i], emit)
	}
}

func (c *Counters) drainStripe(s *stripe, emit func(Key, int64)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	read := s.read.Load()
	if read.len() == 0 && len(s.dirty) == 0 {
		return
	}
	evict := s.evict[:0]
	// idle reports whether ctr had nothing to drain for long enough.
	idle := func(k Key, ctr *counter) bool {
		if d := ctr.swap(); d != 0 {
			ctr.idle = 0
			emit(k, d)
			return false
		}
		ctr.idle++
		if int(ctr.idle) < c.cfg.IdleDrains {
			return false
		}
		ctr.removed = true
		return true
	}
	if read != nil {
		for i := range read.slots {
			if sl := &read.slots[i]; sl.h != 0 && idle(sl.key, sl.c) {
				evict = append(evict, *sl)
			}
		}
	}
	for k, ctr := range s.dirty {
		if idle(k, ctr) {
			evict = append(evict, slot{key: k, c: ctr})
		}
	}
	if len(evict) > 0 || len(s.dirty) > 0 {
		c.rebuild(s, read)
	}
	// The evicted counters are out of both tables; seal them. A writer that
	// found one before the rebuild either added before the seal (its delta
	// is returned here) or sees the seal and retries on a new counter.
	for _, sl := range evict {
		if d := sl.c.seal(); d != 0 {
			emit(sl.key, d)
		}
		c.index.remove(sl.key)
	}
	c.evicted.Add(uint64(len(evict)))
	clear(evict) // drop key and counter references
	s.evict = evict[:0]
}

// Len returns the number of counters in memory.
func (c *Counters) Len() int {
	n := 0
	for i := range c.stripes {
		s := &c.stripes[i]
		s.mu.Lock()
		n += s.read.Load().len() + len(s.dirty)
		s.mu.Unlock()
	}
	return n
}

// Stats returns running totals for metrics.
func (c *Counters) Stats() CountersStats {
	return CountersStats{
		Live:      c.Len(),
		Created:   c.created.Load(),
		Evicted:   c.evicted.Load(),
		Resharded: c.resharded.Load(),
		Retried:   c.retried.Load(),
	}
}

// Shards returns the shard count of k's live counter, or 0 if k has no
// counter in memory.
func (c *Counters) Shards(k Key) int {
	h, s := c.locate(&k)
	s.mu.Lock()
	defer s.mu.Unlock()
	ctr := s.read.Load().find(h, &k)
	if ctr == nil {
		ctr = s.dirty[k]
	}
	if ctr == nil {
		return 0
	}
	return ctr.numShards()
}

// Reshard changes the shard count of k's live counter to shards (clamped to
// 1..MaxShards) without losing or doubling a delta: the new counter replaces
// the old one in the tables, the old one is sealed, and what it held moves
// to the new one. It does nothing if k has no counter in memory; a counter
// created later asks the directory.
func (c *Counters) Reshard(k Key, shards int) {
	shards = min(max(shards, 1), c.cfg.MaxShards)
	h, s := c.locate(&k)
	s.mu.Lock()
	defer s.mu.Unlock()
	read := s.read.Load()
	old := read.find(h, &k)
	inRead := old != nil
	if !inRead {
		old = s.dirty[k]
	}
	if old == nil || old.numShards() == shards {
		return
	}
	ctr := newCounter(shards)
	ctr.idle = old.idle
	old.removed = true
	if s.dirty == nil {
		s.dirty = make(map[Key]*counter)
	}
	s.dirty[k] = ctr
	if inRead {
		c.rebuild(s, read) // a table without old, with ctr and the rest of dirty
	}
	if d := old.seal(); d != 0 {
		ctr.add(d) // only a holder of s.mu can seal ctr, so this counts
	}
	c.resharded.Add(1)
}

// table is an open-addressing hash table (linear probing, at most half
// full) from Key to counter. A published table is never modified, so
// writers read it without a lock.
type table struct {
	slots []slot // a power of two long
	n     int
}

// slot is one entry of a table: one cache line, so a lookup that hits its
// first slot reads one line before the counter's.
type slot struct {
	h   uint64 // hashKey of key; 0 marks an empty slot
	c   *counter
	key Key
}

// newTable returns an empty table with room for n counters.
func newTable(n int) *table {
	size := 8
	for size < 2*n {
		size *= 2
	}
	return &table{slots: make([]slot, size)}
}

// len returns the number of counters in t (0 for a nil table).
func (t *table) len() int {
	if t == nil {
		return 0
	}
	return t.n
}

// find returns the counter of key k with hash h, or nil.
func (t *table) find(h uint64, k *Key) *counter {
	if t == nil {
		return nil
	}
	mask := uint64(len(t.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		sl := &t.slots[i]
		if sl.h == h && sl.key == *k {
			return sl.c
		}
		if sl.h == 0 {
			return nil
		}
	}
}

// insert adds a key that t does not hold; t must not be published yet.
func (t *table) insert(h uint64, k Key, ctr *counter) {
	mask := uint64(len(t.slots) - 1)
	i := h & mask
	for t.slots[i].h != 0 {
		i = (i + 1) & mask
	}
	t.slots[i] = slot{h: h, c: ctr, key: k}
	t.n++
}

// hashKey returns a seeded 64-bit hash of k, never 0. It is wyhash's mixing
// (the same as the Go runtime's hash on machines without AES instructions),
// applied to the three strings in turn: about twice as fast as the AES hash
// Go's maps use for a Key, whose three calls run one after the other. With a
// per-table random seed, clients cannot choose colliding ids.
func hashKey(seed uint64, k *Key) uint64 {
	h := hashString(seed, k.ContentID)
	h = hashString(h, k.Counter)
	h = hashString(h, k.Region)
	if h == 0 {
		h = 1
	}
	return h
}

const (
	wyp0 = 0xa0761d6478bd642f
	wyp1 = 0xe7037ed1a0b428db
	wyp2 = 0x8ebc6af09c88c6e3
	wyp3 = 0x589965cc75374cc3
)

func wymix(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

// hashString hashes s with state h: wyhash's short-input and 16-byte-block
// rules (ids are at most 128 bytes).
func hashString(h uint64, s string) uint64 {
	n := len(s)
	h ^= wyp0
	var a, b uint64
	switch {
	case n == 0:
		return wymix(h, wyp3)
	case n < 4:
		a = uint64(s[0]) | uint64(s[n>>1])<<8 | uint64(s[n-1])<<16
	case n <= 8:
		a = uint64(le32(s))
		b = uint64(le32(s[n-4:]))
	case n <= 16:
		a = le64(s)
		b = le64(s[n-8:])
	default:
		rest := s
		for len(rest) > 16 {
			h = wymix(le64(rest)^wyp1, le64(rest[8:])^h)
			rest = rest[16:]
		}
		// The last 16 bytes of s, overlapping the blocks already mixed.
		a = le64(s[n-16:])
		b = le64(s[n-8:])
	}
	return wymix(wyp2^uint64(n), wymix(a^wyp1, b^h))
}

func le32(s string) uint32 {
	_ = s[3]
	return uint32(s[0]) | uint32(s[1])<<8 | uint32(s[2])<<16 | uint32(s[3])<<24
}

func le64(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}
