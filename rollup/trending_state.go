package rollup

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/partial"
	"github.com/edgecount/edgecount/store"
	"github.com/edgecount/edgecount/topk"
)

// stateVersion is the leading byte of an encoded trending state.
const stateVersion = 1

// errState is wrapped by every decodeState error.
var errState = errors.New("malformed trending state")

// state returns the partition's state as of now (the rollup's clock):
// what its lists cover and the encoding of its windows. tp.mu is held.
func (tp *trendPart) state(now time.Time) engagement.TrendingState {
	st := engagement.TrendingState{Partition: tp.id, AsOf: time.UnixMilli(tp.nowMs)}
	for _, r := range slices.Sorted(maps.Keys(tp.regionAt)) {
		st.Regions = append(st.Regions, engagement.RegionAsOf{Region: r, AsOf: time.UnixMilli(tp.regionAt[r])})
	}
	st.Data = tp.encode(nil, now)
	return st
}

// encode appends the partition's window state (docs/trending.md, Restart
// and handover): its counted position, per region and per agent run the
// newest message counted, the lists stored non-empty, and per group every
// agent run's lists and the exact counts of the candidates. Maps are
// written in sorted order, so equal states encode equally.
func (tp *trendPart) encode(dst []byte, now time.Time) []byte {
	u := func(v uint64) { dst = binary.AppendUvarint(dst, v) }
	i := func(v int64) { dst = binary.AppendVarint(dst, v) }
	str := func(s string) { u(uint64(len(s))); dst = append(dst, s...) }
	dst = append(dst, stateVersion)
	u(tp.lastSeq)
	i(tp.nowMs)
	i(now.UnixMilli())
	i(tp.gapFrom)
	i(tp.gapTo)
	u(uint64(len(tp.regionAt)))
	for _, r := range slices.Sorted(maps.Keys(tp.regionAt)) {
		str(r)
		i(tp.regionAt[r])
	}
	runs := slices.SortedFunc(maps.Keys(tp.runs), cmpRun)
	u(uint64(len(runs)))
	for _, run := range runs {
		p := tp.runs[run]
		str(run.agent)
		u(run.epoch)
		u(p.seq)
		i(p.atMs)
	}
	rows := slices.SortedFunc(maps.Keys(tp.rows), func(a, b rowID) int {
		return cmp.Or(strings.Compare(a.scope, b.scope), strings.Compare(a.counter, b.counter), cmp.Compare(a.window, b.window))
	})
	u(uint64(len(rows)))
	for _, r := range rows {
		str(r.scope)
		str(r.counter)
		u(uint64(r.window))
	}
	keys := slices.SortedFunc(maps.Keys(tp.groups), func(a, b groupKey) int {
		return cmp.Or(strings.Compare(a.region, b.region), strings.Compare(a.counter, b.counter))
	})
	u(uint64(len(keys)))
	for _, k := range keys {
		g := tp.groups[k]
		str(k.region)
		str(k.counter)
		for wi := range numWindows {
			runs := slices.SortedFunc(maps.Keys(g.lists[wi]), cmpRun)
			u(uint64(len(runs)))
			for _, run := range runs {
				al := g.lists[wi][run]
				str(run.agent)
				u(run.epoch)
				i(al.minute)
				i(al.floor)
				u(uint64(len(al.items)))
				for _, id := range slices.Sorted(maps.Keys(al.items)) {
					it := al.items[id]
					str(id)
					i(it.Count)
					i(it.Error)
				}
			}
		}
		ids := slices.Sorted(maps.Keys(g.exact))
		u(uint64(len(ids)))
		for _, id := range ids {
			r := g.exact[id]
			str(id)
			i(r.since)
			for _, bs := range [][]bucket{r.min[:], r.hour[:]} {
				n := 0
				for _, b := range bs {
					if b.v != 0 {
						n++
					}
				}
				u(uint64(n))
				for _, b := range bs {
					if b.v != 0 {
						i(b.n)
						i(b.v)
					}
				}
			}
		}
	}
	return dst
}

func cmpRun(a, b agentRun) int {
	return cmp.Or(strings.Compare(a.agent, b.agent), cmp.Compare(a.epoch, b.epoch))
}

