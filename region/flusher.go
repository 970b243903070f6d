package region

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgecount/edgecount/partial"
	"github.com/edgecount/edgecount/wal"
)

// outMsg is one encoded partial-sum message waiting to be published.
type outMsg struct {
	partition uint32
	id        string
	data      []byte
	sums      int
	logIndex  uint64   // its record in the outbox log; 0 without a log
	held      *heldMsg // its sums, remembered for fresh reads (fresh.go)
}

// flusher drains the counters every flush interval into partial-sum
// messages (one or more per partition) and queues them in a bounded FIFO
// outbox; one publisher goroutine sends the outbox in order, retrying the
// head until the broker stores it. Order per agent is therefore the order
// of flushes, and a retry reuses the message id, so the broker's
// de-duplication drops a copy stored by an attempt whose ack was lost.
//
// Lock order: flushMu before mu. flushMu serialises flushes (ticker and
// final); mu guards the outbox.
type flusher struct {
	a     *Agent
	pub   Publisher
	epoch uint64

	flushMu sync.Mutex
	seq     uint64
	parts   [][]partial.Sum // per-partition scratch, reused
	batch   partial.Batch

	mu      sync.Mutex
	queue   []outMsg
	notify  chan struct{} // cap 1: outbox gained a message
	drained chan struct{} // closed and replaced whenever the outbox empties

	stopFlush  chan struct{}
	pubCtx     context.Context
	pubCancel  context.CancelFunc
	wg         sync.WaitGroup
	lastWarned time.Time
	// deferring is set while flushes are deferred for a full outbox (the
	// broker is slow or down).
	deferring atomic.Bool
	// all holds a flush's sums until it is logged, to put them back in the
	// counters if logging fails.
	all []partial.Sum
}

func newFlusher(a *Agent, pub Publisher, epoch uint64) *flusher {
	f := &flusher{
		a:         a,
		pub:       pub,
		epoch:     epoch,
		parts:     make([][]partial.Sum, a.cfg.Partitions),
		notify:    make(chan struct{}, 1),
		drained:   make(chan struct{}),
		stopFlush: make(chan struct{}),
	}
	f.pubCtx, f.pubCancel = context.WithCancel(context.Background())
	return f
}

func (f *flusher) start() {
	f.wg.Add(2)
	go func() {
		defer f.wg.Done()
		f.flushLoop()
	}()
	go func() {
		defer f.wg.Done()
		f.publishLoop()
	}()
}

func (f *flusher) flushLoop() {
	t := time.NewTicker(f.a.cfg.FlushInterval)
	defer t.Stop()
	for {
		select {
		case <-f.stopFlush:
			return
		case <-t.C:
			f.flush(false)
		}
	}
}

// stop ends the ticker, runs a final flush regardless of the outbox bound,
// and waits for the outbox to empty or ctx to end.
func (f *flusher) stop(ctx context.Context) error {
	close(f.stopFlush)
	f.flush(true)
	var err error
	for {
		f.mu.Lock()
		n, sums, drained := len(f.queue), f.queuedSums(), f.drained
		f.mu.Unlock()
		if n == 0 {
			break
		}
		select {
		case <-drained:
			continue
		case <-ctx.Done():
			err = fmt.Errorf("cannot publish %d messages (%d partial sums) before stopping: %w", n, sums, ctx.Err())
		}
		break
	}
	f.pubCancel()
	f.wg.Wait()
	if err != nil {
		if f.a.log != nil {
			f.a.logger.Warn("partial sums not published at stop; the outbox log keeps them for the next start", "err", err)
		} else {
			f.a.logger.Error("partial sums lost at stop", "err", err)
		}
	}
	return err
}

func (f *flusher) queuedSums() int {
	n := 0
	for _, m := range f.queue {
		n += m.sums
	}
	return n
}

