package region

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgecount/edgecount/engagement"
)

// IdempotencyConfig bounds the idempotency keys an agent keeps
// (docs/idempotency.md).
type IdempotencyConfig struct {
	// Window is how long a key is kept after its write was answered: a
	// retry within it gets the first answer, a later one is applied again.
	Window time.Duration
	// MaxKeys bounds the keys kept. At the bound the oldest key is evicted
	// before its window ends (a retry with it is applied again), counted
	// in IdempotencyStats.Evicted.
	MaxKeys int
}

// DefaultIdempotencyConfig returns a 24 h window and at most 10^6 keys.
func DefaultIdempotencyConfig() IdempotencyConfig {
	return IdempotencyConfig{Window: 24 * time.Hour, MaxKeys: 1_000_000}
}

// Validate reports every problem with c.
func (c IdempotencyConfig) Validate() error {
	var errs []error
	if c.Window < time.Second || c.Window > 30*24*time.Hour {
		errs = append(errs, fmt.Errorf("idempotency window %v: want 1s..720h", c.Window))
	}
	if c.MaxKeys < 1 || c.MaxKeys > 100_000_000 {
		errs = append(errs, fmt.Errorf("idempotency max keys %d: want 1..100000000", c.MaxKeys))
	}
	return errors.Join(errs...)
}

// MaxIdempotencyKeyBytes bounds an Idempotency-Key.
const MaxIdempotencyKeyBytes = 128

// ValidIdempotencyKey reports whether k is 1..128 printable ASCII bytes
// (0x20..0x7e).
func ValidIdempotencyKey(k string) bool {
	if len(k) == 0 || len(k) > MaxIdempotencyKeyBytes {
		return false
	}
	for i := 0; i < len(k); i++ {
		if c := k[i]; c < 0x20 || c > 0x7e {
			return false
		}
	}
	return true
}

// IdempotencyKey names a keyed write.
type IdempotencyKey struct {
	// Scope is the caller: the name of its token when the API checks
	// tokens, "" otherwise. Two scopes never share a key.
	Scope string
	// Key is the client's Idempotency-Key (ValidIdempotencyKey).
	Key string
}

// maxScopeBytes: a longer scope is replaced by a digest of it, so that a
// key's id stays small (maxKeyIDBytes).
const (
	maxScopeBytes = 64
	maxKeyIDBytes = maxScopeBytes + 1 + MaxIdempotencyKeyBytes
)

// id is the table's and the log's name of k: scope, NUL, key.
func (k IdempotencyKey) id() string {
	s := k.Scope
	if len(s) > maxScopeBytes {
		d := sha256.Sum256([]byte(s))
		s = "#" + hex.EncodeToString(d[:16])
	}
	return s + "\x00" + k.Key
}

// ErrKeyConflict: the idempotency key was used, within its window, for a
// request with another body. Nothing was applied (HTTP 422).
var ErrKeyConflict = errors.New("idempotency key already used for a different request")

// IdempotencyStats are the key table's figures, for metrics.
type IdempotencyStats struct {
	Keys      atomic.Int64  // keys held (answered writes within the window)
	Bytes     atomic.Int64  // estimated memory they take
	Hits      atomic.Uint64 // retries answered from a key
	Conflicts atomic.Uint64 // a key reused with another body
	Waits     atomic.Uint64 // requests that waited for the same key's first request
	Expired   atomic.Uint64 // keys dropped at the end of their window
	Evicted   atomic.Uint64 // keys dropped early at MaxKeys
	LogErrors atomic.Uint64 // keys-log appends that failed (keys kept in memory only)
}

// IdempotencyStats returns the key table's figures.
func (a *Agent) IdempotencyStats() *IdempotencyStats { return &a.keys.st }

// IdempotencyKeysLogBytes returns the bytes of the keys log on disk; 0
// without a log.
func (a *Agent) IdempotencyKeysLogBytes() int64 {
	if a.log == nil {
		return 0
	}
	return a.log.keys.Stats().Bytes
}

// digest identifies a request body: the first 16 bytes of the SHA-256 of
// its canonical encoding (the decoded request, so a JSON and a protobuf
// body of the same increments are the same request).
type digest [16]byte

func digestOf(b []byte) digest {
	s := sha256.Sum256(b)
	return digest(s[:16])
}

