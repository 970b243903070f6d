package region

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/partial"
	"github.com/edgecount/edgecount/topk"
)

// MaxTrendingK is the most items one trending query may ask for.
const MaxTrendingK = 1000

// Errors of trending queries.
var (
	// ErrNotTracked means the agent keeps no trending list for the counter
	// (trending is off, or the counter is not configured).
	ErrNotTracked = errors.New("no trending list kept for this counter")
	// ErrTrendingQuery means a trending query names no window or a k out
	// of 1..MaxTrendingK; the HTTP layer rejects such queries first.
	ErrTrendingQuery = errors.New("invalid trending query")
)

// TrendingConfig configures the agent's trending summaries. The zero value
// (no Counters) turns trending off.
type TrendingConfig struct {
	// Counters lists the counters whose trending is kept. Every agent of a
	// region must list the same counters.
	Counters []string
	// SummaryBytes is the memory of one summary; a counter keeps one per
	// time bucket (60 one-minute and 24 one-hour buckets), two per window
	// for the merged views and one for the current minute: 91 ×
	// SummaryBytes. Zero means 64 KiB (514 tracked items per bucket).
	SummaryBytes int
	// ListLen is how many items of each (counter, window) list the agent
	// ships to the rollup and broadcasts to its peers: more than any K a
	// reader asks for, so that merged lists rank well. Zero means 200; at
	// most MaxTrendingK.
	ListLen int
	// Hot is the rule that gives the region's trending items more shards.
	Hot HotConfig
	// Regions lists the system's regions: an answer from the rollup's
	// stored lists that does not count all of them (or counts one that
	// is behind) is marked incomplete (TrendingAnswer). Empty: only a
	// region behind the others makes an answer incomplete.
	Regions []string
}

// HotConfig is the hot-counter rule (see docs/trending.md): an item that enters its
// region's top Top of a counter over Window gets Shards shards; one that
// stays out of the top 2×Top for CoolAfter goes back to one shard.
type HotConfig struct {
	// Top is N; 0 turns the rule off.
	Top int
	// Window is the trending window the rule reads; empty means "5m".
	Window string
	// Shards is the shard count of a hot counter; 0 means
	// CountersConfig.MaxShards.
	Shards int
	// CoolAfter is how long a hot item must stay out of the top 2×Top
	// before it cools; 0 means 5 minutes.
	CoolAfter time.Duration
	// Interval is how often the rule runs; 0 means 10 seconds.
	Interval time.Duration
}

// DefaultTrendingConfig keeps trending for likes, views and shares, with
// the hot rule on for the top 10.
func DefaultTrendingConfig() TrendingConfig {
	return TrendingConfig{
		Counters:     []string{engagement.CounterLike, "view", "share"},
		SummaryBytes: 64 << 10,
		ListLen:      200,
		Hot:          HotConfig{Top: 10, Window: engagement.Window5m, CoolAfter: 5 * time.Minute, Interval: 10 * time.Second},
	}
}

// Enabled reports whether trending is kept at all.
func (c TrendingConfig) Enabled() bool { return len(c.Counters) > 0 }

// withDefaults fills zero fields.
func (c TrendingConfig) withDefaults(maxShards int) TrendingConfig {
	if c.SummaryBytes == 0 {
		c.SummaryBytes = 64 << 10
	}
	if c.ListLen == 0 {
		c.ListLen = 200
	}
	if c.Hot.Window == "" {
		c.Hot.Window = engagement.Window5m
	}
	if c.Hot.Shards == 0 {
		c.Hot.Shards = maxShards
	}
	if c.Hot.CoolAfter == 0 {
		c.Hot.CoolAfter = 5 * time.Minute
	}
	if c.Hot.Interval == 0 {
		c.Hot.Interval = 10 * time.Second
	}
	return c
}

