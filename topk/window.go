package topk

import (
	"errors"
	"fmt"
	"slices"
	"time"
	"unsafe"
)

// ErrSpan is wrapped by the error of Window.Merged for a span the window
// cannot answer.
var ErrSpan = errors.New("span not covered by the window")

// Level is one ring of time buckets of a Window.
type Level struct {
	// Width is the time a bucket covers; a positive multiple of the previous
	// level's Width.
	Width time.Duration
	// Buckets is the number of buckets kept, 1..10000.
	Buckets int
}

// WindowConfig is the layout of a Window.
type WindowConfig struct {
	// Summary is the layout of every bucket and of the merged views.
	Summary Config
	// Levels are the rings of buckets, finest first. Adds go to the finest
	// level; a bucket that closes is merged into the current bucket of the
	// next level.
	Levels []Level
}

// DefaultWindowConfig returns the window that answers 5m, 1h and 24h:
// 60 one-minute buckets and 24 one-hour buckets of layout summary.
func DefaultWindowConfig(summary Config) WindowConfig {
	return WindowConfig{
		Summary: summary,
		Levels:  []Level{{Width: time.Minute, Buckets: 60}, {Width: time.Hour, Buckets: 24}},
	}
}

// Validate reports whether c describes a window.
func (c WindowConfig) Validate() error {
	var errs []error
	if err := c.Summary.Validate(); err != nil {
		errs = append(errs, err)
	}
	if len(c.Levels) == 0 {
		errs = append(errs, errors.New("no levels"))
	}
	for i, l := range c.Levels {
		switch {
		case l.Width <= 0:
			errs = append(errs, fmt.Errorf("level %d: width %v is not positive", i, l.Width))
		case i > 0 && c.Levels[i-1].Width > 0 && (l.Width <= c.Levels[i-1].Width || l.Width%c.Levels[i-1].Width != 0):
			errs = append(errs, fmt.Errorf("level %d: width %v is not a multiple of %v", i, l.Width, c.Levels[i-1].Width))
		}
		if l.Buckets < 1 || l.Buckets > 10000 {
			errs = append(errs, fmt.Errorf("level %d: buckets %d is not in 1..10000", i, l.Buckets))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: window: %w", ErrConfig, errors.Join(errs...))
	}
	return nil
}

// Window is a sliding view of a stream as rings of summaries, one per time
// bucket. It holds Σ Buckets summaries and the scratch space of their
// merges, allocated up front, and no more: Add and Advance allocate
// nothing.
type Window struct {
	cfg     WindowConfig
	levels  []level
	scratch []candidate // Merge's scratch space, shared by the buckets
	started bool
}

type level struct {
	width int64 // nanoseconds
	cur   int64 // bucket number (time / width) of the current bucket
	ring  []*Summary
}

func (l *level) bucket(n int64) *Summary {
	i := n % int64(len(l.ring))
	if i < 0 {
		i += int64(len(l.ring))
	}
	return l.ring[i]
}

// NewWindow returns an empty window laid out by cfg.
func NewWindow(cfg WindowConfig) (*Window, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Levels = append([]Level(nil), cfg.Levels...)
	w := &Window{cfg: cfg, levels: make([]level, len(cfg.Levels))}
	w.scratch = slices.Grow(w.scratch, 2*cfg.Summary.Capacity)
	for i, l := range cfg.Levels {
		w.levels[i] = level{width: int64(l.Width), ring: make([]*Summary, l.Buckets)}
		for j := range w.levels[i].ring {
			s, err := New(cfg.Summary)
			if err != nil {
				return nil, err
			}
			w.levels[i].ring[j] = s
		}
	}
	return w, nil
}

// Add counts weight occurrences of item at time now. A time before the
// current bucket (a clock step back, a late event) counts in the current
// bucket. Add allocates nothing.
func (w *Window) Add(now time.Time, item string, weight int64) {
	l := &w.levels[0]
	if !w.started || FloorDiv(now.UnixNano(), l.width) > l.cur {
		w.Advance(now)
	}
	l.bucket(l.cur).Add(item, weight)
}

// Advance moves the window to now: buckets that close are merged into the
// next level, buckets that fall out of their ring are emptied. A time
// before the current bucket changes nothing.
func (w *Window) Advance(now time.Time) {
	t := now.UnixNano()
	if !w.started {
		w.started = true
		for i := range w.levels {
			w.levels[i].cur = FloorDiv(t, w.levels[i].width)
		}
		return
	}
	for i := range w.levels {
		l := &w.levels[i]
		n := FloorDiv(t, l.width)
		if n <= l.cur {
			return // coarser levels cannot have moved either
		}
		if i+1 < len(w.levels) {
			next := &w.levels[i+1]
			if src := l.bucket(l.cur); src.n > 0 || src.Floor() > 0 {
				next.bucket(next.cur).merge(src, &w.scratch)
			}
		}
		steps := min(n-l.cur, int64(len(l.ring)))
		for k := int64(1); k <= steps; k++ {
			l.bucket(n - steps + k).Reset()
		}
		l.cur = n
	}
}

// Merged advances the window to now and returns a new summary of the last
// span: the current bucket of the finest level whose ring covers span (and
// whose Width divides it) and the span/Width - 1 buckets before it, plus
// the current buckets of the finer levels, which that level has not
// received yet. The view covers between span - Width and span of time.
func (w *Window) Merged(now time.Time, span time.Duration) (*Summary, error) {
	dst, err := New(w.cfg.Summary)
	if err != nil {
		return nil, err
	}
	if err := w.MergeInto(dst, now, span); err != nil {
		return nil, err
	}
	return dst, nil
}

// MergeInto is Merged into dst: it merges the buckets of span into dst
// without emptying dst first.
func (w *Window) MergeInto(dst *Summary, now time.Time, span time.Duration) error {
	li := -1
	for i, l := range w.cfg.Levels {
		if span > 0 && span%l.Width == 0 && span/l.Width <= time.Duration(l.Buckets) {
			li = i
			break
		}
	}
	if li < 0 {
		return fmt.Errorf("%w: %v", ErrSpan, span)
	}
	w.Advance(now)
	l := &w.levels[li]
	for k := range int64(span / w.cfg.Levels[li].Width) {
		mergeNonEmpty(dst, l.bucket(l.cur-k))
	}
	for i := range li {
		f := &w.levels[i]
		mergeNonEmpty(dst, f.bucket(f.cur))
	}
	return nil
}

// Bytes returns the memory of all buckets (Summary.Bytes) and of the merge
// scratch space.
func (w *Window) Bytes() int {
	n := cap(w.scratch) * int(unsafe.Sizeof(candidate{}))
	for _, l := range w.levels {
		for _, s := range l.ring {
			n += s.Bytes()
		}
	}
	return n
}

func mergeNonEmpty(dst, src *Summary) {
	if src.n == 0 && src.Floor() == 0 {
		return
	}
	dst.Merge(src)
}

// FloorDiv returns ⌊a/b⌋ for b > 0, also for a negative a (where Go's a/b
// rounds up): the number of the bucket of width b that holds time a,
// counted from the epoch. Window numbers its buckets so, and code that
// buckets times as a Window does (in other units, e.g. minutes of unix
// milliseconds) uses it too.
func FloorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}
