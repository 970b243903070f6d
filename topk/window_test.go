package topk

import (
	"errors"
	"math"
	"runtime"
	"strconv"
	"testing"
	"time"
)

var t0 = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

// timed is an arrival at a time.
type timed struct {
	at time.Time
	id string
	w  int64
}

func exactSince(evs []timed, from, to time.Time) map[string]int64 {
	m := map[string]int64{}
	for _, e := range evs {
		if !e.at.Before(from) && !e.at.After(to) {
			m[e.id] += e.w
		}
	}
	return m
}

func mustWindow(t *testing.T, cfg WindowConfig) *Window {
	t.Helper()
	w, err := NewWindow(cfg)
	if err != nil {
		t.Fatalf("NewWindow: %v", err)
	}
	return w
}

// TestWindowMerged checks every span against exact counts over the time
// the span covers, with buckets large enough to be exact.
func TestWindowMerged(t *testing.T) {
	w := mustWindow(t, DefaultWindowConfig(DefaultConfig(64)))
	var evs []timed
	// 30 hours, one arrival every 20 s, 40 ids; the leaders change hourly.
	for i := range 30 * 180 {
		at := t0.Add(time.Duration(i) * 20 * time.Second)
		id := "v" + strconv.Itoa((i%7+i/180)%40)
		evs = append(evs, timed{at, id, int64(1 + i%3)})
	}
	end := evs[len(evs)-1].at
	for _, e := range evs {
		w.Add(e.at, e.id, e.w)
	}
	tests := []struct {
		span time.Duration
		from time.Time // start of the oldest bucket covered
	}{
		{time.Minute, end.Truncate(time.Minute)},
		{5 * time.Minute, end.Truncate(time.Minute).Add(-4 * time.Minute)},
		{time.Hour, end.Truncate(time.Minute).Add(-59 * time.Minute)},
		{2 * time.Hour, end.Truncate(time.Hour).Add(-time.Hour)},
		{24 * time.Hour, end.Truncate(time.Hour).Add(-23 * time.Hour)},
	}
	for _, tt := range tests {
		t.Run(tt.span.String(), func(t *testing.T) {
			m, err := w.Merged(end, tt.span)
			if err != nil {
				t.Fatalf("Merged(%v): %v", tt.span, err)
			}
			want := exactSince(evs, tt.from, end)
			if got := m.Len(); got != len(want) {
				t.Fatalf("Merged(%v) tracks %d items, want %d", tt.span, got, len(want))
			}
			for _, it := range m.Top(-1) {
				if it.Count != want[it.ID] || it.Error != 0 {
					t.Fatalf("Merged(%v) item %q = %d±%d, want %d", tt.span, it.ID, it.Count, it.Error, want[it.ID])
				}
			}
			checkInvariants(t, m)
		})
	}
}

func TestWindowBoundsWhenBucketsOverflow(t *testing.T) {
	w := mustWindow(t, WindowConfig{Summary: DefaultConfig(12), Levels: []Level{{time.Minute, 10}, {10 * time.Minute, 6}}})
	st := zipfStream(25, 30000, 3000, 0.9)
	var evs []timed
	for i, e := range st {
		evs = append(evs, timed{t0.Add(time.Duration(i) * 100 * time.Millisecond), e.id, e.w})
	}
	for _, e := range evs {
		w.Add(e.at, e.id, e.w)
	}
	end := evs[len(evs)-1].at
	for _, span := range []time.Duration{3 * time.Minute, 10 * time.Minute, 50 * time.Minute} {
		m, err := w.Merged(end, span)
		if err != nil {
			t.Fatal(err)
		}
		checkInvariants(t, m)
		width := time.Minute
		if span > 10*time.Minute {
			width = 10 * time.Minute
		}
		from := end.Truncate(width).Add(width - span)
		checkBounds(t, m, exactSince(evs, from, end))
	}
}

