package rollup

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/partial"
)

// ErrPoison marks a message that can never be applied (it does not decode or
// breaks the key rules). The caller must drop it rather than retry. It has
// a method Permanent() reporting true, by which a broker consumer that
// knows the convention (natsjs) terminates the message without being told.
var ErrPoison error = poisonError{}

type poisonError struct{}

func (poisonError) Error() string { return "poison message" }

// Permanent reports that a poison message can never be applied.
func (poisonError) Permanent() bool { return true }

// StatsStore is what the rollup needs of ContentStats: read every scope row
// of some items in one lookup, and write rows as plain values.
type StatsStore interface {
	ReadStats(ctx context.Context, contentIDs []string) (map[string][]engagement.Stats, error)
	WriteStats(ctx context.Context, rows []engagement.Stats) error
}

// Stats are the rollup's running totals, exported for metrics.
type Stats struct {
	Messages    atomic.Uint64 // messages applied
	Sums        atomic.Uint64 // partial sums in applied messages
	RowsWritten atomic.Uint64
	RowsSkipped atomic.Uint64 // rows that already had the message (redelivery)
	Poison      atomic.Uint64
	ApplyErrors atomic.Uint64
	// LagMillis is the age of the newest applied message's flush, at the
	// time it was applied.
	LagMillis atomic.Int64
}

// Rollup applies partial-sum messages to ContentStats rows.
type Rollup struct {
	store  StatsStore
	now    func() time.Time
	logger *slog.Logger
	stats  Stats
	pool   sync.Pool // *partial.Batch
	trend  *trender  // nil: trending off (EnableTrending)

	// applies is held shared by every Apply and exclusively by a recount
	// repair (Recounter) while it re-reads an item's rows and writes them:
	// no message is applied between the check that the rows did not
	// change and the write of their repair.
	applies sync.RWMutex
	// lastApply and lastFail are when Apply last applied a message and
	// last failed to (Unix nanoseconds).
	lastApply, lastFail atomic.Int64
	// failing: the last message Apply saw failed and none has been
	// applied since, so its deltas are still in flight (the broker
	// redelivers it, however long its retry backoff).
	failing atomic.Bool
}

