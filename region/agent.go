package region

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgecount/edgecount/engagement"
)

// Config configures an Agent. The zero value is not valid; start from
// DefaultConfig.
type Config struct {
	// Region is the region this agent counts for.
	Region string
	// AgentID names this agent in partial-sum message ids; unique per region.
	AgentID string
	// Partitions is the number of partial-sum partitions; it must match the
	// rollup's and never change for a stream.
	Partitions int
	// FlushInterval is how often accumulated deltas are handed to the
	// publisher.
	FlushInterval time.Duration
	// MaxMessageBytes caps one encoded partial-sum message.
	MaxMessageBytes int
	// OutboxBytes bounds the encoded messages waiting to be published. When
	// it is reached the flusher stops draining counters (they keep summing in
	// place, so no increment is lost) until the publisher catches up.
	OutboxBytes int64
	// PublishRetryMin and PublishRetryMax bound the publisher's backoff.
	PublishRetryMin, PublishRetryMax time.Duration
	// ReactionAttempts is how many compare-and-set rounds a reaction may
	// lose to concurrent writers before ErrContended.
	ReactionAttempts int
	// SourcedStream says the agent publishes to a stream the rollups do
	// not consume (a regional stream sourced into a hub, which numbers the
	// messages anew): its broker sequences are not the rows' LastSeq, so
	// fresh reads add only the deltas not yet flushed (docs/consistency.md).
	SourcedStream bool
	// CacheTTL is how long a read of totals is served from memory (0: not
	// at all), and CachePushedTTL how long while the rollups' row pushes
	// arrive whole (docs/read-cache.md); PushStaleAfter is how long a
	// partition may go without a push or heartbeat before the feed counts
	// as broken.
	CacheTTL, CachePushedTTL, PushStaleAfter time.Duration
	// CacheEntries bounds the read cache (items).
	CacheEntries int
	// FreshPeerTimeout bounds how long a fresh read waits for the region
	// peers' held deltas; a peer slower than that is named in the answer.
	FreshPeerTimeout time.Duration
	// Counters configures the sharded counter table.
	Counters CountersConfig
	// Trending configures the trending summaries and the hot-counter rule;
	// its zero value turns them off.
	Trending TrendingConfig
	// Log configures the durable intake and outbox logs; its zero value
	// (durability none) keeps every write in memory only until it is
	// flushed.
	Log LogConfig
	// Idempotency bounds the idempotency keys (IncrementOnce, ReactOnce).
	Idempotency IdempotencyConfig
}

// DefaultConfig returns the defaults for region.
func DefaultConfig(region, agentID string) Config {
	return Config{
		Region:           region,
		AgentID:          agentID,
		Partitions:       16,
		FlushInterval:    time.Second,
		MaxMessageBytes:  256 << 10,
		OutboxBytes:      64 << 20,
		PublishRetryMin:  50 * time.Millisecond,
		PublishRetryMax:  5 * time.Second,
		ReactionAttempts: 16,
		CacheTTL:         100 * time.Millisecond,
		CachePushedTTL:   5 * time.Second,
		PushStaleAfter:   3 * time.Second,
		CacheEntries:     100_000,
		FreshPeerTimeout: 50 * time.Millisecond,
		Counters:         DefaultCountersConfig(),
		Trending:         DefaultTrendingConfig(),
		Log:              DefaultLogConfig(),
		Idempotency:      DefaultIdempotencyConfig(),
	}
}

