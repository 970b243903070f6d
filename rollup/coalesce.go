package rollup

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/partial"
	"github.com/edgecount/edgecount/store"
)

// Message is one broker message of a batch given to HandleBatch: its
// stream sequence and body, and, after HandleBatch returned nil, Err: nil
// when the message was applied (or dropped as a copy) and may be
// acknowledged, or an error wrapping ErrPoison when it can never be
// applied and must be terminated.
type Message struct {
	Seq  uint64
	Data []byte
	Err  error
}

// RowsHook is told of the rows of partition p each write stored, after the
// write: the new values, which the hook must not modify or keep past the
// call. It runs on the partition's goroutine and must not block (a push
// to the agents' read caches, best effort).
type RowsHook func(p uint32, rows []engagement.Stats)

// SetRowsHook sets the hook told of every row written (nil: none). Call it
// before the first message.
func (r *Rollup) SetRowsHook(h RowsHook) { r.rowsHook = h }

// HandleBatch decodes and applies msgs, consecutive messages of one
// partition in stream order, coalesced: every row they change is read once
// and written once, with the highest sequence of the messages that changed
// it, and each agent run's mark once, after the rows. A message that does
// not decode gets an Err wrapping ErrPoison and the others are applied
// without it. On error nothing may be acknowledged; a retry of the same
// messages (or of each one alone) completes what the failed call left and
// counts nothing twice, by the rows' LastSeq and the runs' marks.
func (r *Rollup) HandleBatch(ctx context.Context, msgs []Message) error {
	bs := make([]*partial.Batch, len(msgs))
	defer func() {
		for _, b := range bs {
			if b != nil {
				clear(b.Sums)
				clear(b.Tops)
				b.Sums, b.Tops = b.Sums[:0], b.Tops[:0]
				r.pool.Put(b)
			}
		}
	}()
	for i := range msgs {
		msgs[i].Err = nil
		b := r.pool.Get().(*partial.Batch)
		if err := partial.Decode(msgs[i].Data, b); err != nil {
			r.pool.Put(b)
			r.stats.Poison.Add(1)
			msgs[i].Err = fmt.Errorf("%w: seq %d: %v", ErrPoison, msgs[i].Seq, err)
			continue
		}
		bs[i] = b
	}
	return r.ApplyBatch(ctx, msgs, bs)
}

// ApplyBatch applies decoded messages as HandleBatch does: bs[i] is the
// body of msgs[i] (nil for one already marked with an Err). It never runs
// while a recount repair re-reads and writes rows.
func (r *Rollup) ApplyBatch(ctx context.Context, msgs []Message, bs []*partial.Batch) error {
	r.applies.RLock()
	defer r.applies.RUnlock()
	err := r.applyBatch(ctx, msgs, bs)
	r.noteApply(err)
	return err
}

// runKey names one agent run's mark in one partition.
type runKey struct {
	p uint32
	k store.MarkKey
}

// rowDelta is what the messages of a batch add to one row.
type rowDelta struct {
	delta
	seq     uint64 // highest sequence of a message added; 0: none
	skipped uint64 // sequence of the last message that skipped the row
}

