package region

import (
	"bytes"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/edgecount/edgecount/engagement"
)

// TestCacheTableGrowsAndFinds: inserts past many growths of the shards'
// tables keep every entry findable, at most half of any table's slots in
// use, and an entry inserted twice once.
func TestCacheTableGrowsAndFinds(t *testing.T) {
	const n = 20_000
	c := newStatsCache(2*n, time.Hour, 0)
	for i := range n {
		c.expect(fmt.Sprintf("item-%d", i))
	}
	c.expect("item-7") // already warm
	if got := c.len(); got != n {
		t.Fatalf("len = %d, want %d", got, n)
	}
	for i := range n {
		id := fmt.Sprintf("item-%d", i)
		if e, ok := c.lookup(id); !ok || e.key != id {
			t.Fatalf("lookup(%q) = %v, %v", id, e, ok)
		}
	}
	if _, ok := c.lookup("item-absent"); ok {
		t.Fatal("an id never inserted was found")
	}
	total := 0
	for i := range c.shards {
		tab := c.shards[i].tab.Load()
		if 2*tab.used > len(tab.slots) {
			t.Fatalf("shard %d: %d entries in %d slots", i, tab.used, len(tab.slots))
		}
		total += tab.used
	}
	if total != n {
		t.Fatalf("tables hold %d entries, want %d", total, n)
	}
}

// TestCacheConcurrentReadsInsertsSweeps runs readers beside goroutines that
// insert, fill and evict (the limit is far below the ids read), under
// -race: reads take no lock, so this is what checks that the tables are
// published safely. Afterwards the count of entries matches the tables and
// every value read was the one stored for its id.
func TestCacheConcurrentReadsInsertsSweeps(t *testing.T) {
	const ids = 3000
	c := newStatsCache(300, time.Hour, 0)
	name := func(i int) string { return fmt.Sprintf("v%d", i%ids) }
	var wg sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, 8)
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; ; i += 7 {
				select {
				case <-stop:
					return
				default:
				}
				id := name(i)
				c.put(id, []engagement.Stats{{ContentID: id, Scope: engagement.GlobalScope, Likes: 1}}, time.Now(), c.epoch.Load())
			}
		}()
	}
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := name(i * 13)
				if v, ok := c.get(id, time.Now().UnixNano()); ok && len(v.rows) == 1 && v.rows[0].ContentID != id {
					errs <- fmt.Errorf("get(%q) answered the rows of %q", id, v.rows[0].ContentID)
					return
				}
			}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	total := 0
	for i := range c.shards {
		total += c.shards[i].tab.Load().used
	}
	if int64(total) != c.n.Load() {
		t.Fatalf("tables hold %d entries, the count says %d", total, c.n.Load())
	}
	if c.evicted.Load() == 0 {
		t.Fatal("no sweep ran")
	}
}

// TestGetAllAgreesWithGet: the staged lookup of many ids answers what get
// answers for each, over tables with probe chains, keys inline and not
// (longer than inlineKey, empty), absent ids, values whose first read is
// under way, expired and served on either term, in batches of every size
// around getBatch.
func TestGetAllAgreesWithGet(t *testing.T) {
	c := newStatsCache(1<<20, time.Second, time.Minute)
	now := time.Now()
	var ids []string
	for i := range 3000 {
		id := fmt.Sprintf("item-%d", i)
		switch i % 7 {
		case 1:
			id = fmt.Sprintf("%s-%0*d", id, inlineKey, i) // longer than inline
		case 2:
			id = fmt.Sprintf("%0*d", inlineKey, i) // exactly inline
		}
		ids = append(ids, id)
		switch i % 5 {
		case 0: // absent
		case 1: // first read under way
			c.expect(id)
		case 2: // loaded long ago: served on neither term
			c.put(id, []engagement.Stats{{ContentID: id, Scope: engagement.GlobalScope}}, now.Add(-time.Hour), 0)
		case 3: // loaded 10 s ago: served only while the feed is whole
			c.put(id, []engagement.Stats{{ContentID: id, Scope: engagement.GlobalScope}}, now.Add(-10*time.Second), 0)
		default:
			c.put(id, []engagement.Stats{{ContentID: id, Scope: engagement.GlobalScope}}, now, 0)
		}
	}
	c.expect("")
	c.put("", nil, now, 0)
	ids = append(ids, "", "never-seen", fmt.Sprintf("%0*d", 2*inlineKey, 1))
	for _, whole := range []bool{false, true} {
		c.pushedUntil.Store(0)
		if whole {
			c.pushedUntil.Store(now.Add(time.Hour).UnixNano())
		}
		for size := 1; size <= 3*getBatch+1; size++ {
			for start := 0; start+size <= len(ids); start += 97 {
				batch := ids[start : start+size]
				out := make([]*cacheValue, size)
				c.getAll(batch, now.UnixNano(), out)
				for j, id := range batch {
					want, ok := c.get(id, now.UnixNano())
					if !ok {
						want = nil
					}
					if out[j] != want {
						t.Fatalf("whole feed %v, batch of %d: getAll(%q) = %p, get = %p", whole, size, id, out[j], want)
					}
				}
			}
		}
	}
	served := 0
	for _, id := range ids {
		if _, ok := c.get(id, now.UnixNano()); ok {
			served++
		}
	}
	if served == 0 {
		t.Fatal("no id served: the test compares only misses")
	}
}

