package region

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/edgecount/edgecount/directory"
)

// drainAll drains c once and returns what it emitted, failing the test if a
// key is emitted twice in one Drain or with a zero delta.
func drainAll(t *testing.T, c *Counters) map[Key]int64 {
	t.Helper()
	got := make(map[Key]int64)
	c.Drain(func(k Key, d int64) {
		if d == 0 {
			t.Errorf("Drain emitted a zero delta for %+v", k)
		}
		if _, dup := got[k]; dup {
			t.Errorf("Drain emitted %+v twice", k)
		}
		got[k] = d
	})
	return got
}

func key(content, counter string) Key {
	return Key{ContentID: content, Counter: counter, Region: "eu"}
}

func TestCountersAddDrain(t *testing.T) {
	type add struct {
		k Key
		d int64
	}
	tests := []struct {
		name string
		adds []add
		want map[Key]int64
	}{
		{
			name: "one key",
			adds: []add{{key("v1", "view"), 1}, {key("v1", "view"), 41}},
			want: map[Key]int64{key("v1", "view"): 42},
		},
		{
			name: "negative deltas",
			adds: []add{{key("v1", "like"), 1}, {key("v1", "like"), -1}, {key("v1", "like"), -1}, {key("v2", "like"), -5}},
			want: map[Key]int64{key("v1", "like"): -1, key("v2", "like"): -5},
		},
		{
			name: "a sum of zero is not emitted",
			adds: []add{{key("v1", "like"), 3}, {key("v1", "like"), -3}, {key("v2", "view"), 1}},
			want: map[Key]int64{key("v2", "view"): 1},
		},
		{
			name: "region, counter and item are all part of the key",
			adds: []add{
				{Key{"v1", "like", "eu"}, 1}, {Key{"v1", "like", "us"}, 2},
				{Key{"v1", "dislike", "eu"}, 3}, {Key{"v2", "like", "eu"}, 4},
			},
			want: map[Key]int64{
				{"v1", "like", "eu"}: 1, {"v1", "like", "us"}: 2,
				{"v1", "dislike", "eu"}: 3, {"v2", "like", "eu"}: 4,
			},
		},
		{
			name: "largest delta",
			adds: []add{{key("v1", "view"), MaxDelta}, {key("v1", "view"), MaxDelta}, {key("v2", "view"), -MaxDelta}},
			want: map[Key]int64{key("v1", "view"): 2 * MaxDelta, key("v2", "view"): -MaxDelta},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewCounters(nil, DefaultCountersConfig())
			for _, a := range tt.adds {
				c.Add(a.k, a.d)
			}
			checkEmitted(t, drainAll(t, c), tt.want)
			if got := drainAll(t, c); len(got) != 0 {
				t.Errorf("second Drain emitted %v, want nothing", got)
			}
		})
	}
}

func checkEmitted(t *testing.T, got, want map[Key]int64) {
	t.Helper()
	for k, g := range got {
		if g != want[k] {
			t.Errorf("emitted %+v = %d, want %d", k, g, want[k])
		}
	}
	for k, w := range want {
		if _, ok := got[k]; !ok {
			t.Errorf("emitted nothing for %+v, want %d", k, w)
		}
	}
}

func TestCountersManyKeys(t *testing.T) {
	c := NewCounters(nil, DefaultCountersConfig())
	const n = 20_000
	want := make(map[Key]int64, n)
	for i := range n {
		k := Key{ContentID: fmt.Sprintf("v%d", i), Counter: []string{"view", "share", "like"}[i%3], Region: "eu"}
		d := int64(i%7) - 3
		if d == 0 {
			d = 9
		}
		for range i%3 + 1 {
			c.Add(k, d)
			want[k] += d
		}
	}
	if got := c.Len(); got != n {
		t.Fatalf("Len() = %d, want %d", got, n)
	}
	checkEmitted(t, drainAll(t, c), want)
}