// Validate reports every problem with c.
func (c Config) Validate() error {
	var errs []error
	if !engagement.ValidRegion(c.Region) {
		errs = append(errs, fmt.Errorf("region %q: want lower-case letters, digits, '_' or '-', not %q", c.Region, engagement.GlobalScope))
	}
	if !engagement.ValidID(c.AgentID) {
		errs = append(errs, fmt.Errorf("agent id %q: want 1-128 printable ASCII bytes without spaces or '/'", c.AgentID))
	}
	if c.Partitions < 1 || c.Partitions > 4096 {
		errs = append(errs, fmt.Errorf("partitions %d: want 1..4096", c.Partitions))
	}
	if c.FlushInterval < 10*time.Millisecond {
		errs = append(errs, fmt.Errorf("flush interval %v: want at least 10ms", c.FlushInterval))
	}
	if c.MaxMessageBytes < 4<<10 {
		errs = append(errs, fmt.Errorf("max message bytes %d: want at least 4096", c.MaxMessageBytes))
	}
	if c.OutboxBytes < int64(c.MaxMessageBytes) {
		errs = append(errs, fmt.Errorf("outbox bytes %d: want at least max message bytes (%d)", c.OutboxBytes, c.MaxMessageBytes))
	}
	if c.PublishRetryMin <= 0 || c.PublishRetryMax < c.PublishRetryMin {
		errs = append(errs, fmt.Errorf("publish retry %v..%v: want 0 < min <= max", c.PublishRetryMin, c.PublishRetryMax))
	}
	if c.ReactionAttempts < 1 {
		errs = append(errs, fmt.Errorf("reaction attempts %d: want at least 1", c.ReactionAttempts))
	}
	if c.CacheTTL < 0 {
		errs = append(errs, fmt.Errorf("cache ttl %v: want >= 0", c.CacheTTL))
	}
	if c.FreshPeerTimeout <= 0 {
		errs = append(errs, fmt.Errorf("fresh peer timeout %v: want > 0", c.FreshPeerTimeout))
	}
	if c.CachePushedTTL < 0 {
		errs = append(errs, fmt.Errorf("cache pushed ttl %v: want >= 0", c.CachePushedTTL))
	}
	if c.PushStaleAfter < 0 {
		errs = append(errs, fmt.Errorf("push stale after %v: want >= 0", c.PushStaleAfter))
	}
	if c.CacheEntries < 1 {
		errs = append(errs, fmt.Errorf("cache entries %d: want at least 1", c.CacheEntries))
	}
	if err := c.Counters.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Trending.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Log.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Idempotency.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// StatsReader is what the agent needs of ContentStats: every scope row of
// each id in one lookup.
type StatsReader interface {
	ReadStats(ctx context.Context, contentIDs []string) (map[string][]engagement.Stats, error)
}

// Publisher stores one partial-sum message on the broker. It returns only
// once the broker has stored it; msgID lets the broker drop a retried copy.
type Publisher interface {
	Publish(ctx context.Context, partition uint32, msgID string, data []byte) error
}

// Check is a named readiness probe of a dependency.
type Check struct {
	Name string
	Fn   func(ctx context.Context) error
	// Optional marks a dependency the agent can serve without (writes go
	// on): its failure is reported by Degraded, not by Ready.
	Optional bool
}

// Deps are the agent's dependencies.
type Deps struct {
	Reactions ReactionStore
	Stats     StatsReader
	Publisher Publisher
	Directory Directory // nil: every counter gets one shard
	Checks    []Check   // run by Ready
	Logger    *slog.Logger
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
	// Epoch identifies this run of the agent in message ids; zero means
	// the start time in nanoseconds. With a durable log it must strictly
	// increase from run to run (LoadIdentity), so that the messages of a
	// new run sort after the re-published ones of the last.
	Epoch uint64
	// Trending reads the rollup's stored trending lists; nil means
	// queries that need them fail (the agent's own region is still
	// answered from peers when SetPeers is used).
	Trending TrendingReader
	// ShardWriter, when set, receives the hot-counter rule's shard counts
	// so that every agent of the region (and counters created later) get
	// them; without it the rule reshards this agent's live counters only.
	ShardWriter ShardWriter
}

// Stats are the agent's running totals, exported for metrics. All fields
// are updated atomically and may be read at any time.
type Stats struct {
	IncrementsAccepted atomic.Uint64
	ReactionsChanged   atomic.Uint64
	ReactionsUnchanged atomic.Uint64
	ReactionConflicts  atomic.Uint64
	ReactionsContended atomic.Uint64
	// ReactionsTooFrequent counts reactions refused because their row took
	// engagement.MaxWritersKept changes in engagement.WriterHistory.
	ReactionsTooFrequent atomic.Uint64
	Flushes              atomic.Uint64
	FlushesDeferred      atomic.Uint64
	FlushNanos           atomic.Uint64
	SumsFlushed          atomic.Uint64
	MessagesEnqueued     atomic.Uint64
	MessagesPublished    atomic.Uint64
	PublishErrors        atomic.Uint64
	OutboxBytes          atomic.Int64
	OutboxMessages       atomic.Int64
	CacheHits            atomic.Uint64
	CacheMisses          atomic.Uint64
	FreshReads           atomic.Uint64 // reads with consistency fresh
	FreshPeerMisses      atomic.Uint64 // peers that did not answer one in time
	// Trending.
	TrendingNanos     atomic.Uint64 // time spent on trending in flushes
	TopListsShipped   atomic.Uint64 // per-partition trending lists put in messages
	PeerSummaryErrors atomic.Uint64 // peer summaries that did not decode
	HotCounters       atomic.Int64  // items the hot rule holds hot
	HotPromoted       atomic.Uint64
	HotCooled         atomic.Uint64
	HotReadErrors     atomic.Uint64 // regional lists the hot rule could not read
	HotWriteErrors    atomic.Uint64 // shard counts the directory did not take
}

// Agent is one edge agent's core: it takes reactions and increments, keeps
// them in sharded counters, flushes partial sums to the publisher, and
// serves totals through a short-lived cache. Its methods are safe for
// concurrent use.
type Agent struct {
	cfg       Config
	reactions ReactionStore
	reader    StatsReader
	checks    []Check
	logger    *slog.Logger
	now       func() time.Time

	counters *Counters
	cache    *statsCache
	push     pushStats
	feed     pushFeed
	held     heldState // flushed messages, for fresh reads (fresh.go)
	// heldPeers asks the region's other agents for their held deltas.
	heldPeers atomic.Pointer[HeldPeers]
	flusher   *flusher
	stats     Stats

	dir         Directory
	trend       *trending // nil: trending off
	trendStore  TrendingReader
	trendCache  trendCache
	peers       atomic.Pointer[PeerSummaries]
	shardWriter ShardWriter
	hot         *hotRule // nil: rule off
	hotCancel   context.CancelFunc
	hotWG       sync.WaitGroup

	log      *durable // nil: no log (durability none)
	logStats LogStats
	keys     *keyTable

	stopping  atomic.Bool
	startOnce sync.Once
	stopOnce  sync.Once
	stopErr   error
}

// New builds an agent. Call Start to begin flushing and Stop to end.
func New(cfg Config, deps Deps) (*Agent, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("cannot build agent: %w", err)
	}
	if deps.Reactions == nil || deps.Stats == nil || deps.Publisher == nil {
		return nil, errors.New("cannot build agent: reactions, stats and publisher are required")
	}
	a := &Agent{
		cfg:       cfg,
		reactions: deps.Reactions,
		reader:    deps.Stats,
		checks:    deps.Checks,
		logger:    deps.Logger,
		now:       deps.Now,
	}
	if a.logger == nil {
		a.logger = slog.New(slog.DiscardHandler)
	}
	a.logger = a.logger.With("component", "agent")
	if a.now == nil {
		a.now = time.Now
	}
	epoch := deps.Epoch
	if epoch == 0 {
		epoch = uint64(time.Now().UnixNano())
	}
	a.counters = NewCounters(deps.Directory, cfg.Counters)
	a.keys = newKeyTable(cfg.Idempotency, a.now)
	a.cache = newStatsCache(cfg.CacheEntries, cfg.CacheTTL, cfg.CachePushedTTL)
	a.feed.init(cfg.Partitions, cfg.PushStaleAfter)
	a.held.sourced = cfg.SourcedStream
	a.held.progress = make([]atomic.Uint64, cfg.Partitions)
	a.flusher = newFlusher(a, deps.Publisher, epoch)
	a.dir, a.trendStore, a.shardWriter = deps.Directory, deps.Trending, deps.ShardWriter
	if cfg.Log.Enabled() {
		d, problems, err := openLogs(cfg)
		if err != nil {
			return nil, fmt.Errorf("cannot build agent: %w", err)
		}
		for _, p := range problems {
			a.logger.Error("damaged log records dropped, not replayed", "problem", p.String())
		}
		a.log = d
	}
	if cfg.Trending.Enabled() {
		tc := cfg.Trending.withDefaults(cfg.Counters.withDefaults().MaxShards)
		a.cfg.Trending = tc
		var err error
		if a.trend, err = newTrending(tc, cfg.Region, cfg.Partitions, cfg.MaxMessageBytes-headerRoom); err != nil {
			if a.log != nil {
				a.log.close()
			}
			return nil, fmt.Errorf("cannot build agent: %w", err)
		}
		if tc.Hot.Top > 0 {
			a.hot = newHotRule(a, tc.Hot, a.trend.names)
		}
	}
	return a, nil
}

