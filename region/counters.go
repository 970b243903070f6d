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

// counter is one counter's identity and its off-table state: its key, the
// shards of a hot counter, and the value of a cold one until it is promoted
// to its stripe's read table, whose slot then holds the value (see slot).
// It takes 48 bytes: the key's counter and region names are shared by every
// counter with the same pair (see names).
type counter struct {
	// one is a cold counter's value while the counter is in dirty; it is
	// sealed when the counter moves to a read table. Only holders of the
	// stripe lock reach a counter in dirty.
	one atomic.Int64
	hot *shardSet // nil for a one-shard counter
	id  string    // the key's content id, owned by the table
	// names are the key's counter and region names.
	names *names
	// idle counts consecutive empty drains; guarded by the stripe lock.
	idle int32
	// removed is set under the stripe lock when the counter leaves the tables.
	removed bool
}

// key returns c's key.
func (c *counter) key() Key {
	return Key{ContentID: c.id, Counter: c.names.counter, Region: c.names.region}
}

// names is a counter name and a region name.
type names struct{ counter, region string }

const cacheLine = 64

// shardSet holds the shards of a hot counter. Every add reads it, from every
// core, so it fills its cache line (the 64-byte size class is 64-byte
// aligned): a neighbour written by one core would make the others miss on
// every add.
type shardSet struct {
	shardSetFields
	_ [cacheLine - unsafe.Sizeof(shardSetFields{})]byte
}

type shardSetFields struct {
	// salt reshuffles which goroutine adds to which shard; swap changes it.
	salt   atomic.Uint64
	shards []shard
}

// newCounter returns a counter of the key (id, n).
func newCounter(id string, n *names, shards int) *counter {
	c := &counter{id: id, names: n}
	if shards > 1 {
		c.hot = &shardSet{shardSetFields: shardSetFields{shards: make([]shard, shards)}}
		c.hot.salt.Store(rand.Uint64())
	}
	return c
}

// numShards returns how many slots c spreads adds over.
func (c *counter) numShards() int {
	if c.hot == nil {
		return 1
	}
	return len(c.hot.shards)
}

// word returns the word the next add goes to.
func (c *counter) word() *atomic.Int64 {
	h := c.hot
	if h == nil {
		return &c.one
	}
	return &h.shards[shardIndex(len(h.shards), h.salt.Load())].v
}

// shardIndex picks a shard in [0, n) for the calling goroutine, with no
// shared state and no random number: it hashes the address of a local
// variable, which lies in the calling goroutine's stack. Goroutine stacks are
// at least 2 KiB and never overlap, so dropping the low 11 bits leaves a
// number that differs between goroutines and stays the same for one
// goroutine's successive adds. Each goroutine therefore keeps adding to the
// same shard, whose cache line stays in its core's cache, which is what makes
// a sharded add as cheap as an uncontended atomic add (docs/design.md G3); a fresh
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
// set was sealed and the caller must add d elsewhere.
func (h *shardSet) add(d int64) bool {
	return h.shards[shardIndex(len(h.shards), h.salt.Load())].v.Add(d) > sealFloor
}

// add adds d to c's value while c is in dirty (see cell).
func (c *counter) add(d int64) bool { return c.cell().add(d) }

// swap returns the sum of all shards and zeroes them. An add racing with
// swap lands either before a shard's swap (and is returned) or after it (and
// stays for the next swap); never both, never neither.
func (h *shardSet) swap() int64 {
	h.salt.Store(rand.Uint64())
	var sum int64
	for i := range h.shards {
		sum += h.shards[i].v.Swap(0)
	}
	return sum
}

// seal returns the sum of all shards and marks every shard sealed, so that
// any later add reports false. The caller must have removed the counter from
// the tables first, so that writers which see the seal find it gone.
func (h *shardSet) seal() int64 {
	var sum int64
	for i := range h.shards {
		sum += h.shards[i].v.Swap(sealValue)
	}
	return sum
}

// peek returns the sum of the shards without resetting them.
func (h *shardSet) peek() int64 {
	var sum int64
	for i := range h.shards {
		sum += h.shards[i].v.Load()
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
	return &Counter{c: newCounter("", &names{}, min(max(shards, 1), maxShardsLimit))}
}

// Add adds delta. It does not allocate. Unlike Counters.Add, any delta is
// accepted (a Counter is never sealed); the sum must not overflow int64.
func (c *Counter) Add(delta int64) { c.c.word().Add(delta) }

// Swap returns the sum accumulated since the last Swap and zeroes it. A
// concurrent Add is returned by exactly one Swap.
func (c *Counter) Swap() int64 { return c.c.cell().swap() }

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
	// read is the stripe's table. Its keys never change; its cold values
	// are sealed, and carried to the next table, when it is replaced.
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
	evict []evicted
}

