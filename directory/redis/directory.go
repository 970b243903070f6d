package redis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// ErrInvalid means a Set or Delete named an id or counter that cannot have
// an entry, or a shard count outside 1..MaxShards. Nothing was written.
var ErrInvalid = errors.New("invalid directory entry")

// ChangeFunc receives a changed answer: Shards(contentID, counter) now
// returns shards. See Directory.SetOnChange for when it runs.
type ChangeFunc func(contentID, counter string, shards int)

// Directory is the Redis-backed shard directory of one region, cached in
// the process. It satisfies region.Directory. Safe for concurrent use.
type Directory struct {
	cfg    Config
	keys   keys
	def    int
	log    *slog.Logger
	client *goredis.Client

	// items maps a content id to its *entry. Readers (Shards) load without
	// a lock; every store and delete holds wmu.
	items  sync.Map
	nitems atomic.Int64

	// wmu serializes the changes of items, so that each computes its
	// changed answers against the state it replaces, and the OnChange calls
	// that report them, so that they arrive in the order the changes were
	// made. Shards never takes it.
	wmu sync.Mutex
	// gen counts invalidations and resyncs. A fetch applies what it read
	// only if gen did not move since before it sent its commands: otherwise
	// it may have read the entry before a change whose invalidation has
	// already arrived, and it reads again.
	gen atomic.Uint64

	// pmu guards pending: the misses queued or being fetched, so that a
	// counter is fetched once however often it misses.
	pmu     sync.Mutex
	pending map[fetchKey]struct{}
	queue   chan fetchKey

	onChange atomic.Pointer[ChangeFunc]

	up       atomic.Bool   // the invalidation subscription is confirmed and answering
	resyncCh chan struct{} // asks the maintainer for a resync; capacity 1

	psMu sync.Mutex
	ps   *goredis.PubSub // the subscriber's current subscription

	ctx       context.Context // cancelled by Close
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error

	stats    counters
	lastWarn atomic.Int64 // unix nanos of the last fetch-error warning
}

// entry is the cached state of one content item. It is immutable once
// stored, except for used.
type entry struct {
	// loaded means counters holds every counter of the item's set in
	// Redis as of the last fetch: a counter absent from it has no entry and
	// gets the default without asking Redis. An entry that is not loaded
	// (its last fetch failed) answers what
	// it knows and asks Redis again on every miss.
	loaded bool
	// counters holds the counters in the item's set with their shard
	// counts, 0 when the count has not been fetched yet. An item has a
	// handful of counters with entries at most, so a slice scanned with
	// string compares beats a map, which hashes the name.
	counters []slot
	// used is set by Shards and cleared by every eviction pass; an entry
	// unused since the last pass and without an explicit count is evicted.
	used atomic.Bool
}

type slot struct {
	counter string
	shards  int32
}

// lookup returns counter's count and whether counter is in e's set. A nil
// e has no counters.
func (e *entry) lookup(counter string) (shards int32, member bool) {
	if e == nil {
		return 0, false
	}
	for i := range e.counters {
		if e.counters[i].counter == counter {
			return e.counters[i].shards, true
		}
	}
	return 0, false
}

// answer is what Shards returns for counter when e is cached.
func (e *entry) answer(counter string, def int) int {
	if n, _ := e.lookup(counter); n > 0 {
		return int(n)
	}
	return def
}

// shardsCopy returns a copy of e's counters (nil for a nil e).
func (e *entry) shardsCopy() []slot {
	if e == nil {
		return nil
	}
	return append([]slot(nil), e.counters...)
}

// explicit reports whether some counter of e has a known explicit count.
func (e *entry) explicit() bool {
	for _, s := range e.counters {
		if s.shards > 0 {
			return true
		}
	}
	return false
}

type fetchKey struct{ contentID, counter string }

// counters are the directory's statistics, see Stats.
type counters struct {
	hits, misses, fetches, fetchErrors  atomic.Uint64
	invalidations, badMessages, resyncs atomic.Uint64
	resyncErrors, dropped, overflow     atomic.Uint64
	changes, evicted, badEntries        atomic.Uint64
}

