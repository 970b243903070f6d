package rollup

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/internal/periodic"
	"github.com/edgecount/edgecount/partial"
	"github.com/edgecount/edgecount/topk"
)

// TrendingStore is what the rollup needs to keep trending lists: store one
// partition's list of a (scope, counter, window), and the partition's
// trending state beside its lists (written after them), read back by the
// rollup that takes the partition over.
type TrendingStore interface {
	PutTrending(ctx context.Context, t engagement.Trending) error
	PutTrendingState(ctx context.Context, st engagement.TrendingState) error
	GetTrendingState(ctx context.Context, partition uint32) (engagement.TrendingState, bool, error)
}

// TrendingConfig configures the rollup's trending lists.
type TrendingConfig struct {
	// Partitions is the number of partial-sum partitions (the agents'); a
	// list item of another partition than its message's is dropped.
	Partitions int
	// RowItems bounds the items of one stored list (one partition's). A
	// reader that merges the partitions ranks the top k exactly for k up
	// to RowItems. Zero means 200.
	RowItems int
	// Interval is the longest a counted message waits before its
	// partition's lists (and trending state) are recomputed and stored:
	// a partition is stored Interval after the first message counted
	// since its last store, with every message counted meanwhile. Keep it
	// at most the agents' flush interval: the global lists then trail the
	// regional ones by about one interval (G14). Zero means 1 second.
	Interval time.Duration
}

// DefaultTrendingConfig returns the defaults for partitions partitions.
func DefaultTrendingConfig(partitions int) TrendingConfig {
	return TrendingConfig{Partitions: partitions, RowItems: 200, Interval: time.Second}
}

// Validate reports every problem with c.
func (c TrendingConfig) Validate() error {
	var errs []error
	if c.Partitions < 1 || c.Partitions > math.MaxInt32 {
		errs = append(errs, fmt.Errorf("trending partitions %d: want at least 1", c.Partitions))
	}
	if c.RowItems < 0 || c.RowItems > 10000 {
		errs = append(errs, fmt.Errorf("trending row items %d: want 1..10000 (0 for the default)", c.RowItems))
	}
	if c.Interval < 0 {
		errs = append(errs, fmt.Errorf("trending interval %v: want >= 0", c.Interval))
	}
	return errors.Join(errs...)
}

// TrendingStats are the trending totals, exported for metrics.
type TrendingStats struct {
	Lists        atomic.Uint64 // agent lists applied
	BadLists     atomic.Uint64 // lists of an unknown window, dropped
	BadItems     atomic.Uint64 // list items of another partition, dropped
	FutureSkips  atomic.Uint64 // messages flushed more than maxAhead ahead of this clock: trending part ignored
	Redelivered  atomic.Uint64 // messages whose lists and sums were already counted
	RowsWritten  atomic.Uint64
	WriteErrors  atomic.Uint64
	Candidates   atomic.Int64 // items with exact counts, all partitions
	ComputeNanos atomic.Uint64
	// StatesWritten and StateBytes count the partitions' trending states
	// stored (after their lists) and their size.
	StatesWritten atomic.Uint64
	StateBytes    atomic.Uint64
	// StatesLoaded counts partitions taken over from a stored state;
	// StateGaps those of them whose previous owner had counted messages
	// after its last stored state (a crash), so that some exact counts
	// became bounds (see docs/trending.md); StateLoadErrors states that
	// could not be read or decoded (the partition started afresh).
	StatesLoaded    atomic.Uint64
	StateGaps       atomic.Uint64
	StateLoadErrors atomic.Uint64
}

// EnableTrending makes r keep trending lists from the messages it applies
// and store them in st (see docs/trending.md). Call it before the first message.
func (r *Rollup) EnableTrending(cfg TrendingConfig, st TrendingStore) error {
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("cannot enable trending: %w", err)
	}
	if st == nil {
		return errors.New("cannot enable trending: nil store")
	}
	if cfg.RowItems == 0 {
		cfg.RowItems = 200
	}
	if cfg.Interval == 0 {
		cfg.Interval = time.Second
	}
	r.trend = &trender{cfg: cfg, st: st, now: r.now, logger: r.logger, parts: make(map[uint32]*trendPart)}
	return nil
}

