package topk

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"unsafe"

	"github.com/cespare/xxhash/v2"
)

// MaxIDLen is the longest item id, in bytes (the store's content id limit).
const MaxIDLen = 128

// MaxCapacity is the most items one summary can track.
const MaxCapacity = 1 << 22

// MaxRows is the most rows of bound cells.
const MaxRows = 8

// MaxCells is the most bound cells.
const MaxCells = 1 << 24

// DefaultMeanIDLen is the mean id length, in bytes, that ConfigForBytes and
// DefaultConfig size the id arena for when they are not told otherwise.
const DefaultMeanIDLen = 16

// Default layout of the bound cells; see ConfigForBytes and the report
// (docs/topk-report.md) for how they were chosen.
const (
	// DefaultRows is the number of rows of bound cells.
	DefaultRows = 2
	// defaultCellShare is the share of ConfigForBytes' budget given to the
	// bound cells, in percent.
	defaultCellShare = 50
)

// recordHeader is the arena bytes in front of each id: its length (one
// byte) and the index of its entry (three bytes, little endian).
const recordHeader = 4

// minIDBytes is the smallest id arena: room for one id of any length.
const minIDBytes = recordHeader + MaxIDLen

// noOff marks an entry offset that matches no arena record.
const noOff = math.MaxUint32

// ErrConfig is wrapped by the errors of New and Config.Validate.
var ErrConfig = errors.New("invalid top-k configuration")

// Config is the fixed memory layout of a Summary. Two summaries merge
// element by element (and most precisely) when their Rows and Cells are
// equal; their capacities may differ.
type Config struct {
	// Capacity is the most items tracked, 1..MaxCapacity.
	Capacity int
	// IDBytes is the size of the arena that holds the tracked ids, each with
	// a 4-byte header; at least 4+MaxIDLen. 0 means room for Capacity ids of
	// DefaultMeanIDLen bytes with a quarter to spare. When the ids are
	// longer than planned, the summary tracks fewer items rather than grow.
	IDBytes int
	// Rows is the number of rows of bound cells, 1..MaxRows; 0 means
	// DefaultRows.
	Rows int
	// Cells is the total number of bound cells (8 bytes each), rounded down
	// to a multiple of Rows, Rows..MaxCells. 0 means 8×Capacity, about as
	// many bytes as the items take (ConfigForBytes' proportion). One cell
	// (Rows 1) is the plain Space-Saving algorithm.
	Cells int
}

// DefaultConfig returns the configuration NewSummary uses for capacity.
func DefaultConfig(capacity int) Config {
	return Config{Capacity: capacity}.withDefaults()
}

func (c Config) withDefaults() Config {
	if c.IDBytes == 0 {
		c.IDBytes = max(minIDBytes, c.Capacity*(recordHeader+DefaultMeanIDLen)*5/4)
	}
	if c.Rows == 0 {
		c.Rows = DefaultRows
	}
	if c.Cells == 0 {
		c.Cells = max(c.Rows, 8*c.Capacity)
	}
	return c
}

// Validate reports whether c (after defaults) describes a summary.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	if c.Capacity < 1 || c.Capacity > MaxCapacity {
		errs = append(errs, fmt.Errorf("capacity %d is not in 1..%d", c.Capacity, MaxCapacity))
	}
	if c.IDBytes < minIDBytes || c.IDBytes > math.MaxUint32-minIDBytes {
		errs = append(errs, fmt.Errorf("id bytes %d is not in %d..%d", c.IDBytes, minIDBytes, math.MaxUint32-minIDBytes))
	}
	if c.Rows < 1 || c.Rows > MaxRows {
		errs = append(errs, fmt.Errorf("rows %d is not in 1..%d", c.Rows, MaxRows))
	} else if c.Cells < c.Rows || c.Cells > MaxCells {
		errs = append(errs, fmt.Errorf("cells %d is not in %d..%d", c.Cells, c.Rows, MaxCells))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrConfig, errors.Join(errs...))
	}
	return nil
}