// Stats is a snapshot of a Directory's counters, for a metrics adapter. All
// counts are cumulative since New except Items and Up.
type Stats struct {
	// Hits are Shards calls answered from the cache; Misses are those that
	// asked for a fetch (or found one already queued).
	Hits, Misses uint64
	// Fetches are lookup round trips to Redis (one pipeline each, for
	// misses or refreshes); FetchErrors are those that failed.
	Fetches, FetchErrors uint64
	// Invalidations are entries to re-read: invalidation messages received
	// and this directory's own Sets and Deletes. BadMessages are messages
	// on the channel that could not be decoded.
	Invalidations, BadMessages uint64
	// Resyncs are completed re-reads of the whole cache (after every
	// (re)subscription and every RefreshInterval); ResyncErrors are those
	// that failed.
	Resyncs, ResyncErrors uint64
	// Dropped are misses not fetched because the queue was full; Overflow
	// are fetched items not cached because the cache held MaxItems.
	Dropped, Overflow uint64
	// Changes are OnChange calls (answers that changed).
	Changes uint64
	// Evicted are items dropped from the cache by a refresh.
	Evicted uint64
	// BadEntries are stored shard counts that were not a number in
	// 1..MaxShards; such a counter gets the default.
	BadEntries uint64
	// Items is the number of cached content items.
	Items int64
	// Up is true while the invalidation subscription is confirmed and its
	// connection answers; while it is false cached answers may be stale.
	Up bool
}

// New returns a Directory for cfg and starts its goroutines: the
// invalidation subscriber, cfg.Fetchers fetchers and a maintainer. It fails
// only on an invalid cfg: with Redis unreachable the directory starts
// degraded (Healthy false, every counter without a cached entry gets
// cfg.DefaultShards) and recovers by itself when Redis answers. ctx bounds
// the first ping, which only decides the initial health. A nil logger
// discards.
func New(ctx context.Context, cfg Config, logger *slog.Logger) (*Directory, error) {
	return newDirectory(ctx, cfg, logger)
}

// newDirectory is New with go-redis hooks installed before any command, for
// tests that count or hold commands.
func newDirectory(ctx context.Context, cfg Config, logger *slog.Logger, hooks ...goredis.Hook) (*Directory, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("cannot create redis directory: invalid config: %w", err)
	}
	cfg.Channel = cfg.channel()
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	tlsCfg, err := cfg.TLS.clientConfig(cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("cannot create redis directory: %w", err)
	}
	client := goredis.NewClient(&goredis.Options{
		Addr:         cfg.Addr,
		TLSConfig:    tlsCfg,
		Username:     cfg.Username,
		Password:     cfg.Password,
		DB:           cfg.DB,
		DialTimeout:  cfg.DialTimeout,
		ReadTimeout:  cfg.ReadTimeout,
		WriteTimeout: cfg.WriteTimeout,
		// One dial attempt and two command retries: the fetchers and the
		// subscriber retry with their own back-off, and a miss must not
		// queue behind seconds of dial retries while Redis is down.
		DialerRetries:   1,
		MaxRetries:      2,
		DisableIdentity: true,
		// Cluster-upgrade notifications are for Redis Cloud; probing for
		// them costs a command per connection.
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	})
	for _, h := range hooks {
		client.AddHook(h)
	}
	d := &Directory{
		cfg:      cfg,
		keys:     newKeys(cfg.Region),
		def:      cfg.DefaultShards,
		log:      logger.With("component", "directory/redis", "region", cfg.Region, "addr", cfg.Addr, "tls", tlsCfg != nil),
		client:   client,
		pending:  make(map[fetchKey]struct{}),
		queue:    make(chan fetchKey, cfg.QueueSize),
		resyncCh: make(chan struct{}, 1),
	}
	d.ctx, d.cancel = context.WithCancel(context.Background())
	if err := d.Ping(ctx); err != nil {
		d.log.Warn("redis not reachable; starting degraded with default shard counts", "err", err)
	}
	d.wg.Go(d.subscribeLoop)
	for range cfg.Fetchers {
		d.wg.Go(d.fetchLoop)
	}
	d.wg.Go(d.maintainLoop)
	return d, nil
}

// SetOnChange sets the function told about every changed answer: after a
// fetch, an invalidation (from any agent of the region, this one included)
// or a resync, Shards(contentID, counter) now returns shards, which differs
// from what it returned before. The agent reshards its live counter. fn
// runs on one of the directory's goroutines, one call at a time and in the
// order of the changes, while the directory holds its write lock: it must
// not block for long and must not call Set, Delete or Close (Shards is
// fine). It may be told about counters it never created. Set it before
// the first Shards call; changes before that are not reported.
func (d *Directory) SetOnChange(fn ChangeFunc) {
	if fn == nil {
		d.onChange.Store(nil)
		return
	}
	d.onChange.Store(&fn)
}