// TrendingStats returns the trending totals; nil when trending is off.
func (r *Rollup) TrendingStats() *TrendingStats {
	if r.trend == nil {
		return nil
	}
	return &r.trend.stats
}

// WriteTrending recomputes and stores the lists of every partition this
// rollup has state for, now. The rollup also does this by itself, every
// Interval, when a partition's messages arrive; call it for a final write
// before stopping, and only for partitions this rollup still owns.
func (r *Rollup) WriteTrending(ctx context.Context) error {
	if r.trend == nil {
		return nil
	}
	return r.trend.writeAll(ctx)
}

// WriteTrendingPartition recomputes and stores partition p's lists now, if
// this rollup has state for p. Call it when handing p to another rollup,
// before it can apply p's messages.
func (r *Rollup) WriteTrendingPartition(ctx context.Context, p uint32) error {
	if r.trend == nil {
		return nil
	}
	t := r.trend
	t.mu.Lock()
	tp := t.parts[p]
	t.mu.Unlock()
	if tp == nil {
		return nil
	}
	return t.write(ctx, tp, t.now())
}

// WaitTrendingWrites waits for the lists being stored in the background
// (each store is bounded; see handLocked). Call it after the last message
// was applied and before closing the store.
func (r *Rollup) WaitTrendingWrites() {
	if r.trend != nil {
		r.trend.writers.Wait()
	}
}

// ForgetTrending drops the trending state of partition p. Call it when
// this rollup stops consuming p (a handover to another rollup): its exact
// counts would otherwise miss what the other owner applied, should p come
// back. The next message of p starts afresh, as after a restart.
func (r *Rollup) ForgetTrending(p uint32) {
	if r.trend == nil {
		return
	}
	t := r.trend
	t.mu.Lock()
	tp := t.parts[p]
	delete(t.parts, p)
	t.mu.Unlock()
	if tp != nil {
		tp.mu.Lock()
		t.stats.Candidates.Add(-tp.cands)
		tp.cands = 0
		tp.gone = true
		tp.mu.Unlock()
		// A store of its lists already under way ends before this
		// returns (put checks gone before every row).
		tp.wmu.Lock()
		tp.wmu.Unlock() //nolint:staticcheck // an empty critical section: waiting is the point
	}
}

// RunTrending writes, until ctx ends, the lists of every partition whose
// first message counted since its last write is Interval old (it looks
// four times per Interval). A message that arrives at or after that time
// writes too, but the last messages before a quiet spell would otherwise
// wait for the next one (an agent re-ships its lists once a minute).
func (r *Rollup) RunTrending(ctx context.Context) {
	if r.trend == nil {
		return
	}
	t := r.trend
	periodic.Run(ctx, max(t.cfg.Interval/4, time.Millisecond), func() {
		for _, tp := range t.partitions() {
			tp.mu.Lock()
			now := t.now()
			if tp.due(now, t.cfg.Interval) {
				if set, ok := t.prepare(tp, now); ok {
					t.handLocked(tp, set)
				}
			}
			tp.mu.Unlock()
		}
		t.passes.Add(1)
	})
}

// The trending windows by index: 5m and 1h in minute buckets, 24h in hour
// buckets, as topk.DefaultWindowConfig keeps them at the agents.
const numWindows = 3

func windowName(i int) string {
	switch i {
	case 0:
		return engagement.Window5m
	case 1:
		return engagement.Window1h
	default:
		return engagement.Window24h
	}
}

func windowIndex(w string) int {
	switch w {
	case engagement.Window5m:
		return 0
	case engagement.Window1h:
		return 1
	case engagement.Window24h:
		return 2
	}
	return -1
}

// firstMinute returns the first minute of window wi's buckets when the
// current minute is m.
func firstMinute(wi int, m int64) int64 {
	switch wi {
	case 0:
		return m - 4
	case 1:
		return m - 59
	default:
		return (topk.FloorDiv(m, 60) - 23) * 60
	}
}

