package region

import (
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
	}
}

// ApplyRows updates the warm items among rows, which the rollup wrote at
// written (grouped by item, as a push carries them), and returns how many
// rows changed one. A row replaces an item's row of the same scope only if
// it is newer (a higher LastSeq, or the same and a later UpdatedAt), so
// pushes that arrive late or twice change nothing. rows are kept: the
// caller must not modify them afterwards. Safe for concurrent use.
func (a *Agent) ApplyRows(written time.Time, rows []engagement.Stats) int {
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
	now := a.now()
	all := true
	for i, id := range ids {
		rows, _, ok := a.cache.get(id, now)
		dst[i] = rows
		all = all && ok
	}
	return all
}