// ConfigForBytes returns the layout whose memory block (the tracked items,
// their ids and the cells: everything but the Summary header of a few
// hundred bytes that Bytes adds) takes bytes, for ids of meanIDLen bytes on average
// (0 means DefaultMeanIDLen). Half of the budget goes to cells and half to
// tracked items; an item costs 28 bytes of entry and heap, 8 bytes per
// index slot (4 slots per 3 items) and its id plus a 4-byte header in the
// arena, with a quarter to spare. When bytes is a size class of Go's
// allocator (a power of two, or a multiple of 8 KiB above 32 KiB) the block
// is exactly bytes; otherwise the allocator rounds it up, by less than an
// eighth. It returns an error when bytes is too small for a useful summary
// (about 2 KiB).
func ConfigForBytes(bytes, meanIDLen int) (Config, error) {
	if meanIDLen <= 0 {
		meanIDLen = DefaultMeanIDLen
	}
	meanIDLen = min(meanIDLen, MaxIDLen)
	idBytes := func(capacity int) int {
		return max(minIDBytes, capacity*(recordHeader+meanIDLen)*5/4)
	}
	rest := bytes - bytes*defaultCellShare/100
	// The largest capacity whose entries, heap, index and arena fit in rest.
	lo, hi := 0, MaxCapacity
	for lo < hi {
		c := (lo + hi + 1) / 2
		if blockBytes(c, idBytes(c), 0) <= rest {
			lo = c
		} else {
			hi = c - 1
		}
	}
	c := Config{Capacity: lo, IDBytes: idBytes(lo), Rows: DefaultRows}
	// The cells take the rest, rounding included.
	c.Cells = (bytes - blockBytes(c.Capacity, c.IDBytes, 0)) / 8
	c.Cells -= c.Cells % c.Rows
	if c.Capacity < 16 || c.Cells < c.Rows {
		return Config{}, fmt.Errorf("%w: %d bytes is too small", ErrConfig, bytes)
	}
	return c, c.Validate()
}

// indexSlots is the size of the index of a summary of capacity items.
func indexSlots(capacity int) int { return capacity + (capacity+2)/3 }

// blockBytes is the size of the memory block of a summary: cells, entries,
// index, heap and arena, in that order.
func blockBytes(capacity, idBytes, cells int) int {
	return cells*8 + capacity*int(unsafe.Sizeof(entry{})) + indexSlots(capacity)*int(unsafe.Sizeof(slot{})) + capacity*4 + idBytes
}

// Item is one tracked item: its true count is in [Count-Error, Count].
type Item struct {
	ID    string
	Count int64
	Error int64
}

// Stats counts what a summary did since it was created or Reset.
type Stats struct {
	// Ignored counts Add calls with an empty or too long id or a weight < 1.
	Ignored uint64
	// Admitted counts items that started to be tracked by Add.
	Admitted uint64
	// Evicted counts tracked items dropped to make room.
	Evicted uint64
	// Compactions counts rewrites of the id arena.
	Compactions uint64
}

// entry is one tracked item. Its id is the arena record at off.
type entry struct {
	count int64
	err   int64
	off   uint32 // arena offset of the id record
	pos   int32  // position in the heap
}

// slot is one index slot: the entry index + 1 (0: empty) and 32 bits of
// the item's salted hash, which also choose the slot's home.
type slot struct {
	fp  uint32
	idx uint32
}

// candidate is one item of a Merge.
type candidate struct {
	count, err int64
	h          uint64 // unsalted id hash
	off        uint32 // arena offset, in the source summary
	src        bool   // true: the id is in the other summary's arena
}