type trender struct {
	cfg    TrendingConfig
	st     TrendingStore
	now    func() time.Time
	logger *slog.Logger
	stats  TrendingStats
	// passes counts RunTrending's finished passes over the partitions
	// (writes included), for tests to wait on.
	passes atomic.Uint64

	mu    sync.Mutex
	parts map[uint32]*trendPart
	// writers are the partitions' background writers (see handLocked).
	writers sync.WaitGroup

	warnMu     sync.Mutex
	lastWarned time.Time
}

// trendPart is the trending state of one partition: written by the
// partition's goroutine, and by WriteTrending under mu.
type trendPart struct {
	mu      sync.Mutex
	id      uint32
	lastSeq uint64 // newest message counted
	nowMs   int64  // newest flush time counted (agents' clocks), unix ms
	// startMs bounds the flush times of messages a previous process may
	// have counted: this state's creation time, plus clockSkew.
	startMs   int64
	lastWrite time.Time
	// dirtySince is when the first message since the last write was
	// counted: the partition is stored Interval after it.
	dirtySince time.Time
	// regionAt is, per region, the newest flush time (unix ms) of its
	// messages counted; runs is, per agent run, the last message counted.
	regionAt map[string]int64
	runs     map[agentRun]runPos
	// gapFrom..gapTo are the minutes (inclusive) of messages a previous
	// owner may have counted after its last stored state (a crash): an
	// exact count over a window that overlaps them is only a lower bound.
	// gapTo < gapFrom: no gap.
	gapFrom, gapTo int64
	// stale are the agent runs whose lists the state holds are older
	// than messages of theirs a previous owner applied (a crash): the
	// partition stores no lists until each has sent lists again, or
	// until staleUntil (an agent that stopped for good never will).
	stale      map[agentRun]bool
	staleUntil time.Time
	groups     map[groupKey]*trendGroup
	rows       map[rowID]bool // lists stored non-empty by the last write
	cands      int64          // exact counters, for the gauge
	// dirty: messages were counted (or a write failed) since the last
	// write; RunTrending writes such a partition once Interval has passed.
	dirty bool
	// gone: ForgetTrending dropped the partition; nothing writes it any
	// more (another rollup may own it now).
	gone bool
	// gen numbers the computed sets of lists; putGen is the newest one
	// stored (or being stored), under wmu. Lists are computed under mu and
	// stored under wmu only, so a slow store never holds up the apply of
	// messages, and an older set is never stored after a newer one.
	gen    uint64
	wmu    sync.Mutex
	putGen uint64
	// next is the newest set handed to the partition's background writer
	// and not yet taken by it; writing is set while that writer runs.
	// Both under mu.
	next    *stored
	writing bool
}

// clockSkew is how far an agent's clock may run ahead of the rollup's.
const clockSkew = time.Minute

// maxAhead bounds how far ahead of the rollup's clock a message's flush
// time may be for its trending part to count. A partition's current minute
// follows the newest flush and never goes back, so one message from a
// clock far ahead would otherwise push every list out of its window until
// a restart. Its sums are applied to the totals either way.
const maxAhead = 10 * time.Minute

type groupKey struct{ region, counter string }

type rowID struct {
	scope, counter string
	window         int
}

// listID names the list row stores.
func listID(row engagement.Trending) rowID {
	return rowID{row.Scope, row.Counter, windowIndex(row.Window)}
}

// trendGroup is one region's counter: the latest list of every agent run
// (agent, epoch) per window, and exact counts of the listed items.
type trendGroup struct {
	lists [numWindows]map[agentRun]*agentList
	exact map[string]*ring
}

type agentRun struct {
	agent string
	epoch uint64
}

// runPos is the last message of an agent run a partition counted: its
// flush seq and flush time (unix ms).
type runPos struct {
	seq  uint64
	atMs int64
}

type agentList struct {
	minute int64 // of the list's flush time
	floor  int64
	items  map[string]partial.TopItem
}

func (t *trender) part(p uint32) *trendPart {
	t.mu.Lock()
	defer t.mu.Unlock()
	tp := t.parts[p]
	if tp == nil {
		tp = newTrendPart(p, t.now().Add(clockSkew).UnixMilli())
		t.parts[p] = tp
	}
	return tp
}