// New returns a Rollup writing to st. now may be nil (time.Now).
func New(st StatsStore, now func() time.Time, logger *slog.Logger) *Rollup {
	if now == nil {
		now = time.Now
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Rollup{store: st, now: now, logger: logger.With("component", "rollup"),
		pool: sync.Pool{New: func() any { return new(partial.Batch) }}}
}

// Stats returns the running totals.
func (r *Rollup) Stats() *Stats { return &r.stats }

// Handle decodes one broker message with sequence seq and applies it. A
// message that does not decode gives an error wrapping ErrPoison.
func (r *Rollup) Handle(ctx context.Context, seq uint64, data []byte) error {
	b := r.pool.Get().(*partial.Batch)
	defer func() {
		clear(b.Sums)
		clear(b.Tops)
		r.pool.Put(b)
	}()
	if err := partial.Decode(data, b); err != nil {
		r.stats.Poison.Add(1)
		return fmt.Errorf("%w: seq %d: %v", ErrPoison, seq, err)
	}
	return r.Apply(ctx, seq, b)
}

// rowKey names one ContentStats row.
type rowKey struct{ content, scope string }

// delta is what one message adds to one row.
type delta struct {
	likes, dislikes int64
	counters        map[string]int64
}

func (d *delta) add(counter string, v int64) {
	switch counter {
	case engagement.CounterLike:
		d.likes += v
	case engagement.CounterDislike:
		d.dislikes += v
	default:
		if d.counters == nil {
			d.counters = make(map[string]int64)
		}
		d.counters[counter] += v
	}
}

// Apply adds the sums of b, carried by the message with broker sequence
// seq, to the global and regional rows of their items. Rows that already
// hold seq are left alone. On error some rows may have been written; a
// retry of the same message completes the rest without double counting.
// It never runs while a recount repair re-reads and writes rows.
func (r *Rollup) Apply(ctx context.Context, seq uint64, b *partial.Batch) error {
	r.applies.RLock()
	defer r.applies.RUnlock()
	err := r.apply(ctx, seq, b)
	if err != nil {
		r.lastFail.Store(time.Now().UnixNano())
		r.failing.Store(true)
	} else {
		r.lastApply.Store(time.Now().UnixNano())
		r.failing.Store(false)
	}
	return err
}

// pauseApplies waits for the applies in progress and holds every other
// off until resume is called.
func (r *Rollup) pauseApplies() (resume func()) {
	r.applies.Lock()
	return r.applies.Unlock
}

func (r *Rollup) apply(ctx context.Context, seq uint64, b *partial.Batch) error {
	deltas := make(map[rowKey]*delta)
	var ids []string
	get := func(k rowKey) *delta {
		d, ok := deltas[k]
		if !ok {
			d = new(delta)
			deltas[k] = d
		}
		return d
	}
	for i := range b.Sums {
		s := &b.Sums[i]
		g := rowKey{s.ContentID, engagement.GlobalScope}
		if _, ok := deltas[g]; !ok {
			ids = append(ids, s.ContentID)
		}
		get(g).add(s.Counter, s.Delta)
		get(rowKey{s.ContentID, s.Region}).add(s.Counter, s.Delta)
	}
	if len(ids) == 0 {
		r.stats.Messages.Add(1)
		if r.trend != nil {
			r.trend.apply(ctx, seq, b)
		}
		return nil
	}
	current, err := r.store.ReadStats(ctx, ids)
	if err != nil {
		r.stats.ApplyErrors.Add(1)
		return fmt.Errorf("cannot read totals for seq %d: %w", seq, err)
	}
	existing := make(map[rowKey]engagement.Stats, len(deltas))
	for id, rows := range current {
		for _, row := range rows {
			existing[rowKey{id, row.Scope}] = row
		}
	}
	now := r.now()
	rows := make([]engagement.Stats, 0, len(deltas))
	skipped := 0
	for k, d := range deltas {
		row, ok := existing[k]
		if !ok {
			row = engagement.Stats{ContentID: k.content, Scope: k.scope}
		}
		if row.LastSeq >= seq {
			skipped++
			continue
		}
		row.Likes += d.likes
		row.Dislikes += d.dislikes
		if len(d.counters) > 0 {
			merged := make(map[string]int64, len(row.Counters)+len(d.counters))
			for name, v := range row.Counters {
				merged[name] = v
			}
			for name, v := range d.counters {
				merged[name] += v
			}
			row.Counters = merged
		}
		row.LastSeq = seq
		row.UpdatedAt = now
		rows = append(rows, row)
	}
	// A stable order keeps writes reproducible and lock order consistent.
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].ContentID != rows[j].ContentID {
			return rows[i].ContentID < rows[j].ContentID
		}
		return rows[i].Scope < rows[j].Scope
	})
	if len(rows) > 0 {
		// The context's deadline is the lease of a shared partition
		// (natsjs.GroupConsumer): past it another rollup may own the
		// message. A paused process may wake up after it before its
		// timer fires, so look at the clock, not only at ctx.Err.
		if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
			r.stats.ApplyErrors.Add(1)
			return fmt.Errorf("cannot write totals for seq %d: %w", seq, context.DeadlineExceeded)
		}
		if err := r.store.WriteStats(ctx, rows); err != nil {
			r.stats.ApplyErrors.Add(1)
			return fmt.Errorf("cannot write totals for seq %d: %w", seq, err)
		}
	}
	r.stats.Messages.Add(1)
	r.stats.Sums.Add(uint64(len(b.Sums)))
	r.stats.RowsWritten.Add(uint64(len(rows)))
	r.stats.RowsSkipped.Add(uint64(skipped))
	if !b.FlushedAt.IsZero() {
		r.stats.LagMillis.Store(now.Sub(b.FlushedAt).Milliseconds())
	}
	if r.trend != nil {
		// After the rows: a list is counted once its sums are applied.
		r.trend.apply(ctx, seq, b)
	}
	return nil
}
