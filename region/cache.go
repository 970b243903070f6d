package region

import (
	"sync"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/edgecount/edgecount/engagement"
)

const cacheShards = 64

// statsCache keeps recently read totals for a short time. Rows handed out
// are shared and must not be modified. A nil rows slice is a cached
// "no rows yet".
type statsCache struct {
	ttl    time.Duration
	per    int // entries per shard
	shards [cacheShards]cacheShard
}

type cacheShard struct {
	mu sync.Mutex
	m  map[string]cacheEntry
	_  [40]byte // keep neighbouring shard locks off one cache line
}

type cacheEntry struct {
	rows []engagement.Stats
	at   time.Time
}

func newStatsCache(entries int, ttl time.Duration) *statsCache {
	c := &statsCache{ttl: ttl, per: max(1, entries/cacheShards)}
	for i := range c.shards {
		c.shards[i].m = make(map[string]cacheEntry)
	}
	return c
}

func (c *statsCache) shard(id string) *cacheShard {
	return &c.shards[xxhash.Sum64String(id)%cacheShards]
}

func (c *statsCache) get(id string, now time.Time) ([]engagement.Stats, bool) {
	if c.ttl == 0 {
		return nil, false
	}
	s := c.shard(id)
	s.mu.Lock()
	e, ok := s.m[id]
	s.mu.Unlock()
	if !ok || now.Sub(e.at) >= c.ttl {
		return nil, false
	}
	return e.rows, true
}

func (c *statsCache) put(id string, rows []engagement.Stats, now time.Time) {
	if c.ttl == 0 {
		return
	}
	s := c.shard(id)
	s.mu.Lock()
	if _, ok := s.m[id]; !ok && len(s.m) >= c.per {
		for k := range s.m { // map order is random: evict an arbitrary entry
			delete(s.m, k)
			break
		}
	}
	s.m[id] = cacheEntry{rows: rows, at: now}
	s.mu.Unlock()
}