// Summary is a Space-Saving summary with a filter of bound cells in front
// (see the package documentation). The zero value is not usable; build one
// with New, NewSummary or SummaryForBytes.
type Summary struct {
	cfg     Config
	salt    uint64
	n       int     // tracked items: entries[:n], heap[:n]
	entries []entry // len Capacity
	heap    []int32 // min-heap of entry indices by count
	index   []slot  // linear probing, at most 3/4 full
	arena   []byte
	bump    int // arena[:bump] holds records
	live    int // bytes of live records
	rows    int
	cols    int
	cells   []int64 // rows × cols, row-major
	cand    []candidate
	block   []uint64 // the memory of cells, entries, index, heap and arena
	stats   Stats
}

// New returns an empty summary laid out by cfg.
func New(cfg Config) (*Summary, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	cols := cfg.Cells / cfg.Rows
	cfg.Cells = cols * cfg.Rows
	s := &Summary{cfg: cfg, salt: rand.Uint64(), rows: cfg.Rows, cols: cols}
	s.allocate()
	return s, nil
}

// allocate carves one block of memory into the summary's arrays, so that
// Bytes is what the heap holds. The block has no pointers; the arena takes
// whatever the allocator's rounding adds.
func (s *Summary) allocate() {
	c := s.cfg
	s.block = slices.Grow([]uint64(nil), (blockBytes(c.Capacity, c.IDBytes, c.Cells)+7)/8)
	s.block = s.block[:cap(s.block)]
	p := unsafe.Pointer(unsafe.SliceData(s.block))
	s.cells = unsafe.Slice((*int64)(p), c.Cells)
	p = unsafe.Add(p, c.Cells*8)
	s.entries = unsafe.Slice((*entry)(p), c.Capacity)
	p = unsafe.Add(p, c.Capacity*int(unsafe.Sizeof(entry{})))
	s.index = unsafe.Slice((*slot)(p), indexSlots(c.Capacity))
	p = unsafe.Add(p, len(s.index)*int(unsafe.Sizeof(slot{})))
	s.heap = unsafe.Slice((*int32)(p), c.Capacity)
	p = unsafe.Add(p, c.Capacity*4)
	used := blockBytes(c.Capacity, 0, c.Cells)
	s.arena = unsafe.Slice((*byte)(p), min(len(s.block)*8-used, math.MaxUint32-minIDBytes))
}

// NewSummary returns an empty summary that tracks up to capacity items,
// laid out by DefaultConfig. It panics if capacity is not in
// 1..MaxCapacity.
func NewSummary(capacity int) *Summary {
	s, err := New(DefaultConfig(capacity))
	if err != nil {
		panic(err)
	}
	return s
}

// SummaryForBytes returns an empty summary whose memory block takes bytes,
// for ids of DefaultMeanIDLen bytes (ConfigForBytes). It panics if bytes is
// too small.
func SummaryForBytes(bytes int) *Summary {
	cfg, err := ConfigForBytes(bytes, 0)
	if err != nil {
		panic(err)
	}
	s, err := New(cfg)
	if err != nil {
		panic(err)
	}
	return s
}

// Clone returns a copy of s that shares nothing with it.
func (s *Summary) Clone() *Summary {
	c := &Summary{cfg: s.cfg, salt: s.salt, n: s.n, bump: s.bump, live: s.live, rows: s.rows, cols: s.cols, stats: s.stats}
	c.allocate()
	copy(c.block, s.block)
	return c
}

// Config returns the summary's layout.
func (s *Summary) Config() Config { return s.cfg }

// Len returns the number of tracked items.
func (s *Summary) Len() int { return s.n }

// Capacity returns the most items the summary can track.
func (s *Summary) Capacity() int { return len(s.entries) }

// Stats returns the summary's counters.
func (s *Summary) Stats() Stats { return s.stats }

// Bytes returns the memory the summary holds: its header, its block
// (entries, heap, index, id arena and cells, as allocated) and the scratch
// space of Merge once a merge has needed it.
func (s *Summary) Bytes() int {
	return int(unsafe.Sizeof(*s)) + len(s.block)*8 + cap(s.cand)*int(unsafe.Sizeof(candidate{}))
}

// Reset empties the summary, keeping its memory.
func (s *Summary) Reset() {
	s.n = 0
	clear(s.index)
	clear(s.cells)
	s.bump, s.live = 0, 0
	s.stats = Stats{}
}

