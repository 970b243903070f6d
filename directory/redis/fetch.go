package redis

import (
	"context"
	"errors"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/edgecount/edgecount/backoff"
)

// maxApplyAttempts bounds how often a reload re-reads because invalidations
// kept arriving while it was in flight (each of them queued a fetch of its
// own counter, so giving up loses nothing).
const maxApplyAttempts = 3

// retryMin and retryMax bound the wait after consecutive failures to reach
// Redis: 50 ms doubling to at most one second.
const (
	retryMin = 50 * time.Millisecond
	retryMax = time.Second
)

// retryDelay returns the wait after the n-th consecutive failure (n >= 1).
func retryDelay(n int) time.Duration { return backoff.Delay(retryMin, retryMax, n) }

// fetchLoop serves the miss queue: it takes one miss, adds whatever else is
// queued up to BatchSize, and fetches them in one round trip. After a
// failure it backs off, so a down Redis costs a round trip per back-off
// interval and not one per miss.
func (d *Directory) fetchLoop() {
	ctx := d.ctx
	batch := make([]fetchKey, 0, d.cfg.BatchSize)
	failures := 0
	for {
		select {
		case <-ctx.Done():
			return
		case k := <-d.queue:
			batch = append(batch[:0], k)
		}
	fill:
		for len(batch) < d.cfg.BatchSize {
			select {
			case k := <-d.queue:
				batch = append(batch, k)
			default:
				break fill
			}
		}
		err := d.fetch(ctx, batch)
		if err == nil {
			failures = 0
			continue
		}
		if ctx.Err() != nil {
			return
		}
		failures++
		d.warnFetch("cannot fetch directory entries; answering defaults", err)
		if !backoff.Sleep(ctx, retryDelay(failures)) {
			return
		}
	}
}

// fetch looks up the batch's counters, both lookups of each (the item's
// counter set and the counter's shard count) in one MULTI: one round trip.
// It applies the result unless an invalidation arrived meanwhile, in which
// case it queues the batch again. On failure the batch's items are marked
// not loaded, so that the next miss and the resync after Redis comes back
// read them again.
func (d *Directory) fetch(ctx context.Context, batch []fetchKey) error {
	members := make([]*goredis.StringSliceCmd, len(batch))
	values := make([]*goredis.StringCmd, len(batch))
	gen := d.gen.Load()
	d.stats.fetches.Add(1)
	_, err := d.client.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		for i, k := range batch {
			members[i] = p.SMembers(ctx, d.keys.contentKey(k.contentID))
			values[i] = p.HGet(ctx, d.keys.counterKey(k.contentID, k.counter), fieldShards)
		}
		return nil
	})
	if err != nil && !errors.Is(err, goredis.Nil) {
		d.stats.fetchErrors.Add(1)
		d.markUnresolved(batch)
		return fmt.Errorf("cannot fetch %d directory entries: %w", len(batch), err)
	}
	if !d.applyFetch(gen, batch, members, values) {
		for _, k := range batch {
			d.enqueue(k.contentID, k.counter, false)
		}
	}
	return nil
}

// applyFetch applies a miss fetch read when gen was current, and reports
// false (applying nothing) if gen moved since. Either way the batch leaves
// pending before wmu is released (see invalidate).
func (d *Directory) applyFetch(gen uint64, batch []fetchKey, members []*goredis.StringSliceCmd, values []*goredis.StringCmd) bool {
	d.wmu.Lock()
	defer d.wmu.Unlock()
	defer d.unpend(batch)
	if d.gen.Load() != gen {
		return false
	}
	for i, k := range batch {
		var old *entry
		if v, ok := d.items.Load(k.contentID); ok {
			old = v.(*entry)
		}
		set := members[i].Val()
		e := &entry{loaded: true, counters: make([]slot, 0, len(set)+1)}
		e.used.Store(true) // a miss asked for it
		for _, m := range set {
			if m == k.counter {
				continue
			}
			n, _ := old.lookup(m) // keep what an earlier fetch learnt; 0 if nothing
			e.counters = append(e.counters, slot{m, n})
		}
		if s, err := values[i].Result(); err == nil {
			if n, ok := parseShards(s); ok {
				e.counters = append(e.counters, slot{k.counter, n})
			} else {
				d.stats.badEntries.Add(1)
			}
		}
		d.commit(k.contentID, old, e)
	}
	return true
}