// TestMemoKeepsCopies: a Memo keeps a copy of the bytes stored, in every
// size class of memoBytes and past them, under its tag only, and Drop
// empties a slot.
func TestMemoKeepsCopies(t *testing.T) {
	var m Memo
	for _, n := range []int{0, 1, 64, 65, 128, 129, 256, 257, 1000} {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i*7 + n)
		}
		want := slices.Clone(b)
		kept := m.Store(1, uint64(n), b)
		clear(b) // the caller's buffer is reused
		got, ok := m.Load(1, uint64(n))
		if !ok || !bytes.Equal(got, want) || !bytes.Equal(kept, want) {
			t.Fatalf("%d bytes: loaded %v (%v), Store returned %v; want %v", n, got, ok, kept, want)
		}
		if _, ok := m.Load(1, uint64(n)+1); ok {
			t.Fatalf("%d bytes: loaded under another tag", n)
		}
		if _, ok := m.Load(0, uint64(n)); ok {
			t.Fatalf("%d bytes: loaded from the other slot", n)
		}
	}
	m.Drop(1)
	if _, ok := m.Load(1, 1000); ok {
		t.Fatal("loaded after Drop")
	}
	var none *Memo
	if got := none.Store(0, 1, []byte("x")); string(got) != "x" {
		t.Fatalf("a nil Memo's Store returned %q", got)
	}
}

// TestCacheEntryFillsOneLine: an entry with its key inline is one 64-byte
// size class object, aligned to a cache line, so a lookup finds the hash,
// the key and the value pointer in one line; a field added must keep it so
// or shorten inlineKey.
func TestCacheEntryFillsOneLine(t *testing.T) {
	if got := unsafe.Sizeof(cacheEntry{}); got != 64 {
		t.Fatalf("cacheEntry is %d bytes, want 64", got)
	}
}

// TestPutAnswersWallClock: put's "last known current" time carries no
// monotonic reading on any path (cached, cache off; an entry evicted
// during the read answers like the cache off), as a time built from Unix nanoseconds does not: a reader that
// subtracts it from its own clock gets the same arithmetic whichever path
// the read took (the HTTP API's staleness_ms).
func TestPutAnswersWallClock(t *testing.T) {
	start := time.Now() // with a monotonic reading
	rows := []engagement.Stats{{ContentID: "c", Scope: engagement.GlobalScope, LastSeq: 1}}
	for name, c := range map[string]*statsCache{
		"cached":    newStatsCache(10, time.Hour, 0),
		"cache off": newStatsCache(10, 0, 0),
	} {
		_, at, _ := c.put("c", rows, start, 0)
		if at != at.Round(0) {
			t.Errorf("%s: put answered %v, with a monotonic reading", name, at)
		}
		if !at.Equal(start) && name != "cached" {
			t.Errorf("%s: put answered %v, want %v", name, at, start)
		}
	}
}