func reactionDigest(user, content string, action engagement.Action) digest {
	h := sha256.New()
	h.Write([]byte{ansReaction})
	h.Write([]byte(user))
	h.Write([]byte{0})
	h.Write([]byte(content))
	h.Write([]byte{0, byte(action)})
	var s [sha256.Size]byte
	return digest(h.Sum(s[:0])[:16])
}

// answer is the first answer to a keyed write: what the HTTP layer needs,
// with the request, to answer a retry byte for byte.
type answer struct {
	kind     byte // ansIncrements or ansReaction
	accepted int
	react    ReactResult
}

// keyEntry is one key in the table.
type keyEntry struct {
	id     string
	digest digest
	done   chan struct{} // closed when settled or abandoned
	closed bool

	// Set once settled; then only dead and keysIdx change.
	settled bool
	at      int64 // Unix ns of the answer
	ans     answer
	intake  uint64 // index of its intake record; 0 without a log
	keysIdx uint64 // index of its keys-log record; 0 until moved there
	dead    bool   // dropped from the table (expired, evicted)
}

// keyEntryBytes is the memory of one key beside its id, measured by
// TestKeyTableMemory (map slot, entry, channel, queue slots).
const keyEntryBytes = 290

func (e *keyEntry) bytes() int64 { return keyEntryBytes + int64(len(e.id)) }

// keyTable holds the keys of the window: a map by id and the settled
// entries in the order they were answered (the queue), so that the oldest
// go first. The keys whose intake records are not yet truncated are also
// in unmoved; the flusher writes them to the keys log before it truncates
// (moveKeys).
//
// Lock order: the wal's gate (AppendApply) before mu; mu is never held
// across I/O or a wait.
type keyTable struct {
	cfg IdempotencyConfig
	now func() time.Time
	st  IdempotencyStats

	mu      sync.Mutex
	m       map[string]*keyEntry
	queue   []*keyEntry // settled, oldest first, from head
	head    int
	unmoved []*keyEntry
}

func newKeyTable(cfg IdempotencyConfig, now func() time.Time) *keyTable {
	return &keyTable{cfg: cfg, now: now, m: make(map[string]*keyEntry)}
}

// claim looks id up. It returns the first answer of a settled key with the
// same digest, ErrKeyConflict for another digest, or a new in-flight entry
// that the caller must settle or abandon. A request that finds the key in
// flight waits for it: if the first request's write is answered, its
// answer is this one's too; if it failed, the claim starts over.
func (t *keyTable) claim(ctx context.Context, id string, dg digest) (*keyEntry, *answer, error) {
	for waited := false; ; {
		t.mu.Lock()
		now := t.now().UnixNano()
		t.evictLocked(now)
		e := t.m[id]
		if e != nil && e.settled && now-e.at > int64(t.cfg.Window) {
			t.dropLocked(e)
			t.st.Expired.Add(1)
			e = nil
		}
		if e == nil {
			e = &keyEntry{id: strings.Clone(id), digest: dg, done: make(chan struct{})}
			t.m[e.id] = e
			t.mu.Unlock()
			return e, nil, nil
		}
		if e.digest != dg {
			t.mu.Unlock()
			t.st.Conflicts.Add(1)
			return nil, nil, ErrKeyConflict
		}
		if e.settled {
			ans := e.ans
			t.mu.Unlock()
			t.st.Hits.Add(1)
			return nil, &ans, nil
		}
		done := e.done
		t.mu.Unlock()
		if !waited {
			waited = true
			t.st.Waits.Add(1)
		}
		select {
		case <-done:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	}
}

// settle records e's answer (intake: the index of the record that holds
// the key, 0 without a log) and wakes the requests waiting for it. e may
// be an entry the table no longer holds (its request gave up, and the
// outcome was found later): it is put back unless another request holds
// the id by now.
func (t *keyTable) settle(e *keyEntry, ans answer, at int64, intake uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e.settled {
		return
	}
	switch cur := t.m[e.id]; {
	case cur == nil:
		t.m[e.id] = e
	case cur != e:
		t.closeLocked(e)
		return
	}
	e.settled, e.ans, e.at, e.intake = true, ans, at, intake
	t.queue = append(t.queue, e)
	if intake != 0 {
		t.unmoved = append(t.unmoved, e)
	}
	t.st.Keys.Add(1)
	t.st.Bytes.Add(e.bytes())
	t.closeLocked(e)
	t.evictLocked(t.now().UnixNano())
}

// abandon forgets an in-flight entry whose write failed: nothing was
// applied, so a retry with the key is applied anew.
func (t *keyTable) abandon(e *keyEntry) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e.settled {
		return
	}
	if t.m[e.id] == e {
		delete(t.m, e.id)
	}
	t.closeLocked(e)
}