// flush drains the counters into the outbox. Unless final, it leaves the
// counters alone while the outbox is over its bound: the deltas keep
// accumulating in place, so memory stays bounded by the live counters and
// nothing is lost.
//
// With a log, a flush is: Checkpoint (drain every record below next, and
// note the intents still pending below it); re-append those intents; append
// the flush's messages to the outbox log, each carrying next; truncate the
// intake log below next; queue the messages. If an append fails the drained
// sums go back into the counters and the intake log keeps its records, so
// the next flush carries them again. A crash after the outbox append and
// before the truncation is repaired by Recover (it truncates below the
// highest next in the outbox).
func (f *flusher) flush(final bool) {
	f.flushMu.Lock()
	defer f.flushMu.Unlock()
	a := f.a
	d := a.log
	if d != nil && !d.recovered.Load() {
		return // the counters may hold a partial replay; nothing is flushed
	}
	if !final && a.stats.OutboxBytes.Load() >= a.cfg.OutboxBytes {
		f.deferring.Store(true)
		a.stats.FlushesDeferred.Add(1)
		if now := time.Now(); now.Sub(f.lastWarned) > 10*time.Second {
			f.lastWarned = now
			a.logger.Warn("outbox full, flush deferred until the broker catches up",
				"outbox_bytes", a.stats.OutboxBytes.Load(), "outbox_messages", a.stats.OutboxMessages.Load())
		}
		return
	}
	f.deferring.Store(false)
	if d != nil {
		a.retryPending(context.Background())
	}
	start := time.Now()
	n := len(f.parts)
	sums := 0
	// Fresh reads see the drained deltas in the counters or in the
	// recorded messages, never in both or neither (heldState).
	a.held.mu.Lock()
	a.held.prune()
	heldLocked := true
	defer func() {
		if heldLocked {
			a.held.mu.Unlock()
		}
	}()
	drain := func() {
		a.counters.Drain(func(k Key, delta int64) {
			p := partial.PartitionOf(k.ContentID, n)
			f.parts[p] = append(f.parts[p], partial.Sum{ContentID: k.ContentID, Counter: k.Counter, Region: k.Region, Delta: delta})
			sums++
		})
	}
	var next uint64
	var carry []*pendingIntent
	if d != nil {
		d.intake.Checkpoint(func(nx uint64) {
			next = nx
			drain()
			d.mu.Lock()
			for _, pi := range d.pending {
				if pi.index < nx {
					carry = append(carry, pi)
				}
			}
			d.mu.Unlock()
		})
	} else {
		drain()
	}
	// The wire keeps milliseconds; the trending windows bucket the same
	// time the rollup reads.
	flushedAt := time.UnixMilli(a.now().UnixMilli())
	var tops [][]partial.TopList
	if a.trend != nil {
		ts := time.Now()
		tops = a.trend.flush(f.parts, flushedAt)
		a.stats.TrendingNanos.Add(uint64(time.Since(ts)))
	}
	var out []outMsg
	if d != nil {
		f.all = f.all[:0]
	}
	for p := range f.parts {
		var pt []partial.TopList
		if tops != nil {
			pt = tops[p]
		}
		if len(f.parts[p]) == 0 && len(pt) == 0 {
			continue
		}
		first := len(out)
		out = f.encode(out, uint32(p), f.parts[p], pt, flushedAt)
		a.held.record(out[first:], f.parts[p])
		a.stats.TopListsShipped.Add(uint64(len(pt)))
		if d != nil {
			f.all = append(f.all, f.parts[p]...)
		}
		clear(f.parts[p]) // drop string references
		f.parts[p] = f.parts[p][:0]
	}
	a.held.mu.Unlock()
	heldLocked = false
	if d != nil {
		err := f.logFlush(out, next, carry)
		clear(f.all)
		if err != nil {
			a.logStats.FlushesFailed.Add(1)
			if now := time.Now(); now.Sub(f.lastWarned) > 10*time.Second {
				f.lastWarned = now
				a.logger.Error("cannot log a flush; its deltas stay in the counters and the log", "err", err)
			}
			return
		}
	}
	if len(out) > 0 {
		f.enqueue(out)
	}
	a.stats.Flushes.Add(1)
	a.stats.SumsFlushed.Add(uint64(sums))
	a.stats.FlushNanos.Add(uint64(time.Since(start)))
}

// logFlush makes a drained flush durable (see flush). On error it has put
// the sums back into the counters and truncated nothing.
func (f *flusher) logFlush(out []outMsg, next uint64, carry []*pendingIntent) error {
	a, d := f.a, f.a.log
	undo := func(err error) error {
		a.held.forget(out) // before the sums are back in the counters
		for _, s := range f.all {
			a.counters.Add(Key{ContentID: s.ContentID, Counter: s.Counter, Region: s.Region}, s.Delta)
		}
		return err
	}
	ctx := context.Background()
	if len(carry) > 0 {
		payloads := make([][]byte, len(carry))
		for i, pi := range carry {
			payloads[i] = pi.payload
		}
		first, err := d.intake.AppendBatch(ctx, payloads)
		if err != nil {
			return undo(fmt.Errorf("cannot carry %d pending reaction intents over the truncation: %w", len(carry), err))
		}
		d.mu.Lock()
		for i, pi := range carry {
			if _, ok := d.pending[pi.in.id]; ok {
				pi.index = first + uint64(i)
			}
		}
		d.mu.Unlock()
		a.logStats.IntentsReappended.Add(uint64(len(carry)))
	}
	if len(out) > 0 {
		payloads := make([][]byte, len(out))
		for i := range out {
			m := &out[i]
			payloads[i] = appendOutRecord(nil, &outRecord{covered: next, partition: m.partition, id: m.id, sums: m.sums, data: m.data})
		}
		first, err := d.outbox.AppendBatch(ctx, payloads)
		if err != nil {
			return undo(fmt.Errorf("cannot log %d flushed messages: %w", len(out), err))
		}
		for i := range out {
			out[i].logIndex = first + uint64(i)
		}
	}
	// From here the flush is durable: a failed truncation only leaves
	// records that Recover drops (it truncates below the outbox's next).
	// The idempotency keys of those records go to the keys log first.
	a.moveKeys(next)
	if err := d.intake.TruncateBefore(next); err != nil {
		a.logStats.TruncateErrors.Add(1)
		a.logger.Warn("cannot truncate the intake log after a flush", "err", err)
	}
	return nil
}