// Add counts weight more occurrences of item. Weights below 1, empty ids
// and ids longer than MaxIDLen are ignored (and counted in Stats.Ignored):
// the summary counts arrivals, it cannot take them back. Add allocates
// nothing; the id is copied into the summary's arena when the item is
// admitted.
func (s *Summary) Add(item string, weight int64) {
	if weight < 1 || len(item) == 0 || len(item) > MaxIDLen {
		s.stats.Ignored++
		return
	}
	h := xxhash.Sum64String(item)
	if i := lookup(s, item, h); i >= 0 {
		e := &s.entries[i]
		e.count = SatAdd(e.count, weight)
		s.down(int(e.pos))
		return
	}
	s.miss(item, h, weight)
}

// miss handles an arrival of an untracked item.
func (s *Summary) miss(item string, h uint64, weight int64) {
	est := s.estimate(h)
	c := SatAdd(est, weight)
	size := recordHeader + len(item)
	if s.n < len(s.entries) && s.hasRoom(size) {
		// A free entry and room for the id.
		s.insert(item, h, c, est)
		return
	}
	// Full (of entries, or of ids longer than planned): x must beat the
	// smallest count.
	root := int(s.heap[0])
	if c <= s.entries[root].count {
		// Not admitted: the cells keep the upper bound (conservative update).
		s.raise(h, c)
		return
	}
	s.stats.Evicted++
	e := &s.entries[root]
	old := s.id(e.off)
	oh := xxhash.Sum64(old)
	s.raise(oh, e.count)
	s.indexDelete(s.fp(oh), root)
	s.live -= recordHeader + len(old)
	e.off = noOff // its record is garbage from now on
	if !s.reserve(size) {
		// The arena is short of room even without the evicted id: take the
		// general path, which evicts more items.
		s.removeAt(root)
		s.insert(item, h, c, est)
		return
	}
	s.stats.Admitted++
	e.off = s.write(item, root)
	e.count, e.err = c, est
	s.down(0)
	s.indexInsert(s.fp(h), root)
}

// insert starts tracking item with the given bounds; there must be a free
// entry. It evicts the smallest items while the arena is short of room.
func (s *Summary) insert(item string, h uint64, count, err int64) {
	s.stats.Admitted++
	for !s.reserve(recordHeader + len(item)) {
		s.evictMin()
	}
	i := s.n
	s.n++
	s.entries[i] = entry{count: count, err: err, off: s.write(item, i), pos: int32(i)}
	s.heap[i] = int32(i)
	s.up(i)
	s.indexInsert(s.fp(h), i)
}

// evictMin stops tracking the item with the smallest count.
func (s *Summary) evictMin() {
	s.stats.Evicted++
	s.removeAt(int(s.heap[0]))
}

// removeAt stops tracking entry i, keeping its upper bound in the cells.
// An entry whose off is noOff is already out of the index and the arena.
func (s *Summary) removeAt(i int) {
	e := &s.entries[i]
	if e.off != noOff {
		id := s.id(e.off)
		h := xxhash.Sum64(id)
		s.raise(h, e.count)
		s.indexDelete(s.fp(h), i)
		s.live -= recordHeader + len(id)
	}
	// Remove from the heap: move the last heap element into its place.
	p := int(e.pos)
	last := s.n - 1
	s.n--
	if p != last {
		x := s.heap[last]
		place(s.heap, s.entries, p, x)
		s.down(p)
		s.up(int(s.entries[x].pos))
	}
	// Keep entries dense: move the last entry into i.
	if i != last {
		m := s.entries[last]
		s.entries[i] = m
		s.heap[m.pos] = int32(i)
		s.setRecordEntry(m.off, i)
		id := s.id(m.off)
		fp := s.fp(xxhash.Sum64(id))
		j := fastrange(fp, uint32(len(s.index)))
		for s.index[j].idx != uint32(last+1) {
			if j++; j == uint32(len(s.index)) {
				j = 0
			}
		}
		s.index[j].idx = uint32(i + 1)
	}
}