// Config returns the agent's configuration.
func (a *Agent) Config() Config { return a.cfg }

// Stats returns the agent's running totals.
func (a *Agent) Stats() *Stats { return &a.stats }

// LiveCounters returns how many counters hold state in memory.
func (a *Agent) LiveCounters() int { return a.counters.Len() }

// Start launches the flusher, the publisher and the hot-counter rule. With
// a log, call Recover first: until it has succeeded writes fail with
// ErrRecovering and the flusher does not flush.
func (a *Agent) Start() {
	a.startOnce.Do(func() {
		a.flusher.start()
		if a.hot != nil {
			ctx, cancel := context.WithCancel(context.Background())
			a.hotCancel = cancel
			a.hotWG.Add(1)
			go func() {
				defer a.hotWG.Done()
				a.hot.run(ctx)
			}()
		}
	})
}

// Stop stops taking writes, flushes what the counters hold and waits until
// every flushed message is published or ctx ends, then closes the logs
// (what was not published stays in the outbox log and is re-published by
// the next run). It is idempotent; callers should stop the request intake
// first so that no write is in flight.
func (a *Agent) Stop(ctx context.Context) error {
	a.stopOnce.Do(func() {
		a.stopping.Store(true)
		a.Start() // a never-started agent still flushes what it took
		if a.hotCancel != nil {
			a.hotCancel()
			a.hotWG.Wait()
		}
		a.stopErr = a.flusher.stop(ctx)
		if a.log != nil {
			if err := a.log.close(); err != nil {
				a.stopErr = errors.Join(a.stopErr, fmt.Errorf("cannot close the agent's logs: %w", err))
			}
		}
	})
	return a.stopErr
}

