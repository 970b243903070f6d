package topk

import (
	"errors"
	"math"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

func TestExactUnderCapacity(t *testing.T) {
	s := NewSummary(100)
	st := zipfStream(1, 5000, 80, 1.0)
	feed(s, st)
	checkExact(t, s, exactCounts(st))
	checkInvariants(t, s)
}

// configs is the set of layouts the property tests run on.
var configs = []struct {
	name string
	cfg  Config
}{
	{"space-saving", Config{Capacity: 32, Rows: 1, Cells: 1}},
	{"filtered-1-row", Config{Capacity: 32, Rows: 1, Cells: 64}},
	{"default", DefaultConfig(32)},
	{"4-rows", Config{Capacity: 16, Rows: 4, Cells: 128}},
	{"tiny-arena", Config{Capacity: 32, IDBytes: minIDBytes + 40, Rows: 2, Cells: 64}},
}

func TestBoundsHold(t *testing.T) {
	streams := []struct {
		name string
		st   []event
	}{
		{"zipf-0.8", zipfStream(2, 20000, 2000, 0.8)},
		{"zipf-1.2", zipfStream(3, 20000, 2000, 1.2)},
		{"uniform", zipfStream(4, 20000, 500, 0)},
		{"weighted", weighted(5, 5000, 300)},
		{"long-ids", longIDs(6, 5000)},
		{"rising", rising(300)},
	}
	for _, c := range configs {
		for _, st := range streams {
			t.Run(c.name+"/"+st.name, func(t *testing.T) {
				s := mustNew(t, c.cfg)
				bytes := s.Bytes()
				for i, e := range st.st {
					s.Add(e.id, e.w)
					if i%997 == 0 {
						checkInvariants(t, s)
					}
				}
				checkInvariants(t, s)
				checkBounds(t, s, exactCounts(st.st))
				if got := s.Bytes(); got != bytes {
					t.Fatalf("Bytes() = %d after adds, want %d (no growth)", got, bytes)
				}
			})
		}
	}
}

// TestSpaceSavingGuarantee checks the classic bound: every item above
// N/Capacity is tracked and every error is at most N/Capacity.
func TestSpaceSavingGuarantee(t *testing.T) {
	for _, c := range configs[:4] {
		for _, sk := range []float64{0.6, 1.0, 1.5} {
			t.Run(c.name+"/"+strconv.FormatFloat(sk, 'f', 1, 64), func(t *testing.T) {
				st := zipfStream(7, 30000, 3000, sk)
				s := feed(mustNew(t, c.cfg), st)
				bound := int64(len(st) / s.Capacity())
				tracked := map[string]bool{}
				for _, it := range s.Top(-1) {
					tracked[it.ID] = true
				}
				for id, n := range exactCounts(st) {
					if n > bound && !tracked[id] {
						t.Fatalf("item %q with count %d > N/capacity %d is not tracked", id, n, bound)
					}
				}
				for _, it := range s.Top(-1) {
					if it.Error > bound {
						t.Fatalf("item %q: error %d > N/capacity %d", it.ID, it.Error, bound)
					}
				}
			})
		}
	}
}

func TestTopOrder(t *testing.T) {
	s := NewSummary(10)
	for _, e := range []event{{"b", 5}, {"a", 5}, {"c", 9}, {"d", 1}, {"e", 5}} {
		s.Add(e.id, e.w)
	}
	got := s.Top(4)
	want := []Item{{"c", 9, 0}, {"a", 5, 0}, {"b", 5, 0}, {"e", 5, 0}}
	if len(got) != len(want) {
		t.Fatalf("Top(4) = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("Top(4) = %v, want %v", got, want)
		}
	}
	if got := len(s.Top(-1)); got != 5 {
		t.Fatalf("len(Top(-1)) = %d, want 5", got)
	}
	if got := len(s.Top(0)); got != 0 {
		t.Fatalf("len(Top(0)) = %d, want 0", got)
	}
}

func TestIgnored(t *testing.T) {
	s := NewSummary(4)
	for _, e := range []event{{"a", 0}, {"a", -3}, {"", 1}, {strings.Repeat("x", MaxIDLen+1), 1}} {
		s.Add(e.id, e.w)
	}
	if got := s.Len(); got != 0 {
		t.Fatalf("Len() = %d after ignored adds, want 0", got)
	}
	if got := s.Stats().Ignored; got != 4 {
		t.Fatalf("Stats().Ignored = %d, want 4", got)
	}
	s.Add(strings.Repeat("x", MaxIDLen), 1)
	if got := s.Len(); got != 1 {
		t.Fatalf("Len() = %d after a %d-byte id, want 1", got, MaxIDLen)
	}
}

func TestSaturates(t *testing.T) {
	s := mustNew(t, Config{Capacity: 2, Rows: 1, Cells: 1})
	s.Add("a", math.MaxInt64)
	s.Add("a", math.MaxInt64)
	s.Add("b", math.MaxInt64-1)
	s.Add("c", math.MaxInt64)
	s.Add("d", 5)
	for _, it := range s.Top(-1) {
		if it.Count < 0 || it.Error < 0 || it.Error > it.Count {
			t.Fatalf("item %+v wrapped", it)
		}
	}
	if top := s.Top(1)[0]; top.Count != math.MaxInt64 {
		t.Fatalf("top count = %d, want %d", top.Count, int64(math.MaxInt64))
	}
	checkInvariants(t, s)
}

func TestReset(t *testing.T) {
	s := feed(NewSummary(16), zipfStream(8, 2000, 100, 1))
	s.Reset()
	if s.Len() != 0 || s.Floor() != 0 || s.Stats() != (Stats{}) {
		t.Fatalf("after Reset: Len %d Floor %d Stats %+v, want all zero", s.Len(), s.Floor(), s.Stats())
	}
	st := zipfStream(9, 2000, 100, 1)
	feed(s, st)
	checkInvariants(t, s)
	checkBounds(t, s, exactCounts(st))
}

// TestLongIDsShrinkCapacity: ids longer than the arena was planned for
// make the summary track fewer items, not grow.
func TestLongIDsShrinkCapacity(t *testing.T) {
	s := NewSummary(64) // arena for 16-byte ids
	bytes := s.Bytes()
	var st []event
	for i := range 400 {
		st = append(st, event{strconv.Itoa(i%90) + strings.Repeat("z", 120), int64(1 + i%7)})
	}
	feed(s, st)
	if s.Len() >= s.Capacity() {
		t.Fatalf("Len() = %d with 123-byte ids in an arena for 16-byte ones, want < %d", s.Len(), s.Capacity())
	}
	if got := s.Bytes(); got != bytes {
		t.Fatalf("Bytes() = %d, want %d", got, bytes)
	}
	checkInvariants(t, s)
	checkBounds(t, s, exactCounts(st))
}

func TestAddDoesNotAllocate(t *testing.T) {
	st := zipfStream(10, 100000, 50000, 0.7)
	s := SummaryForBytes(16 << 10)
	feed(s, st[:50000]) // warm: full, evicting, compacting
	before := s.Stats()
	i := 50000
	allocs := testing.AllocsPerRun(40000, func() {
		e := st[i]
		s.Add(e.id, e.w)
		i++
	})
	if allocs != 0 {
		t.Fatalf("Add allocates %v times per call, want 0", allocs)
	}
	after := s.Stats()
	if after.Admitted == before.Admitted || after.Evicted == before.Evicted || after.Compactions == before.Compactions {
		t.Fatalf("the measured adds did not admit, evict and compact (%+v → %+v): the test measures nothing", before, after)
	}
}

// TestBytesIsWhatIsAllocated compares Bytes with the heap the summary
// really took.
func TestBytesIsWhatIsAllocated(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's build allocates differently")
	}
	for _, budget := range []int{16 << 10, 64 << 10, 256 << 10} {
		t.Run(strconv.Itoa(budget>>10)+"KiB", func(t *testing.T) {
			cfg, err := ConfigForBytes(budget, 0)
			if err != nil {
				t.Fatal(err)
			}
			const n = 16
			// Other goroutines (the runtime's, the test framework's) may
			// allocate inside the window and can only add bytes, so the
			// smallest of a few measurements is the summary's own.
			var keep []*Summary
			got := -1
			for range 5 {
				keep = make([]*Summary, 0, n)
				var m0, m1 runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&m0)
				for range n {
					keep = append(keep, mustNew(t, cfg))
				}
				runtime.ReadMemStats(&m1)
				if g := int(m1.TotalAlloc-m0.TotalAlloc) / n; got < 0 || g < got {
					got = g
				}
			}
			s := keep[0]
			if b := s.Bytes(); got < b || got > b+64 {
				t.Fatalf("allocated %d bytes for Bytes() = %d, want Bytes() + the header's size-class rounding", got, b)
			}
			if b, header := s.Bytes(), int(unsafe.Sizeof(*s)); b != budget+header {
				t.Fatalf("Bytes() = %d for a budget of %d, want the budget plus the %d-byte header", b, budget, header)
			}
			runtime.KeepAlive(keep)
		})
	}
}