// applyBatch applies a batch of one partition's messages in four steps:
//
//  1. chooseMessages: which messages to apply; a message its run's mark
//     covers (a copy under a new broker sequence) is dropped.
//  2. items, readRows and addMessages: read the rows the chosen messages
//     change and sum, per row, the messages above the row's LastSeq.
//  3. writeRowsThenMarks: write the rows, each with the highest sequence it
//     took, then the runs' marks: the first with the rows, the others
//     after them.
//  4. noteApplied and applyTrending: count, tell the rows hook, and feed
//     the trending lists, all in memory and after the rows.
//
// It applies every message exactly once whatever step an error or a crash
// interrupts, because the broker delivers the messages again, under their
// sequences, until they are acknowledged after applyBatch returned nil,
// and:
//   - steps 1 and 2 write nothing, and the marks kept in memory change
//     only once a write of them succeeded (write);
//   - a row never takes a message at or below its LastSeq, and LastSeq is
//     written with the sums in the same row: a row the interrupted step 3
//     wrote skips the message when it comes again (RowsSkipped), a row it
//     did not write takes it;
//   - a mark is written with its rows or after them, never before
//     (StatsStore.WriteStatsMark): a message its run's mark covers, the
//     message again or a copy of it, is dropped only once its rows are
//     written, and a message whose rows were written but not its mark
//     sets the mark when it comes again;
//   - step 4 writes no row and no mark: the trending lists skip a
//     sequence they counted, and the rest is statistics and the hook's
//     best-effort push.
//
// It relies on msgs being consecutive messages of one partition in stream
// order, bs[i] the body of msgs[i] (nil when msgs[i].Err is set), and on
// ApplyBatch's shared hold of the apply lock.
func (r *Rollup) applyBatch(ctx context.Context, msgs []Message, bs []*partial.Batch) error {
	now := r.now()
	first, last := msgs[0].Seq, msgs[len(msgs)-1].Seq
	// take and the maps of rs are made here, where they stay on the stack.
	take := make([]bool, len(bs))
	marks, err := r.chooseMessages(ctx, msgs, bs, take, now)
	if err != nil {
		return err
	}
	rs := rowSums{deltas: make(map[rowKey]*rowDelta)}
	ids := rs.items(bs, take)
	rs.existing = make(map[rowKey]engagement.Stats, len(rs.deltas))
	if err := r.readRows(ctx, ids, rs.existing, first, last); err != nil {
		return err
	}
	sums := rs.addMessages(msgs, bs, take)
	rows := rs.rows(now)
	if err := r.writeRowsThenMarks(ctx, last, rows, marks); err != nil {
		return err
	}
	r.noteApplied(now, bs, take, rows, sums, rs.skipped)
	r.applyTrending(msgs, bs, take)
	return nil
}

// batchMarks are the runs' marks that a batch's messages are checked
// against and set: the stored marks of each partition met (read once per
// batch through partitionMarks), and the marks the batch sets, one per
// agent run in order of the run's first message, with the partition's
// marks each goes to.
type batchMarks struct {
	parts map[uint32]*partMarks // nil until a numbered message comes
	index map[runKey]int        // into marks
	marks []store.Mark
	// markParts[j] holds the marks of marks[j]'s partition.
	markParts []*partMarks
}

// chooseMessages sets take[i] when msgs[i] is to be applied, and returns
// the marks the batch sets. A numbered message (every agent's) is checked
// against its run's mark, the stored one or the one an earlier message of
// this batch set; seq 0 means the sender does not number, and the message
// is applied. A message above store.MaxPartition gets an Err wrapping
// ErrPoison. It writes nothing; an error is a failed read of the marks.
func (r *Rollup) chooseMessages(ctx context.Context, msgs []Message, bs []*partial.Batch, take []bool, now time.Time) (batchMarks, error) {
	var bm batchMarks
	for i, b := range bs {
		if b == nil || msgs[i].Err != nil {
			continue
		}
		ok, err := r.choose(ctx, &bm, &msgs[i], b, now)
		if err != nil {
			return batchMarks{}, err
		}
		take[i] = ok
	}
	return bm, nil
}

// choose reports whether to apply msg (body b), and records the mark it
// sets in bm. It relies on the messages of a run coming in increasing seq
// order: a message at or below its run's mark is a copy of one applied
// (dropCovered).
func (r *Rollup) choose(ctx context.Context, bm *batchMarks, msg *Message, b *partial.Batch, now time.Time) (bool, error) {
	seq := msg.Seq
	if b.Seq == 0 {
		return true, nil
	}
	if b.Partition > store.MaxPartition {
		r.stats.Poison.Add(1)
		msg.Err = fmt.Errorf("%w: seq %d: partition %d above %d", ErrPoison, seq, b.Partition, store.MaxPartition)
		return false, nil
	}
	pm, err := r.batchPartitionMarks(ctx, bm, b.Partition, seq, now)
	if err != nil {
		return false, err
	}
	key := runKey{b.Partition, store.MarkKey{Agent: b.Agent, Epoch: b.Epoch}}
	if m, ok := r.runMark(bm, pm, key); ok && m.Covers(b.Epoch, b.Seq) {
		r.dropCovered(seq, b, m)
		return false, nil
	}
	bm.set(key, pm, store.Mark{Partition: b.Partition, Agent: b.Agent, Epoch: b.Epoch, Seq: b.Seq, FlushedAt: b.FlushedAt, UpdatedAt: now})
	return true, nil
}

