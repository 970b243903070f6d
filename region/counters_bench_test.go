package region

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// Benchmarks for docs/design.md targets G3 and G4. Run them with
//
//	go test ./region -run '^$' -bench 'Hot|Cold' -cpu 1,2 -count 5
//
// G3 = ns/op of HotCounter/atomic at -cpu 1 ÷ (2 × ns/op of
// HotCounter/sharded at -cpu 2): the rate of two goroutines on one hot
// counter against twice the rate of one goroutine's uncontended atomic add.
// G4 = ns/op of ColdKeys/private-map ÷ ns/op of ColdKeys/counters (≥ 0.7),
// and ns/op of ColdKeys/sync-map ÷ ns/op of ColdKeys/counters (≥ 1.5).

// hotShards is the shard count of the hot counter: MaxShards' default.
const hotShards = 64

func BenchmarkHotCounter(b *testing.B) {
	const key = "v-hot"
	b.Run("atomic", func(b *testing.B) {
		var n atomic.Int64
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				n.Add(1)
			}
		})
	})
	b.Run("sharded", func(b *testing.B) {
		c := NewCounter(hotShards)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				c.Add(1)
			}
		})
	})
	b.Run("sharded-rand", func(b *testing.B) {
		// The alternative shard choice: a fresh shard per add from
		// math/rand/v2's per-thread generator.
		shards := make([]shard, hotShards)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				i := (uint64(uint32(rand.Uint64())) * hotShards) >> 32
				shards[i].v.Add(1)
			}
		})
	})
	b.Run("counters", func(b *testing.B) {
		c := NewCounters(fixedDirectory(hotShards), DefaultCountersConfig())
		k := Key{ContentID: key, Counter: "view", Region: "eu"}
		c.Add(k, 1)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				c.Add(k, 1)
			}
		})
	})
	b.Run("mutex-map", func(b *testing.B) {
		var mu sync.Mutex
		m := map[string]int64{key: 0}
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				mu.Lock()
				m[key]++
				mu.Unlock()
			}
		})
	})
	b.Run("sync-map", func(b *testing.B) {
		var m sync.Map
		m.Store(key, new(atomic.Int64))
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				v, _ := m.Load(key)
				v.(*atomic.Int64).Add(1)
			}
		})
	})
}

// makeKeys returns n distinct keys.
func makeKeys(n int) []Key {
	keys := make([]Key, n)
	counters := []string{"view", "share", "like"}
	for i := range keys {
		keys[i] = Key{ContentID: fmt.Sprintf("video-%08d", i), Counter: counters[i%len(counters)], Region: "eu"}
	}
	return keys
}

// walk visits keys in a scattered order: each goroutine starts elsewhere and
// strides by a prime (mod n, which must not be a multiple of it), so consecutive adds touch unrelated memory and two
// goroutines seldom touch the same key at once.
type walk struct{ i, n, stride int }

const walkStride = 7919

// newWalk starts a walk over n keys; starts spreads the goroutines of one
// benchmark over the keys.
func newWalk(starts *atomic.Int64, n int) walk {
	return walk{i: int(starts.Add(12_347)) % n, n: n, stride: walkStride % n}
}

func (w *walk) next() int {
	w.i += w.stride
	if w.i >= w.n {
		w.i -= w.n
	}
	return w.i
}

// BenchmarkColdKeys adds to 100,000 counters: far more than fit in the
// caches, as on an agent serving a long tail. This is G4's benchmark.
func BenchmarkColdKeys(b *testing.B) { benchKeyed(b, makeKeys(100_000)) }

// BenchmarkWarmKeys adds to 1,000 counters, which fit in the caches: the
// cost is hashing and synchronisation rather than memory.
func BenchmarkWarmKeys(b *testing.B) { benchKeyed(b, makeKeys(1_000)) }

func benchKeyed(b *testing.B, keys []Key) {
	// Each variant starts from a collected heap, so that the garbage of
	// the one before does not decide where its memory lands.
	run := func(name string, f func(b *testing.B)) {
		runtime.GC()
		b.Run(name, f)
	}
	run("counters", func(b *testing.B) {
		c := NewCounters(nil, DefaultCountersConfig())
		for _, k := range keys {
			c.Add(k, 1)
		}
		c.Drain(func(Key, int64) {}) // steady state: every key promoted
		var starts atomic.Int64
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			w := newWalk(&starts, len(keys))
			for pb.Next() {
				c.Add(keys[w.next()], 1)
			}
		})
	})
	run("mutex-map", func(b *testing.B) {
		var mu sync.Mutex
		m := make(map[Key]int64, len(keys))
		for _, k := range keys {
			m[k] = 0
		}
		var starts atomic.Int64
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			w := newWalk(&starts, len(keys))
			for pb.Next() {
				k := keys[w.next()]
				mu.Lock()
				m[k]++
				mu.Unlock()
			}
		})
	})
	run("sync-map", func(b *testing.B) {
		var m sync.Map
		for _, k := range keys {
			m.Store(k, new(atomic.Int64))
		}
		var starts atomic.Int64
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			w := newWalk(&starts, len(keys))
			for pb.Next() {
				v, _ := m.Load(keys[w.next()])
				v.(*atomic.Int64).Add(1)
			}
		})
	})
	run("private-map", func(b *testing.B) {
		// One unsynchronised map per goroutine, built before the timer:
		// the floor for a keyed increment.
		maps := make([]map[Key]int64, runtime.GOMAXPROCS(0))
		for i := range maps {
			maps[i] = make(map[Key]int64, len(keys))
			for _, k := range keys {
				maps[i][k] = 0
			}
		}
		var next, starts atomic.Int64
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			m := maps[int(next.Add(1)-1)%len(maps)]
			w := newWalk(&starts, len(keys))
			for pb.Next() {
				m[keys[w.next()]]++
			}
		})
	})
}

// BenchmarkDrain measures one Drain of 100,000 counters that all hold a
// delta: the flusher's cost per interval, off the write path.
func BenchmarkDrain(b *testing.B) {
	keys := makeKeys(100_000)
	c := NewCounters(nil, CountersConfig{IdleDrains: 1000})
	emitted := 0
	emit := func(Key, int64) { emitted++ }
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		for _, k := range keys {
			c.Add(k, 1)
		}
		b.StartTimer()
		c.Drain(emit)
	}
	if emitted != b.N*len(keys) {
		b.Fatalf("emitted %d deltas, want %d", emitted, b.N*len(keys))
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(emitted), "ns/counter")
}
