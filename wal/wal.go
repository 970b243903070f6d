package wal

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Errors a caller acts on; match them with errors.Is.
var (
	// ErrFull: the append would pass Config.MaxBytes, or the disk is full.
	// Nothing of the append is in the log. TruncateBefore makes room.
	ErrFull = errors.New("log full")
	// ErrTooLarge: a payload is longer than Config.MaxRecordBytes.
	ErrTooLarge = errors.New("record too large")
	// ErrClosed: the Log was closed.
	ErrClosed = errors.New("log closed")
	// ErrFailed: an fsync failed, or a failed write could not be undone. The
	// Log refuses every later append; what it acknowledged before is safe.
	// Close it and open it again (a process restart does that).
	ErrFailed = errors.New("log failed")
	// ErrCorrupt: the meta file is damaged, segment files have no meta file,
	// or Replay met bytes that changed since Open checked them.
	ErrCorrupt = errors.New("log corrupt")
	// ErrLocked: another Log (in this or another process) has the directory
	// open.
	ErrLocked = errors.New("log directory locked")
)

// Log is a segmented, checksummed, group-committed append-only log. All
// methods are safe for concurrent use.
type Log struct {
	cfg      Config
	id       logID
	lockFile *os.File

	// gate is held shared by AppendApply from before its append until its
	// apply has returned, and exclusively by Checkpoint.
	gate sync.RWMutex

	// sem is held (one token) by the goroutine that writes to the segment
	// files: an appender committing a group, TruncateBefore never, Close at
	// the end. Holding it is what makes the fields marked "sem" safe.
	sem chan struct{}

	mu        sync.Mutex
	closed    bool
	failed    error      // sticky; wraps ErrFailed
	next      uint64     // index of the next record
	trunc     uint64     // first index not acknowledged (the truncation point)
	pend      []byte     // encoded records not yet handed to a committer
	spare     []byte     // the committed buffer, kept for reuse
	pendN     int        // records in pend
	gen       *gen       // the group the records in pend belong to
	segs      []*segment // oldest first
	hasActive bool       // the last of segs is the active segment
	diskBytes int64      // in the segment files
	ages      []ageMark
	st        counters

	// Where segments start is decided when records are encoded, so that the
	// budget check counts every segment header: layout is where the next
	// record would go once everything queued is written, breaks the indexes
	// in pend that start a segment, pendHeaders their header bytes, and
	// inflight the bytes (records and headers) a committer is writing.
	layout      layout
	breaks      []uint64
	pendHeaders int64
	inflight    int64
	rotate      bool // the active segment is fully acknowledged and big: start a new one

	// fmu guards the active pointer for the Interval syncer; the sem holder
	// changes it under fmu and reads it without.
	fmu    sync.Mutex
	active *segment
	dirty  atomic.Bool // Interval: written since the last fsync

	updBuf []segUpdate // sem: reused by write

	metaMu sync.Mutex // guards meta
	meta   *metaFile

	stop      chan struct{}
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error

	fsyncs    atomic.Uint64
	fsyncNano atomic.Int64
	fsyncMax  atomic.Int64
	replayed  atomic.Uint64
}

// segment is one segment file. first, path and f never change; last and size
// change under Log.mu, only by the sem holder.
type segment struct {
	path  string
	first uint64   // index of its first record (from its header)
	last  uint64   // index of its last good record; first-1 when it has none
	size  int64    // bytes up to the end of the last good record
	extra int64    // bytes after size that Open did not trust (left for inspection)
	f     *os.File // open for writing: the active segment only
}

// gen is a commit group: the records that one write and one fsync cover.
// err is set before done is closed.
type gen struct {
	done chan struct{}
	err  error
}

func newGen() *gen { return &gen{done: make(chan struct{})} }

// ageMark says that record index was appended at unixNano; marks are at least
// ageResolution apart, so the age of the oldest record is known within it.
type ageMark struct {
	index    uint64
	unixNano int64
}

const ageResolution = int64(10 * time.Millisecond)

// layout is the end of the last segment as it will be once everything queued
// is written.
type layout struct {
	off     int64 // bytes in the segment
	records bool  // it holds a record
}