func TestCountersShardsFromDirectory(t *testing.T) {
	dir := directory.NewLocal(1)
	dir.Set("hot", "view", 16)
	dir.Set("viral", "view", 1000)
	dir.Set("warm", "like", 3)
	tests := []struct {
		name      string
		dir       Directory
		maxShards int
		k         Key
		want      int
	}{
		{"nil directory gives one shard", nil, 64, key("hot", "view"), 1},
		{"cold counter", dir, 64, key("cold", "view"), 1},
		{"hot counter", dir, 64, key("hot", "view"), 16},
		{"odd shard count", dir, 64, key("warm", "like"), 3},
		{"other counter of a hot item is cold", dir, 64, key("hot", "like"), 1},
		{"clamped to MaxShards", dir, 64, key("viral", "view"), 64},
		{"clamped to a small MaxShards", dir, 8, key("hot", "view"), 8},
		{"directory answers below one", fixedDirectory(-5), 64, key("v", "view"), 1},
		{"directory answers zero", fixedDirectory(0), 64, key("v", "view"), 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewCounters(tt.dir, CountersConfig{MaxShards: tt.maxShards})
			if got := c.Shards(tt.k); got != 0 {
				t.Fatalf("Shards before the first Add = %d, want 0", got)
			}
			for range 1000 {
				c.Add(tt.k, 1)
			}
			if got := c.Shards(tt.k); got != tt.want {
				t.Errorf("Shards = %d, want %d", got, tt.want)
			}
			checkEmitted(t, drainAll(t, c), map[Key]int64{tt.k: 1000})
		})
	}
}

// fixedDirectory answers the same shard count for every counter.
type fixedDirectory int

func (d fixedDirectory) Shards(string, string) int { return int(d) }

func TestCountersEviction(t *testing.T) {
	tests := []struct {
		idleDrains int
		// wantLen[i] is Len after the i-th Drain following the adds.
		wantLen []int
	}{
		{idleDrains: 1, wantLen: []int{10, 0}},
		{idleDrains: 3, wantLen: []int{10, 10, 10, 0}},
		{idleDrains: 0 /* default: 3 */, wantLen: []int{10, 10, 10, 0}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("idle=%d", tt.idleDrains), func(t *testing.T) {
			c := NewCounters(fixedDirectory(4), CountersConfig{IdleDrains: tt.idleDrains})
			for i := range 10 {
				c.Add(key(fmt.Sprint("v", i), "view"), 1)
			}
			for i, want := range tt.wantLen {
				c.Drain(func(Key, int64) {})
				if got := c.Len(); got != want {
					t.Fatalf("Len after drain %d = %d, want %d", i+1, got, want)
				}
			}
			if got, want := c.Stats().Evicted, uint64(10); got != want {
				t.Errorf("Stats().Evicted = %d, want %d", got, want)
			}
		})
	}
}

// TestCountersActivityResetsIdle: a counter that receives an add between
// drains is never removed.
func TestCountersActivityResetsIdle(t *testing.T) {
	c := NewCounters(nil, CountersConfig{IdleDrains: 2})
	busy, quiet := key("busy", "view"), key("quiet", "view")
	c.Add(busy, 1)
	c.Add(quiet, 1)
	for i := range 5 {
		c.Add(busy, 1)
		got := drainAll(t, c)
		if got[busy] == 0 {
			t.Fatalf("drain %d: nothing emitted for the busy counter", i+1)
		}
	}
	if got := c.Shards(busy); got != 1 {
		t.Errorf("busy counter Shards = %d, want 1 (still live)", got)
	}
	if got := c.Shards(quiet); got != 0 {
		t.Errorf("quiet counter Shards = %d, want 0 (removed)", got)
	}
	if got := c.Len(); got != 1 {
		t.Errorf("Len() = %d, want 1", got)
	}
}

// promoted adds 1 to k and drains c, which promotes k to its stripe's read
// table, and returns that table and k's slot in it.
func promoted(t *testing.T, c *Counters, k Key) (*table, int) {
	t.Helper()
	c.Add(k, 1)
	c.Drain(func(Key, int64) {})
	h, s := c.locate(&k)
	tab := s.read.Load()
	i := tab.find(h, keyShape(&k), &k)
	if i < 0 {
		t.Fatal("counter not in the read table after Drain")
	}
	return tab, i
}