// Validate reports every problem with c. Zero fields are valid: they mean
// the default.
func (c TrendingConfig) Validate() error {
	if !c.Enabled() {
		return nil
	}
	var errs []error
	for i, name := range c.Counters {
		if !engagement.ValidCounter(name) {
			errs = append(errs, fmt.Errorf("trending counters[%d] %q: want [a-z][a-z0-9_]{0,31}", i, name))
		} else if slices.Index(c.Counters, name) != i {
			errs = append(errs, fmt.Errorf("trending counters[%d] %q: listed twice", i, name))
		}
	}
	if c.SummaryBytes != 0 {
		if _, err := topk.ConfigForBytes(c.SummaryBytes, 0); err != nil {
			errs = append(errs, fmt.Errorf("trending summary bytes %d: %w", c.SummaryBytes, err))
		}
	}
	if c.ListLen < 0 || c.ListLen > MaxTrendingK {
		errs = append(errs, fmt.Errorf("trending list length %d: want 1..%d (0 for the default)", c.ListLen, MaxTrendingK))
	}
	h := c.Hot
	if h.Top < 0 || h.Top > MaxTrendingK/2 {
		errs = append(errs, fmt.Errorf("hot top %d: want 0..%d", h.Top, MaxTrendingK/2))
	}
	if _, ok := engagement.WindowSpan(h.Window); h.Window != "" && !ok {
		errs = append(errs, fmt.Errorf("hot window %q: want one of %s", h.Window, strings.Join(engagement.TrendingWindows(), ", ")))
	}
	if h.Shards < 0 || h.Shards > maxShardsLimit {
		errs = append(errs, fmt.Errorf("hot shards %d: want 1..%d (0 for the counters' max shards)", h.Shards, maxShardsLimit))
	}
	if h.CoolAfter < 0 || h.Interval < 0 {
		errs = append(errs, fmt.Errorf("hot cool after %v, interval %v: want >= 0", h.CoolAfter, h.Interval))
	}
	return errors.Join(errs...)
}

// TrendingReader reads the trending lists the rollup stored: every
// partition's list of (scope, counter, window), and what every
// partition's lists cover (the regions counted and how recent each is).
type TrendingReader interface {
	ReadTrending(ctx context.Context, scope, counter, window string) ([]engagement.Trending, error)
	ReadTrendingCoverage(ctx context.Context) ([]engagement.TrendingState, error)
}

// TrendingAnswer is a trending list with what it counts: the regions
// whose contributions it includes, each with the newest flush time of
// its that the list counts, and whether that is every region.
type TrendingAnswer struct {
	engagement.Trending
	// Regions are the regions the list includes, by name, each as of
	// the newest flush of its the list counts.
	Regions []engagement.RegionAsOf
	// Behind are regions the list counts only up to more than
	// BehindAfter flush intervals before the newest region's
	// contribution (cut off from the rollups, or idle): not in Regions.
	Behind []engagement.RegionAsOf
	// Complete: every region of the system (TrendingConfig.Regions) is
	// in Regions.
	Complete bool
}

// BehindAfter is how many flush intervals a region's contribution to a
// stored list may trail the newest region's before it counts as behind:
// G14's bound on how long the global lists may take.
const BehindAfter = 3

// PeerSummaries gives the trending summaries that the other agents of the
// region broadcast (gossip). It is declared here, by its consumer; the
// gossip layer implements it.
type PeerSummaries interface {
	// PeerSummaries returns the latest summary that each live peer of the
	// region broadcast under key (TrendingSummaryKey), not this agent's
	// own. It must not block. The agent does not modify or keep the
	// returned slices beyond the call.
	PeerSummaries(key string) []PeerSummary
}

// PeerSummary is one peer's broadcast summary.
type PeerSummary struct {
	Agent string
	AsOf  time.Time
	// Data is a topk encoding (AppendTop) of the peer's own counts.
	Data []byte
}

// TrendingSummary is one of the agent's own summaries, for broadcast to
// its region's peers under Key.
type TrendingSummary struct {
	Key  string
	AsOf time.Time
	// Data is a topk encoding (AppendTop of ListLen items and one bound
	// cell) of this agent's counts of the counter over the window.
	Data []byte
}