// React sets a user's reaction to an item.
func (a *Agent) React(ctx context.Context, userID, contentID string, action engagement.Action) (ReactResult, error) {
	if a.stopping.Load() {
		return ReactResult{}, ErrStopping
	}
	return a.react(ctx, nil, userID, contentID, action)
}

// GetReaction returns a user's reaction row.
func (a *Agent) GetReaction(ctx context.Context, userID, contentID string) (engagement.Reaction, bool, error) {
	return a.reactions.GetReaction(ctx, userID, contentID)
}

// GetReactions returns a user's reaction rows for several items.
func (a *Agent) GetReactions(ctx context.Context, userID string, contentIDs []string) (map[string]engagement.Reaction, error) {
	return a.reactions.GetReactions(ctx, userID, contentIDs)
}

// Increment adds validated increments to the counters of the agent's region.
//
// With a log, the batch is one intake record, appended (and, in fsync mode,
// fsynced) before Increment returns; the in-memory add runs inside the
// log's AppendApply, so a flush carries exactly the records below its
// checkpoint. A client that goes away does not cancel an append in flight:
// once durable, a record is also added.
func (a *Agent) Increment(ctx context.Context, incs []Increment) error {
	if a.stopping.Load() {
		return ErrStopping
	}
	if a.log == nil {
		a.addIncrements(incs)
		return nil
	}
	if !a.log.recovered.Load() {
		return ErrRecovering
	}
	bp := recBufs.Get().(*[]byte)
	*bp = appendIncrements((*bp)[:0], a.cfg.Region, incs)
	// context.Background rather than context.WithoutCancel(ctx): the log
	// reads no value of the context, and WithoutCancel allocates.
	_, err := a.log.intake.AppendApply(context.Background(), *bp, func(uint64) { a.addIncrements(incs) })
	if cap(*bp) <= 64<<10 {
		recBufs.Put(bp)
	}
	if err != nil {
		return fmt.Errorf("cannot log increments: %w", a.mapLogErr(err))
	}
	return nil
}