// newTrendPart returns an empty partition state whose exact counts start
// after startMs.
func newTrendPart(p uint32, startMs int64) *trendPart {
	return &trendPart{id: p, groups: make(map[groupKey]*trendGroup), rows: make(map[rowID]bool),
		regionAt: make(map[string]int64), runs: make(map[agentRun]runPos), startMs: startMs, gapFrom: 1, gapTo: 0}
}

// due reports whether the partition's counted messages are to be stored
// at now; tp.mu is held.
func (tp *trendPart) due(now time.Time, interval time.Duration) bool {
	return tp.dirty && now.Sub(tp.dirtySince) >= interval
}

// apply counts one applied message: its positive sums into the exact
// counts of listed items, its lists as the sending agent's latest. A
// message at or below the partition's last counted sequence (a redelivery)
// changes nothing. Every Interval it recomputes the partition's lists and
// hands them to the partition's background writer.
func (t *trender) apply(seq uint64, b *partial.Batch) {
	tp := t.part(b.Partition)
	tp.mu.Lock()
	set, w := t.applyLocked(tp, seq, b)
	if w {
		t.handLocked(tp, set)
	}
	tp.mu.Unlock()
}

// backgroundPutTimeout bounds one background store of a partition's lists.
const backgroundPutTimeout = 30 * time.Second

// handLocked gives set to the partition's background writer, starting it
// when none runs; tp.mu is held. The writer stores the newest set it was
// given until none is left, so the messages' apply never waits for the
// store (a store slowed down or just restarted, with dozens of lists a
// partition, held each batch of a catching-up rollup for seconds), and a
// set superseded before the writer took it is never stored.
func (t *trender) handLocked(tp *trendPart, set stored) {
	if old := tp.next; old != nil {
		// Superseded before the writer took it: its lists that the new
		// set leaves out (one emptied then, stored empty only by it) are
		// still to be stored, as they were.
		in := make(map[rowID]bool, len(set.rows))
		for _, row := range set.rows {
			in[listID(row)] = true
		}
		for _, row := range old.rows {
			if !in[listID(row)] {
				set.rows = append(set.rows, row)
			}
		}
	}
	tp.next = &set
	if tp.writing {
		return
	}
	tp.writing = true
	t.writers.Add(1)
	go func() {
		defer t.writers.Done()
		for {
			tp.mu.Lock()
			s := tp.next
			tp.next = nil
			if s == nil {
				tp.writing = false
				tp.mu.Unlock()
				return
			}
			tp.mu.Unlock()
			ctx, cancel := context.WithTimeout(context.Background(), backgroundPutTimeout)
			t.put(ctx, tp, *s) //nolint:errcheck // counted and logged by put
			cancel()
		}
	}()
}