// place returns where a record of n bytes goes: whether it starts a new
// segment, and the layout after it.
func (y layout) place(n, segmentBytes int64, rotate bool) (bool, layout) {
	if (y.off+n > segmentBytes && y.off > headerSize) || (rotate && y.records) {
		return true, layout{off: headerSize + n, records: true}
	}
	return false, layout{off: y.off + n, records: true}
}

// counters are the Stats fields kept under Log.mu.
type counters struct {
	appended        uint64
	full            uint64
	recovered       int64
	tornTails       int
	corruptRecords  int
	badSegments     int
	foreignSegments int
	droppedBytes    int64
}

// Append adds payload to the log and returns its index. In Fsync mode it
// returns once an fsync covers the record, in Interval mode once it is
// written, in None mode at once. The payload is copied; the caller may reuse
// it when Append returns.
//
// Errors: ErrTooLarge, ErrFull (nothing appended), ErrClosed, ErrFailed, or
// the write or fsync error of the group. If ctx ends first, Append returns
// ctx.Err(): the record stays queued and may still become durable, so its
// outcome is unknown, as after any timeout.
func (l *Log) Append(ctx context.Context, payload []byte) (uint64, error) {
	return l.AppendBatch(ctx, [][]byte{payload})
}

// AppendBatch adds the payloads as consecutive records, all in one commit
// group, and returns the index of the first. It is all or nothing: an error
// other than ctx's means none was appended. An empty batch returns the next
// index and does nothing.
func (l *Log) AppendBatch(ctx context.Context, payloads [][]byte) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	var total int64
	for _, p := range payloads {
		if len(p) > l.cfg.MaxRecordBytes {
			return 0, fmt.Errorf("cannot append %d bytes: %w (limit %d)", len(p), ErrTooLarge, l.cfg.MaxRecordBytes)
		}
		total += recordSize(len(p))
	}
	now := time.Now().UnixNano()
	l.mu.Lock()
	switch {
	case l.closed:
		l.mu.Unlock()
		return 0, ErrClosed
	case l.failed != nil:
		err := l.failed
		l.mu.Unlock()
		return 0, err
	case len(payloads) == 0:
		next := l.next
		l.mu.Unlock()
		return next, nil
	}
	first := l.next
	if l.cfg.Durability == None {
		l.next += uint64(len(payloads))
		l.st.appended += uint64(len(payloads))
		l.markAge(first, now)
		l.mu.Unlock()
		return first, nil
	}
	y, nbreaks, headers, rotate := l.layout, len(l.breaks), int64(0), l.rotate
	for i, p := range payloads {
		var brk bool
		brk, y = y.place(recordSize(len(p)), l.cfg.SegmentBytes, rotate)
		rotate = false
		if brk {
			l.breaks = append(l.breaks, first+uint64(i))
			headers += headerSize
		}
	}
	if l.diskBytes+l.inflight+int64(len(l.pend))+l.pendHeaders+total+headers > l.cfg.MaxBytes {
		l.breaks = l.breaks[:nbreaks]
		l.st.full++
		l.mu.Unlock()
		return 0, fmt.Errorf("cannot append %d bytes: %w (budget %d bytes)", total, ErrFull, l.cfg.MaxBytes)
	}
	l.layout, l.rotate = y, false
	l.pendHeaders += headers
	for _, p := range payloads {
		l.pend = appendRecord(l.pend, l.next, now, p)
		l.next++
	}
	l.pendN += len(payloads)
	l.markAge(first, now)
	g := l.gen
	l.mu.Unlock()

	select {
	case <-g.done:
	case l.sem <- struct{}{}:
		l.gather()
		select {
		case <-g.done: // a committer took the group while this one waited
		default:
			// g is still l.gen: only a holder of sem takes a group, and
			// every earlier holder finished its group before letting go.
			l.commit()
		}
		<-l.sem
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	if g.err != nil {
		return 0, g.err
	}
	return first, nil
}

// AppendApply appends payload like Append and, if that succeeds, calls
// apply(index) before it returns; Checkpoint never runs in between. The agent
// passes the in-memory add of the write's deltas as apply. apply must not
// call Checkpoint.
func (l *Log) AppendApply(ctx context.Context, payload []byte, apply func(index uint64)) (uint64, error) {
	l.gate.RLock()
	defer l.gate.RUnlock()
	index, err := l.Append(ctx, payload)
	if err == nil {
		apply(index)
	}
	return index, err
}