// answered returns e's answer once it is settled.
func (t *keyTable) answered(e *keyEntry) (answer, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return e.ans, e.settled
}

// restore puts back a key read from a log at start-up (keysIdx: its
// keys-log record, or intake: its intake record). A key the table holds
// already (a crash between writing the keys log and truncating the intake
// log leaves both copies) or one past its window is skipped.
func (t *keyTable) restore(k *keyRecord, keysIdx, intake uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now().UnixNano()
	if _, ok := t.m[k.id]; ok || now-k.at > int64(t.cfg.Window) {
		return
	}
	e := &keyEntry{id: k.id, digest: k.digest, closed: true, settled: true, at: k.at, ans: k.ans, intake: intake, keysIdx: keysIdx}
	t.m[e.id] = e
	t.queue = append(t.queue, e)
	if keysIdx == 0 {
		t.unmoved = append(t.unmoved, e)
	}
	t.st.Keys.Add(1)
	t.st.Bytes.Add(e.bytes())
	t.evictLocked(now)
}

func (t *keyTable) closeLocked(e *keyEntry) {
	if !e.closed {
		e.closed = true
		close(e.done)
	}
}

// dropLocked removes a settled entry from the map; it leaves the queue
// (popped by evictLocked) and unmoved (skipped by moveKeys).
func (t *keyTable) dropLocked(e *keyEntry) {
	if t.m[e.id] == e {
		delete(t.m, e.id)
	}
	if !e.dead {
		e.dead = true
		t.st.Keys.Add(-1)
		t.st.Bytes.Add(-e.bytes())
	}
}

// evictLocked drops the keys past their window and, over MaxKeys, the
// oldest.
func (t *keyTable) evictLocked(now int64) {
	for t.head < len(t.queue) {
		e := t.queue[t.head]
		switch {
		case e.dead:
		case now-e.at > int64(t.cfg.Window):
			t.dropLocked(e)
			t.st.Expired.Add(1)
		case t.st.Keys.Load() > int64(t.cfg.MaxKeys):
			t.dropLocked(e)
			t.st.Evicted.Add(1)
		default:
			return
		}
		t.queue[t.head] = nil
		t.head++
		if t.head >= 1024 && t.head*2 >= len(t.queue) {
			n := copy(t.queue, t.queue[t.head:])
			clear(t.queue[n:])
			t.queue, t.head = t.queue[:n], 0
		}
	}
}

// oldestKeysIdx returns the keys-log index of the oldest key held, ok
// false when the oldest key is not in the keys log (none of the keys
// there is held any more).
func (t *keyTable) oldestKeysIdx() (uint64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, e := range t.queue[t.head:] {
		if e.dead {
			continue
		}
		return e.keysIdx, e.keysIdx != 0
	}
	return 0, false
}

// keyClaim is a keyed write in progress: its entry and the key part of its
// log record.
type keyClaim struct {
	e   *keyEntry // nil for a key found in the log at start-up
	rec keyRecord
}

// settleClaim records a claim's answer given at at; the key came from the
// log when the claim has no entry. It does not change kc, which a pending
// intent may share with the flusher.
func (a *Agent) settleClaim(kc *keyClaim, ans answer, at int64, intake uint64) {
	e := kc.e
	if e == nil {
		e = &keyEntry{id: kc.rec.id, digest: kc.rec.digest, done: make(chan struct{})}
	}
	a.keys.settle(e, ans, at, intake)
}