// applyLocked is apply under tp.mu; it returns the lists to store when
// the partition is due (see due).
func (t *trender) applyLocked(tp *trendPart, seq uint64, b *partial.Batch) (stored, bool) {
	if seq <= tp.lastSeq {
		t.stats.Redelivered.Add(1)
		return stored{}, false
	}
	tp.lastSeq = seq
	now := t.now()
	if !tp.dirty {
		tp.dirty, tp.dirtySince = true, now
	}
	at := b.FlushedAt.UnixMilli()
	if b.FlushedAt.IsZero() {
		at = now.UnixMilli()
	}
	if at > now.Add(maxAhead).UnixMilli() {
		t.stats.FutureSkips.Add(1)
		return stored{}, false
	}
	tp.nowMs = max(tp.nowMs, at)
	tp.regionAt[b.Region] = max(tp.regionAt[b.Region], at)
	tp.runs[agentRun{b.Agent, b.Epoch}] = runPos{seq: b.Seq, atMs: at}
	if len(b.Tops) > 0 && !b.More {
		delete(tp.stale, agentRun{b.Agent, b.Epoch})
	}
	minute := topk.FloorDiv(at, time.Minute.Milliseconds())
	for i := range b.Sums {
		s := &b.Sums[i]
		if s.Delta <= 0 {
			continue
		}
		if g := tp.groups[groupKey{s.Region, s.Counter}]; g != nil {
			if r := g.exact[s.ContentID]; r != nil {
				r.add(minute, s.Delta)
			}
		}
	}
	// Exact counts start after every flush that may have been counted
	// before: this process's newest, and what a previous process may have
	// applied before this one started.
	since := topk.FloorDiv(max(tp.nowMs, tp.startMs), time.Minute.Milliseconds()) + 1
	for i := range b.Tops {
		l := &b.Tops[i]
		wi := windowIndex(l.Window)
		if wi < 0 {
			t.stats.BadLists.Add(1)
			continue
		}
		t.stats.Lists.Add(1)
		g := tp.group(groupKey{b.Region, l.Counter})
		run := agentRun{b.Agent, b.Epoch}
		if l.Floor == 0 && len(l.Items) == 0 {
			delete(g.lists[wi], run)
			continue
		}
		al := &agentList{minute: minute, floor: l.Floor, items: make(map[string]partial.TopItem, len(l.Items))}
		for _, it := range l.Items {
			if partial.PartitionOf(it.ContentID, t.cfg.Partitions) != b.Partition {
				t.stats.BadItems.Add(1)
				continue
			}
			al.items[it.ContentID] = it
			if g.exact[it.ContentID] == nil {
				// Sums counted before now are not in it: it is exact from
				// the next minute on.
				g.exact[it.ContentID] = &ring{since: since}
				tp.cands++
				t.stats.Candidates.Add(1)
			}
		}
		g.lists[wi][run] = al
	}
	// Not in the middle of a flush: its lists come with its last
	// message, and a write before them would pair this flush's sums with
	// the previous lists (a count below what is applied).
	if now := t.now(); !b.More && tp.due(now, t.cfg.Interval) {
		return t.prepare(tp, now)
	}
	return stored{}, false
}

func (tp *trendPart) group(k groupKey) *trendGroup {
	g := tp.groups[k]
	if g == nil {
		g = &trendGroup{exact: make(map[string]*ring)}
		for i := range g.lists {
			g.lists[i] = make(map[agentRun]*agentList)
		}
		tp.groups[k] = g
	}
	return g
}

// partitions returns the partitions with state, in no particular order.
func (t *trender) partitions() []*trendPart {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Collect(maps.Values(t.parts))
}

func (t *trender) writeAll(ctx context.Context) error {
	var errs []error
	for _, tp := range t.partitions() {
		errs = append(errs, t.write(ctx, tp, t.now()))
	}
	return errors.Join(errs...)
}

// write recomputes and stores the partition's lists now.
func (t *trender) write(ctx context.Context, tp *trendPart, now time.Time) error {
	tp.mu.Lock()
	set, ok := t.prepare(tp, now)
	tp.mu.Unlock()
	if !ok {
		return nil
	}
	return t.put(ctx, tp, set)
}

// stored is one computed set of a partition's lists, numbered gen, and
// the partition's state as of them.
type stored struct {
	rows  []engagement.Trending
	state engagement.TrendingState
	gen   uint64
}

// prepare recomputes the partition's lists and encodes its state; tp.mu
// is held. ok is false for a partition that is gone.
func (t *trender) prepare(tp *trendPart, now time.Time) (set stored, ok bool) {
	if tp.gone {
		return stored{}, false
	}
	if len(tp.stale) > 0 && now.Before(tp.staleUntil) {
		tp.markDirty(now)
		return stored{}, false
	}
	start := time.Now()
	tp.lastWrite, tp.dirty = now, false
	set.rows = t.compute(tp)
	set.state = tp.state(now)
	t.stats.ComputeNanos.Add(uint64(time.Since(start)))
	tp.gen++
	set.gen = tp.gen
	return set, true
}

// putParallel bounds the lists one put has in flight: a partition has a
// list per region and one global per (counter, window), dozens, and one
// at a time took seconds on a busy store.
const putParallel = 8