func TestWindowLateAndIdle(t *testing.T) {
	w := mustWindow(t, DefaultWindowConfig(DefaultConfig(16)))
	w.Add(t0.Add(5*time.Minute), "a", 1)
	w.Add(t0, "b", 2) // late: counts in the current minute
	m, err := w.Merged(t0.Add(5*time.Minute), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if lo, hi := m.Bounds("b"); lo != 2 || hi != 2 {
		t.Fatalf("late arrival: Bounds(b) = [%d, %d] in the current minute, want [2, 2]", lo, hi)
	}
	// Two days idle: every bucket has left its ring.
	later := t0.Add(48 * time.Hour)
	for _, span := range []time.Duration{time.Hour, 24 * time.Hour} {
		m, err := w.Merged(later, span)
		if err != nil {
			t.Fatal(err)
		}
		if m.Len() != 0 {
			t.Fatalf("after 48 h idle, Merged(%v) = %v, want empty", span, m.Top(-1))
		}
	}
	w.Add(later, "c", 4)
	m, _ = w.Merged(later, 24*time.Hour)
	if got := m.Top(-1); len(got) != 1 || got[0] != (Item{"c", 4, 0}) {
		t.Fatalf("Merged(24h) = %v, want [{c 4 0}]", got)
	}
}

func TestWindowSpans(t *testing.T) {
	w := mustWindow(t, DefaultWindowConfig(DefaultConfig(16)))
	for _, span := range []time.Duration{0, -time.Minute, 90 * time.Second, 61 * time.Minute, 25 * time.Hour} {
		if _, err := w.Merged(t0, span); !errors.Is(err, ErrSpan) {
			t.Errorf("Merged(%v) error = %v, want ErrSpan", span, err)
		}
	}
	for _, span := range []time.Duration{time.Minute, 60 * time.Minute, 2 * time.Hour, 24 * time.Hour} {
		if _, err := w.Merged(t0, span); err != nil {
			t.Errorf("Merged(%v) = %v", span, err)
		}
	}
}

func TestWindowConfigValidate(t *testing.T) {
	s := DefaultConfig(8)
	bad := []WindowConfig{
		{Summary: s},
		{Summary: Config{}, Levels: []Level{{time.Minute, 5}}},
		{Summary: s, Levels: []Level{{0, 5}}},
		{Summary: s, Levels: []Level{{time.Minute, 0}}},
		{Summary: s, Levels: []Level{{time.Minute, 5}, {90 * time.Second, 5}}},
		{Summary: s, Levels: []Level{{time.Minute, 5}, {time.Minute, 5}}},
	}
	for _, cfg := range bad {
		if _, err := NewWindow(cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("NewWindow(%+v) error = %v, want ErrConfig", cfg.Levels, err)
		}
	}
}

func TestWindowAddDoesNotAllocate(t *testing.T) {
	w := mustWindow(t, DefaultWindowConfig(DefaultConfig(64)))
	st := zipfStream(26, 200000, 20000, 0.9)
	bytes := w.Bytes()
	// Warm up for two hours, so that every bucket has merged once.
	for i, e := range st[:100000] {
		w.Add(t0.Add(time.Duration(i)*72*time.Millisecond), e.id, e.w)
	}
	// Then two more hours: minute and hour rollovers into fresh buckets.
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	for i := 100000; i < len(st); i++ {
		w.Add(t0.Add(time.Duration(i)*72*time.Millisecond), st[i].id, st[i].w)
	}
	runtime.ReadMemStats(&m1)
	if n := m1.Mallocs - m0.Mallocs; n != 0 {
		t.Fatalf("100000 Window.Add calls over two hours allocated %d times, want 0", n)
	}
	if got := w.Bytes(); got != bytes {
		t.Fatalf("Bytes() = %d, want %d", got, bytes)
	}
}

func TestFloorDiv(t *testing.T) {
	const minute = int64(time.Minute / time.Millisecond)
	tests := []struct{ a, b, want int64 }{
		{0, 60, 0},
		{59, 60, 0},
		{60, 60, 1},
		{119, 60, 1},
		{-1, 60, -1}, // Go's -1/60 is 0: the minute before the epoch is -1
		{-59, 60, -1},
		{-60, 60, -1},
		{-61, 60, -2},
		{-120, 60, -2},
		{7, 1, 7},
		{-7, 1, -7},
		{math.MaxInt64, 2, math.MaxInt64 / 2},
		{math.MinInt64, 2, math.MinInt64 / 2},
		{math.MinInt64 + 1, 2, math.MinInt64 / 2},
		{math.MinInt64, math.MaxInt64, -2},
		{time.Date(1969, 12, 31, 23, 59, 59, 0, time.UTC).UnixMilli(), minute, -1},
		{time.Date(2026, 3, 1, 10, 0, 30, 0, time.UTC).UnixMilli(), minute, time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC).Unix() / 60},
	}
	for _, tt := range tests {
		if got := FloorDiv(tt.a, tt.b); got != tt.want {
			t.Errorf("FloorDiv(%d, %d) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}
