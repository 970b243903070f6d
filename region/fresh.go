package region

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/partial"
)

// Consistency is the accuracy mode of a count read (docs/consistency.md).
type Consistency uint8

const (
	// Eventual answers the stored totals, through the read cache.
	Eventual Consistency = iota
	// Fresh answers the stored totals plus the deltas the region's agents
	// hold that the stored rows do not have yet.
	Fresh
)

// ParseConsistency parses the wire names "eventual" and "fresh".
func ParseConsistency(s string) (Consistency, bool) {
	switch s {
	case "eventual":
		return Eventual, true
	case "fresh":
		return Fresh, true
	}
	return Eventual, false
}

// String returns the wire name of c.
func (c Consistency) String() string {
	if c == Fresh {
		return "fresh"
	}
	return "eventual"
}

// Held is one delta an agent holds for one counter of an item that a
// stored row may not have yet: still in the sharded counters (Flushed
// false), or flushed in a message the rollup may not have applied.
type Held struct {
	Counter, Region string
	Delta           int64
	// Flushed is false for a delta still in the counters: no stored row
	// has it.
	Flushed bool
	// Seq is the broker's sequence of the message that carries the delta,
	// once the broker acknowledged it; 0 before.
	Seq uint64
	// Floor is, while Seq is 0, a broker sequence below the message's:
	// the agent's last acknowledged sequence when the message was queued
	// (the agent publishes one message at a time, in order).
	Floor uint64
}

// NotIn reports whether h is certainly not in a stored row whose LastSeq
// is last. The rollup applies a partition's messages in broker order and
// a row records the highest sequence applied to it, so a row that has h
// has LastSeq >= h.Seq (> h.Floor). NotIn is false whenever the row may
// have h: a fresh read adds h to the row only when NotIn, and so never
// counts a delta twice.
func (h *Held) NotIn(last uint64) bool {
	switch {
	case !h.Flushed:
		return true
	case h.Seq != 0:
		return last < h.Seq
	default:
		return last <= h.Floor
	}
}

// MergeHeld returns rows (one item's stored rows, one per scope) with every
// held delta added to the global row and to its region's row, each where
// NotIn that row's LastSeq (a missing row counts as LastSeq 0 and is
// created). rows and their maps are never modified: the result is a copy
// when anything is added. Likes and dislikes of the result are clamped at
// zero (a held undo whose like is in a message not yet known applied).
func MergeHeld(rows []engagement.Stats, contentID string, held []Held) []engagement.Stats {
	if len(held) == 0 {
		return rows
	}
	var out []engagement.Stats
	cloned := map[int]bool{}
	row := func(scope string) *engagement.Stats {
		if out == nil {
			out = slices.Clone(rows)
		}
		for i := range out {
			if out[i].Scope == scope {
				if !cloned[i] {
					out[i].Counters = maps.Clone(out[i].Counters)
					cloned[i] = true
				}
				return &out[i]
			}
		}
		out = append(out, engagement.Stats{ContentID: contentID, Scope: scope})
		cloned[len(out)-1] = true
		return &out[len(out)-1]
	}
	lastSeq := func(scope string) uint64 {
		for i := range rows {
			if rows[i].Scope == scope {
				return rows[i].LastSeq
			}
		}
		return 0
	}
	for i := range held {
		h := &held[i]
		for _, scope := range [2]string{engagement.GlobalScope, h.Region} {
			if !h.NotIn(lastSeq(scope)) {
				continue
			}
			r := row(scope)
			switch h.Counter {
			case engagement.CounterLike:
				r.Likes += h.Delta
			case engagement.CounterDislike:
				r.Dislikes += h.Delta
			default:
				if r.Counters == nil {
					r.Counters = make(map[string]int64)
				}
				r.Counters[h.Counter] += h.Delta
			}
		}
	}
	if out == nil {
		return rows
	}
	for i := range out {
		out[i].Likes, out[i].Dislikes = max(out[i].Likes, 0), max(out[i].Dislikes, 0)
	}
	return out
}

