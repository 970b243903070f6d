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
	"github.com/edgecount/edgecount/store"
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
// of some items in one lookup, write rows as plain values, and keep the
// high-water marks of each partition's agents (store.Mark).
type StatsStore interface {
	ReadStats(ctx context.Context, contentIDs []string) (map[string][]engagement.Stats, error)
	WriteStats(ctx context.Context, rows []engagement.Stats) error
	// ReadMarks returns the marks of every agent run of one partition.
	ReadMarks(ctx context.Context, partition uint32) ([]store.Mark, error)
	// WriteStatsMark writes rows (possibly none) and mark m, the mark in
	// the same transaction as the rows or after them, never before: an
	// error may leave the rows written without the mark, never the mark
	// without the rows.
	WriteStatsMark(ctx context.Context, rows []engagement.Stats, m store.Mark) error
	// DeleteMarks removes some marks of one partition.
	DeleteMarks(ctx context.Context, partition uint32, keys []store.MarkKey) error
}

// DefaultMarkTTL is how long a mark nobody moved is kept (SetMarkTTL).
const DefaultMarkTTL = 30 * 24 * time.Hour

// pruneEvery is how often the marks of a partition are checked for marks
// older than the TTL, besides when they are read.
const pruneEvery = 24 * time.Hour

// Stats are the rollup's running totals, exported for metrics.
type Stats struct {
	Messages    atomic.Uint64 // messages applied
	Sums        atomic.Uint64 // partial sums in applied messages
	RowsWritten atomic.Uint64
	// RowWrites counts store writes of rows: one per message, or one per
	// batch of coalesced messages (HandleBatch).
	RowWrites   atomic.Uint64
	RowsSkipped atomic.Uint64 // rows that already had the message (redelivery)
	// DuplicatesDropped counts messages dropped because their run's
	// mark covers them: a copy, under a new broker sequence, of a message
	// applied before (a re-publish after the de-duplication window).
	DuplicatesDropped atomic.Uint64
	// OrderViolations counts messages dropped below their run's mark
	// that cannot be copies of applied ones, because they were flushed
	// after the message that set the mark: two running agents share an
	// id and an epoch, or a run's sequence went back. Their counts are
	// lost; the cause must be fixed (a warning says so).
	OrderViolations atomic.Uint64
	// MarksPruned counts marks removed after MarkTTL without a message.
	MarksPruned atomic.Uint64
	// Marks is the number of marks held in memory: one per agent run
	// seen in each partition this rollup holds.
	Marks       atomic.Int64
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
	// rowsHook, if set, is told of the rows of every write (SetRowsHook).
	rowsHook RowsHook

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

	// marksMu guards marks and markTTL. marks holds, per partition seen
	// since its last ForgetPartition, every agent run's mark as stored: read
	// once, then kept up to date by the partition's applies.
	marksMu sync.Mutex
	marks   map[uint32]*partMarks
	markTTL time.Duration
	// lastViolationWarn throttles the warning of OrderViolations (Unix
	// nanoseconds).
	lastViolationWarn atomic.Int64
}

// partMarks are the marks of one partition's agent runs.
type partMarks struct {
	agents map[store.MarkKey]store.Mark
	pruned time.Time // when marks older than the TTL were last looked for
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
		pool:  sync.Pool{New: func() any { return new(partial.Batch) }},
		marks: make(map[uint32]*partMarks), markTTL: DefaultMarkTTL}
}

// SetMarkTTL sets how long the mark of an agent that sends nothing to a
// partition is kept (DefaultMarkTTL; zero keeps marks forever). A copy of
// a message that arrives after its run's mark was pruned is applied
// again, so the TTL must exceed the longest time an agent may hold a
// published but unacknowledged message (its downtime with a full outbox).
// Call it before the first message.
func (r *Rollup) SetMarkTTL(ttl time.Duration) {
	r.marksMu.Lock()
	r.markTTL = max(ttl, 0)
	r.marksMu.Unlock()
}

