package region

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgecount/edgecount/engagement"
)

// ReadCacheStats describe the read cache of warm items (docs/read-cache.md).
type ReadCacheStats struct {
	// Items is the number of warm items held.
	Items int
	// Evicted counts warm items dropped to keep the cache under its limit.
	Evicted uint64
	// Pushes counts row pushes received; PushRows the rows they carried;
	// PushRowsApplied the rows that changed a warm item (the rest were of
	// items not warm here, or no newer than what the item had).
	Pushes, PushRows, PushRowsApplied uint64
	// PushLag is the age of the last push received: from the rollup's
	// write to its arrival here (the two clocks' difference included).
	PushLag time.Duration
	// PushGaps counts the gaps seen in the partitions' push sequences (a
	// lost push, a new sender, the first push of a partition); each makes
	// every warm item read from the store again within CacheTTL.
	PushGaps uint64
	// FeedWhole reports whether every partition's pushes arrive in
	// sequence and recently: warm items are then served for
	// CachePushedTTL, else for CacheTTL.
	FeedWhole bool
}

// pushStats are the counters ApplyRows keeps beside the cache's.
type pushStats struct {
	pushes  atomic.Uint64
	lagNano atomic.Int64
}

// ReadCacheStats returns the read cache's state and counters.
func (a *Agent) ReadCacheStats() ReadCacheStats {
	return ReadCacheStats{
		Items:           a.cache.len(),
		Evicted:         a.cache.evicted.Load(),
		Pushes:          a.push.pushes.Load(),
		PushRows:        a.cache.pushRows.Load(),
		PushRowsApplied: a.cache.pushApplied.Load(),
		PushLag:         time.Duration(a.push.lagNano.Load()),
		PushGaps:        a.feed.gaps.Load(),
		FeedWhole:       a.now().UnixNano() < a.cache.pushedUntil.Load(),
	}
}

// pushFeed follows each partition's sequence of pushes (sender, number,
// time of the last) to tell whether the feed is whole: every partition
// heard from within staleAfter, in sequence. Guarded by mu; pushes arrive
// one at a time.
type pushFeed struct {
	mu         sync.Mutex
	staleAfter int64
	parts      []feedPart
	// checked is when pushedUntil was last computed from every partition.
	checked int64
	gaps    atomic.Uint64
}

type feedPart struct {
	sender, seq uint64
	last        int64 // Unix nanoseconds; 0: no sequenced push yet
}

func (f *pushFeed) init(partitions int, staleAfter time.Duration) {
	f.parts = make([]feedPart, max(partitions, 0))
	f.staleAfter = int64(staleAfter)
}

// note records a push of part (sender 0: unsequenced) arrived at now and
// updates the cache's epoch and the feed's term.
func (f *pushFeed) note(c *statsCache, part uint32, sender, seq uint64, now int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if int(part) >= len(f.parts) || f.staleAfter <= 0 {
		return // a partition this agent does not know: the feed never counts as whole
	}
	st := &f.parts[part]
	wholeBefore := now < c.pushedUntil.Load()
	switch {
	case sender == 0:
		// Cannot be checked for gaps: the partition is not followed.
		*st = feedPart{}
		c.pushedUntil.Store(0)
		return
	case sender == st.sender && seq == st.seq+1:
		st.seq, st.last = seq, now
	case sender == st.sender && seq <= st.seq:
		return // late or repeated: nothing learnt
	default:
		// A lost push, a new sender (a handover, a restart) or the first
		// push seen: what was read before may have missed a push.
		c.epoch.Add(1)
		f.gaps.Add(1)
		*st = feedPart{sender: sender, seq: seq, last: now}
	}
	// pushedUntil only moves on from a scan of every partition, at most
	// every staleAfter/8: between scans it is the earlier, stricter value.
	if wholeBefore && now-f.checked < f.staleAfter/8 {
		return
	}
	f.checked = now
	until := int64(0)
	for i := range f.parts {
		p := &f.parts[i]
		if p.last == 0 {
			until = 0
			break
		}
		if t := p.last + f.staleAfter; until == 0 || t < until {
			until = t
		}
	}
	if !wholeBefore && now < until {
		// Values read while the feed was broken may have missed a push
		// that no gap will show: they keep the short term.
		c.epoch.Add(1)
	}
	c.pushedUntil.Store(until)
}

// ApplyRows applies an unsequenced push (ApplyPush with sender 0).
func (a *Agent) ApplyRows(written time.Time, rows []engagement.Stats) int {
	return a.ApplyPush(0, 0, 0, written, rows)
}

// ApplyPush updates the warm items among rows, which the rollup wrote at
// written (grouped by item, as a push carries them), and returns how many
// rows changed one. A row replaces an item's row of the same scope only if
// it is newer (a higher LastSeq, or the same and a later UpdatedAt), so
// pushes that arrive late or twice change nothing. part, sender and seq
// place the push in its partition's sequence (sender 0: unsequenced); a
// gap makes every warm item read from the store again within CacheTTL
// (docs/read-cache.md). An empty push is a heartbeat. rows are kept: the
// caller must not modify them afterwards. Safe for concurrent use.
func (a *Agent) ApplyPush(part uint32, sender, seq uint64, written time.Time, rows []engagement.Stats) int {
	a.feed.note(a.cache, part, sender, seq, a.now().UnixNano())
	if len(rows) == 0 {
		return 0
	}
	a.push.pushes.Add(1)
	now := a.now()
	if !written.IsZero() {
		a.push.lagNano.Store(int64(now.Sub(written)))
	}
	a.noteProgress(rows)
	return a.cache.push(rows, now)
}

// WarmCounts puts in dst[i] the rows of ids[i] if the item is warm, and
// reports whether every one was: a read that takes no lock, touches no
// store and allocates nothing. Rows handed out are shared and must not be
// modified. On false, Counts reads what is missing.
func (a *Agent) WarmCounts(ids []string, dst [][]engagement.Stats) bool {
	now := a.now().UnixNano()
	all := true
	for i, id := range ids {
		v, ok := a.cache.get(id, now)
		dst[i] = nil
		if ok {
			dst[i] = v.rows
		}
		all = all && ok
	}
	return all
}