// headerRoom is room left in a message for the batch header fields.
const headerRoom = 512

// encode cuts sums, then the partition's trending lists, into messages of
// at most MaxMessageBytes and appends them to out. The lists come after
// every sum of the flush (in the last message, or in messages of their
// own), so that a reader that has a list has every sum it counts.
func (f *flusher) encode(out []outMsg, partition uint32, sums []partial.Sum, tops []partial.TopList, at time.Time) []outMsg {
	b := &f.batch
	limit := f.a.cfg.MaxMessageBytes - headerRoom
	for len(sums) > 0 || len(tops) > 0 {
		size, i, j := 0, 0, 0
		for ; i < len(sums); i++ {
			s := partial.SumSize(&sums[i], f.a.cfg.Region)
			if i > 0 && size+s > limit {
				break
			}
			size += s
		}
		if i == len(sums) {
			for ; j < len(tops); j++ {
				s := partial.TopListSize(&tops[j])
				if size > 0 && size+s > limit {
					break
				}
				size += s
			}
		}
		f.seq++
		*b = partial.Batch{
			Agent: f.a.cfg.AgentID, Region: f.a.cfg.Region, Epoch: f.epoch, Seq: f.seq,
			Partition: partition, FlushedAt: at, Sums: sums[:i], Tops: tops[:j],
			More: i < len(sums) || j < len(tops),
		}
		data := partial.Append(make([]byte, 0, size+headerRoom), b)
		out = append(out, outMsg{partition: partition, id: b.MsgID(), data: data, sums: i})
		sums, tops = sums[i:], tops[j:]
	}
	b.Sums, b.Tops = nil, nil
	return out
}

func (f *flusher) enqueue(msgs []outMsg) {
	var bytes int64
	for _, m := range msgs {
		bytes += int64(len(m.data))
	}
	f.mu.Lock()
	f.queue = append(f.queue, msgs...)
	f.mu.Unlock()
	f.a.stats.OutboxBytes.Add(bytes)
	f.a.stats.OutboxMessages.Add(int64(len(msgs)))
	f.a.stats.MessagesEnqueued.Add(uint64(len(msgs)))
	select {
	case f.notify <- struct{}{}:
	default:
	}
}

func (f *flusher) publishLoop() {
	ctx := f.pubCtx
	for {
		f.mu.Lock()
		if len(f.queue) == 0 {
			f.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-f.notify:
				continue
			}
		}
		m := f.queue[0]
		f.mu.Unlock()

		seq, ok := f.publish(ctx, m)
		if !ok {
			return
		}
		f.a.held.acked(m.held, seq)
		f.mu.Lock()
		f.queue[0] = outMsg{}
		f.queue = f.queue[1:]
		empty := len(f.queue) == 0
		f.mu.Unlock()
		if m.logIndex != 0 {
			// The outbox log is truncated past every acknowledged message
			// at once (one meta fsync each). A crash before it re-publishes
			// that one message with its id: JetStream drops it within its
			// de-duplication window, but the stream is a work queue and a
			// restarted broker no longer knows the ids of consumed
			// messages, so the rollup's high-water mark per (agent,
			// partition) is what drops it then. Batching truncations would
			// widen that window; it is kept to one message.
			if err := f.a.log.outbox.TruncateBefore(m.logIndex + 1); err != nil && !errors.Is(err, wal.ErrClosed) {
				f.a.logStats.TruncateErrors.Add(1)
				f.a.logger.Warn("cannot truncate the outbox log after a publish; the message is re-published after a restart", "msg_id", m.id, "err", err)
			}
		}
		f.a.stats.OutboxBytes.Add(-int64(len(m.data)))
		f.a.stats.OutboxMessages.Add(-1)
		f.a.stats.MessagesPublished.Add(1)
		if empty {
			// Stop waits on drained: the truncation above is done by now.
			f.mu.Lock()
			if len(f.queue) == 0 {
				f.queue = nil
				close(f.drained)
				f.drained = make(chan struct{})
			}
			f.mu.Unlock()
		}
	}
}

// publish sends m until the broker stores it, backing off between
// attempts, and returns the broker's sequence of it (0 when the publisher
// does not say). It returns false only when ctx ends first.
func (f *flusher) publish(ctx context.Context, m outMsg) (uint64, bool) {
	backoff := f.a.cfg.PublishRetryMin
	sp, _ := f.pub.(SeqPublisher)
	for attempt := 1; ; attempt++ {
		var seq uint64
		var err error
		if sp != nil {
			seq, err = sp.PublishSeq(ctx, m.partition, m.id, m.data)
		} else {
			err = f.pub.Publish(ctx, m.partition, m.id, m.data)
		}
		if err == nil {
			return seq, true
		}
		if ctx.Err() != nil {
			return 0, false
		}
		f.a.stats.PublishErrors.Add(1)
		if attempt == 1 || attempt%20 == 0 {
			f.a.logger.Warn("cannot publish partial sums, retrying", "msg_id", m.id, "attempt", attempt, "err", err)
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, false
		case <-t.C:
		}
		backoff = min(2*backoff, f.a.cfg.PublishRetryMax)
	}
}