// TestCountersAddAfterSeal walks Add's steps by hand around an eviction: a
// writer finds the counter, Drain removes and seals it, and the writer's add
// must then report that it did not count, so that the writer adds to the
// successor. This is the interleaving the stress test below cannot force.
func TestCountersAddAfterSeal(t *testing.T) {
	for _, shards := range []int{1, 8} {
		t.Run(fmt.Sprintf("shards=%d", shards), func(t *testing.T) {
			c := NewCounters(fixedDirectory(shards), CountersConfig{IdleDrains: 1})
			k := key("v1", "view")
			tab, found := promoted(t, c, k)

			c.Drain(func(Key, int64) {}) // nothing to drain: removed and sealed
			if got := c.Len(); got != 0 {
				t.Fatalf("Len after eviction = %d, want 0", got)
			}
			for i := range 2 * shards {
				if tab.add(found, 5) {
					t.Fatalf("add %d on a sealed counter counted", i)
				}
			}
			c.Add(k, 5) // what Add does after a failed add: look up again
			if got := c.Shards(k); got != shards {
				t.Fatalf("successor Shards = %d, want %d", got, shards)
			}
			checkEmitted(t, drainAll(t, c), map[Key]int64{k: 5})
		})
	}
}

// TestCountersAddBeforeSeal: a writer that added just before the seal had its
// delta taken by the seal; Drain must emit it, not drop it with the counter.
func TestCountersAddBeforeSeal(t *testing.T) {
	c := NewCounters(fixedDirectory(4), CountersConfig{IdleDrains: 1})
	k := key("v1", "view")
	tab, found := promoted(t, c, k)
	h, s := c.locate(&k)
	// Drain by hand: the swap finds nothing, the writer adds, then the seal.
	s.mu.Lock()
	x := tab.cell(found)
	if d := x.swap(); d != 0 {
		t.Fatalf("swap = %d, want 0", d)
	}
	if !tab.add(found, 7) {
		t.Fatal("add before the seal did not count")
	}
	tab.ctrs[found].removed = true
	c.rebuild(s, tab)
	sealed := x.seal()
	s.mu.Unlock()
	if sealed != 7 {
		t.Fatalf("seal returned %d, want 7", sealed)
	}
	if got := s.read.Load().find(h, keyShape(&k), &k); got >= 0 {
		t.Fatal("removed counter still in the read table")
	}
}

// TestCountersAddAcrossRebuild walks Add's steps by hand around a rebuild
// that replaces the read table while a writer holds a slot of the old one:
// what was added before the rebuild moves to the new table, and an add after
// it reports that it did not count, so that the writer looks up again and
// adds to the new table. Cold counters keep their value in the table's slot,
// so this is how no delta is lost to a promotion; hot ones keep theirs in
// their shards, which the new table shares.
func TestCountersAddAcrossRebuild(t *testing.T) {
	for _, shards := range []int{1, 8} {
		t.Run(fmt.Sprintf("shards=%d", shards), func(t *testing.T) {
			c := NewCounters(fixedDirectory(shards), CountersConfig{IdleDrains: 5})
			k := key("v1", "view")
			old, i := promoted(t, c, k) // its slot holds 0
			_, s := c.locate(&k)
			if !old.add(i, 3) {
				t.Fatal("add to the live table did not count")
			}
			other := sameStripeKey(t, c, k)
			for range 4 { // the stripe's misses pay for a rebuild
				if s.read.Load() != old {
					break
				}
				c.Add(other, 1)
			}
			if s.read.Load() == old {
				t.Fatal("the read table was not replaced")
			}
			counted := old.add(i, 4) // the writer that found the old slot
			if counted != (shards > 1) {
				t.Fatalf("add to the replaced table counted = %v, want %v", counted, shards > 1)
			}
			if !counted {
				c.Add(k, 4) // what Add does next
			}
			got := drainAll(t, c)
			if got[k] != 7 {
				t.Fatalf("drained %d for %v, want 7", got[k], k)
			}
		})
	}
}