// ForgetPartition drops what the rollup keeps in memory of partition p:
// its agents' marks (read again from the store with p's next message) and
// its trending state (ForgetTrending). Call it when this rollup stops
// consuming p: another rollup may apply p's messages meanwhile, and the
// marks kept here would miss them should p come back.
func (r *Rollup) ForgetPartition(p uint32) {
	r.marksMu.Lock()
	if pm := r.marks[p]; pm != nil {
		r.stats.Marks.Add(-int64(len(pm.agents)))
		delete(r.marks, p)
	}
	r.marksMu.Unlock()
	r.ForgetTrending(p)
}

// partitionMarks returns the marks of partition p, read from the store
// the first time, and prunes those older than the TTL once a day.
func (r *Rollup) partitionMarks(ctx context.Context, p uint32, now time.Time) (*partMarks, error) {
	r.marksMu.Lock()
	pm, ttl := r.marks[p], r.markTTL
	r.marksMu.Unlock()
	if pm == nil {
		stored, err := r.store.ReadMarks(ctx, p)
		if err != nil {
			return nil, err
		}
		if r.trend != nil {
			r.trend.load(ctx, p, stored) // before p's first message: see docs/trending.md
		}
		pm = &partMarks{agents: make(map[store.MarkKey]store.Mark, len(stored))}
		for _, m := range stored {
			pm.agents[m.Key()] = m
		}
		r.marksMu.Lock()
		if old := r.marks[p]; old != nil {
			r.stats.Marks.Add(-int64(len(old.agents)))
		}
		r.marks[p] = pm
		r.stats.Marks.Add(int64(len(pm.agents)))
		r.marksMu.Unlock()
	}
	r.marksMu.Lock()
	due := ttl > 0 && now.Sub(pm.pruned) >= pruneEvery
	if due {
		pm.pruned = now
	}
	r.marksMu.Unlock()
	if due {
		r.pruneMarks(ctx, p, pm, now.Add(-ttl))
	}
	return pm, nil
}

// pruneMarks deletes the marks of p last written before cutoff. A failure
// is logged and the marks are kept: they are looked at again a day later.
func (r *Rollup) pruneMarks(ctx context.Context, p uint32, pm *partMarks, cutoff time.Time) {
	var old []store.MarkKey
	r.marksMu.Lock()
	for k, m := range pm.agents {
		if m.UpdatedAt.Before(cutoff) {
			old = append(old, k)
		}
	}
	r.marksMu.Unlock()
	if len(old) == 0 {
		return
	}
	sort.Slice(old, func(i, j int) bool {
		if old[i].Agent != old[j].Agent {
			return old[i].Agent < old[j].Agent
		}
		return old[i].Epoch < old[j].Epoch
	})
	if err := r.fence(ctx); err != nil {
		return
	}
	if err := r.store.DeleteMarks(ctx, p, old); err != nil {
		r.logger.Warn("cannot prune the marks of agent runs silent for long", "partition", p, "marks", len(old), "err", err)
		return
	}
	r.marksMu.Lock()
	for _, k := range old {
		if _, ok := pm.agents[k]; ok {
			delete(pm.agents, k)
			if r.marks[p] == pm {
				r.stats.Marks.Add(-1)
			}
		}
	}
	r.marksMu.Unlock()
	r.stats.MarksPruned.Add(uint64(len(old)))
	r.logger.Info("pruned the marks of agent runs silent for long", "partition", p, "marks", len(old), "before", cutoff)
}

// setMark records m as its partition's mark for its agent, unless the
// partition was forgotten meanwhile.
func (r *Rollup) setMark(pm *partMarks, m store.Mark) {
	r.marksMu.Lock()
	if r.marks[m.Partition] == pm {
		if _, ok := pm.agents[m.Key()]; !ok {
			r.stats.Marks.Add(1)
		}
		pm.agents[m.Key()] = m
	}
	r.marksMu.Unlock()
}

// violationWarnEvery throttles the warning of an order violation.
const violationWarnEvery = 10 * time.Second