func TestConfigForBytes(t *testing.T) {
	tests := []struct {
		bytes, idLen int
		wantErr      bool
	}{
		{1 << 10, 0, true},
		{4 << 10, 0, false},
		{64 << 10, 0, false},
		{64 << 10, 36, false},
		{64 << 10, 500, false},
		{8 << 20, 16, false},
	}
	for _, tt := range tests {
		cfg, err := ConfigForBytes(tt.bytes, tt.idLen)
		if tt.wantErr {
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("ConfigForBytes(%d, %d) error = %v, want ErrConfig", tt.bytes, tt.idLen, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("ConfigForBytes(%d, %d): %v", tt.bytes, tt.idLen, err)
		}
		s := mustNew(t, cfg)
		if b := s.Bytes() - int(unsafe.Sizeof(*s)); b > tt.bytes || float64(b) < 0.97*float64(tt.bytes) {
			t.Fatalf("ConfigForBytes(%d, %d) gives Bytes() = %d (%+v)", tt.bytes, tt.idLen, b, cfg)
		}
	}
	short, _ := ConfigForBytes(64<<10, 8)
	long, _ := ConfigForBytes(64<<10, 64)
	if short.Capacity <= long.Capacity {
		t.Fatalf("capacity for 8-byte ids %d <= for 64-byte ids %d", short.Capacity, long.Capacity)
	}
}

func TestConfigValidate(t *testing.T) {
	bad := []Config{
		{Capacity: 0},
		{Capacity: MaxCapacity + 1},
		{Capacity: 10, IDBytes: 10},
		{Capacity: 10, Rows: MaxRows + 1},
		{Capacity: 10, Rows: -1},
		{Capacity: 10, Rows: 4, Cells: 3},
		{Capacity: 10, Cells: MaxCells + 1},
	}
	for _, cfg := range bad {
		if _, err := New(cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("New(%+v) error = %v, want ErrConfig", cfg, err)
		}
	}
	s := mustNew(t, Config{Capacity: 10, Rows: 3, Cells: 10})
	if got := s.Config().Cells; got != 9 {
		t.Fatalf("Cells = %d, want 10 rounded down to 9 (3 rows)", got)
	}
}

func TestSatAdd(t *testing.T) {
	const maxInt, minInt = math.MaxInt64, math.MinInt64
	tests := []struct{ a, b, want int64 }{
		{0, 0, 0},
		{2, 3, 5},
		{-2, 3, 1},
		{2, -3, -1},
		{-2, -3, -5},
		{maxInt, 0, maxInt},
		{minInt, 0, minInt},
		{maxInt - 1, 1, maxInt},
		{maxInt, 1, maxInt},
		{maxInt - 5, 10, maxInt},
		{maxInt, maxInt, maxInt},
		{1, maxInt, maxInt},
		{minInt + 1, -1, minInt},
		{minInt, -1, minInt},
		{minInt + 5, -10, minInt},
		{minInt, minInt, minInt},
		{-1, minInt, minInt},
		{maxInt, minInt, -1},
		{minInt, maxInt, -1},
		{maxInt, -1, maxInt - 1},
		{minInt, 1, minInt + 1},
	}
	for _, tt := range tests {
		if got := SatAdd(tt.a, tt.b); got != tt.want {
			t.Errorf("SatAdd(%d, %d) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
		if got := SatAdd(tt.b, tt.a); got != tt.want {
			t.Errorf("SatAdd(%d, %d) = %d, want %d", tt.b, tt.a, got, tt.want)
		}
	}
}