// batchPartitionMarks returns the marks of partition p, read through
// partitionMarks on the batch's first message of p; seq is that message's,
// for the error.
func (r *Rollup) batchPartitionMarks(ctx context.Context, bm *batchMarks, p uint32, seq uint64, now time.Time) (*partMarks, error) {
	if pm := bm.parts[p]; pm != nil {
		return pm, nil
	}
	pm, err := r.partitionMarks(ctx, p, now)
	if err != nil {
		r.stats.ApplyErrors.Add(1)
		return nil, fmt.Errorf("cannot read the marks of partition %d for seq %d: %w", p, seq, err)
	}
	if bm.parts == nil {
		bm.parts, bm.index = make(map[uint32]*partMarks), make(map[runKey]int)
	}
	bm.parts[p] = pm
	return pm, nil
}

// runMark returns the mark of run key: the one an earlier message of the
// batch set, else the one kept in pm, the marks of key's partition.
func (r *Rollup) runMark(bm *batchMarks, pm *partMarks, key runKey) (store.Mark, bool) {
	if j, ok := bm.index[key]; ok {
		return bm.marks[j], true
	}
	r.marksMu.Lock()
	m, ok := pm.agents[key.k]
	r.marksMu.Unlock()
	return m, ok
}

// set records m as the mark the batch sets for run key, in place of the
// one an earlier message of the run set; pm holds the marks of key's
// partition (batchPartitionMarks made bm's maps).
func (bm *batchMarks) set(key runKey, pm *partMarks, m store.Mark) {
	if j, ok := bm.index[key]; ok {
		bm.marks[j] = m
		return
	}
	bm.index[key] = len(bm.marks)
	bm.marks, bm.markParts = append(bm.marks, m), append(bm.markParts, pm)
}

// rowSums are the sums a batch adds to each row it changes, and the rows
// as read before.
type rowSums struct {
	deltas   map[rowKey]*rowDelta
	existing map[rowKey]engagement.Stats
	// skipped counts (row, message) pairs skipped: the row held the
	// message already.
	skipped int
}

// items returns the items the chosen messages change, in order, each
// once, and gives the global row of each an empty sum.
func (rs *rowSums) items(bs []*partial.Batch, take []bool) []string {
	var ids []string
	for i, b := range bs {
		if !take[i] {
			continue
		}
		for j := range b.Sums {
			if _, ok := rs.deltas[rowKey{b.Sums[j].ContentID, engagement.GlobalScope}]; !ok {
				ids = append(ids, b.Sums[j].ContentID)
				rs.deltas[rowKey{b.Sums[j].ContentID, engagement.GlobalScope}] = new(rowDelta)
			}
		}
	}
	return ids
}

// readRows reads every scope row of items ids into existing, in one
// lookup; first and last are the batch's sequences, for the error. It
// writes nothing to the store.
func (r *Rollup) readRows(ctx context.Context, ids []string, existing map[rowKey]engagement.Stats, first, last uint64) error {
	if len(ids) == 0 {
		return nil
	}
	current, err := r.store.ReadStats(ctx, ids)
	if err != nil {
		r.stats.ApplyErrors.Add(1)
		return fmt.Errorf("cannot read totals for seq %d..%d: %w", first, last, err)
	}
	for id, rows := range current {
		for _, row := range rows {
			existing[rowKey{id, row.Scope}] = row
		}
	}
	return nil
}

