package directory

import (
	"context"
	"sync"
)

// Local is an in-process directory: a default shard count plus explicit
// entries for the counters that need more (or fewer). Safe for concurrent
// use; Shards takes a read lock only. The zero value is not usable; use
// NewLocal.
type Local struct {
	def int
	mu  sync.RWMutex
	m   map[localKey]int
}

type localKey struct{ contentID, counter string }

// NewLocal returns an empty directory that answers defaultShards (at least 1)
// for every counter without an entry.
func NewLocal(defaultShards int) *Local {
	return &Local{def: max(defaultShards, 1), m: make(map[localKey]int)}
}

// Shards returns the shard count for the counter: its entry if it has one,
// otherwise the default. It never blocks on I/O and always returns at least 1.
func (l *Local) Shards(contentID, counter string) int {
	l.mu.RLock()
	n, ok := l.m[localKey{contentID, counter}]
	l.mu.RUnlock()
	if !ok {
		return l.def
	}
	return n
}

// Set records the shard count for a counter; shards below 1 are stored as 1.
// It affects counters created afterwards; a live counter keeps its shards
// until it is removed or resharded.
func (l *Local) Set(contentID, counter string, shards int) {
	l.mu.Lock()
	l.m[localKey{contentID, counter}] = max(shards, 1)
	l.mu.Unlock()
}

// Delete removes a counter's entry, so it gets the default again.
func (l *Local) Delete(contentID, counter string) {
	l.mu.Lock()
	delete(l.m, localKey{contentID, counter})
	l.mu.Unlock()
}

// SetShards is Set, or Delete when shards is 1 or less ("back to the
// default"). It never fails; ctx is unused. It is how the agent's hot
// counter rule (region.ShardWriter) records shard counts in standalone
// mode, so that counters created later get them too.
func (l *Local) SetShards(_ context.Context, contentID, counter string, shards int) error {
	if shards <= 1 {
		l.Delete(contentID, counter)
		return nil
	}
	l.Set(contentID, counter, shards)
	return nil
}

// Default returns the shard count of counters without an entry.
func (l *Local) Default() int { return l.def }

// Len returns the number of entries.
func (l *Local) Len() int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return len(l.m)
}