// Checkpoint calls fn(next) at a moment when no AppendApply is between its
// append and its apply: every record below next that was appended with
// AppendApply has been applied, and none at or above it has. The agent drains
// its counters in fn and, once the flush that carries what it drained is
// acknowledged, calls TruncateBefore(next): the log then replays exactly what
// no acknowledged flush carries. Checkpoint waits for the AppendApply calls
// in progress (up to one fsync) and holds new ones back until fn returns, so
// fn must be quick: drain, do not publish.
func (l *Log) Checkpoint(fn func(next uint64)) {
	l.gate.Lock()
	defer l.gate.Unlock()
	l.mu.Lock()
	next := l.next
	l.mu.Unlock()
	fn(next)
}

// markAge notes the append time of index; l.mu is held.
func (l *Log) markAge(index uint64, unixNano int64) {
	if n := len(l.ages); n > 0 && unixNano-l.ages[n-1].unixNano < ageResolution {
		return
	}
	l.ages = append(l.ages, ageMark{index: index, unixNano: unixNano})
}

// trimAges drops the marks of acknowledged records; l.mu is held.
func (l *Log) trimAges() {
	i := 0
	if l.trunc >= l.next {
		i = len(l.ages)
	}
	for i+1 < len(l.ages) && l.ages[i+1].index <= l.trunc {
		i++
	}
	l.ages = l.ages[i:]
	if i > 0 && len(l.ages) < cap(l.ages)/4 {
		l.ages = append([]ageMark(nil), l.ages...)
	}
}

// maxGatherYields bounds the yields of gather: a group waits at most this
// many scheduler passes for more members.
const maxGatherYields = 8

// gather lets the goroutines that are ready to run append before the group
// is committed: it yields to the scheduler while the group grows (at most
// maxGatherYields times). The caller holds sem.
//
// Without it the goroutine that gets the token commits at once, and with
// few Ps (GOMAXPROCS=1 when the process is pinned to one core) the group is
// only what the scheduler ran during the last fsync, which blocks the P
// until sysmon takes it back: groups of one or two under 128 concurrent
// requests (docs/wal.md, "Group commit"). A yield costs well under a
// microsecond when nothing else is runnable, so a lone appender still
// commits its own record at once.
func (l *Log) gather() {
	l.mu.Lock()
	n := l.pendN
	l.mu.Unlock()
	for range maxGatherYields {
		runtime.Gosched()
		l.mu.Lock()
		m := l.pendN
		l.mu.Unlock()
		if m == n {
			return
		}
		n = m
	}
}

// commit writes (and in Fsync mode fsyncs) the pending group and closes its
// done channel. The caller holds sem.
func (l *Log) commit() {
	l.mu.Lock()
	buf, breaks, g, n := l.pend, l.breaks, l.gen, l.pendN
	if len(buf) == 0 {
		l.mu.Unlock()
		return
	}
	l.pend, l.spare = l.spare[:0], nil
	l.breaks = nil
	l.pendN = 0
	l.gen = newGen()
	l.inflight = int64(len(buf)) + l.pendHeaders
	l.pendHeaders = 0
	err := l.failed
	l.mu.Unlock()

	var w written
	if err == nil {
		w, err = l.write(buf, breaks)
	}

	l.mu.Lock()
	l.inflight = 0
	var queued *gen
	switch {
	case err == nil:
		for _, u := range w.updates {
			u.seg.size, u.seg.last = u.size, u.last
		}
		l.updBuf = w.updates[:0]
		l.segs = append(l.segs, w.created...)
		l.hasActive = l.hasActive || len(w.created) > 0
		l.diskBytes += w.bytes
		l.st.appended += uint64(n)
	case errors.Is(err, ErrFailed):
		if l.failed == nil {
			l.failed = err
		}
	default:
		// The write was undone. The appends queued behind it fail too, so
		// that no index is skipped and the layout is the files' again.
		queued = l.gen
		l.gen = newGen()
		l.pend, l.breaks, l.pendN, l.pendHeaders = l.pend[:0], nil, 0, 0
		l.next = binary.LittleEndian.Uint64(buf[8:16])
		for len(l.ages) > 0 && l.ages[len(l.ages)-1].index >= l.next {
			l.ages = l.ages[:len(l.ages)-1]
		}
		l.layout = layout{off: l.cfg.SegmentBytes} // no active segment: start one
		if a := l.active; a != nil {
			l.layout = layout{off: a.size, records: a.last >= a.first}
		}
	}
	if cap(buf) <= 4*l.cfg.MaxRecordBytes {
		l.spare = buf[:0]
	}
	l.mu.Unlock()
	g.err = err
	close(g.done)
	if queued != nil {
		queued.err = err
		close(queued.done)
	}
}