// TestCountersTableLongKeys: keys too long for a slot's bytes are compared
// through their counter, and keys that differ only where one field ends and
// the next begins are different keys.
func TestCountersTableLongKeys(t *testing.T) {
	c := NewCounters(nil, CountersConfig{IdleDrains: 2})
	long := strings.Repeat("x", slotText)
	keys := []Key{
		{ContentID: long, Counter: "view", Region: "eu"},
		{ContentID: long + "y", Counter: "view", Region: "eu"},
		{ContentID: long[:slotText-6], Counter: "view", Region: "eu"}, // exactly fills the slot
		{ContentID: long[:slotText-5], Counter: "view", Region: "eu"}, // one byte over
		{ContentID: "ab", Counter: "c", Region: "d"},
		{ContentID: "a", Counter: "bc", Region: "d"},
		{ContentID: "a", Counter: "b", Region: "cd"},
		{ContentID: "", Counter: "abc", Region: "d"},
		{ContentID: strings.Repeat("é", 64), Counter: "like", Region: "us-east"},
	}
	want := make(map[Key]int64)
	for range 3 { // in dirty, then promoted by the misses
		for i, k := range keys {
			c.Add(k, int64(i+1))
			want[k] += int64(i + 1)
		}
	}
	checkEmitted(t, drainAll(t, c), want)
	for i, k := range keys { // in the read table
		c.Add(k, int64(i+1))
	}
	got := drainAll(t, c)
	for i, k := range keys {
		if got[k] != int64(i+1) {
			t.Errorf("second drain: %+v = %d, want %d", k, got[k], i+1)
		}
	}
	if got := c.Len(); got != len(keys) {
		t.Errorf("Len() = %d, want %d", got, len(keys))
	}
}

// TestCountersConcurrentDrainEviction hammers Add from many goroutines while
// another goroutine drains continuously with eviction after one empty drain,
// so counters are removed and re-created under the writers all the time. The
// sum emitted for every key must equal the sum added, exactly.
func TestCountersConcurrentDrainEviction(t *testing.T) {
	tests := []struct {
		name string
		dir  Directory
		keys int
	}{
		{"cold counters", nil, 16},
		{"hot counters", fixedDirectory(8), 16},
		// Enough keys that stripes hold several, so that rebuilds copy
		// live counters while writers use the old table.
		{"many keys", fixedDirectory(2), 3000},
		// Cold counters keep their values in the table: every rebuild
		// moves them while writers add to the old table.
		{"many cold keys", nil, 3000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stressCounters(t, tt.dir, tt.keys, false)
		})
	}
}

// TestCountersConcurrentReshard adds a goroutine that keeps changing the
// shard count of live counters on top of the eviction stress.
func TestCountersConcurrentReshard(t *testing.T) {
	stressCounters(t, fixedDirectory(2), 16, true)
}

func stressCounters(t *testing.T, dir Directory, keys int, reshard bool) {
	t.Helper()
	const (
		writers = 8
		adds    = 20_000
	)
	c := NewCounters(dir, CountersConfig{IdleDrains: 1, MaxShards: 16})
	keyOf := func(i int) Key { return key(fmt.Sprint("v", i), "view") }

	var (
		emitted   = make(map[Key]int64)
		emittedMu sync.Mutex
		stop      atomic.Bool
		wg        sync.WaitGroup
		drains    atomic.Int64
	)
	emit := func(k Key, d int64) { emitted[k] += d }
	drain := func() {
		emittedMu.Lock()
		defer emittedMu.Unlock()
		c.Drain(emit)
	}
	wg.Go(func() {
		for !stop.Load() {
			drain()
			drains.Add(1)
		}
	})
	if reshard {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(1, 2))
			for !stop.Load() {
				c.Reshard(keyOf(r.IntN(keys)), 1+r.IntN(16))
			}
		})
	}

	added := make([][]int64, writers)
	for w := range added {
		added[w] = make([]int64, keys)
	}
	var writersWG sync.WaitGroup
	for w := range writers {
		writersWG.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 99))
			for range adds {
				i := r.IntN(keys)
				d := int64(r.IntN(5)) - 1 // -1..3, including zero
				c.Add(keyOf(i), d)
				added[w][i] += d
			}
		})
	}
	writersWG.Wait()
	stop.Store(true)
	wg.Wait()
	drain() // what the writers added after the last concurrent drain

	for i := range keys {
		var want int64
		for w := range added {
			want += added[w][i]
		}
		if got := emitted[keyOf(i)]; got != want {
			t.Errorf("emitted for %+v = %d, want %d (added)", keyOf(i), got, want)
		}
	}
	if len(emitted) > keys {
		t.Errorf("emitted %d keys, want at most %d", len(emitted), keys)
	}
	st := c.Stats()
	t.Logf("drains %d, created %d, evicted %d, resharded %d, adds retried after a seal %d",
		drains.Load(), st.Created, st.Evicted, st.Resharded, st.Retried)
	if st.Evicted == 0 {
		t.Errorf("no counter was evicted during the stress; the test did not exercise removal")
	}
	if reshard && st.Resharded == 0 {
		t.Errorf("no counter was resharded during the stress")
	}
}