// addMessages adds the sums of each chosen message, in order, to its global
// and regional rows, and returns how many sums the chosen messages carry.
func (rs *rowSums) addMessages(msgs []Message, bs []*partial.Batch, take []bool) uint64 {
	var sums uint64
	for i, b := range bs {
		if !take[i] {
			continue
		}
		seq := msgs[i].Seq
		sums += uint64(len(b.Sums))
		for j := range b.Sums {
			s := &b.Sums[j]
			rs.add(rowKey{s.ContentID, engagement.GlobalScope}, seq, s.Counter, s.Delta)
			rs.add(rowKey{s.ContentID, s.Region}, seq, s.Counter, s.Delta)
		}
	}
	return sums
}

// add adds v to counter of row k for message seq, unless the row as read
// holds seq already (its LastSeq is at or above it).
func (rs *rowSums) add(k rowKey, seq uint64, counter string, v int64) {
	d := rs.deltas[k]
	if d == nil {
		d = new(rowDelta)
		rs.deltas[k] = d
	}
	if row, ok := rs.existing[k]; ok && row.LastSeq >= seq {
		if d.skipped != seq {
			d.skipped = seq
			rs.skipped++
		}
		return
	}
	d.add(counter, v)
	d.seq = max(d.seq, seq)
}

// rows returns the rows that took a message: each as read plus its sums,
// with LastSeq the highest sequence it took, in a stable order (content,
// then scope), which keeps writes reproducible and lock order consistent.
func (rs *rowSums) rows(now time.Time) []engagement.Stats {
	rows := make([]engagement.Stats, 0, len(rs.deltas))
	for k, d := range rs.deltas {
		if d.seq == 0 {
			continue
		}
		row, ok := rs.existing[k]
		if !ok {
			row = engagement.Stats{ContentID: k.content, Scope: k.scope}
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
		row.LastSeq = d.seq
		row.UpdatedAt = now
		rows = append(rows, row)
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].ContentID != rows[j].ContentID {
			return rows[i].ContentID < rows[j].ContentID
		}
		return rows[i].Scope < rows[j].Scope
	})
	return rows
}

// writeRowsThenMarks writes the rows with the first run's mark, then every
// other run's mark after them: never a mark before the rows it covers. A
// batch without a numbered message writes the rows alone. last is the
// batch's last sequence, for the error.
func (r *Rollup) writeRowsThenMarks(ctx context.Context, last uint64, rows []engagement.Stats, bm batchMarks) error {
	if len(bm.marks) == 0 {
		if err := r.write(ctx, last, rows, nil, store.Mark{}); err != nil {
			return err
		}
	}
	for j, m := range bm.marks {
		var rs []engagement.Stats
		if j == 0 {
			rs = rows
		}
		if err := r.write(ctx, last, rs, bm.markParts[j], m); err != nil {
			return err
		}
	}
	return nil
}

// noteApplied counts a written batch (messages, sums, rows written and
// skipped, the lag of its newest flush) and tells the rows hook of its
// rows, under the partition of its first chosen message.
func (r *Rollup) noteApplied(now time.Time, bs []*partial.Batch, take []bool, rows []engagement.Stats, sums uint64, skipped int) {
	var applied uint64
	var newest time.Time
	part := uint32(0)
	for i, b := range bs {
		if !take[i] {
			continue
		}
		if applied == 0 {
			part = b.Partition
		}
		applied++
		if b.FlushedAt.After(newest) {
			newest = b.FlushedAt
		}
	}
	r.stats.Messages.Add(applied)
	r.stats.Sums.Add(sums)
	r.stats.RowsWritten.Add(uint64(len(rows)))
	r.stats.RowsSkipped.Add(uint64(skipped))
	if len(rows) > 0 {
		r.stats.RowWrites.Add(1)
		if r.rowsHook != nil {
			r.rowsHook(part, rows)
		}
	}
	if !newest.IsZero() && sums > 0 {
		r.stats.LagMillis.Store(now.Sub(newest).Milliseconds())
	}
}

// applyTrending feeds the chosen messages to the trending lists, if on.
// It runs after the rows are written: a list is counted once its sums are
// applied.
func (r *Rollup) applyTrending(msgs []Message, bs []*partial.Batch, take []bool) {
	if r.trend == nil {
		return
	}
	for i, b := range bs {
		if take[i] {
			r.trend.apply(msgs[i].Seq, b)
		}
	}
}