// markUnresolved marks the batch's items as not loaded, keeping what they
// answer, and creates a not-loaded entry for those not cached. Called when
// a fetch failed.
func (d *Directory) markUnresolved(batch []fetchKey) {
	d.wmu.Lock()
	defer d.wmu.Unlock()
	defer d.unpend(batch)
	for _, k := range batch {
		var old *entry
		if v, ok := d.items.Load(k.contentID); ok {
			old = v.(*entry)
			if !old.loaded {
				continue
			}
		}
		e := &entry{counters: old.shardsCopy()}
		e.used.Store(true) // a miss or an invalidation asked for it
		d.commit(k.contentID, old, e)
	}
}

// maintainLoop re-reads the whole cache when the subscriber asks (after
// every confirmed subscription: messages may have been missed) and every
// RefreshInterval, evicting unused items first. A failed resync is retried
// after a back-off while the subscription is up.
func (d *Directory) maintainLoop() {
	ctx := d.ctx
	tick := time.NewTicker(d.cfg.RefreshInterval)
	defer tick.Stop()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	failures := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			d.evict()
		case <-d.resyncCh:
		case <-retry.C:
			if !d.up.Load() {
				continue // the next subscription asks again
			}
		}
		retry.Stop()
		if err := d.resync(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			d.stats.resyncErrors.Add(1)
			failures++
			d.warnFetch("cannot re-read the directory cache; keeping cached entries", err)
			retry.Reset(retryDelay(failures))
			continue
		}
		failures = 0
	}
}

// evict drops the items not used since the previous eviction that have no
// explicit count, and clears the used flag of the others.
func (d *Directory) evict() {
	d.wmu.Lock()
	defer d.wmu.Unlock()
	d.items.Range(func(k, v any) bool {
		e := v.(*entry)
		if e.used.Load() {
			e.used.Store(false)
			return true
		}
		if !e.explicit() {
			d.items.Delete(k)
			d.nitems.Add(-1)
			d.stats.evicted.Add(1)
		}
		return true
	})
}

// resync re-reads every cached item, BatchSize items per pair of round
// trips, and reports the answers that changed.
func (d *Directory) resync(ctx context.Context) error {
	d.gen.Add(1) // fetches in flight may have read before the subscription
	var contents []string
	d.items.Range(func(k, _ any) bool {
		contents = append(contents, k.(string))
		return true
	})
	for len(contents) > 0 {
		n := min(len(contents), d.cfg.BatchSize)
		if err := d.reload(ctx, contents[:n]); err != nil {
			return err
		}
		contents = contents[n:]
	}
	d.stats.resyncs.Add(1)
	return nil
}

// reload reads the complete state of the items (their counter sets, then
// the counts of all their members) and replaces their entries.
func (d *Directory) reload(ctx context.Context, contents []string) error {
	sets := make([]*goredis.StringSliceCmd, len(contents))
	for range maxApplyAttempts {
		gen := d.gen.Load()
		d.stats.fetches.Add(1)
		_, err := d.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for i, c := range contents {
				sets[i] = p.SMembers(ctx, d.keys.contentKey(c))
			}
			return nil
		})
		if err != nil {
			d.stats.fetchErrors.Add(1)
			return fmt.Errorf("cannot read the counter sets of %d items: %w", len(contents), err)
		}
		values := make([][]*goredis.StringCmd, len(contents))
		d.stats.fetches.Add(1)
		_, err = d.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for i, c := range contents {
				for _, m := range sets[i].Val() {
					values[i] = append(values[i], p.HGet(ctx, d.keys.counterKey(c, m), fieldShards))
				}
			}
			return nil
		})
		if err != nil && !errors.Is(err, goredis.Nil) {
			d.stats.fetchErrors.Add(1)
			return fmt.Errorf("cannot read the counters of %d items: %w", len(contents), err)
		}
		if d.applyReload(gen, contents, sets, values) {
			return nil
		}
	}
	return nil // raced with invalidations every time; they queued their own fetches
}

// applyReload applies a reload read when gen was current, and reports false
// (applying nothing) if gen moved since. Items evicted meanwhile stay out.
func (d *Directory) applyReload(gen uint64, contents []string, sets []*goredis.StringSliceCmd, values [][]*goredis.StringCmd) bool {
	d.wmu.Lock()
	defer d.wmu.Unlock()
	if d.gen.Load() != gen {
		return false
	}
	for i, c := range contents {
		v, ok := d.items.Load(c)
		if !ok {
			continue
		}
		set := sets[i].Val()
		e := &entry{loaded: true, counters: make([]slot, 0, len(set))}
		for j, m := range set {
			s, err := values[i][j].Result()
			if err != nil {
				continue // deleted between the two round trips
			}
			if n, ok := parseShards(s); ok {
				e.counters = append(e.counters, slot{m, n})
			} else {
				d.stats.badEntries.Add(1)
			}
		}
		d.commit(c, v.(*entry), e)
	}
	return true
}