// stateReader reads an encoded state and remembers the first error.
type stateReader struct {
	buf []byte
	err error
}

func (r *stateReader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s", errState, fmt.Sprintf(format, args...))
		r.buf = nil
	}
}

func (r *stateReader) uvarint() uint64 {
	v, n := binary.Uvarint(r.buf)
	if n <= 0 {
		r.fail("value ends early")
		return 0
	}
	r.buf = r.buf[n:]
	return v
}

// varint reads a zigzag varint (binary.AppendVarint's).
func (r *stateReader) varint() int64 {
	u := r.uvarint()
	return int64(u>>1) ^ -int64(u&1)
}

// count reads an element count, each element taking at least minSize bytes.
func (r *stateReader) count(minSize int) int {
	n := r.uvarint()
	if r.err == nil && n > uint64(len(r.buf)/minSize) {
		r.fail("count %d exceeds the value", n)
		return 0
	}
	return int(n)
}

func (r *stateReader) str() string {
	n := r.uvarint()
	if r.err == nil && n > uint64(len(r.buf)) {
		r.fail("string ends early")
		return ""
	}
	if r.err != nil {
		return ""
	}
	s := string(r.buf[:n])
	r.buf = r.buf[n:]
	return s
}

// decodeState rebuilds partition p's state from data (encode's format).
// It checks what the rollup relies on: known windows, bounds that hold
// (0 <= error <= count), buckets in range, items of partition p among
// partitions. savedMs is the rollup clock at encoding.
func decodeState(data []byte, p uint32, partitions int) (tp *trendPart, savedMs int64, err error) {
	r := &stateReader{buf: data}
	if len(data) == 0 || data[0] != stateVersion {
		return nil, 0, fmt.Errorf("%w: unknown version", errState)
	}
	r.buf = r.buf[1:]
	tp = newTrendPart(p, 0)
	tp.lastSeq = r.uvarint()
	tp.nowMs = r.varint()
	savedMs = r.varint()
	tp.gapFrom, tp.gapTo = r.varint(), r.varint()
	for range r.count(2) {
		reg := r.str()
		tp.regionAt[reg] = r.varint()
	}
	for range r.count(4) {
		run := agentRun{agent: r.str(), epoch: r.uvarint()}
		tp.runs[run] = runPos{seq: r.uvarint(), atMs: r.varint()}
	}
	for range r.count(3) {
		id := rowID{scope: r.str(), counter: r.str()}
		w := r.uvarint()
		if w >= numWindows {
			r.fail("row window %d", w)
		}
		id.window = int(w)
		tp.rows[id] = true
	}
	for range r.count(2 + numWindows + 1) {
		k := groupKey{region: r.str(), counter: r.str()}
		if _, dup := tp.groups[k]; dup {
			r.fail("group %v twice", k)
		}
		g := tp.group(k)
		for wi := range numWindows {
			for range r.count(5) {
				run := agentRun{agent: r.str(), epoch: r.uvarint()}
				al := &agentList{minute: r.varint(), floor: r.varint()}
				if al.floor < 0 {
					r.fail("negative floor")
				}
				n := r.count(3)
				al.items = make(map[string]partial.TopItem, n)
				for range n {
					it := partial.TopItem{ContentID: r.str(), Count: r.varint(), Error: r.varint()}
					if it.Count < 1 || it.Error < 0 || it.Error > it.Count {
						r.fail("item bounds %d, %d", it.Count, it.Error)
					}
					if r.err == nil && partial.PartitionOf(it.ContentID, partitions) != p {
						r.fail("item %q of another partition", it.ContentID)
					}
					al.items[it.ContentID] = it
				}
				g.lists[wi][run] = al
			}
		}
		for range r.count(4) {
			id := r.str()
			ring := &ring{since: r.varint()}
			for bi, bs := range [][]bucket{ring.min[:], ring.hour[:]} {
				for range r.count(2) {
					n, v := r.varint(), r.varint()
					if v < 0 {
						r.fail("negative count")
					}
					b := &bs[mod(n, int64(len(bs)))]
					if b.v != 0 {
						r.fail("bucket %d of %q twice (%d)", n, id, bi)
					}
					*b = bucket{n: n, v: v}
				}
			}
			g.exact[id] = ring
			tp.cands++
		}
	}
	if r.err == nil && len(r.buf) > 0 {
		r.fail("%d trailing bytes", len(r.buf))
	}
	if r.err != nil {
		return nil, 0, r.err
	}
	return tp, savedMs, nil
}