// CountRead is one item's answer to ReadCounts.
type CountRead struct {
	// Rows are the item's rows, one per scope (none when it has no row
	// and, for fresh, nothing held). Shared: they must not be modified.
	Rows []engagement.Stats
	// Stored is when the stored part of Rows was last known current: the
	// start of the store read that returned it, or the arrival of the
	// last push that changed the item, whichever is later.
	Stored time.Time
	// AsOf is the time the answer reflects: Stored for an eventual read,
	// the time the held deltas were collected for a fresh one.
	AsOf time.Time
	// Memo, when not nil, is the slot of the item's current cached state
	// (Rows, Stored and AsOf of an eventual read): what a caller derives
	// from those and keeps there is reused by the reads of the same state
	// (the HTTP API keeps its encoded answers). Nil for a fresh read and
	// for an item the cache does not keep.
	Memo *Memo
}

// ReadInfo says what a read reached.
type ReadInfo struct {
	// Now is the agent's clock when the answer was complete.
	Now time.Time
	// Peers counts the live region peers a fresh read asked; Missing
	// names those that did not answer in time (their held deltas are not
	// in the answer).
	Peers   int
	Missing []string
}

// HeldPeers reaches the other agents of the region (gossip).
type HeldPeers interface {
	// PeerHeld asks every live peer for the deltas it holds of ids, within
	// ctx, and returns one answer per peer asked.
	PeerHeld(ctx context.Context, ids []string) []PeerHeld
}

// PeerHeld is one peer's answer: the deltas it holds by content id, or
// the error that kept it from answering.
type PeerHeld struct {
	Agent string
	Held  map[string][]Held
	Err   error
}

// SetHeldPeers sets the region peers a fresh read asks (nil: none).
func (a *Agent) SetHeldPeers(p HeldPeers) {
	if p == nil {
		a.heldPeers.Store(nil)
		return
	}
	a.heldPeers.Store(&p)
}

// ReadCounts puts in dst[i] the rows of ids[i] (len(dst) must be len(ids))
// in the accuracy mode asked. An eventual read is Counts with times. A
// fresh read first takes the stored rows (as eventual), then the deltas
// this agent holds and, within Config.FreshPeerTimeout, those of every
// live region peer, and adds to each row what it does not have
// (MergeHeld). A peer that does not answer is named in ReadInfo.Missing;
// the read still succeeds.
func (a *Agent) ReadCounts(ctx context.Context, ids []string, mode Consistency, dst []CountRead) (ReadInfo, error) {
	if len(dst) != len(ids) {
		return ReadInfo{}, fmt.Errorf("cannot read counts: %d destinations for %d ids", len(dst), len(ids))
	}
	now := a.now()
	nowNano := now.UnixNano()
	missing := 0
	var vs [getBatch]*cacheValue
	for base := 0; base < len(ids); base += getBatch {
		batch := ids[base:min(base+getBatch, len(ids))]
		a.cache.getAll(batch, nowNano, vs[:len(batch)])
		for j, v := range vs[:len(batch)] {
			if v == nil {
				missing++
				dst[base+j] = CountRead{}
				continue
			}
			at := time.Unix(0, v.current)
			dst[base+j] = CountRead{Rows: v.rows, Stored: at, AsOf: at, Memo: &v.memo}
		}
	}
	a.stats.CacheHits.Add(uint64(len(ids) - missing))
	if missing > 0 {
		if err := a.readMissing(ctx, ids, dst, missing); err != nil {
			return ReadInfo{}, err
		}
	}
	if mode != Fresh {
		return ReadInfo{Now: now}, nil
	}
	return a.addHeld(ctx, ids, dst), nil
}

// readMissing reads from the store the ids whose dst entry has no time.
func (a *Agent) readMissing(ctx context.Context, ids []string, dst []CountRead, n int) error {
	a.stats.CacheMisses.Add(uint64(n))
	miss := make([]string, 0, n)
	for i, id := range ids {
		if dst[i].Stored.IsZero() {
			a.cache.expect(id)
			miss = append(miss, id)
		}
	}
	start, epoch := a.now(), a.cache.epoch.Load()
	got, err := a.reader.ReadStats(ctx, miss)
	if err != nil {
		return fmt.Errorf("cannot read totals: %w", err)
	}
	for i, id := range ids {
		if !dst[i].Stored.IsZero() {
			continue
		}
		a.noteProgress(got[id])
		rows, at, memo := a.cache.put(id, got[id], start, epoch)
		dst[i] = CountRead{Rows: rows, Stored: at, AsOf: at, Memo: memo}
	}
	return nil
}