// put stores the lists prepare computed, putParallel at a time, then the
// partition's state, without tp.mu: a slow or frozen store delays only
// other stores of this partition's lists. A set older than one already
// stored is dropped, its lists marked to be written again; a partition
// that is gone stores nothing more. A failed row is marked to
// be written again, and the state is then not stored (it would claim
// lists the store does not hold).
func (t *trender) put(ctx context.Context, tp *trendPart, set stored) error {
	tp.wmu.Lock()
	defer tp.wmu.Unlock()
	if set.gen < tp.putGen {
		// A newer set was stored first (a WriteTrending beside the
		// background writer): this one's lists are written again by the
		// next write, since one may be a list it alone emptied.
		tp.mu.Lock()
		for _, row := range set.rows {
			tp.rows[listID(row)] = true
		}
		tp.markDirty(t.now())
		tp.mu.Unlock()
		return nil
	}
	tp.putGen = set.gen
	var (
		errMu sync.Mutex
		errs  []error
		g     errgroup.Group
	)
	g.SetLimit(putParallel)
	for _, row := range set.rows {
		tp.mu.Lock()
		gone := tp.gone
		tp.mu.Unlock()
		if gone {
			break // the rows under way finish before wmu is let go
		}
		g.Go(func() error {
			if err := t.st.PutTrending(ctx, row); err != nil {
				t.stats.WriteErrors.Add(1)
				errMu.Lock()
				errs = append(errs, err)
				errMu.Unlock()
				// Written again by the next write, even if it is empty by
				// then: the store may still hold an older, non-empty list.
				tp.mu.Lock()
				tp.rows[listID(row)] = true
				tp.markDirty(t.now())
				tp.mu.Unlock()
				return nil // collected in errs
			}
			t.stats.RowsWritten.Add(1)
			return nil
		})
	}
	g.Wait() //nolint:errcheck // every goroutine returns nil; failures are in errs
	if len(errs) == 0 {
		tp.mu.Lock()
		gone := tp.gone
		tp.mu.Unlock()
		if gone {
			return nil
		}
		if err := t.st.PutTrendingState(ctx, set.state); err != nil {
			t.stats.WriteErrors.Add(1)
			errs = append(errs, err)
			tp.mu.Lock()
			tp.markDirty(t.now())
			tp.mu.Unlock()
		} else {
			t.stats.StatesWritten.Add(1)
			t.stats.StateBytes.Add(uint64(len(set.state.Data)))
		}
	}
	if err := errors.Join(errs...); err != nil {
		t.warnMu.Lock()
		if now := time.Now(); now.Sub(t.lastWarned) > 10*time.Second {
			t.lastWarned = now
			t.logger.Warn("cannot store trending lists; they are written again at the next interval", "partition", tp.id, "failed", len(errs), "err", err)
		}
		t.warnMu.Unlock()
		return fmt.Errorf("cannot store trending lists of partition %d: %w", tp.id, err)
	}
	return nil
}

// compute returns the partition's lists as of its newest flush time: one
// per region and one global per (counter, window), plus an empty one for
// every list stored non-empty last time that has no items now. It runs in
// three phases: prune what no longer overlaps the windows, rank the lists
// of the groups left, and empty the stored lists of the groups gone.
func (t *trender) compute(tp *trendPart) []engagement.Trending {
	m := topk.FloorDiv(tp.nowMs, time.Minute.Milliseconds())
	asOf := time.UnixMilli(tp.nowMs)
	t.prune(tp, m)
	out, nonEmpty := t.rankLists(tp, m, asOf)
	out = append(out, tp.emptiedLists(asOf)...)
	tp.rows = nonEmpty
	return out
}