// written is what a successful write changed, applied under l.mu.
type written struct {
	updates []segUpdate
	created []*segment
	bytes   int64
}

type segUpdate struct {
	seg  *segment
	size int64
	last uint64
}

// write puts buf's records into the active segment, starting a new segment
// at each index in breaks (the first record always starts one when there is
// no active segment yet), and fsyncs in Fsync mode. A write error is undone
// (the files are cut back to where they were) and returned, wrapping ErrFull
// for a full disk; an fsync error, or a write error that cannot be undone,
// returns an error wrapping ErrFailed. The caller holds sem.
func (l *Log) write(buf []byte, breaks []uint64) (w written, err error) {
	start := l.active // nil before the first append since Open
	cur := start
	var off int64
	last := binary.LittleEndian.Uint64(buf[8:16]) - 1
	if cur != nil {
		off, last = cur.size, cur.last
	}
	runStart, runOff := 0, off
	w.updates = l.updBuf[:0]
	var replaced []*segment
	defer func() {
		if err != nil && !errors.Is(err, ErrFailed) {
			err = l.undo(start, w.created, err)
		}
		if err == nil {
			for _, s := range replaced {
				_ = s.f.Close() // synced; a close error loses nothing
				s.f = nil
			}
		}
	}()
	for p := 0; p < len(buf); {
		n := recordSize(int(binary.LittleEndian.Uint32(buf[p+4:])))
		index := binary.LittleEndian.Uint64(buf[p+8:])
		brk := len(breaks) > 0 && breaks[0] == index
		if brk {
			breaks = breaks[1:]
		}
		if index != last+1 || (cur == nil && !brk) {
			return w, fmt.Errorf("%w: record %d follows %d, break %v", ErrFailed, index, last, brk)
		}
		if brk {
			if cur != nil {
				if err := l.writeRun(cur, buf[runStart:p], runOff); err != nil {
					return w, err
				}
				if p > runStart || l.cfg.Durability != Fsync {
					if err := l.sync(cur.f); err != nil {
						return w, fmt.Errorf("%w: cannot fsync %s: %v", ErrFailed, cur.path, err)
					}
				}
				w.updates = append(w.updates, segUpdate{seg: cur, size: off, last: last})
				w.bytes += int64(p - runStart)
				replaced = append(replaced, cur)
			}
			next, err := l.createSegment(index)
			if err != nil {
				return w, err
			}
			w.created = append(w.created, next)
			w.bytes += headerSize
			l.fmu.Lock()
			l.active = next
			l.fmu.Unlock()
			cur, off = next, headerSize
			runStart, runOff = p, headerSize
		}
		off += n
		last = index
		p += int(n)
	}
	if err := l.writeRun(cur, buf[runStart:], runOff); err != nil {
		return w, err
	}
	w.bytes += int64(len(buf) - runStart)
	w.updates = append(w.updates, segUpdate{seg: cur, size: off, last: last})
	if l.cfg.Durability == Fsync {
		if err := l.sync(cur.f); err != nil {
			return w, fmt.Errorf("%w: cannot fsync %s: %v", ErrFailed, cur.path, err)
		}
	} else {
		l.dirty.Store(true)
	}
	return w, nil
}

// writeRun writes b to s at off with one pwrite(2).
func (l *Log) writeRun(s *segment, b []byte, off int64) error {
	if len(b) == 0 {
		return nil
	}
	if _, err := s.f.WriteAt(b, off); err != nil {
		return fmt.Errorf("cannot write %s: %w", s.path, err)
	}
	return nil
}