// recBufs are encoding buffers for log records.
var recBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

func (a *Agent) addIncrements(incs []Increment) {
	for i := range incs {
		in := &incs[i]
		a.counters.Add(Key{ContentID: in.ContentID, Counter: in.Counter, Region: a.cfg.Region}, in.Delta)
	}
	a.stats.IncrementsAccepted.Add(uint64(len(incs)))
}

// Counts returns every scope row of each id, from the cache when warm
// (see statsCache), else from the store in one read.
func (a *Agent) Counts(ctx context.Context, contentIDs []string) (map[string][]engagement.Stats, error) {
	now := a.now().UnixNano()
	out := make(map[string][]engagement.Stats, len(contentIDs))
	var missing []string
	for _, id := range contentIDs {
		if v, ok := a.cache.get(id, now); ok {
			if v.rows != nil {
				out[id] = v.rows
			}
			continue
		}
		missing = append(missing, id)
	}
	a.stats.CacheHits.Add(uint64(len(contentIDs) - len(missing)))
	if len(missing) == 0 {
		return out, nil
	}
	a.stats.CacheMisses.Add(uint64(len(missing)))
	for _, id := range missing {
		a.cache.expect(id)
	}
	start, epoch := a.now(), a.cache.epoch.Load()
	got, err := a.reader.ReadStats(ctx, missing)
	if err != nil {
		return nil, fmt.Errorf("cannot read totals: %w", err)
	}
	for _, id := range missing {
		a.noteProgress(got[id])
		if rows, _, _ := a.cache.put(id, got[id], start, epoch); rows != nil {
			out[id] = rows
		}
	}
	return out, nil
}

// Ready runs every dependency check and the publisher's state.
func (a *Agent) Ready(ctx context.Context) error {
	if a.stopping.Load() {
		return ErrStopping
	}
	var errs []error
	if err := a.logReady(); err != nil {
		errs = append(errs, fmt.Errorf("log: %w", err))
	}
	for _, c := range a.checks {
		if c.Optional {
			continue
		}
		if err := c.Fn(ctx); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", c.Name, err))
		}
	}
	return errors.Join(errs...)
}

// Degraded lists the optional dependencies that are down.
func (a *Agent) Degraded(ctx context.Context) []string {
	var out []string
	for _, c := range a.checks {
		if !c.Optional {
			continue
		}
		if err := c.Fn(ctx); err != nil {
			out = append(out, c.Name+": "+err.Error())
		}
	}
	return out
}

// Reshard changes the shard count of this region's live counter of an
// item, without losing a delta; the shard directory calls it when an
// entry changes.
func (a *Agent) Reshard(contentID, counter string, shards int) {
	a.counters.Reshard(Key{ContentID: contentID, Counter: counter, Region: a.cfg.Region}, shards)
}