// IncrementOnce is Increment under an idempotency key: the first request
// with k is applied and its answer (the count accepted) kept for the
// window; a retry with the same increments gets that answer with replayed
// true and applies nothing; one with other increments gets ErrKeyConflict.
// With a log the key is part of the write's intake record.
func (a *Agent) IncrementOnce(ctx context.Context, k IdempotencyKey, incs []Increment) (accepted int, replayed bool, err error) {
	if a.stopping.Load() {
		return 0, false, ErrStopping
	}
	if a.log != nil && !a.log.recovered.Load() {
		return 0, false, ErrRecovering
	}
	bp := recBufs.Get().(*[]byte)
	defer func() {
		if cap(*bp) <= 64<<10 {
			recBufs.Put(bp)
		}
	}()
	inner := appendIncrements((*bp)[:0], a.cfg.Region, incs)
	*bp = inner
	dg := digestOf(inner)
	e, first, err := a.keys.claim(ctx, k.id(), dg)
	if err != nil {
		return 0, false, err
	}
	if first != nil {
		return first.accepted, true, nil
	}
	ans := answer{kind: ansIncrements, accepted: len(incs)}
	kc := keyClaim{e: e, rec: keyRecord{id: e.id, digest: dg, at: a.now().UnixNano(), answered: true, ans: ans}}
	if a.log == nil {
		a.addIncrements(incs)
		a.settleClaim(&kc, ans, kc.rec.at, 0)
		return len(incs), false, nil
	}
	payload := append(appendKeyed(make([]byte, 0, len(inner)+64+len(e.id)), &kc.rec), inner...)
	_, err = a.log.intake.AppendApply(context.Background(), payload, func(i uint64) {
		a.addIncrements(incs)
		a.settleClaim(&kc, ans, kc.rec.at, i)
	})
	if err != nil {
		a.keys.abandon(e)
		return 0, false, fmt.Errorf("cannot log increments: %w", a.mapLogErr(err))
	}
	return len(incs), false, nil
}

// ReactOnce is React under an idempotency key: the first request with k
// is applied and its answer (changed, previous, version) kept for the
// window; a retry with the same user, item and action gets that answer
// with replayed true, even if the row has changed since; other values get
// ErrKeyConflict. With a log the key is part of the reaction's intent and
// resolution records (or, for a reaction that changed nothing, a record
// of its own).
func (a *Agent) ReactOnce(ctx context.Context, k IdempotencyKey, userID, contentID string, action engagement.Action) (res ReactResult, replayed bool, err error) {
	if a.stopping.Load() {
		return ReactResult{}, false, ErrStopping
	}
	if a.log != nil && !a.log.recovered.Load() {
		return ReactResult{}, false, ErrRecovering
	}
	dg := reactionDigest(userID, contentID, action)
	e, first, err := a.keys.claim(ctx, k.id(), dg)
	if err != nil {
		return ReactResult{}, false, err
	}
	if first != nil {
		return first.react, true, nil
	}
	kc := &keyClaim{e: e, rec: keyRecord{id: e.id, digest: dg}}
	res, err = a.react(ctx, kc, userID, contentID, action)
	if err != nil {
		// An outcome found while answering the error (resolveAfterError)
		// is the answer after all.
		if ans, ok := a.keys.answered(e); ok {
			return ans.react, false, nil
		}
		a.keys.abandon(e)
		return ReactResult{}, false, err
	}
	return res, false, nil
}

// reactAnswer is the answer of a reaction that applied the intent in.
func intentAnswer(in *intent) answer {
	prev := engagement.ActionNone
	if in.prevFound {
		prev = in.prev.Action
	}
	return answer{kind: ansReaction, react: ReactResult{Previous: prev, Action: in.action, Version: in.next.Version, Changed: true}}
}

// keyUnchanged records the answer of a keyed reaction that changed
// nothing: with a log, in a key record of its own (there is no write to
// guard), before the answer goes out.
func (a *Agent) keyUnchanged(ctx context.Context, kc *keyClaim, res ReactResult) error {
	rec := kc.rec
	rec.at, rec.answered, rec.ans, rec.alone = a.now().UnixNano(), true, answer{kind: ansReaction, react: res}, true
	if a.log == nil {
		a.settleClaim(kc, rec.ans, rec.at, 0)
		return nil
	}
	_, err := a.log.intake.AppendApply(context.Background(), appendKeyed(nil, &rec), func(i uint64) { a.settleClaim(kc, rec.ans, rec.at, i) })
	if err != nil {
		return fmt.Errorf("cannot log reaction key: %w", a.mapLogErr(err))
	}
	return nil
}