// undo takes back a failed write: it removes the segments the write created
// and cuts the segment it started in (if any) back to its last good record,
// durably. It returns cause (wrapping ErrFull for a full disk), or an error
// wrapping ErrFailed if the undo itself fails.
func (l *Log) undo(start *segment, created []*segment, cause error) error {
	l.fmu.Lock()
	l.active = start
	l.fmu.Unlock()
	var errs []error
	for _, s := range created {
		errs = append(errs, s.f.Close(), os.Remove(s.path))
	}
	if start != nil {
		errs = append(errs, start.f.Truncate(start.size), l.sync(start.f))
	}
	if len(created) > 0 {
		errs = append(errs, syncDir(l.cfg.Dir))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: %v; cannot undo it: %v", ErrFailed, cause, err)
	}
	if errors.Is(cause, syscall.ENOSPC) {
		return fmt.Errorf("%w: %w", ErrFull, cause)
	}
	return cause
}

// sync makes what was written to segment f durable (fdatasync where there
// is one, see syncData) and records how long it took.
func (l *Log) sync(f *os.File) error { return l.timedSync(syncData, f) }

// timedSync runs sync(f) and records how long it took.
func (l *Log) timedSync(sync func(*os.File) error, f *os.File) error {
	t0 := time.Now()
	err := sync(f)
	d := time.Since(t0)
	l.fsyncs.Add(1)
	l.fsyncNano.Add(int64(d))
	for m := l.fsyncMax.Load(); int64(d) > m && !l.fsyncMax.CompareAndSwap(m, int64(d)); m = l.fsyncMax.Load() {
	}
	if l.cfg.ObserveFsync != nil {
		l.cfg.ObserveFsync(d)
	}
	return err
}

// syncLoop fsyncs the active segment every SyncInterval if it was written
// (Interval mode).
func (l *Log) syncLoop() {
	defer l.wg.Done()
	t := time.NewTicker(l.cfg.SyncInterval)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		if !l.dirty.Swap(false) {
			continue
		}
		l.fmu.Lock()
		s := l.active
		var err error
		if s != nil {
			err = l.sync(s.f)
		}
		l.fmu.Unlock()
		if err != nil {
			l.mu.Lock()
			if l.failed == nil {
				l.failed = fmt.Errorf("%w: cannot fsync %s: %v", ErrFailed, s.path, err)
			}
			l.mu.Unlock()
		}
	}
}