// addHeld adds this agent's and its peers' held deltas to dst.
func (a *Agent) addHeld(ctx context.Context, ids []string, dst []CountRead) ReadInfo {
	a.stats.FreshReads.Add(1)
	var peers []PeerHeld
	var wg sync.WaitGroup
	if p := a.heldPeers.Load(); p != nil {
		pctx, cancel := context.WithTimeout(ctx, a.cfg.FreshPeerTimeout)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cancel()
			peers = (*p).PeerHeld(pctx, ids)
		}()
	}
	own := a.HeldDeltas(ids)
	asOf := a.now()
	wg.Wait()
	info := ReadInfo{Peers: len(peers)}
	for _, ph := range peers {
		if ph.Err != nil {
			info.Missing = append(info.Missing, ph.Agent)
			a.stats.FreshPeerMisses.Add(1)
			a.logger.Debug("region peer did not answer a fresh read", "peer", ph.Agent, "err", ph.Err)
		}
	}
	var scratch []Held
	for i, id := range ids {
		scratch = append(scratch[:0], own[id]...)
		for _, ph := range peers {
			scratch = append(scratch, ph.Held[id]...)
		}
		dst[i].Rows = MergeHeld(dst[i].Rows, id, scratch)
		dst[i].AsOf = asOf
		dst[i].Memo = nil
	}
	info.Now = a.now()
	return info
}

// HeldDeltas returns, by content id, the deltas this agent holds of ids:
// what its counters hold and what its flushed messages not yet seen
// applied carry. Flushes remember their messages only from the first call
// on (until then the flushed deltas of an agent nobody reads fresh are
// not kept; the first fresh answers may miss those in flight). It is one consistent cut: no delta is both in the
// counters and in a message (a flush drains and records under the same
// lock).
func (a *Agent) HeldDeltas(ids []string) map[string][]Held {
	out := make(map[string][]Held)
	h := &a.held
	if !h.inUse.Load() {
		h.inUse.Store(true)
	}
	h.mu.RLock()
	defer h.mu.RUnlock()
	for _, id := range ids {
		if _, done := out[id]; done {
			continue
		}
		var list []Held
		a.counters.Held(id, func(k Key, v int64) {
			list = append(list, Held{Counter: k.Counter, Region: k.Region, Delta: v})
		})
		p := partial.PartitionOf(id, a.cfg.Partitions)
		for _, m := range h.msgs {
			if m.partition != p {
				continue
			}
			seq := m.seq.Load()
			for _, j := range m.lookup(id) {
				s := &m.sums[j]
				list = append(list, Held{Counter: s.Counter, Region: s.Region, Delta: s.Delta, Flushed: true, Seq: seq, Floor: m.floor})
			}
		}
		out[id] = list
	}
	return out
}

// maxHeldSums bounds the flushed sums the agent remembers for fresh
// reads (about 64 bytes each); past it the oldest messages are forgotten
// (fresh reads then miss their deltas until the rollup applies them).
const maxHeldSums = 1 << 18

// heldState remembers the messages a flush sent until the agent sees the
// rollup applied them (a row of their partition with LastSeq at or above
// theirs), for fresh reads.
//
// mu: a flush holds it (write) from its drain until its messages are
// recorded, and a fresh read holds it (read) while it reads the counters
// and the messages, so the read never sees a delta in both or, drained,
// in neither. Lock order: flushMu, mu, the log's Checkpoint gate, stripe
// locks, the key index's shard locks.
type heldState struct {
	mu   sync.RWMutex
	msgs []*heldMsg // oldest first
	sums int
	// lastAck is the highest broker sequence acknowledged to this agent.
	lastAck atomic.Uint64
	// progress[p] is the highest LastSeq seen on a row of partition p.
	progress []atomic.Uint64
	dropped  atomic.Uint64
	// inUse is set by the first fresh read or peer query: until then a
	// flush remembers nothing, and costs what it did without fresh reads.
	inUse atomic.Bool
	// sourced (Config.SourcedStream): broker sequences are not the rows',
	// so flushed messages are never remembered.
	sourced bool
}

// heldMsg is one flushed message's sums.
type heldMsg struct {
	partition uint32
	floor     uint64
	seq       atomic.Uint64 // broker sequence once acknowledged
	sums      []partial.Sum
	once      sync.Once
	idx       map[string][]int32 // content id → positions in sums
}