func TestCountersReshard(t *testing.T) {
	tests := []struct {
		name       string
		from, to   int
		inDirty    bool // reshard a counter not yet promoted to the read map
		wantShards int
	}{
		{"cold to hot", 1, 16, false, 16},
		{"hot to cold", 16, 1, false, 1},
		{"hot to hotter, clamped", 4, 1000, false, 32},
		{"below one means one", 4, -2, false, 1},
		{"same count", 4, 4, false, 4},
		{"cold to hot, not yet promoted", 1, 16, true, 16},
		{"hot to cold, not yet promoted", 16, 1, true, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewCounters(fixedDirectory(tt.from), CountersConfig{MaxShards: 32})
			k := key("v1", "view")
			other := sameStripeKey(t, c, k)
			c.Add(other, 1) // first key of the stripe: promoted at once
			c.Add(k, 10)
			if !tt.inDirty {
				drainAll(t, c)
				c.Add(k, 10)
				c.Add(other, 1)
			}
			_, s := c.locate(&k)
			s.mu.Lock()
			_, dirty := s.dirty[k]
			s.mu.Unlock()
			if dirty != tt.inDirty {
				t.Fatalf("key in dirty map = %v, want %v", dirty, tt.inDirty)
			}
			c.Reshard(k, tt.to)
			c.Add(k, 5)
			if got := c.Shards(k); got != tt.wantShards {
				t.Errorf("Shards after Reshard = %d, want %d", got, tt.wantShards)
			}
			checkEmitted(t, drainAll(t, c), map[Key]int64{k: 15, other: 1})
			if got := c.Len(); got != 2 {
				t.Errorf("Len() = %d, want 2", got)
			}
		})
	}
}

// sameStripeKey returns a key other than k that falls in k's stripe.
func sameStripeKey(t *testing.T, c *Counters, k Key) Key {
	t.Helper()
	_, want := c.locate(&k)
	for i := range 100 << stripeBits {
		o := key(fmt.Sprint("other", i), k.Counter)
		if _, s := c.locate(&o); s == want {
			return o
		}
	}
	t.Fatal("no key found in the same stripe")
	return Key{}
}

func TestCountersReshardAbsentKey(t *testing.T) {
	c := NewCounters(nil, DefaultCountersConfig())
	c.Reshard(key("v1", "view"), 8)
	if got := c.Len(); got != 0 {
		t.Fatalf("Len after Reshard of an absent key = %d, want 0", got)
	}
	c.Add(key("v1", "view"), 1)
	if got := c.Shards(key("v1", "view")); got != 1 {
		t.Fatalf("Shards = %d, want 1 (Reshard of an absent key is not remembered)", got)
	}
}

// TestCountersPromotion: a key created between drains moves to the lock-free
// read table once its misses have paid for the copy.
func TestCountersPromotion(t *testing.T) {
	c := NewCounters(nil, DefaultCountersConfig())
	k := key("v1", "view")
	h, s := c.locate(&k)
	for range 3 {
		c.Add(k, 1)
	}
	if s.read.Load().find(h, keyShape(&k), &k) < 0 {
		t.Fatal("key not promoted to the read table after 3 adds")
	}
	s.mu.Lock()
	dirty := len(s.dirty)
	s.mu.Unlock()
	if dirty != 0 {
		t.Errorf("dirty map holds %d keys after promotion, want 0", dirty)
	}
	checkEmitted(t, drainAll(t, c), map[Key]int64{k: 3})
}

func TestCountersAddDoesNotAllocate(t *testing.T) {
	for _, shards := range []int{1, 16} {
		t.Run(fmt.Sprintf("shards=%d", shards), func(t *testing.T) {
			c := NewCounters(fixedDirectory(shards), DefaultCountersConfig())
			k := Key{ContentID: strings.Repeat("v", 20), Counter: "view", Region: "eu"}
			c.Add(k, 1)
			allocs := testing.AllocsPerRun(1000, func() { c.Add(k, 1) })
			if allocs != 0 {
				t.Fatalf("Add allocates %v times per call, want 0", allocs)
			}
		})
	}
}