// evicted is a counter Drain removed, and the cell that held its value.
type evicted struct {
	ctr  *counter
	cell cell
}

// Counters is the agent's table of sharded counters. Safe for concurrent use.
type Counters struct {
	stripes [1 << stripeBits]stripe // first: a Counters is a large, page-aligned allocation
	dir     Directory
	cfg     CountersConfig
	seed    uint64
	index   keyIndex // live keys by item, for fresh reads (counters_held.go)

	namesMu sync.Mutex // a leaf, taken when a counter is created
	names   map[names]*names

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
	shape := keyShape(&k)
	for {
		t := s.read.Load()
		i := t.find(h, shape, &k)
		if i < 0 {
			c.addSlow(s, h, k, delta)
			return
		}
		if t.add(i, delta) {
			return
		}
		c.retried.Add(1)
		// The slot was sealed after we found it: its table was replaced
		// (the value moved to the new one) or its counter removed. The
		// next lookup finds the new table, or misses and creates a
		// successor.
	}
}

// addSlow adds delta to k's counter under the stripe lock, creating the
// counter if needed. Nothing is sealed while the lock is held, so the add
// counts.
func (c *Counters) addSlow(s *stripe, h uint64, k Key, delta int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	read := s.read.Load()
	if i := read.find(h, keyShape(&k), &k); i >= 0 {
		read.add(i, delta)
		return
	}
	s.misses++
	ctr := s.dirty[k]
	if ctr == nil {
		// The caller's strings may point into a request buffer; the table
		// keeps the key for as long as the counter lives.
		ctr = newCounter(strings.Clone(k.ContentID), c.namesOf(k.Counter, k.Region), c.shardsFor(k))
		k = ctr.key()
		if s.dirty == nil {
			s.dirty = make(map[Key]*counter)
		}
		s.dirty[k] = ctr
		c.index.add(k)
		c.created.Add(1)
	}
	ctr.add(delta)
	// Promote once the misses have paid for the copy, so that a key that
	// turns hot between two drains stops taking the lock.
	if s.misses >= read.len()+len(s.dirty) {
		c.rebuild(s, read)
	}
}

// cellOf returns the cell that holds k's value now, if k has a counter.
// Called with s.mu held.
func (s *stripe) cellOf(h uint64, k *Key) (cell, *counter, bool) {
	read := s.read.Load()
	if i := read.find(h, keyShape(k), k); i >= 0 {
		return read.cell(i), read.ctrs[i], true
	}
	if ctr := s.dirty[*k]; ctr != nil {
		return ctr.cell(), ctr, true
	}
	return cell{}, nil, false
}

// rebuild publishes a new read table holding the live counters of read and
// dirty, and empties dirty. It then seals the cold values of read and adds
// what they held to the new table: a writer that found one of them before
// the new table was published either added before the seal (and its delta
// moves) or sees the seal and retries on the new table. Called with s.mu
// held.
func (c *Counters) rebuild(s *stripe, read *table) {
	t := newTable(read.len() + len(s.dirty))
	if read != nil {
		for i, ctr := range read.ctrs {
			if ctr != nil && !ctr.removed {
				t.copy(&read.slots[i], ctr)
			}
		}
	}
	// A hot counter's shards go with it; a cold one's value moves. Only
	// holders of s.mu reach a counter in dirty, so its value moves before
	// the table is published.
	for k, ctr := range s.dirty {
		if !ctr.removed {
			j := t.insert(hashKey(c.seed, &k), &k, ctr)
			if ctr.hot == nil {
				t.slots[j].v.Store(ctr.one.Swap(sealValue))
			}
		}
	}
	s.read.Store(t)
	if read != nil {
		for i, ctr := range read.ctrs {
			// Just after a Drain's swaps, most hold nothing and are not
			// looked up in t.
			if sl := &read.slots[i]; ctr != nil && sl.shape&slotHot == 0 && !ctr.removed {
				if d := sl.v.Swap(sealValue); d != 0 {
					t.slots[t.indexOf(sl.h, ctr)].v.Add(d)
				}
			}
		}
	}
	clear(s.dirty)
	s.misses = 0
}