// lookup returns the positions of id's sums.
func (m *heldMsg) lookup(id string) []int32 {
	m.once.Do(func() {
		m.idx = make(map[string][]int32)
		for i := range m.sums {
			m.idx[m.sums[i].ContentID] = append(m.idx[m.sums[i].ContentID], int32(i))
		}
	})
	return m.idx[id]
}

// record remembers the messages out[i] of one partition, whose sums are
// consecutive ranges of sums, and points out[i].held at them. h.mu is held.
func (h *heldState) record(out []outMsg, sums []partial.Sum) {
	if !h.inUse.Load() || h.sourced {
		return
	}
	floor := h.lastAck.Load()
	for i := range out {
		n := out[i].sums
		if n == 0 {
			continue
		}
		m := &heldMsg{partition: out[i].partition, floor: floor, sums: slices.Clone(sums[:n])}
		sums = sums[n:]
		out[i].held = m
		h.msgs = append(h.msgs, m)
		h.sums += n
	}
}

// forget drops the records of out (a flush that was not logged). h.mu is
// not held.
func (h *heldState) forget(out []outMsg) {
	h.mu.Lock()
	defer h.mu.Unlock()
	drop := map[*heldMsg]bool{}
	for i := range out {
		if out[i].held != nil {
			drop[out[i].held] = true
			out[i].held = nil
		}
	}
	h.msgs = slices.DeleteFunc(h.msgs, func(m *heldMsg) bool {
		if drop[m] {
			h.sums -= len(m.sums)
			return true
		}
		return false
	})
}

// prune drops the messages seen applied, and the oldest beyond
// maxHeldSums. h.mu is held.
func (h *heldState) prune() {
	h.msgs = slices.DeleteFunc(h.msgs, func(m *heldMsg) bool {
		seq := m.seq.Load()
		if seq != 0 && int(m.partition) < len(h.progress) && h.progress[m.partition].Load() >= seq {
			h.sums -= len(m.sums)
			return true
		}
		return false
	})
	for h.sums > maxHeldSums && len(h.msgs) > 0 {
		h.sums -= len(h.msgs[0].sums)
		h.msgs[0] = nil
		h.msgs = h.msgs[1:]
		h.dropped.Add(1)
	}
}

// acked records the broker sequence of a published message.
func (h *heldState) acked(m *heldMsg, seq uint64) {
	if seq == 0 {
		return
	}
	if m != nil {
		m.seq.Store(seq)
	}
	for {
		cur := h.lastAck.Load()
		if seq <= cur || h.lastAck.CompareAndSwap(cur, seq) {
			return
		}
	}
}

// noteProgress raises the partitions' progress by rows read or pushed.
func (a *Agent) noteProgress(rows []engagement.Stats) {
	for i := range rows {
		r := &rows[i]
		if i > 0 && r.ContentID == rows[i-1].ContentID && r.LastSeq <= rows[i-1].LastSeq {
			continue
		}
		p := &a.held.progress[partial.PartitionOf(r.ContentID, a.cfg.Partitions)]
		for {
			cur := p.Load()
			if r.LastSeq <= cur || p.CompareAndSwap(cur, r.LastSeq) {
				break
			}
		}
	}
}

// HeldStats describe what the agent remembers for fresh reads.
type HeldStats struct {
	// Messages and Sums are the flushed messages (and their sums) not yet
	// seen applied; Dropped counts messages forgotten past the bound.
	Messages, Sums int
	Dropped        uint64
}

// HeldStats returns the state fresh reads use.
func (a *Agent) HeldStats() HeldStats {
	a.held.mu.RLock()
	defer a.held.mu.RUnlock()
	return HeldStats{Messages: len(a.held.msgs), Sums: a.held.sums, Dropped: a.held.dropped.Load()}
}

// SeqPublisher is a Publisher that also reports the broker's sequence of
// the stored message (the sequence the rollup records in the rows it
// changes). With it, fresh reads tell exactly which flushed deltas a row
// has; without it, only those of messages queued before any row moved.
type SeqPublisher interface {
	PublishSeq(ctx context.Context, partition uint32, msgID string, data []byte) (uint64, error)
}