// prune drops what no longer overlaps the windows as of minute m: agent
// lists older than their window, exact counts of items that no list names
// any more, and groups left with no list. It updates the candidates gauge.
func (t *trender) prune(tp *trendPart, m int64) {
	var cands int64
	for k, g := range tp.groups {
		named := make(map[string]bool)
		empty := true
		for wi := range g.lists {
			first := firstMinute(wi, m)
			for run, al := range g.lists[wi] {
				if al.minute < first {
					delete(g.lists[wi], run) // every arrival it counts is older than the window
					continue
				}
				empty = false
				for id := range al.items {
					named[id] = true
				}
			}
		}
		for id := range g.exact {
			if !named[id] {
				delete(g.exact, id)
			}
		}
		if empty {
			delete(tp.groups, k)
		}
		cands += int64(len(g.exact))
	}
	t.stats.Candidates.Add(cands - tp.cands)
	tp.cands = cands
	// Regions and runs not heard of for longer than the longest window
	// count in no list any more.
	oldest := tp.nowMs - (24*time.Hour + time.Hour).Milliseconds()
	maps.DeleteFunc(tp.regionAt, func(_ string, at int64) bool { return at < oldest })
	maps.DeleteFunc(tp.runs, func(_ agentRun, p runPos) bool { return p.atMs < oldest })
}

// markDirty makes the partition due again Interval after now (a failed
// write); tp.mu is held.
func (tp *trendPart) markDirty(now time.Time) {
	if !tp.dirty {
		tp.dirty, tp.dirtySince = true, now
	}
}

// rankLists returns the ranked lists of the partition's groups as of
// minute m, in a stable order: every region's per (counter, region,
// window), then the global ones per (counter, window). A list with no
// items is left out unless it was stored non-empty last time (tp.rows);
// every list it returns is taken out of tp.rows, so what is left there
// belongs to groups that are gone. nonEmpty names the lists it returns
// with items.
func (t *trender) rankLists(tp *trendPart, m int64, asOf time.Time) (out []engagement.Trending, nonEmpty map[rowID]bool) {
	nonEmpty = make(map[rowID]bool)
	emit := func(scope, counter string, wi int, items []engagement.TrendingItem) {
		id := rowID{scope, counter, wi}
		if len(items) == 0 && !tp.rows[id] {
			return
		}
		delete(tp.rows, id)
		engagement.RankTrending(items)
		items = items[:min(len(items), t.cfg.RowItems)]
		out = append(out, engagement.Trending{
			TrendingKey: engagement.TrendingKey{Scope: scope, Counter: counter, Window: windowName(wi), Partition: tp.id},
			AsOf:        asOf, Items: items,
		})
		if len(items) > 0 {
			nonEmpty[id] = true
		}
	}
	byCounter := make(map[string][]*trendGroup)
	keys := slices.SortedFunc(maps.Keys(tp.groups), func(a, b groupKey) int {
		return cmp.Or(strings.Compare(a.counter, b.counter), strings.Compare(a.region, b.region))
	})
	for _, k := range keys {
		g := tp.groups[k]
		byCounter[k.counter] = append(byCounter[k.counter], g)
		for wi := range numWindows {
			emit(k.region, k.counter, wi, listItems([]*trendGroup{g}, wi, m, tp.gap()))
		}
	}
	for _, counter := range slices.Sorted(maps.Keys(byCounter)) {
		for wi := range numWindows {
			emit(engagement.GlobalScope, counter, wi, listItems(byCounter[counter], wi, m, tp.gap()))
		}
	}
	return out, nonEmpty
}

// listItems returns the unranked items of window wi as of minute m over
// the groups gs (one region's group, or every region's for the global
// list): each candidate of any group with its bounds summed over the
// groups; an item whose upper bound is 0 is left out.
func listItems(gs []*trendGroup, wi int, m int64, gap minutes) []engagement.TrendingItem {
	ids := make(map[string]bool)
	for _, g := range gs {
		for id := range g.candidates(wi, m) {
			ids[id] = true
		}
	}
	var items []engagement.TrendingItem
	for id := range ids {
		var lo, hi int64
		for _, g := range gs {
			l, h := g.bound(id, wi, m, gap)
			lo, hi = topk.SatAdd(lo, l), topk.SatAdd(hi, h)
		}
		if hi > 0 {
			items = append(items, engagement.TrendingItem{ContentID: id, Count: hi, Error: hi - lo})
		}
	}
	return items
}