// maxNames bounds the (counter, region) pairs a table shares; a counter of a
// pair past that gets its own copy.
const maxNames = 4096

// namesOf returns the shared copy of the pair (counter, region).
func (c *Counters) namesOf(counter, region string) *names {
	c.namesMu.Lock()
	defer c.namesMu.Unlock()
	if n := c.names[names{counter, region}]; n != nil {
		return n
	}
	n := &names{strings.Clone(counter), strings.Clone(region)}
	if len(c.names) < maxNames {
		if c.names == nil {
			c.names = make(map[names]*names)
		}
		c.names[*n] = n
	}
	return n
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
	// drain emits what x holds and reports whether ctr had nothing to
	// drain for long enough.
	drain := func(k Key, ctr *counter, x cell) {
		if d := x.swap(); d != 0 {
			ctr.idle = 0
			emit(k, d)
			return
		}
		ctr.idle++
		if int(ctr.idle) >= c.cfg.IdleDrains {
			ctr.removed = true
			evict = append(evict, evicted{ctr, x})
		}
	}
	if read != nil {
		for i, ctr := range read.ctrs {
			if ctr != nil {
				drain(ctr.key(), ctr, read.cell(i))
			}
		}
	}
	for k, ctr := range s.dirty {
		drain(k, ctr, ctr.cell())
	}
	if len(evict) > 0 || len(s.dirty) > 0 {
		c.rebuild(s, read)
	}
	// The evicted counters are out of both tables; seal them. A writer that
	// found one before the rebuild either added before the seal (its delta
	// is returned here) or sees the seal and retries on a new counter.
	for _, e := range evict {
		if d := e.cell.seal(); d != 0 {
			emit(e.ctr.key(), d)
		}
		c.index.remove(e.ctr.key())
	}
	c.evicted.Add(uint64(len(evict)))
	clear(evict) // drop counter references
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
	if _, ctr, ok := s.cellOf(h, &k); ok {
		return ctr.numShards()
	}
	return 0
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
	oldCell, old, ok := s.cellOf(h, &k)
	if !ok || old.numShards() == shards {
		return
	}
	inRead := read.find(h, keyShape(&k), &k) >= 0
	ctr := newCounter(old.id, old.names, shards)
	ctr.idle = old.idle
	old.removed = true
	if s.dirty == nil {
		s.dirty = make(map[Key]*counter)
	}
	s.dirty[old.key()] = ctr
	if inRead {
		c.rebuild(s, read) // a table without old, with ctr and the rest of dirty
	}
	if d := oldCell.seal(); d != 0 {
		// Only a holder of s.mu seals, so this counts.
		newCell, _, _ := s.cellOf(h, &k)
		newCell.add(d)
	}
	c.resharded.Add(1)
}

// cell is where a counter's value lives: the slot of a cold counter in a
// read table, a cold counter's own word while it is in dirty, or the shards
// of a hot counter.
type cell struct {
	v   *atomic.Int64 // a cold counter's word; nil for a hot counter
	hot *shardSet
}

// cell returns the cell of c while it is in dirty.
func (c *counter) cell() cell {
	if c.hot != nil {
		return cell{hot: c.hot}
	}
	return cell{v: &c.one}
}

// add adds d and reports whether it counted (false: the cell is sealed).
func (x cell) add(d int64) bool {
	if x.v != nil {
		return x.v.Add(d) > sealFloor
	}
	return x.hot.add(d)
}

// swap returns what x holds and zeroes it.
func (x cell) swap() int64 {
	if x.v != nil {
		return x.v.Swap(0)
	}
	return x.hot.swap()
}

// seal returns what x holds and seals it: every later add reports false.
func (x cell) seal() int64 {
	if x.v != nil {
		return x.v.Swap(sealValue)
	}
	return x.hot.seal()
}

// peek returns what x holds.
func (x cell) peek() int64 {
	if x.v != nil {
		return x.v.Load()
	}
	return x.hot.peek()
}

// table is an open-addressing hash table (linear probing, at most half
// full) from Key to counter. Its keys are fixed when it is published;
// writers read it without a lock and add to the values in its slots.
type table struct {
	slots []slot     // a power of two long
	ctrs  []*counter // ctrs[i] is the counter of slots[i]; nil for an empty slot
	n     int
}