// TrendingSummaryKey returns the broadcast key of (counter, window):
// "trending/<counter>/<window>".
func TrendingSummaryKey(counter, window string) string {
	return "trending/" + counter + "/" + window
}

// ShardWriter records a counter's shard count for every agent of the
// region: the shard directory (in-process, or Redis, whose change reaches
// every agent by invalidation). shards 1 means "back to the default".
type ShardWriter interface {
	SetShards(ctx context.Context, contentID, counter string, shards int) error
}

// trending holds an agent's trending summaries. The windows and the
// shipping state belong to the flusher (under flushMu); snapshots of the
// last flush's lists are published under mu for queries and broadcast.
type trending struct {
	cfg      TrendingConfig
	region   string
	parts    int
	counters map[string]*trendCounter // fixed after construction
	names    []string                 // sorted counter names
	windows  []string
	spans    []time.Duration

	// Flusher-owned.
	lastHash   []uint64 // per partition: hash of the lists last shipped
	lastMinute []int64  // per partition: minute of the last shipped lists
	emptyHash  uint64
	per        [][]partial.TopList // per partition scratch
	sizeLimit  int                 // bytes one list may take
	computed   int64               // minute of the last snapshots; MinInt64: none
	curMinute  int64               // minute of the counters' cur; MinInt64: none

	mu    sync.Mutex
	snaps map[snapKey]*trendSnap
	// coverWarned throttles the warning of an unreadable coverage (unix ns).
	coverWarned atomic.Int64
}

// trendCounter is one counter's window. A view of it (what MergeInto
// gives) is kept as two parts: the closed buckets of each window, merged
// once per minute, and the current minute, kept beside the window; a flush
// merges the two instead of every bucket of the window.
type trendCounter struct {
	window *topk.Window
	closed []*topk.Summary // per window: its buckets but the current minute
	cur    *topk.Summary   // the current minute's adds
	views  []*topk.Summary // per window, reused
}

type snapKey struct{ counter, window string }

// trendSnap is one (counter, window) list as of a flush, encoded: the
// first ListLen items in Top order and one cell that bounds every other
// item (topk AppendTop).
type trendSnap struct {
	asOf time.Time
	enc  []byte
}

func newTrending(cfg TrendingConfig, region string, parts, messageLimit int) (*trending, error) {
	sc, err := topk.ConfigForBytes(cfg.SummaryBytes, 0)
	if err != nil {
		return nil, err
	}
	t := &trending{
		cfg:        cfg,
		region:     region,
		parts:      parts,
		counters:   make(map[string]*trendCounter, len(cfg.Counters)),
		names:      slices.Sorted(slices.Values(cfg.Counters)),
		windows:    engagement.TrendingWindows(),
		lastHash:   make([]uint64, parts),
		lastMinute: make([]int64, parts),
		per:        make([][]partial.TopList, parts),
		sizeLimit:  messageLimit - 64,
		snaps:      make(map[snapKey]*trendSnap),
		computed:   math.MinInt64,
		curMinute:  math.MinInt64,
	}
	for _, w := range t.windows {
		span, _ := engagement.WindowSpan(w)
		t.spans = append(t.spans, span)
	}
	for _, name := range t.names {
		w, err := topk.NewWindow(topk.DefaultWindowConfig(sc))
		if err != nil {
			return nil, err
		}
		tc := &trendCounter{window: w}
		if tc.cur, err = topk.New(sc); err != nil {
			return nil, err
		}
		for range t.windows {
			v, err := topk.New(sc)
			if err != nil {
				return nil, err
			}
			c, err := topk.New(sc)
			if err != nil {
				return nil, err
			}
			tc.views, tc.closed = append(tc.views, v), append(tc.closed, c)
		}
		t.counters[name] = tc
	}
	t.emptyHash = t.hashLists(t.emptyLists())
	for p := range t.lastHash {
		t.lastHash[p] = t.emptyHash
	}
	return t, nil
}