// emptiedLists returns an empty list for every list left in tp.rows: one
// the last write stored non-empty, of a group that is gone. The store may
// still hold it non-empty.
func (tp *trendPart) emptiedLists(asOf time.Time) []engagement.Trending {
	var out []engagement.Trending
	for id := range tp.rows {
		out = append(out, engagement.Trending{
			TrendingKey: engagement.TrendingKey{Scope: id.scope, Counter: id.counter, Window: windowName(id.window), Partition: tp.id},
			AsOf:        asOf,
		})
	}
	return out
}

// minutes is an inclusive range of minutes; empty when to < from.
type minutes struct{ from, to int64 }

func (g minutes) overlaps(from, to int64) bool { return g.from <= g.to && g.from <= to && from <= g.to }

func (tp *trendPart) gap() minutes { return minutes{tp.gapFrom, tp.gapTo} }

// candidates yields the items of window wi's lists, and the items whose
// exact count covers the window.
func (g *trendGroup) candidates(wi int, m int64) func(yield func(string) bool) {
	return func(yield func(string) bool) {
		seen := make(map[string]bool)
		for _, al := range g.lists[wi] {
			for id := range al.items {
				if !seen[id] {
					seen[id] = true
					if !yield(id) {
						return
					}
				}
			}
		}
		for id, r := range g.exact {
			if !seen[id] && r.since <= firstMinute(wi, m) {
				seen[id] = true
				if !yield(id) {
					return
				}
			}
		}
	}
}

// bound returns the bounds of item id's count in the group over window wi
// as of minute m (see docs/trending.md):
//   - from the lists: an agent's list of minute m adds [count-error,
//     count] for an item it names and [0, floor] for one it does not; a
//     list of an earlier minute adds only upper bounds (its window has
//     moved since, so some of what it counts may have left);
//   - from the exact counts: an item's count since it was first listed is
//     a lower bound, and its whole count once that covers the window and
//     the window does not overlap gap (minutes a previous owner may have
//     counted after its last stored state).
func (g *trendGroup) bound(id string, wi int, m int64, gap minutes) (lo, hi int64) {
	for _, al := range g.lists[wi] {
		if it, ok := al.items[id]; ok {
			hi = topk.SatAdd(hi, it.Count)
			if al.minute == m {
				lo = topk.SatAdd(lo, it.Count-it.Error)
			}
		} else {
			hi = topk.SatAdd(hi, al.floor)
		}
	}
	if r := g.exact[id]; r != nil {
		e, covered := r.sum(wi, m)
		if covered && !gap.overlaps(firstMinute(wi, m), m) {
			return e, e
		}
		lo = max(lo, e)
		hi = max(hi, lo)
	}
	return lo, hi
}

// ring holds an item's exact counts per minute (the last 60) and per hour
// (the last 24), counted from minute since on, bucketed by flush time.
type ring struct {
	since int64
	min   [60]bucket
	hour  [24]bucket
}

type bucket struct{ n, v int64 }

func (r *ring) add(minute, d int64) {
	if minute < r.since {
		return
	}
	put := func(b *bucket, n int64) {
		if b.n < n {
			*b = bucket{n: n}
		}
		if b.n == n {
			b.v = topk.SatAdd(b.v, d)
		}
	}
	put(&r.min[mod(minute, 60)], minute)
	h := topk.FloorDiv(minute, 60)
	put(&r.hour[mod(h, 24)], h)
}

// sum returns the item's count over window wi as of minute m, and whether
// it covers the whole window (else it is a lower bound).
func (r *ring) sum(wi int, m int64) (int64, bool) {
	first := firstMinute(wi, m)
	var v int64
	if wi == 2 {
		for h := topk.FloorDiv(first, 60); h <= topk.FloorDiv(m, 60); h++ {
			if b := &r.hour[mod(h, 24)]; b.n == h {
				v = topk.SatAdd(v, b.v)
			}
		}
	} else {
		for n := first; n <= m; n++ {
			if b := &r.min[mod(n, 60)]; b.n == n {
				v = topk.SatAdd(v, b.v)
			}
		}
	}
	return v, r.since <= first
}

func mod(a, b int64) int64 {
	r := a % b
	if r < 0 {
		r += b
	}
	return r
}