// dropCovered counts and logs message seq (b), which its run's mark m
// covers. A copy of an applied message was flushed no later than the
// message that set the mark; one flushed after it is no copy but a
// message its run sent out of order (or another agent under the same id
// and epoch), dropped all the same: applying it would move the mark back
// and let copies of later messages count twice.
func (r *Rollup) dropCovered(seq uint64, b *partial.Batch, m store.Mark) {
	if !b.FlushedAt.After(m.FlushedAt) {
		r.stats.DuplicatesDropped.Add(1)
		r.logger.Debug("dropped a message its run's mark covers", "seq", seq, "msg_id", b.MsgID(),
			"partition", b.Partition, "mark_epoch", m.Epoch, "mark_seq", m.Seq)
		return
	}
	n := r.stats.OrderViolations.Add(1)
	last := r.lastViolationWarn.Load()
	if now := time.Now().UnixNano(); now-last >= int64(violationWarnEvery) && r.lastViolationWarn.CompareAndSwap(last, now) {
		r.logger.Warn("dropped a message below its run's mark that was flushed after the mark's message, so it is no copy: "+
			"two running agents share an id and an epoch, or a run's sequence went back; its counts are lost",
			"seq", seq, "msg_id", b.MsgID(), "partition", b.Partition, "flushed_at", b.FlushedAt,
			"mark_epoch", m.Epoch, "mark_seq", m.Seq, "mark_flushed_at", m.FlushedAt, "violations", n)
	}
}

// fence refuses a write once ctx's deadline has passed. The deadline is
// the lease of a shared partition (natsjs.GroupConsumer): past it another
// rollup may own the message. A paused process may wake up after it before
// its timer fires, so look at the clock, not only at ctx.Err.
func (r *Rollup) fence(ctx context.Context) error {
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return nil
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
// seq, to the global and regional rows of their items, and records b's
// (agent, epoch, seq) as its run's mark in partition b.Partition. A message
// its run's mark covers (a copy under a new broker sequence) changes
// nothing and returns nil; rows that already hold seq are left alone. On
// error some rows may have been written; a retry of the same message
// completes the rest and the mark without double counting. It never runs
// while a recount repair re-reads and writes rows.
func (r *Rollup) Apply(ctx context.Context, seq uint64, b *partial.Batch) error {
	r.applies.RLock()
	defer r.applies.RUnlock()
	err := r.apply(ctx, seq, b)
	r.noteApply(err)
	return err
}

// noteApply records the outcome of an apply for Quiet.
func (r *Rollup) noteApply(err error) {
	if err != nil {
		r.lastFail.Store(time.Now().UnixNano())
		r.failing.Store(true)
	} else {
		r.lastApply.Store(time.Now().UnixNano())
		r.failing.Store(false)
	}
}

// write writes the rows of message seq and, when pm is set (a numbered
// message), its mark, under the lease fence; on success the mark is kept
// in pm.
func (r *Rollup) write(ctx context.Context, seq uint64, rows []engagement.Stats, pm *partMarks, m store.Mark) error {
	if pm == nil && len(rows) == 0 {
		return nil
	}
	if err := r.fence(ctx); err != nil {
		r.stats.ApplyErrors.Add(1)
		return fmt.Errorf("cannot write totals for seq %d: %w", seq, err)
	}
	var err error
	if pm != nil {
		err = r.store.WriteStatsMark(ctx, rows, m)
	} else {
		err = r.store.WriteStats(ctx, rows)
	}
	if err != nil {
		r.stats.ApplyErrors.Add(1)
		return fmt.Errorf("cannot write totals for seq %d: %w", seq, err)
	}
	if pm != nil {
		r.setMark(pm, m)
	}
	return nil
}

// pauseApplies waits for the applies in progress and holds every other
// off until resume is called.
func (r *Rollup) pauseApplies() (resume func()) {
	r.applies.Lock()
	return r.applies.Unlock
}

func (r *Rollup) apply(ctx context.Context, seq uint64, b *partial.Batch) error {
	msgs := [1]Message{{Seq: seq}}
	if err := r.applyBatch(ctx, msgs[:], []*partial.Batch{b}); err != nil {
		return err
	}
	return msgs[0].Err
}