// emptyLists returns the lists of a partition with nothing tracked.
func (t *trending) emptyLists() []partial.TopList {
	var out []partial.TopList
	for _, c := range t.names {
		for _, w := range t.windows {
			out = append(out, partial.TopList{Counter: c, Window: w})
		}
	}
	return out
}

// flush counts the own region's positive sums of tracked counters at time
// at, refreshes the snapshots, and returns the lists to ship per
// partition (nil for a partition whose lists need not be shipped). A
// partition's lists are shipped when they changed since they were last
// shipped, or when the minute changed and they are not empty (so the
// rollup sees that they are current). Called by the flusher only.
func (t *trending) flush(parts [][]partial.Sum, at time.Time) [][]partial.TopList {
	minute := topk.FloorDiv(at.UnixMilli(), time.Minute.Milliseconds())
	if minute > t.curMinute {
		// A new minute, before anything is added to it: the windows' views
		// are their closed buckets now.
		for _, tc := range t.counters {
			for wi := range t.windows {
				tc.closed[wi].Reset()
				if err := tc.window.MergeInto(tc.closed[wi], at, t.spans[wi]); err != nil {
					panic(fmt.Sprintf("trending window %s: %v", t.windows[wi], err)) // the default window covers every span
				}
			}
			tc.cur.Reset()
		}
		t.curMinute = minute
	}
	added := false
	for p := range parts {
		for i := range parts[p] {
			s := &parts[p][i]
			if s.Delta <= 0 || s.Region != t.region {
				continue
			}
			if tc := t.counters[s.Counter]; tc != nil {
				// A time before the current minute (a clock step back)
				// counts in it, in the window as here.
				tc.window.Add(at, s.ContentID, s.Delta)
				tc.cur.Add(s.ContentID, s.Delta)
				added = true
			}
		}
	}
	if !added && minute == t.computed {
		// Nothing new within the minute: the lists are what was shipped,
		// and as of now.
		t.mu.Lock()
		for k, s := range t.snaps {
			c := *s
			c.asOf = at
			t.snaps[k] = &c
		}
		t.mu.Unlock()
		return nil
	}
	t.computed = minute
	for p := range t.per {
		clear(t.per[p])
		t.per[p] = t.per[p][:0]
	}
	snaps := make(map[snapKey]*trendSnap, len(t.names)*len(t.windows))
	for _, c := range t.names {
		tc := t.counters[c]
		for wi, w := range t.windows {
			v := tc.views[wi]
			v.Reset()
			v.Merge(tc.closed[wi])
			v.Merge(tc.cur)
			items := v.Top(t.cfg.ListLen + 1)
			floor := v.Floor()
			if len(items) > t.cfg.ListLen {
				floor = max(floor, items[t.cfg.ListLen].Count)
				items = items[:t.cfg.ListLen]
			}
			snaps[snapKey{c, w}] = &trendSnap{asOf: at, enc: v.AppendTop(nil, t.cfg.ListLen)}
			t.split(c, w, items, floor)
		}
	}
	t.mu.Lock()
	t.snaps = snaps
	t.mu.Unlock()

	var out [][]partial.TopList
	for p, lists := range t.per {
		h := t.hashLists(lists)
		if h == t.lastHash[p] && (minute == t.lastMinute[p] || h == t.emptyHash) {
			continue
		}
		if out == nil {
			out = make([][]partial.TopList, t.parts)
		}
		out[p] = lists
		t.lastHash[p], t.lastMinute[p] = h, minute
	}
	return out
}

// split appends the (counter, window) list to every partition's lists:
// each partition gets its own items and the common floor. A list that
// would not fit in one message keeps its largest items and raises its
// floor to the largest count it drops, which keeps the bound valid.
func (t *trending) split(counter, window string, items []topk.Item, floor int64) {
	for p := range t.per {
		t.per[p] = append(t.per[p], partial.TopList{Counter: counter, Window: window, Floor: floor})
	}
	for _, it := range items {
		p := partial.PartitionOf(it.ID, t.parts)
		l := &t.per[p][len(t.per[p])-1]
		l.Items = append(l.Items, partial.TopItem{ContentID: it.ID, Count: it.Count, Error: it.Error})
	}
	for p := range t.per {
		l := &t.per[p][len(t.per[p])-1]
		for partial.TopListSize(l) > t.sizeLimit && len(l.Items) > 0 {
			last := l.Items[len(l.Items)-1]
			l.Floor = max(l.Floor, last.Count)
			l.Items = l.Items[:len(l.Items)-1]
		}
	}
}

