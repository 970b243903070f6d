package rollup

import (
	"context"
	"fmt"
	"sort"

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

func (r *Rollup) applyBatch(ctx context.Context, msgs []Message, bs []*partial.Batch) error {
	now := r.now()
	first, last := msgs[0].Seq, msgs[len(msgs)-1].Seq
	// Which messages to apply: a numbered message (every agent's) is
	// checked against its run's mark, the stored one or the one an earlier
	// message of this batch set. Seq 0 means the sender does not number.
	take := make([]bool, len(bs))
	var (
		marks   []store.Mark
		markPMs []*partMarks
		markIdx map[runKey]int
		pms     map[uint32]*partMarks
	)
	for i, b := range bs {
		if b == nil || msgs[i].Err != nil {
			continue
		}
		seq := msgs[i].Seq
		if b.Seq == 0 {
			take[i] = true
			continue
		}
		if b.Partition > store.MaxPartition {
			r.stats.Poison.Add(1)
			msgs[i].Err = fmt.Errorf("%w: seq %d: partition %d above %d", ErrPoison, seq, b.Partition, store.MaxPartition)
			continue
		}
		pm := pms[b.Partition]
		if pm == nil {
			var err error
			if pm, err = r.partitionMarks(ctx, b.Partition, now); err != nil {
				r.stats.ApplyErrors.Add(1)
				return fmt.Errorf("cannot read the marks of partition %d for seq %d: %w", b.Partition, seq, err)
			}
			if pms == nil {
				pms, markIdx = make(map[uint32]*partMarks), make(map[runKey]int)
			}
			pms[b.Partition] = pm
		}
		key := runKey{b.Partition, store.MarkKey{Agent: b.Agent, Epoch: b.Epoch}}
		j, inBatch := markIdx[key]
		var m store.Mark
		ok := inBatch
		if inBatch {
			m = marks[j]
		} else {
			r.marksMu.Lock()
			m, ok = pm.agents[key.k]
			r.marksMu.Unlock()
		}
		if ok && m.Covers(b.Epoch, b.Seq) {
			r.dropCovered(seq, b, m)
			continue
		}
		nm := store.Mark{Partition: b.Partition, Agent: b.Agent, Epoch: b.Epoch, Seq: b.Seq, FlushedAt: b.FlushedAt, UpdatedAt: now}
		if inBatch {
			marks[j] = nm
		} else {
			markIdx[key] = len(marks)
			marks, markPMs = append(marks, nm), append(markPMs, pm)
		}
		take[i] = true
	}

	deltas := make(map[rowKey]*rowDelta)
	var ids []string
	for i, b := range bs {
		if !take[i] {
			continue
		}
		for j := range b.Sums {
			if _, ok := deltas[rowKey{b.Sums[j].ContentID, engagement.GlobalScope}]; !ok {
				ids = append(ids, b.Sums[j].ContentID)
				deltas[rowKey{b.Sums[j].ContentID, engagement.GlobalScope}] = new(rowDelta)
			}
		}
	}
	existing := make(map[rowKey]engagement.Stats, len(deltas))
	if len(ids) > 0 {
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
	}
	// Add each message to the rows it has not reached yet, in order.
	skipped := 0
	add := func(k rowKey, seq uint64, counter string, v int64) {
		d := deltas[k]
		if d == nil {
			d = new(rowDelta)
			deltas[k] = d
		}
		if row, ok := existing[k]; ok && row.LastSeq >= seq {
			if d.skipped != seq {
				d.skipped = seq
				skipped++
			}
			return
		}
		d.add(counter, v)
		d.seq = max(d.seq, seq)
	}
	var sums uint64
	for i, b := range bs {
		if !take[i] {
			continue
		}
		seq := msgs[i].Seq
		sums += uint64(len(b.Sums))
		for j := range b.Sums {
			s := &b.Sums[j]
			add(rowKey{s.ContentID, engagement.GlobalScope}, seq, s.Counter, s.Delta)
			add(rowKey{s.ContentID, s.Region}, seq, s.Counter, s.Delta)
		}
	}
	rows := make([]engagement.Stats, 0, len(deltas))
	for k, d := range deltas {
		if d.seq == 0 {
			continue
		}
		row, ok := existing[k]
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
	// A stable order keeps writes reproducible and lock order consistent.
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].ContentID != rows[j].ContentID {
			return rows[i].ContentID < rows[j].ContentID
		}
		return rows[i].Scope < rows[j].Scope
	})
	// The rows first, with the first run's mark; every other run's mark
	// after them: never a mark before the rows it covers.
	if len(marks) == 0 {
		if err := r.write(ctx, last, rows, nil, store.Mark{}); err != nil {
			return err
		}
	}
	for j, m := range marks {
		var rs []engagement.Stats
		if j == 0 {
			rs = rows
		}
		if err := r.write(ctx, last, rs, markPMs[j], m); err != nil {
			return err
		}
	}
	var applied uint64
	var newest partial.Batch
	part := uint32(0)
	for i, b := range bs {
		if !take[i] {
			continue
		}
		if applied == 0 {
			part = b.Partition
		}
		applied++
		if b.FlushedAt.After(newest.FlushedAt) {
			newest.FlushedAt = b.FlushedAt
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
	if !newest.FlushedAt.IsZero() && sums > 0 {
		r.stats.LagMillis.Store(now.Sub(newest.FlushedAt).Milliseconds())
	}
	if r.trend != nil {
		// After the rows: a list is counted once its sums are applied.
		for i, b := range bs {
			if take[i] {
				r.trend.apply(msgs[i].Seq, b)
			}
		}
	}
	return nil
}