// Bounds returns the lower and upper bound of item's true count, whether
// it is tracked or not.
func (s *Summary) Bounds(item string) (lower, upper int64) {
	if len(item) == 0 || len(item) > MaxIDLen {
		return 0, 0
	}
	h := xxhash.Sum64String(item)
	if i := lookup(s, item, h); i >= 0 {
		e := &s.entries[i]
		return e.count - e.err, e.count
	}
	return 0, s.estimate(h)
}

// Top returns the (up to) k tracked items with the largest counts, by count
// descending then id ascending. k < 0 means all.
func (s *Summary) Top(k int) []Item {
	order := s.order()
	if k >= 0 && k < len(order) {
		order = order[:k]
	}
	items := make([]Item, len(order))
	for j, i := range order {
		e := &s.entries[i]
		items[j] = Item{ID: string(s.id(e.off)), Count: e.count, Error: e.err}
	}
	return items
}

// compare orders entries by count descending, then id ascending.
func (s *Summary) compare(a, b int32) int {
	ea, eb := &s.entries[a], &s.entries[b]
	if c := cmp.Compare(eb.count, ea.count); c != 0 {
		return c
	}
	return slices.Compare(s.id(ea.off), s.id(eb.off))
}

// Floor returns an upper bound of the true count of every untracked item.
func (s *Summary) Floor() int64 { return slices.Max(s.cells) }

// --- bound cells ---

// cell returns the index of row r's cell of an item of unsalted hash h.
func (s *Summary) cell(h uint64, r int) int {
	x := uint32(h) + uint32(r)*uint32(h>>32)
	return r*s.cols + int(fastrange(x, uint32(s.cols)))
}

// estimate returns the cells' upper bound for an untracked item.
func (s *Summary) estimate(h uint64) int64 {
	v := s.cells[s.cell(h, 0)]
	for r := 1; r < s.rows; r++ {
		v = min(v, s.cells[s.cell(h, r)])
	}
	return v
}

// raise lifts the item's cells to at least v.
func (s *Summary) raise(h uint64, v int64) {
	for r := 0; r < s.rows; r++ {
		c := &s.cells[s.cell(h, r)]
		*c = max(*c, v)
	}
}

// --- heap (min by count) ---

func (s *Summary) down(p int) {
	h, es, n := s.heap, s.entries, s.n
	x := h[p]
	cx := es[x].count
	for {
		c := 2*p + 1
		if c >= n {
			break
		}
		if c+1 < n && es[h[c+1]].count < es[h[c]].count {
			c++
		}
		if cx <= es[h[c]].count {
			break
		}
		place(h, es, p, h[c])
		p = c
	}
	place(h, es, p, x)
}

func (s *Summary) up(p int) {
	h, es := s.heap, s.entries
	x := h[p]
	cx := es[x].count
	for p > 0 {
		q := (p - 1) / 2
		if es[h[q]].count <= cx {
			break
		}
		place(h, es, p, h[q])
		p = q
	}
	place(h, es, p, x)
}

// place puts entry x at heap position p.
func place(h []int32, es []entry, p int, x int32) {
	h[p] = x
	es[x].pos = int32(p)
}

// --- index ---

// fp returns the index fingerprint of an unsalted hash: 32 bits of the
// hash mixed with the summary's random salt, so that ids chosen to collide
// in one summary's index do not collide in another's.
func (s *Summary) fp(h uint64) uint32 {
	x := h ^ s.salt
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	return uint32(x)
}

func (s *Summary) indexInsert(fp uint32, idx int) {
	n := uint32(len(s.index))
	i := fastrange(fp, n)
	for s.index[i].idx != 0 {
		if i++; i == n {
			i = 0
		}
	}
	s.index[i] = slot{fp: fp, idx: uint32(idx + 1)}
}