func (t *trending) hashLists(lists []partial.TopList) uint64 {
	var d xxhash.Digest
	d.Reset()
	var buf [8]byte
	num := func(v int64) {
		binary.LittleEndian.PutUint64(buf[:], uint64(v))
		d.Write(buf[:])
	}
	str := func(s string) {
		num(int64(len(s)))
		d.WriteString(s)
	}
	for i := range lists {
		l := &lists[i]
		str(l.Counter)
		str(l.Window)
		num(l.Floor)
		num(int64(len(l.Items)))
		for j := range l.Items {
			str(l.Items[j].ContentID)
			num(l.Items[j].Count)
			num(l.Items[j].Error)
		}
	}
	return d.Sum64()
}

// snapshot returns the last flush's list of (counter, window), or nil.
func (t *trending) snapshot(counter, window string) *trendSnap {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.snaps[snapKey{counter, window}]
}

// summaries returns every snapshot as a broadcast summary, in a stable
// order.
func (t *trending) summaries() []TrendingSummary {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []TrendingSummary
	for _, c := range t.names {
		for _, w := range t.windows {
			if s := t.snaps[snapKey{c, w}]; s != nil {
				out = append(out, TrendingSummary{Key: TrendingSummaryKey(c, w), AsOf: s.asOf, Data: s.enc})
			}
		}
	}
	return out
}

// trendList is a merged trending list: every item known, ranked.
type trendList struct {
	asOf     time.Time
	items    []engagement.TrendingItem
	regions  []engagement.RegionAsOf
	behind   []engagement.RegionAsOf
	complete bool
	until    time.Time // cache expiry
}

// trendCache keeps merged lists for a short while; it holds at most
// maxTrendCache lists.
type trendCache struct {
	mu sync.Mutex
	m  map[trendQuery]*trendList
}

type trendQuery struct{ scope, counter, window string }

const maxTrendCache = 256

func (c *trendCache) get(q trendQuery, now time.Time) *trendList {
	c.mu.Lock()
	defer c.mu.Unlock()
	if l := c.m[q]; l != nil && now.Before(l.until) {
		return l
	}
	return nil
}

func (c *trendCache) put(q trendQuery, l *trendList) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxTrendCache {
		c.m = make(map[trendQuery]*trendList)
	}
	c.m[q] = l
}

// Trending returns the k items with the largest counts of counter over
// window in scope (GlobalScope or a region), each with its count and error
// bound (the true count is in [Count-Error, Count]), and the time the list
// is as of.
//
// The agent's own region is answered from this agent's summary merged with
// its region peers' broadcast summaries when a peer source is set
// (SetPeers). Otherwise, and for every other scope, it is answered from
// the lists the rollup stored; the agent's own summary is not added to
// them, because they already count this agent's share up to their as-of
// time and adding it again would break the lower bounds. Answers are cached
// for Config.CacheTTL.
func (a *Agent) Trending(ctx context.Context, scope, counter, window string, k int) (engagement.Trending, error) {
	v, err := a.TrendingView(ctx, scope, counter, window, k)
	return v.Trending, err
}