// Shards returns the shard count of the counter, at least 1. It never waits
// for Redis: it answers from the cache; on a miss it answers the default
// (or what it knows of a stale entry) at once and queues a fetch, whose
// result, if different, is reported to OnChange. Shards does not allocate
// on a hit.
func (d *Directory) Shards(contentID, counter string) int {
	if v, ok := d.items.Load(contentID); ok {
		e := v.(*entry)
		if !e.used.Load() {
			e.used.Store(true)
		}
		n, member := e.lookup(counter)
		if !e.loaded || member && n == 0 {
			d.miss(contentID, counter)
		} else {
			d.stats.hits.Add(1)
		}
		if n > 0 {
			return int(n)
		}
		return d.def
	}
	d.miss(contentID, counter)
	return d.def
}

// miss counts a miss and queues a fetch of the counter.
func (d *Directory) miss(contentID, counter string) {
	d.stats.misses.Add(1)
	d.enqueue(contentID, counter, true)
}

// enqueue queues a fetch of the counter unless one is queued or running,
// or counts a drop when the queue is full. clone copies the ids before
// keeping them. It never blocks.
func (d *Directory) enqueue(contentID, counter string, clone bool) {
	if d.ctx.Err() != nil {
		return
	}
	k := fetchKey{contentID, counter}
	d.pmu.Lock()
	defer d.pmu.Unlock()
	if _, ok := d.pending[k]; ok {
		return
	}
	if clone { // the caller's strings may point into a request buffer
		k = fetchKey{strings.Clone(contentID), strings.Clone(counter)}
	}
	select {
	case d.queue <- k:
		d.pending[k] = struct{}{}
	default:
		d.stats.dropped.Add(1)
	}
}

// unpend forgets that the batch's keys are queued or being fetched.
func (d *Directory) unpend(batch []fetchKey) {
	d.pmu.Lock()
	for _, k := range batch {
		delete(d.pending, k)
	}
	d.pmu.Unlock()
}

// Set records in Redis that the counter gets shards shards and publishes an
// invalidation to every Directory of the region, this one included: each
// re-reads the entry (one round trip) and reports the new count to
// OnChange. Set itself is one round trip: SADD, HSET and PUBLISH in one
// MULTI. It returns before the directories have re-read the entry.
func (d *Directory) Set(ctx context.Context, contentID, counter string, shards int) error {
	if err := checkEntry(contentID, counter); err != nil {
		return fmt.Errorf("cannot set shards: %w: %w", ErrInvalid, err)
	}
	if shards < 1 || shards > MaxShards {
		return fmt.Errorf("cannot set shards of %s/%s: %w: %d is outside 1..%d", contentID, counter, ErrInvalid, shards, MaxShards)
	}
	_, err := d.client.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		p.SAdd(ctx, d.keys.contentKey(contentID), counter)
		p.HSet(ctx, d.keys.counterKey(contentID, counter), fieldShards, shards, fieldUpdated, time.Now().UnixMilli())
		p.Publish(ctx, d.cfg.Channel, encodeInvalidation(contentID, counter))
		return nil
	})
	if err != nil {
		return fmt.Errorf("cannot set shards of %s/%s in redis: %w", contentID, counter, err)
	}
	// Do not wait for the echo: it may be late or lost.
	d.invalidate(strings.Clone(contentID), strings.Clone(counter))
	return nil
}

// Delete removes the counter's entry, so that it gets the default again,
// and publishes an invalidation like Set.
func (d *Directory) Delete(ctx context.Context, contentID, counter string) error {
	if err := checkEntry(contentID, counter); err != nil {
		return fmt.Errorf("cannot delete shards: %w: %w", ErrInvalid, err)
	}
	_, err := d.client.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		p.SRem(ctx, d.keys.contentKey(contentID), counter)
		p.Del(ctx, d.keys.counterKey(contentID, counter))
		p.Publish(ctx, d.cfg.Channel, encodeInvalidation(contentID, counter))
		return nil
	})
	if err != nil {
		return fmt.Errorf("cannot delete shards of %s/%s in redis: %w", contentID, counter, err)
	}
	d.invalidate(strings.Clone(contentID), strings.Clone(counter))
	return nil
}

// SetShards is Set, or Delete when shards is 1 or less ("back to the
// default"), with shards capped at MaxShards. It is how the agents' hot
// counter rule (region.ShardWriter) writes the region's shard list.
func (d *Directory) SetShards(ctx context.Context, contentID, counter string, shards int) error {
	if shards <= 1 {
		return d.Delete(ctx, contentID, counter)
	}
	return d.Set(ctx, contentID, counter, min(shards, MaxShards))
}

// Healthy reports whether the invalidation subscription is confirmed and
// its connection answers. It does no I/O. While it is false the directory
// keeps answering from its cache and the default, and its cached answers
// may be stale; when it turns true again the whole cache is re-read.
func (d *Directory) Healthy() bool { return d.up.Load() }

