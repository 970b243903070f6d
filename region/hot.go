package region

import (
	"context"
	"time"

	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/internal/periodic"
)

// hotKey names one counter of one item.
type hotKey struct{ contentID, counter string }

// hotRule gives the region's trending items more shards, with hysteresis
// (see docs/trending.md): enter the top N → Shards; out of the top 2N for
// CoolAfter → 1. Its state belongs to the agent's hot loop goroutine.
type hotRule struct {
	a        *Agent
	cfg      HotConfig
	counters []string
	hot      map[hotKey]time.Time // hot items → last time seen in the top 2N
	warned   time.Time            // last read warning, to throttle them
}

func newHotRule(a *Agent, cfg HotConfig, counters []string) *hotRule {
	return &hotRule{a: a, cfg: cfg, counters: counters, hot: make(map[hotKey]time.Time)}
}

// run applies the rule every Interval until ctx ends: Agent.Stop cancels
// it and waits for run to return before the final flush.
func (h *hotRule) run(ctx context.Context) {
	periodic.Run(ctx, h.cfg.Interval, func() { h.step(ctx) })
}

// step reads each counter's regional list and applies the rule. A counter
// whose list cannot be read is left as it is: no item cools on missing
// data.
func (h *hotRule) step(ctx context.Context) {
	a := h.a
	for _, counter := range h.counters {
		l, err := a.trendingList(ctx, a.cfg.Region, counter, h.cfg.Window)
		if err != nil {
			a.stats.HotReadErrors.Add(1)
			if now := time.Now(); ctx.Err() == nil && now.Sub(h.warned) > time.Minute {
				h.warned = now
				a.logger.Warn("cannot read the regional trending list for the hot rule; no item cools meanwhile",
					"counter", counter, "read_errors", a.stats.HotReadErrors.Load(), "err", err)
			}
			continue
		}
		h.apply(ctx, counter, l.items, a.now())
	}
	a.stats.HotCounters.Store(int64(len(h.hot)))
}

// apply runs the rule for one counter on its ranked regional list at now.
func (h *hotRule) apply(ctx context.Context, counter string, ranked []engagement.TrendingItem, now time.Time) {
	n := h.cfg.Top
	for i, it := range ranked {
		if i >= 2*n {
			break
		}
		k := hotKey{it.ContentID, counter}
		if _, hot := h.hot[k]; !hot {
			if i >= n {
				continue // between N and 2N: keeps a hot item hot, makes none hot
			}
			h.set(ctx, k, h.cfg.Shards)
			h.a.stats.HotPromoted.Add(1)
		}
		h.hot[k] = now
	}
	for k, seen := range h.hot {
		if k.counter == counter && now.Sub(seen) >= h.cfg.CoolAfter {
			// Kept hot until the directory has it, so a failed write is
			// retried by the next round instead of leaving every agent
			// of the region with the hot shard count.
			if h.set(ctx, k, 1) {
				delete(h.hot, k)
				h.a.stats.HotCooled.Add(1)
			}
		}
	}
}

// set gives k's counter in this region shards shards: the live counter
// now, the shard directory for every agent of the region (and for
// counters created later), unless the directory already says so. It
// reports whether the directory has it.
func (h *hotRule) set(ctx context.Context, k hotKey, shards int) bool {
	a := h.a
	a.counters.Reshard(Key{ContentID: k.contentID, Counter: k.counter, Region: a.cfg.Region}, shards)
	if a.shardWriter == nil {
		return true
	}
	if a.dir != nil && a.dir.Shards(k.contentID, k.counter) == shards {
		return true
	}
	if err := a.shardWriter.SetShards(ctx, k.contentID, k.counter, shards); err != nil {
		a.stats.HotWriteErrors.Add(1)
		if ctx.Err() == nil {
			a.logger.Warn("cannot write a shard count to the directory", "content", k.contentID, "counter", k.counter, "shards", shards, "err", err)
		}
		return false
	}
	return true
}