// slot is one entry of a table, one cache line: the hash, a cold counter's
// value, and the key's bytes when they fit, so that an Add that hits its
// first slot reads that line and no other. A lookup compares the key's
// strings with the slot's bytes; a key too long for them is compared with
// the counter's key instead.
type slot struct {
	h     uint64       // hashKey of the key; 0 marks an empty slot
	v     atomic.Int64 // a cold counter's value; unused for a hot one
	shape uint32       // keyShape of the key, and slotHot
	text  [slotText]byte
}

// slotText is the room for a key's three strings, one after another, in a
// slot: a UUID, "like" and a region name of up to four bytes fit.
const slotText = cacheLine - 8 - 8 - 4

const (
	// shapeLong marks a key whose strings do not fit in slotText.
	shapeLong = 1 << 24
	// slotHot marks the slot of a hot counter, whose value is in its
	// shards (table.ctrs[i].hot).
	slotHot = 1 << 25
)

// keyShape returns the lengths of k's three strings, 8 bits each, or
// shapeLong if they do not fit in a slot.
func keyShape(k *Key) uint32 {
	a, b, c := len(k.ContentID), len(k.Counter), len(k.Region)
	if a+b+c > slotText {
		return shapeLong
	}
	return uint32(a) | uint32(b)<<8 | uint32(c)<<16
}

// newTable returns an empty table with room for n counters.
func newTable(n int) *table {
	size := 8
	for size < 2*n {
		size *= 2
	}
	return &table{slots: make([]slot, size), ctrs: make([]*counter, size)}
}

// len returns the number of counters in t (0 for a nil table).
func (t *table) len() int {
	if t == nil {
		return 0
	}
	return t.n
}

// find returns the index of the slot of key k with hash h and shape
// keyShape(k), or -1.
func (t *table) find(h uint64, shape uint32, k *Key) int {
	if t == nil {
		return -1
	}
	mask := uint64(len(t.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		sl := &t.slots[i]
		if sl.h == h && sl.shape&^slotHot == shape && t.holds(i, k) {
			return int(i)
		}
		if sl.h == 0 {
			return -1
		}
	}
}

// holds reports whether slot i, whose shape matches k's, holds k.
func (t *table) holds(i uint64, k *Key) bool {
	sl := &t.slots[i]
	if sl.shape&shapeLong != 0 {
		ctr := t.ctrs[i]
		return ctr.id == k.ContentID && ctr.names.counter == k.Counter && ctr.names.region == k.Region
	}
	a, b, c := len(k.ContentID), len(k.Counter), len(k.Region)
	text := sl.text[:a+b+c]
	return string(text[:a]) == k.ContentID && string(text[a:a+b]) == k.Counter && string(text[a+b:]) == k.Region
}

// add adds d to the value of slot i and reports whether it counted.
func (t *table) add(i int, d int64) bool { return t.cell(i).add(d) }

// cell returns the cell of slot i's counter.
func (t *table) cell(i int) cell {
	if t.slots[i].shape&slotHot != 0 {
		return cell{hot: t.ctrs[i].hot}
	}
	return cell{v: &t.slots[i].v}
}

// insert adds ctr, whose key k t does not hold and hashes to h, and returns
// its slot; t must not be published yet. The slot's value starts at zero.
func (t *table) insert(h uint64, k *Key, ctr *counter) int {
	i := t.free(h)
	sl := &t.slots[i]
	sl.h = h
	sl.shape = keyShape(k)
	if sl.shape != shapeLong {
		n := copy(sl.text[:], k.ContentID)
		n += copy(sl.text[n:], k.Counter)
		copy(sl.text[n:], k.Region)
	}
	if ctr.hot != nil {
		sl.shape |= slotHot
	}
	t.ctrs[i] = ctr
	t.n++
	return i
}

// free returns the first empty slot on the probe sequence of hash h.
func (t *table) free(h uint64) int {
	mask := uint64(len(t.slots) - 1)
	i := h & mask
	for t.slots[i].h != 0 {
		i = (i + 1) & mask
	}
	return int(i)
}

// indexOf returns the slot of ctr, whose key hashes to h and which t holds.
func (t *table) indexOf(h uint64, ctr *counter) int {
	mask := uint64(len(t.slots) - 1)
	i := h & mask
	for t.ctrs[i] != ctr {
		i = (i + 1) & mask
	}
	return int(i)
}

// copy adds ctr, whose slot in another table is from, without reading the
// key again; t must not be published yet. The slot's value starts at zero.
func (t *table) copy(from *slot, ctr *counter) {
	i := t.free(from.h)
	sl := &t.slots[i]
	sl.h, sl.shape, sl.text = from.h, from.shape, from.text
	t.ctrs[i] = ctr
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