// Ping sends one PING to Redis, for a readiness check that wants a fresh
// answer.
func (d *Directory) Ping(ctx context.Context) error {
	if err := d.client.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("cannot ping redis at %s: %w", d.cfg.Addr, err)
	}
	return nil
}

// Stats returns a snapshot of the counters.
func (d *Directory) Stats() Stats {
	s := &d.stats
	return Stats{
		Hits:          s.hits.Load(),
		Misses:        s.misses.Load(),
		Fetches:       s.fetches.Load(),
		FetchErrors:   s.fetchErrors.Load(),
		Invalidations: s.invalidations.Load(),
		BadMessages:   s.badMessages.Load(),
		Resyncs:       s.resyncs.Load(),
		ResyncErrors:  s.resyncErrors.Load(),
		Dropped:       s.dropped.Load(),
		Overflow:      s.overflow.Load(),
		Changes:       s.changes.Load(),
		Evicted:       s.evicted.Load(),
		BadEntries:    s.badEntries.Load(),
		Items:         d.nitems.Load(),
		Up:            d.up.Load(),
	}
}

// Default returns the shard count of counters without an entry.
func (d *Directory) Default() int { return d.def }

// Close stops the directory's goroutines, waits for them and closes the
// Redis connections. Shards keeps answering from the cache afterwards
// (misses get the default and are not fetched); Set and Delete fail. Close
// is idempotent.
func (d *Directory) Close() error {
	d.closeOnce.Do(func() {
		d.cancel()
		d.psMu.Lock()
		if d.ps != nil {
			_ = d.ps.Close() // ends the subscriber's Receive
		}
		d.psMu.Unlock()
		d.wg.Wait()
		if err := d.client.Close(); err != nil {
			d.closeErr = fmt.Errorf("cannot close redis client: %w", err)
		}
		d.up.Store(false)
	})
	return d.closeErr
}

// invalidate makes the directory re-read one counter's entry. Moving gen
// under wmu orders it against every fetch's apply: a fetch that applies
// later and may have read the entry before it changed reads again, and one
// that applied earlier has left pending, so the fetch queued here is not
// deduplicated away.
func (d *Directory) invalidate(contentID, counter string) {
	d.stats.invalidations.Add(1)
	d.wmu.Lock()
	d.gen.Add(1)
	d.wmu.Unlock()
	d.enqueue(contentID, counter, false)
}

// commit replaces old, contentID's current entry (nil: none), by e and
// reports every answer that changed. Called with wmu held.
func (d *Directory) commit(contentID string, old, e *entry) {
	if old == nil {
		if d.nitems.Load() >= int64(d.cfg.MaxItems) {
			// Not cached: the answers stay the default, nothing changed.
			d.stats.overflow.Add(1)
			return
		}
		d.nitems.Add(1)
	} else if old.used.Load() {
		e.used.Store(true)
	}
	d.items.Store(contentID, e)
	fn := d.onChange.Load()
	report := func(counter string) {
		if n := e.answer(counter, d.def); n != old.answer(counter, d.def) {
			d.stats.changes.Add(1)
			if fn != nil {
				(*fn)(contentID, counter, n)
			}
		}
	}
	for _, s := range e.counters {
		report(s.counter)
	}
	if old != nil {
		for _, s := range old.counters {
			if _, still := e.lookup(s.counter); !still {
				report(s.counter)
			}
		}
	}
}

// warnFetch logs a failed fetch at most every ten seconds.
func (d *Directory) warnFetch(msg string, err error) {
	now := time.Now().UnixNano()
	last := d.lastWarn.Load()
	if now-last < int64(10*time.Second) || !d.lastWarn.CompareAndSwap(last, now) {
		return
	}
	d.log.Warn(msg, "err", err, "fetch_errors", d.stats.fetchErrors.Load())
}

// SetClientLogger routes the messages of the go-redis library to l at debug
// level, with component=go-redis. go-redis logs through one process-wide
// logger, on standard error by default, and writes a line for every failed
// dial while Redis is down; the directory reports outages itself (Healthy,
// Stats, one warning per change of state). It affects every go-redis
// client in the process: call it once, from main, before New.
func SetClientLogger(l *slog.Logger) {
	goredis.SetLogger(clientLogger{l.With("component", "go-redis")})
}

type clientLogger struct{ l *slog.Logger }

func (c clientLogger) Printf(ctx context.Context, format string, v ...any) {
	c.l.DebugContext(ctx, fmt.Sprintf(format, v...))
}