// staleWait bounds how long a partition taken over after a crash waits
// for fresh lists of the agent runs whose lists its state holds are stale:
// an agent re-ships its lists at least once a minute while they are not
// empty.
const staleWait = 2 * time.Minute

// load installs partition p's stored state, if any, before the first
// message this rollup applies to p: called with the marks of p as stored
// before that message (every message the previous owner applied). A run
// whose mark is above what the state counted had messages applied after
// the state was stored (the previous owner crashed between its writes):
// their exact counts are lost, so the minutes they may fall in become a
// gap (exact counts over a window that overlaps it are lower bounds) and
// exact counts of new candidates start after it; and their lists are
// older than their counts, so p stores no lists (the store keeps those of
// the state) until each such run has sent lists again (or staleWait). A state that cannot be
// read leaves p to start afresh, as without one.
func (t *trender) load(ctx context.Context, p uint32, marks []store.Mark) {
	t.mu.Lock()
	_, have := t.parts[p]
	t.mu.Unlock()
	if have {
		return
	}
	st, ok, err := t.st.GetTrendingState(ctx, p)
	if err != nil || !ok {
		if err != nil {
			t.stats.StateLoadErrors.Add(1)
			t.logger.Warn("cannot read the trending state of a partition; its windows are rebuilt from the agents' lists", "partition", p, "err", err)
		}
		return
	}
	tp, savedMs, err := decodeState(st.Data, p, t.cfg.Partitions)
	if err != nil {
		t.stats.StateLoadErrors.Add(1)
		t.logger.Warn("cannot decode the trending state of a partition; its windows are rebuilt from the agents' lists", "partition", p, "err", err)
		return
	}
	minute := func(ms int64) int64 { return topk.FloorDiv(ms, time.Minute.Milliseconds()) }
	lostFrom, lostTo := int64(math.MaxInt64), int64(math.MinInt64)
	for _, m := range marks {
		run := agentRun{m.Agent, m.Epoch}
		pos, counted := tp.runs[run]
		switch {
		case counted && m.Seq > pos.seq:
			lostFrom = min(lostFrom, minute(pos.atMs))
		case !counted && m.UpdatedAt.UnixMilli() > savedMs:
			// A run first applied after the state: its lost messages
			// were flushed before its mark, at most one clock skew
			// before the newest flush counted.
			lostFrom = min(lostFrom, minute(min(m.FlushedAt.UnixMilli(), tp.nowMs-clockSkew.Milliseconds())))
		default:
			continue
		}
		lostTo = max(lostTo, minute(m.FlushedAt.UnixMilli()))
		if tp.stale == nil {
			tp.stale = make(map[agentRun]bool)
		}
		tp.stale[run] = true
	}
	if lostFrom <= lostTo {
		if tp.gapFrom <= tp.gapTo {
			lostFrom, lostTo = min(lostFrom, tp.gapFrom), max(lostTo, tp.gapTo)
		}
		tp.gapFrom, tp.gapTo = lostFrom, lostTo
		tp.startMs = (lostTo + 1) * time.Minute.Milliseconds()
		tp.staleUntil = t.now().Add(staleWait)
		t.stats.StateGaps.Add(1)
		t.logger.Warn("took a partition over from a trending state older than what its previous owner applied (a crash): "+
			"exact trending counts of the minutes between are bounds until the windows pass them",
			"partition", p, "gap_from", time.UnixMilli(lostFrom*time.Minute.Milliseconds()), "gap_to", time.UnixMilli(lostTo*time.Minute.Milliseconds()))
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, have := t.parts[p]; have {
		return
	}
	t.parts[p] = tp
	t.stats.Candidates.Add(tp.cands)
	t.stats.StatesLoaded.Add(1)
}
