package region

import (
	"sync"

	"github.com/cespare/xxhash/v2"
)

// keyIndex lists the live counter keys of each item, so that a fresh read
// (Agent.ReadCounts) finds an item's counters without scanning the table.
// It changes only when a counter is created or removed (both under the
// key's stripe lock, off the add path); its shard locks are leaves: nothing
// is locked while one is held.
type keyIndex struct {
	shards [indexShards]indexShard
}

const indexShards = 64

type indexShard struct {
	mu sync.Mutex
	m  map[string][]Key // content id → live keys of that item
	_  [40]byte
}

func (x *keyIndex) shard(id string) *indexShard {
	return &x.shards[xxhash.Sum64String(id)%indexShards]
}

// add records k, whose strings the table owns. Called under k's stripe lock.
func (x *keyIndex) add(k Key) {
	s := x.shard(k.ContentID)
	s.mu.Lock()
	if s.m == nil {
		s.m = make(map[string][]Key)
	}
	s.m[k.ContentID] = append(s.m[k.ContentID], k)
	s.mu.Unlock()
}

// remove forgets k. Called under k's stripe lock.
func (x *keyIndex) remove(k Key) {
	s := x.shard(k.ContentID)
	s.mu.Lock()
	keys := s.m[k.ContentID]
	for i := range keys {
		if keys[i] == k {
			keys[i] = keys[len(keys)-1]
			keys[len(keys)-1] = Key{}
			keys = keys[:len(keys)-1]
			break
		}
	}
	if len(keys) == 0 {
		delete(s.m, k.ContentID)
	} else {
		s.m[k.ContentID] = keys
	}
	s.mu.Unlock()
}

// keys appends the live keys of item id to dst.
func (x *keyIndex) keys(id string, dst []Key) []Key {
	s := x.shard(id)
	s.mu.Lock()
	dst = append(dst, s.m[id]...)
	s.mu.Unlock()
	return dst
}

// Held calls fn with every non-zero value the live counters of item id hold
// (what the next Drain would emit for them). Each counter is read under its
// stripe lock, so a Reshard or a Drain of that stripe is not half-seen; an
// Add racing with the read is either seen or left for the next one. It is
// the read side of the table: it never blocks an Add to an existing
// counter.
func (c *Counters) Held(id string, fn func(k Key, v int64)) {
	var buf [8]Key
	for _, k := range c.index.keys(id, buf[:0]) {
		h, s := c.locate(&k)
		s.mu.Lock()
		var v int64
		if x, _, ok := s.cellOf(h, &k); ok {
			v = x.peek()
		}
		s.mu.Unlock()
		if v != 0 {
			fn(k, v)
		}
	}
}