func TestCountersAddPanicsOnHugeDelta(t *testing.T) {
	for _, d := range []int64{MaxDelta + 1, -MaxDelta - 1, sealValue} {
		t.Run(fmt.Sprint(d), func(t *testing.T) {
			c := NewCounters(nil, DefaultCountersConfig())
			defer func() {
				if recover() == nil {
					t.Errorf("Add(%d) did not panic", d)
				}
				if got := c.Len(); got != 0 {
					t.Errorf("Len after a rejected Add = %d, want 0", got)
				}
			}()
			c.Add(key("v1", "view"), d)
		})
	}
}

func TestCountersConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     CountersConfig
		wantErr string // substring; empty means valid
	}{
		{"defaults", DefaultCountersConfig(), ""},
		{"zero means defaults", CountersConfig{}, ""},
		{"one shard, evict at once", CountersConfig{MaxShards: 1, IdleDrains: 1}, ""},
		{"largest", CountersConfig{MaxShards: maxShardsLimit, IdleDrains: 1000}, ""},
		{"negative shards", CountersConfig{MaxShards: -1}, "max shards"},
		{"too many shards", CountersConfig{MaxShards: maxShardsLimit + 1}, "max shards"},
		{"negative idle drains", CountersConfig{IdleDrains: -1}, "idle drains"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("Validate() = %v, want an error about %q", err, tt.wantErr)
			}
		})
	}
}

func TestNewCountersPanicsOnInvalidConfig(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("NewCounters with MaxShards -1 did not panic")
		}
	}()
	NewCounters(nil, CountersConfig{MaxShards: -1})
}

func TestCounter(t *testing.T) {
	tests := []struct{ shards, want int }{
		{1, 1}, {8, 8}, {0, 1}, {-3, 1}, {maxShardsLimit + 5, maxShardsLimit},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.shards), func(t *testing.T) {
			c := NewCounter(tt.shards)
			if got := c.Shards(); got != tt.want {
				t.Fatalf("Shards() = %d, want %d", got, tt.want)
			}
			const goroutines, adds = 4, 5000
			var (
				wg      sync.WaitGroup
				stop    atomic.Bool
				swapped atomic.Int64
			)
			wg.Go(func() {
				for !stop.Load() {
					swapped.Add(c.Swap())
				}
			})
			var writers sync.WaitGroup
			for g := range goroutines {
				writers.Go(func() {
					for i := range adds {
						c.Add(int64(g + i%3 - 1))
					}
				})
			}
			writers.Wait()
			stop.Store(true)
			wg.Wait()
			swapped.Add(c.Swap())
			var want int64
			for g := range goroutines {
				for i := range adds {
					want += int64(g + i%3 - 1)
				}
			}
			if got := swapped.Load(); got != want {
				t.Fatalf("sum of Swaps = %d, want %d", got, want)
			}
			if got := c.Swap(); got != 0 {
				t.Fatalf("Swap after Swap = %d, want 0", got)
			}
		})
	}
}

// TestCounterSize: a table slot fills exactly one cache line, so that an Add
// that hits reads one line and two cold counters never share one (see slot).
func TestCounterSize(t *testing.T) {
	if got := unsafe.Sizeof(slot{}); got != cacheLine {
		t.Fatalf("slot is %d bytes, want %d", got, cacheLine)
	}
	if got := unsafe.Sizeof(counter{}); got != 48 {
		t.Fatalf("counter is %d bytes, want 48", got)
	}
	if got := unsafe.Sizeof(shardSet{}); got != cacheLine {
		t.Fatalf("shardSet is %d bytes, want %d", got, cacheLine)
	}
	if got := unsafe.Sizeof(shard{}); got != shardSize {
		t.Fatalf("shard is %d bytes, want %d", got, shardSize)
	}
	if got := unsafe.Sizeof(stripe{}); got != 2*cacheLine {
		t.Fatalf("stripe is %d bytes, want %d", got, 2*cacheLine)
	}
}