// indexDelete removes entry idx, found from its fingerprint, by backward
// shift, so that probes never need tombstones.
func (s *Summary) indexDelete(fp uint32, idx int) {
	n := uint32(len(s.index))
	i := fastrange(fp, n)
	for s.index[i].idx != uint32(idx+1) {
		if i++; i == n {
			i = 0
		}
	}
	j := i
	for {
		if j++; j == n {
			j = 0
		}
		sl := s.index[j]
		if sl.idx == 0 {
			break
		}
		home := fastrange(sl.fp, n)
		// sl stays if its home lies cyclically in (i, j].
		if i <= j {
			if i < home && home <= j {
				continue
			}
		} else if i < home || home <= j {
			continue
		}
		s.index[i] = sl
		i = j
	}
	s.index[i] = slot{}
}

// --- id arena ---

// id returns the id of the record at off.
func (s *Summary) id(off uint32) []byte {
	n := uint32(s.arena[off])
	return s.arena[off+recordHeader : off+recordHeader+n]
}

// reserve makes room for a record of size bytes at the end of the arena,
// compacting it if needed, and reports whether there is room. It compacts
// only when that leaves an eighth of the arena free after the record, so
// that compaction costs O(1) per byte written even when the ids are longer
// than planned; otherwise the caller evicts an item and asks again. With
// nothing tracked there is always room (the arena holds at least one id of
// MaxIDLen bytes).
func (s *Summary) reserve(size int) bool {
	if s.bump+size <= len(s.arena) {
		return true
	}
	if !s.hasRoom(size) {
		return false
	}
	s.compact()
	return true
}

// hasRoom reports whether the arena can take one more record of size
// bytes and keep an eighth free for compaction to win.
func (s *Summary) hasRoom(size int) bool {
	return s.n == 0 || s.live+size <= len(s.arena)-len(s.arena)/8
}

// write appends the record of id for entry idx and returns its offset; the
// arena must have room (reserve).
func (s *Summary) write(id string, idx int) uint32 { return write(s, id, idx) }

func write[T string | []byte](s *Summary, id T, idx int) uint32 {
	off := s.bump
	s.arena[off] = byte(len(id))
	s.arena[off+1] = byte(idx)
	s.arena[off+2] = byte(idx >> 8)
	s.arena[off+3] = byte(idx >> 16)
	copy(s.arena[off+recordHeader:], id)
	size := recordHeader + len(id)
	s.bump += size
	s.live += size
	return uint32(off)
}

func (s *Summary) setRecordEntry(off uint32, idx int) {
	s.arena[off+1] = byte(idx)
	s.arena[off+2] = byte(idx >> 8)
	s.arena[off+3] = byte(idx >> 16)
}

func (s *Summary) recordEntry(off int) int {
	return int(s.arena[off+1]) | int(s.arena[off+2])<<8 | int(s.arena[off+3])<<16
}

// compact moves the live records to the front of the arena. A record is
// live when its entry still points at it.
func (s *Summary) compact() {
	s.stats.Compactions++
	w := 0
	for r := 0; r < s.bump; {
		size := recordHeader + int(s.arena[r])
		if i := s.recordEntry(r); i < s.n && s.entries[i].off == uint32(r) {
			if w != r {
				copy(s.arena[w:], s.arena[r:r+size])
				s.entries[i].off = uint32(w)
			}
			w += size
		}
		r += size
	}
	s.bump = w
	s.live = w
}

// --- arithmetic ---

// fastrange maps x uniformly onto [0, n).
func fastrange(x, n uint32) uint32 { return uint32(uint64(x) * uint64(n) >> 32) }

// SatAdd returns a+b, saturating at math.MaxInt64 and math.MinInt64
// instead of wrapping around: how counts and their bounds add up in a
// Summary, so that a bound that overflows stays a bound.
func SatAdd(a, b int64) int64 {
	if s := a + b; (s > a) == (b > 0) {
		return s
	}
	if b > 0 {
		return math.MaxInt64
	}
	return math.MinInt64
}