// keyApplied records the answer of a keyed reaction that applied, on an
// agent without a log (with one, logResolution does, in the resolution).
func (a *Agent) keyApplied(kc *keyClaim, res ReactResult) {
	if kc == nil || a.log != nil {
		return
	}
	a.settleClaim(kc, answer{kind: ansReaction, react: res}, a.now().UnixNano(), 0)
}

// wrapIntent puts the key (without an answer) in front of an intent
// record.
func wrapIntent(kc *keyClaim, rec []byte) []byte {
	if kc == nil {
		return rec
	}
	k := kc.rec
	k.answered = false
	return append(appendKeyed(make([]byte, 0, len(rec)+32+len(k.id)), &k), rec...)
}

// keyedResolution puts the key and the answer in front of the resolution
// rec of an intent that applied, and returns what to run in the record's
// apply to keep the key; for any other resolution it returns rec and a
// function that does nothing.
func (a *Agent) keyedResolution(pi *pendingIntent, rs *resolution, rec []byte) ([]byte, func(index uint64)) {
	if pi.key == nil || !rs.applied {
		return rec, func(uint64) {}
	}
	k := pi.key.rec
	k.at, k.answered, k.ans = a.now().UnixNano(), true, intentAnswer(&pi.in)
	kc := pi.key
	return append(appendKeyed(make([]byte, 0, len(rec)+64+len(k.id)), &k), rec...), func(i uint64) { a.settleClaim(kc, k.ans, k.at, i) }
}

// keysRecordBytes bounds one keys-log record.
const keysRecordBytes = 64 << 10

// moveKeys runs in a flush before the intake log is truncated below next:
// it writes the keys held in records below next to the keys log (one
// fsync), then truncates the keys log below the oldest key still held. A
// failure is counted and logged, and the flush goes on: counting is never
// held back for keys; the keys stay in memory (and, until the truncation,
// in the intake log) but a restart forgets them.
func (a *Agent) moveKeys(next uint64) {
	d, t := a.log, a.keys
	t.mu.Lock()
	var move, keep []*keyEntry
	for _, e := range t.unmoved {
		switch {
		case e.dead:
		case e.intake < next:
			move = append(move, e)
		default:
			keep = append(keep, e)
		}
	}
	t.unmoved = keep
	var payloads [][]byte
	var counts []int
	var recs []keyRecord
	size := 0
	for i, e := range move {
		recs = append(recs, keyRecord{id: e.id, digest: e.digest, at: e.at, ans: e.ans})
		size += len(e.id) + 48
		if size >= keysRecordBytes || i == len(move)-1 {
			payloads = append(payloads, appendKeys(nil, recs))
			counts = append(counts, len(recs))
			recs, size = recs[:0], 0
		}
	}
	t.mu.Unlock()
	if len(payloads) > 0 {
		first, err := d.keys.AppendBatch(context.Background(), payloads)
		if err != nil {
			t.st.LogErrors.Add(1)
			a.logger.Error("cannot write idempotency keys to the keys log; they are kept in memory, a restart forgets them", "keys", len(move), "err", err)
			return
		}
		t.mu.Lock()
		j := 0
		for r, n := range counts {
			for ; n > 0; n-- {
				move[j].keysIdx = first + uint64(r)
				j++
			}
		}
		t.mu.Unlock()
	}
	idx, ok := t.oldestKeysIdx()
	if !ok {
		idx = d.keys.Stats().NextIndex
	}
	if err := d.keys.TruncateBefore(idx); err != nil {
		a.logStats.TruncateErrors.Add(1)
		a.logger.Warn("cannot truncate the keys log", "err", err)
	}
}

// replayKeys restores the keys log's keys (Recover, before the intake).
func (a *Agent) replayKeys() error {
	return a.log.keys.Replay(0, func(i uint64, p []byte) error {
		if err := decodeKeys(p, func(k keyRecord) { a.keys.restore(&k, i, 0) }); err != nil {
			a.logStats.RecordsMalformed.Add(1)
			a.logger.Error("keys log record does not decode; its keys are forgotten", "index", i, "err", err)
		}
		return nil
	})
}