// TestHashKey: every id length is handled, the fields do not run into each
// other, the seed matters, and a long run of realistic ids has no 64-bit
// collision and spreads evenly over the stripes.
func TestHashKey(t *testing.T) {
	const seed = 0x1234_5678_9abc_def0
	seen := make(map[uint64]Key)
	check := func(k Key) {
		t.Helper()
		h := hashKey(seed, &k)
		if h == 0 {
			t.Fatalf("hashKey(%+v) = 0", k)
		}
		if h2 := hashKey(seed, &k); h2 != h {
			t.Fatalf("hashKey(%+v) = %#x, then %#x", k, h, h2)
		}
		if prev, dup := seen[h]; dup && prev != k {
			t.Fatalf("hashKey(%+v) = hashKey(%+v) = %#x", k, prev, h)
		}
		seen[h] = k
	}
	// Every length up to the longest id, each byte position varied.
	for n := range 130 {
		base := []byte(strings.Repeat("a", n))
		check(Key{ContentID: string(base), Counter: "view", Region: "eu"})
		for i := range n {
			b := append([]byte(nil), base...)
			b[i] = 'b'
			check(Key{ContentID: string(b), Counter: "view", Region: "eu"})
		}
	}
	// Field boundaries.
	for _, k := range []Key{
		{"ab", "c", "d"}, {"a", "bc", "d"}, {"a", "b", "cd"}, {"abc", "", "d"},
		{"", "abc", "d"}, {"abcd", "", ""}, {"", "", "abcd"}, {"", "", ""},
	} {
		check(k)
	}
	if a, b := hashKey(1, &Key{"v", "view", "eu"}), hashKey(2, &Key{"v", "view", "eu"}); a == b {
		t.Errorf("two seeds give the same hash %#x", a)
	}

	var perStripe [1 << stripeBits]int
	const n = 200_000
	for i := range n {
		k := Key{ContentID: fmt.Sprintf("video-%08d", i), Counter: "view", Region: "eu"}
		check(k)
		perStripe[hashKey(seed, &k)>>(64-stripeBits)]++
	}
	mean := n / len(perStripe)
	for i, got := range perStripe {
		// ~781 per stripe, standard deviation ~28: 25% off is ~7 sigma.
		if got < mean*3/4 || got > mean*5/4 {
			t.Errorf("stripe %d holds %d of %d sequential ids, want about %d", i, got, n, mean)
		}
	}
}

func TestTable(t *testing.T) {
	for _, n := range []int{0, 1, 7, 8, 100, 5000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			tab := newTable(n)
			if len(tab.slots) < 2*n {
				t.Fatalf("%d slots for %d counters, want at least %d", len(tab.slots), n, 2*n)
			}
			ctrs := make([]*counter, n)
			for i := range n {
				k := key(fmt.Sprint("v", i), "view")
				ctrs[i] = newCounter(k.ContentID, &names{k.Counter, k.Region}, 1)
				tab.insert(hashKey(7, &k), &k, ctrs[i])
			}
			if got := tab.len(); got != n {
				t.Fatalf("len() = %d, want %d", got, n)
			}
			for i := range n {
				k := key(fmt.Sprint("v", i), "view")
				if got := tab.find(hashKey(7, &k), keyShape(&k), &k); got < 0 || tab.ctrs[got] != ctrs[i] {
					t.Fatalf("find(%+v) = %d, want the slot of %p", k, got, ctrs[i])
				}
			}
			for i := n; i < n+100; i++ {
				k := key(fmt.Sprint("v", i), "view")
				if got := tab.find(hashKey(7, &k), keyShape(&k), &k); got >= 0 {
					t.Fatalf("find(%+v) = %d for an absent key, want -1", k, got)
				}
			}
		})
	}
	// Keys with one hash: only the bytes tell them apart.
	tab := newTable(4)
	same := []Key{key("v1", "view"), key("v2", "view"), key("v1", "like"), {ContentID: strings.Repeat("v", 60), Counter: "view", Region: "eu"}}
	for _, k := range same {
		tab.insert(42, &k, newCounter(k.ContentID, &names{k.Counter, k.Region}, 1))
	}
	for _, k := range same {
		if got := tab.find(42, keyShape(&k), &k); got < 0 || tab.ctrs[got].key() != k {
			t.Fatalf("find(%+v) among keys of one hash = %d", k, got)
		}
	}
	absent := key("v3", "view")
	if got := tab.find(42, keyShape(&absent), &absent); got >= 0 {
		t.Fatalf("find(%+v) = %d for an absent key of the same hash, want -1", absent, got)
	}
	var nilTable *table
	if got := nilTable.find(1, 0, &Key{}); got >= 0 || nilTable.len() != 0 {
		t.Fatalf("nil table: find = %d, len = %d; want -1, 0", got, nilTable.len())
	}
}