// TruncateBefore acknowledges every record below index: Replay, now and after
// a restart, starts at index, and segment files whose records are all below
// it are removed. The new truncation point is on disk (an atomic rename of
// the meta file, fsynced) before TruncateBefore returns. An index at or below
// the current truncation point does nothing; one above the next index is an
// error.
func (l *Log) TruncateBefore(index uint64) error {
	l.mu.Lock()
	switch {
	case l.closed:
		l.mu.Unlock()
		return ErrClosed
	case index > l.next:
		next := l.next
		l.mu.Unlock()
		return fmt.Errorf("cannot truncate before %d: the next index is %d", index, next)
	case index <= l.trunc:
		l.mu.Unlock()
		return nil
	}
	l.trunc = index
	l.trimAges()
	l.mu.Unlock()
	if l.cfg.Durability == None {
		return nil
	}

	l.metaMu.Lock()
	defer l.metaMu.Unlock()
	l.mu.Lock()
	t := l.trunc
	l.mu.Unlock()
	if t > l.meta.cur.n {
		if err := l.meta.write(header{id: l.id, n: t}); err != nil {
			return fmt.Errorf("cannot truncate before %d: %w", t, err)
		}
	}

	l.mu.Lock()
	// The last segment is the active one once an append has created it
	// (hasActive); before that, every segment is from before Open.
	keep := len(l.segs)
	if l.hasActive {
		keep--
	}
	k := 0
	for k < keep && l.segs[k].last < t {
		k++
	}
	doomed := append([]*segment(nil), l.segs[:k]...)
	l.segs = append(l.segs[:0:0], l.segs[k:]...)
	if l.hasActive {
		if a := l.segs[len(l.segs)-1]; a.last >= a.first && a.last < t && a.size >= l.cfg.SegmentBytes/8 {
			l.rotate = true
		}
	}
	l.mu.Unlock()

	var errs []error
	var freed int64
	for _, s := range doomed {
		if err := removeSegment(s.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		freed += s.size + s.extra
	}
	l.mu.Lock()
	l.diskBytes -= freed
	l.mu.Unlock()
	if err := errors.Join(errs...); err != nil {
		// Open removes them next time: the truncation point is on disk.
		return fmt.Errorf("cannot remove acknowledged segments: %w", err)
	}
	return nil
}

// Close commits what is queued, fsyncs (in every mode but None), closes the
// files and releases the directory. Appends after Close fail with ErrClosed.
// Close is idempotent; it returns the first call's result.
func (l *Log) Close() error {
	l.closeOnce.Do(func() {
		l.mu.Lock()
		l.closed = true
		l.mu.Unlock()
		if l.cfg.Durability == None {
			return
		}
		close(l.stop)
		l.wg.Wait()
		l.sem <- struct{}{} // kept: nothing writes after Close
		l.commit()
		var errs []error
		l.mu.Lock()
		failed := l.failed
		l.mu.Unlock()
		if a := l.active; a != nil {
			if failed == nil {
				if err := l.sync(a.f); err != nil {
					errs = append(errs, fmt.Errorf("cannot fsync %s: %w", a.path, err))
				}
			}
			errs = append(errs, a.f.Close())
		}
		l.metaMu.Lock() // a TruncateBefore may be writing it
		errs = append(errs, l.meta.close(), unlockDir(l.lockFile))
		l.metaMu.Unlock()
		l.closeErr = errors.Join(errs...)
	})
	return l.closeErr
}

// Stats is a snapshot of the log's gauges and counters, for metrics.
type Stats struct {
	Durability Durability
	Bytes      int64 // in segment files, headers included
	Segments   int
	// FirstIndex is the truncation point: the first record not acknowledged.
	FirstIndex uint64
	// NextIndex is the index the next Append gets.
	NextIndex uint64
	// Unacknowledged is NextIndex − FirstIndex: records appended and not yet
	// truncated (including any lost to damage found at Open).
	Unacknowledged uint64
	// OldestAppended is when record FirstIndex was appended (at most 10 ms
	// early); zero when every record is acknowledged.
	OldestAppended time.Time

	Appended  uint64 // records appended since Open
	Full      uint64 // appends refused with ErrFull for the budget
	Recovered int64  // intact unacknowledged records found by Open
	Replayed  uint64 // records passed to Replay callbacks

	// What Open found damaged and did not replay (see Recovery.Problems).
	TornTails, CorruptRecords, BadSegments, ForeignSegments int
	DroppedBytes                                            int64

	Fsyncs    uint64
	FsyncTime time.Duration // total
	FsyncMax  time.Duration
	// Failed is the error that stopped the log (wrapping ErrFailed), or nil.
	Failed error
}

// Stats returns the current statistics.
func (l *Log) Stats() Stats {
	l.mu.Lock()
	s := Stats{
		Durability:      l.cfg.Durability,
		Bytes:           l.diskBytes,
		Segments:        len(l.segs),
		FirstIndex:      l.trunc,
		NextIndex:       l.next,
		Appended:        l.st.appended,
		Full:            l.st.full,
		Recovered:       l.st.recovered,
		TornTails:       l.st.tornTails,
		CorruptRecords:  l.st.corruptRecords,
		BadSegments:     l.st.badSegments,
		ForeignSegments: l.st.foreignSegments,
		DroppedBytes:    l.st.droppedBytes,
		Failed:          l.failed,
	}
	if l.next > l.trunc {
		s.Unacknowledged = l.next - l.trunc
		if len(l.ages) > 0 {
			s.OldestAppended = time.Unix(0, l.ages[0].unixNano)
		}
	}
	l.mu.Unlock()
	s.Replayed = l.replayed.Load()
	s.Fsyncs = l.fsyncs.Load()
	s.FsyncTime = time.Duration(l.fsyncNano.Load())
	s.FsyncMax = time.Duration(l.fsyncMax.Load())
	return s
}