// TrendingView is Trending with what the answer counts: the regions it
// includes, as of when, and whether that is all of them. An answer from
// the agent's own and its peers' summaries includes its region, complete.
// One from the rollup's stored lists includes the regions that the
// partitions' stored states name, each as of the newest of its flushes
// any partition counts; a region more than BehindAfter flush intervals
// behind the newest is left out of Regions (in Behind), and the answer is
// complete when Regions holds every region of TrendingConfig.Regions (of
// a regional scope: that region).
func (a *Agent) TrendingView(ctx context.Context, scope, counter, window string, k int) (TrendingAnswer, error) {
	out := TrendingAnswer{Trending: engagement.Trending{TrendingKey: engagement.TrendingKey{Scope: scope, Counter: counter, Window: window}}}
	if a.trend == nil || a.trend.counters[counter] == nil {
		return out, fmt.Errorf("%w: %q", ErrNotTracked, counter)
	}
	if _, ok := engagement.WindowSpan(window); !ok || k < 1 || k > MaxTrendingK {
		return out, fmt.Errorf("%w: window %q, k %d", ErrTrendingQuery, window, k)
	}
	if scope != engagement.GlobalScope && !engagement.ValidRegion(scope) {
		return out, fmt.Errorf("%w: scope %q", ErrTrendingQuery, scope)
	}
	l, err := a.trendingList(ctx, scope, counter, window)
	if err != nil {
		return out, err
	}
	out.AsOf = l.asOf
	out.Items = l.items[:min(k, len(l.items))]
	out.Regions, out.Behind, out.Complete = l.regions, l.behind, l.complete
	return out, nil
}

// trendingList returns the whole merged list of a query, cached.
func (a *Agent) trendingList(ctx context.Context, scope, counter, window string) (*trendList, error) {
	now := a.now()
	q := trendQuery{scope, counter, window}
	if l := a.trendCache.get(q, now); l != nil {
		return l, nil
	}
	var (
		l   *trendList
		err error
	)
	if peers := a.peers.Load(); scope == a.cfg.Region && peers != nil {
		l, err = a.regionalFromPeers(*peers, counter, window)
	} else {
		l, err = a.storedTrending(ctx, scope, counter, window)
	}
	if err != nil {
		return nil, err
	}
	l.until = now.Add(a.cfg.CacheTTL)
	a.trendCache.put(q, l)
	return l, nil
}

// regionalFromPeers merges this agent's last flushed summary with its
// peers' broadcast ones. The agents' streams are disjoint (each counts the
// writes it accepted), so the merge bounds the region's counts as of the
// oldest summary merged.
func (a *Agent) regionalFromPeers(peers PeerSummaries, counter, window string) (*trendList, error) {
	var parts []*topk.Summary
	n := 0
	var asOf time.Time
	add := func(data []byte, at time.Time) error {
		s, err := topk.DecodeSummary(data)
		if err != nil {
			return err
		}
		parts = append(parts, s)
		n += s.Len()
		if asOf.IsZero() || at.Before(asOf) {
			asOf = at
		}
		return nil
	}
	if own := a.trend.snapshot(counter, window); own != nil {
		if err := add(own.enc, own.asOf); err != nil {
			return nil, fmt.Errorf("cannot decode own trending summary: %w", err)
		}
	}
	for _, p := range peers.PeerSummaries(TrendingSummaryKey(counter, window)) {
		if err := add(p.Data, p.AsOf); err != nil {
			a.stats.PeerSummaryErrors.Add(1)
			a.logger.Warn("peer trending summary does not decode, left out", "peer", p.Agent, "err", err)
		}
	}
	l := &trendList{asOf: asOf}
	if len(parts) == 0 {
		return l, nil
	}
	l.regions, l.complete = []engagement.RegionAsOf{{Region: a.cfg.Region, AsOf: asOf}}, true
	merged, err := topk.New(topk.Config{Capacity: max(1, n), Rows: 1, Cells: 1})
	if err != nil {
		return nil, fmt.Errorf("cannot merge trending summaries: %w", err)
	}
	for _, s := range parts {
		merged.Merge(s)
	}
	for _, it := range merged.Top(-1) {
		l.items = append(l.items, engagement.TrendingItem{ContentID: it.ID, Count: it.Count, Error: it.Error})
	}
	return l, nil
}

// storedTrending merges the rollup's per-partition lists of a query. The
// partitions hold disjoint items, so merging is ranking their union; the
// list is as of its oldest partition. A partition's list older than the
// window (nothing it counts can still be in the window: the rollup stopped
// hearing of the partition, e.g. it restarted after every agent did) is
// left out.
func (a *Agent) storedTrending(ctx context.Context, scope, counter, window string) (*trendList, error) {
	if a.trendStore == nil {
		return nil, errors.New("cannot read trending: no trending store")
	}
	rows, err := a.trendStore.ReadTrending(ctx, scope, counter, window)
	if err != nil {
		return nil, fmt.Errorf("cannot read trending: %w", err)
	}
	span, _ := engagement.WindowSpan(window)
	oldest := a.now().Add(-span)
	l := &trendList{}
	for _, r := range rows {
		if r.AsOf.Before(oldest) {
			continue
		}
		if l.asOf.IsZero() || r.AsOf.Before(l.asOf) {
			l.asOf = r.AsOf
		}
		l.items = append(l.items, r.Items...)
	}
	engagement.RankTrending(l.items)
	// After the lists: a partition's state is stored after its lists, so
	// what it claims the lists hold.
	cov, err := a.trendStore.ReadTrendingCoverage(ctx)
	if err != nil {
		// The list is still worth answering; it is marked incomplete.
		last := a.trend.coverWarned.Load()
		if now := time.Now().UnixNano(); now-last > int64(10*time.Second) && a.trend.coverWarned.CompareAndSwap(last, now) {
			a.logger.Warn("cannot read what the trending lists cover; answers are marked incomplete", "err", err)
		}
		return l, nil
	}
	l.regions, l.behind, l.complete = coverage(cov, scope, a.trend.cfg.Regions, oldest, BehindAfter*a.cfg.FlushInterval)
	return l, nil
}

// coverage returns the regions the partitions' states say a list of
// scope counts, each as of the newest of its flushes any partition
// counts, leaving out what is older than oldest; those more than behind
// older than the newest region's go to behindRegions. complete: every
// region of want (of a regional scope: that region) is included.
func coverage(states []engagement.TrendingState, scope string, want []string, oldest time.Time, behind time.Duration) (included, behindRegions []engagement.RegionAsOf, complete bool) {
	newest := map[string]time.Time{}
	for _, st := range states {
		for _, r := range st.Regions {
			if scope != engagement.GlobalScope && r.Region != scope || r.AsOf.Before(oldest) {
				continue
			}
			if r.AsOf.After(newest[r.Region]) {
				newest[r.Region] = r.AsOf
			}
		}
	}
	var front time.Time
	for _, at := range newest {
		if at.After(front) {
			front = at
		}
	}
	for _, r := range slices.Sorted(maps.Keys(newest)) {
		ra := engagement.RegionAsOf{Region: r, AsOf: newest[r]}
		if newest[r].Before(front.Add(-behind)) {
			behindRegions = append(behindRegions, ra)
		} else {
			included = append(included, ra)
		}
	}
	if scope != engagement.GlobalScope {
		want = []string{scope}
	}
	complete = len(included) > 0 && len(behindRegions) == 0
	for _, r := range want {
		if !slices.ContainsFunc(included, func(ra engagement.RegionAsOf) bool { return ra.Region == r }) {
			complete = false
		}
	}
	return included, behindRegions, complete
}

// TrendingSummaries returns this agent's own trending summaries as of its
// last flush, one per (counter, window), for broadcast to its region's
// peers. It is empty when trending is off or before the first flush. The
// returned Data must not be modified.
func (a *Agent) TrendingSummaries() []TrendingSummary {
	if a.trend == nil {
		return nil
	}
	return a.trend.summaries()
}

// SetPeers sets the source of the region peers' summaries (gossip); nil
// goes back to the rollup's stored lists. Safe to call at any time.
func (a *Agent) SetPeers(p PeerSummaries) {
	if p == nil {
		a.peers.Store(nil)
		return
	}
	a.peers.Store(&p)
}

// TrendingCounters returns the counters whose trending is kept.
func (a *Agent) TrendingCounters() []string {
	if a.trend == nil {
		return nil
	}
	return slices.Clone(a.trend.names)
}
