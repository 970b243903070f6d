package rollup

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgecount/edgecount/backoff"
	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/partial"
	"github.com/edgecount/edgecount/store"
)

// RecountStore is what the recount job needs of a store: the totals, a
// resumable scan over them and a resumable count of one item's reactions
// from the by-content index.
type RecountStore interface {
	StatsStore
	// ScanStats returns up to limit rows after cursor and the cursor to
	// pass next ("" starts over; a next of "" means the scan wrapped).
	ScanStats(ctx context.Context, cursor string, limit int) (rows []engagement.Stats, next string, err error)
	// CountReactions counts an item's reactions from the by-content index
	// in one call (tools and tests; the job uses RecountReactions).
	CountReactions(ctx context.Context, contentID string) ([]engagement.RegionTally, error)
	// RecountReactions counts an item's reactions from the by-content
	// index, one read per reaction, resumably: from cursor ("" starts),
	// about budget entries per call, returning the tallies so far and the
	// cursor to pass next ("" when finished; on an error, a cursor that
	// resumes after what was read). complete reports that a finished
	// count is exact; when false, an entry may be missing (a cell may be
	// short) or stale.
	RecountReactions(ctx context.Context, contentID, cursor string, budget int) (tallies []engagement.RegionTally, next string, complete bool, err error)
}

// Verifier is implemented by a store whose RecountReactions is not complete
// (Cassandra): VerifyReactions counts an item by the reaction rows the
// index names, so a stale entry counts as what its row holds. It never
// counts a reaction that does not exist (each cell is a lower bound), and
// costs one more read per reaction; the job calls it only before it raises
// a total.
type Verifier interface {
	VerifyReactions(ctx context.Context, contentID string) ([]engagement.RegionTally, error)
}

// MaxRecountIDs bounds the ids of one on-demand recount.
const MaxRecountIDs = 100

// MaxRecountBatch bounds RecountConfig.Batch (the stores' scan limit).
const MaxRecountBatch = 10_000

// RecountConfig configures a Recounter. Start from DefaultRecountConfig.
type RecountConfig struct {
	// Interval is the time between periodic passes. Zero runs no periodic
	// pass: items are recounted on demand only.
	Interval time.Duration
	// StaleAfter makes an item stale when none of its rows was updated for
	// this long; every pass checks the stale items among the rows it scans.
	StaleAfter time.Duration
	// Sample is how many of the other (recently updated) items among the
	// rows a pass scans it also checks, chosen at random.
	Sample int
	// Quiet bounds the time from a reaction change to the apply of its
	// delta to the totals: at least the agents' flush interval plus the
	// longest publish and rollup lag tolerated. A repair is written only
	// after Quiet has passed since the count it uses, and only if no row
	// of the item changed meanwhile (see docs/recount.md).
	Quiet time.Duration
	// Batch is how many ContentStats rows one pass scans (1..MaxRecountBatch).
	Batch int
	// Partitions is the number of partial-sum partitions of the stream.
	Partitions int
	// Owned lists the partitions whose items this rollup applies and may
	// therefore repair; empty means all.
	Owned []uint32
	// Owns, when set, decides instead of Owned whether this rollup applies
	// a partition now (for partitions assigned at run time). It is asked
	// again under the apply lock just before a repair is written, and must
	// be safe for concurrent use.
	Owns func(partition uint32) bool
	// CountBudget is how many index entries one RecountReactions call
	// reads (1..MaxRecountBatch·100).
	CountBudget int
	// ItemTimeout bounds the time one check spends counting an item. A
	// count that does not finish keeps its cursor and resumes at the next
	// pass or on-demand recount of the item.
	ItemTimeout time.Duration
	// ProgressFile, when set, is where unfinished counts are kept (JSON,
	// replaced atomically), so a count resumes after a restart; empty
	// keeps them in memory only.
	ProgressFile string
}

// MaxInProgress bounds the unfinished counts a Recounter keeps.
const MaxInProgress = 1000

// DefaultRecountConfig returns the defaults: a pass a minute over 1,000
// rows, items stale after 10 minutes, 20 sampled, 30 s quiet, 16 partitions,
// counts read 20,000 entries a call and spend at most 30 s on an item per
// check.
func DefaultRecountConfig() RecountConfig {
	return RecountConfig{
		Interval:    time.Minute,
		StaleAfter:  10 * time.Minute,
		Sample:      20,
		Quiet:       30 * time.Second,
		Batch:       1000,
		Partitions:  16,
		CountBudget: 20_000,
		ItemTimeout: 30 * time.Second,
	}
}

// Validate reports every problem with c.
func (c RecountConfig) Validate() error {
	var errs []error
	if c.Interval < 0 {
		errs = append(errs, fmt.Errorf("interval %v: want 0 (on demand only) or more", c.Interval))
	}
	if c.StaleAfter <= 0 {
		errs = append(errs, fmt.Errorf("stale_after %v: must be positive", c.StaleAfter))
	}
	if c.Sample < 0 {
		errs = append(errs, fmt.Errorf("sample %d: want 0 or more", c.Sample))
	}
	if c.Quiet <= 0 {
		errs = append(errs, fmt.Errorf("quiet %v: must be positive (at least the flush interval plus the tolerated lag)", c.Quiet))
	}
	if c.Batch < 1 || c.Batch > MaxRecountBatch {
		errs = append(errs, fmt.Errorf("batch %d: want 1..%d", c.Batch, MaxRecountBatch))
	}
	if c.Partitions < 1 || c.Partitions > 4096 {
		errs = append(errs, fmt.Errorf("partitions %d: want 1..4096", c.Partitions))
	}
	if c.CountBudget < 1 || c.CountBudget > MaxRecountBatch*100 {
		errs = append(errs, fmt.Errorf("count_budget %d: want 1..%d", c.CountBudget, MaxRecountBatch*100))
	}
	if c.ItemTimeout <= 0 {
		errs = append(errs, fmt.Errorf("item_timeout %v: must be positive", c.ItemTimeout))
	}
	for _, p := range c.Owned {
		if int(p) >= c.Partitions {
			errs = append(errs, fmt.Errorf("owned partition %d: not in 0..%d", p, c.Partitions-1))
		}
	}
	return errors.Join(errs...)
}

// RecountStats are the recount job's running totals, exported for metrics.
type RecountStats struct {
	Passes       atomic.Uint64
	ScanCycles   atomic.Uint64 // passes that reached the end of the table
	ItemsChecked atomic.Uint64
	RowsChecked  atomic.Uint64 // rows compared with a count
	RowsRepaired atomic.Uint64
	// RowsRaised and RowsLowered count the repaired rows with a cell
	// raised (lost deltas) and with a cell lowered (deltas counted that
	// no reaction backs); a row may count in both.
	RowsRaised  atomic.Uint64
	RowsLowered atomic.Uint64
	// DriftRepaired sums |Δlikes| + |Δdislikes| over the rows repaired.
	DriftRepaired atomic.Uint64
	// RowsDeferred counts rows with drift left for a later pass because
	// the item's totals changed while it was counted, or the pipeline was
	// behind.
	RowsDeferred atomic.Uint64
	// RowsUnrepaired counts rows whose total is above a count that may be
	// short (a store whose count is not complete): left as they are.
	RowsUnrepaired atomic.Uint64
	// CountsUnfinished counts checks whose count stopped before the end:
	// at ItemTimeout, or on an index read that failed (then the item is
	// reported unrepaired). The count resumes from its cursor.
	CountsUnfinished atomic.Uint64
	// CountsResumed counts checks that continued an unfinished count.
	CountsResumed atomic.Uint64
	// Verifies counts counts verified by the reaction rows before a raise
	// (Verifier).
	Verifies atomic.Uint64
	// InProgress is the number of unfinished counts kept.
	InProgress atomic.Int64
	Errors     atomic.Uint64
	// LastPassMillis is the Unix time in milliseconds at which the last
	// pass ended (0 before the first).
	LastPassMillis atomic.Int64
	// CountComplete is 1 when the last finished count was complete (totals
	// are lowered as well as raised to it), 0 when it was not (a Cassandra
	// keyspace of an older version until index-migrate -repair ran), -1
	// before the first.
	CountComplete atomic.Int32
}

// ItemStatus is the outcome of recounting one item.
type ItemStatus string

// The outcomes of recounting an item.
const (
	// ItemClean: the totals equal the count.
	ItemClean ItemStatus = "clean"
	// ItemRepaired: rows that differed were rewritten (some may be left
	// as they are, see ItemUnrepaired).
	ItemRepaired ItemStatus = "repaired"
	// ItemDeferred: drift was found but the totals changed while the item
	// was counted (or the pipeline is behind); a later pass checks again.
	ItemDeferred ItemStatus = "deferred"
	// ItemUnrepaired: drift was found only where the store's count may be
	// short, so nothing was written.
	ItemUnrepaired ItemStatus = "unrepaired"
	// ItemUnknown: no totals and no reactions exist for the id.
	ItemUnknown ItemStatus = "unknown"
	// ItemNotOwned: the id's partition is applied by another rollup.
	ItemNotOwned ItemStatus = "not_owned"
	// ItemFailed: the store failed; Reason says how.
	ItemFailed ItemStatus = "error"
)

// Tally is a pair of reaction totals.
type Tally struct {
	Likes, Dislikes int64
}

// RowResult is one row of a recounted item: its totals before, what the
// reactions count, and its totals after (equal to Before when unchanged).
type RowResult struct {
	Scope   string
	Exists  bool // the row existed before
	Before  Tally
	Counted Tally
	After   Tally
}

// ItemResult is the outcome of recounting one item.
type ItemResult struct {
	ContentID string
	Status    ItemStatus
	// Partition is the item's partial-sum partition.
	Partition uint32
	// Rows lists the rows compared, sorted by scope (global among them).
	Rows []RowResult
	// Drift is the sum of |Δlikes| + |Δdislikes| over the rows written.
	Drift int64
	// Reason explains deferred, unrepaired, not_owned and error outcomes.
	Reason string

	cursor string // where the item's count continues from
}

// PassReport summarises one periodic pass.
type PassReport struct {
	RowsScanned int
	Stale       int // stale items checked
	Sampled     int // recently updated items checked
	Resumed     int // items whose unfinished count continued
	Wrapped     bool
	Items       []ItemResult
}

// RecountOptions modify an on-demand recount.
type RecountOptions struct {
	// AllowLower lets a repair lower a total to a count that the store
	// does not vouch is complete (Cassandra, see store/cassandra). The
	// operator asserting it has checked that no reaction's by-content
	// entry is missing (no ErrIndexBehind since the reactions were made).
	AllowLower bool
}

// IDError is the error of an on-demand recount given an id that no item
// can have. It wraps store.ErrInvalid.
type IDError struct {
	Index int
	ID    string
}

func (e *IDError) Error() string {
	return fmt.Sprintf("id %d (%q) is not a valid content id: want 1-%d bytes of printable ASCII without spaces or '/'",
		e.Index, e.ID, engagement.MaxIDLen)
}

// Unwrap returns store.ErrInvalid.
func (e *IDError) Unwrap() error { return store.ErrInvalid }

// Recounter is the recount job: it compares ContentStats rows with the
// reactions they derive from and repairs the rows that drifted, without
// racing with the rollup's apply (see docs/recount.md): a repair holds off the
// rollup's Apply while it re-reads and writes rows.
//
// A Recounter is safe for concurrent use: passes run one at a time, and
// on-demand recounts may run beside them.
type Recounter struct {
	ru     *Rollup
	st     RecountStore
	cfg    RecountConfig
	owned  []bool // by partition; nil means all
	logger *slog.Logger
	stats  RecountStats

	passMu sync.Mutex // one pass at a time; guards cursor
	cursor string

	progMu   sync.Mutex // guards progress and the progress file
	progress map[string]*countProgress
}

// NewRecounter returns the recount job of ru over st, which must be the
// store ru writes to. logger may be nil.
func NewRecounter(ru *Rollup, st RecountStore, cfg RecountConfig, logger *slog.Logger) (*Recounter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("cannot create recounter: %w", err)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	rc := &Recounter{ru: ru, st: st, cfg: cfg, logger: logger.With("component", "recount"),
		progress: map[string]*countProgress{}}
	rc.stats.CountComplete.Store(-1)
	if err := rc.loadProgress(); err != nil {
		return nil, fmt.Errorf("cannot create recounter: %w", err)
	}
	if len(cfg.Owned) > 0 {
		rc.owned = make([]bool, cfg.Partitions)
		for _, p := range cfg.Owned {
			rc.owned[p] = true
		}
	}
	return rc, nil
}

// Stats returns the running totals.
func (rc *Recounter) Stats() *RecountStats { return &rc.stats }

// Config returns the configuration.
func (rc *Recounter) Config() RecountConfig { return rc.cfg }

// behind reports why repairs of items whose count began at countedAt must wait, or
// "" when they need not: a message failed to apply and none has been
// applied since (its deltas are in flight, however long its retry backoff
// is), or one failed since Quiet before the count, or a message applied
// since Quiet before the count had been flushed more than Quiet before it
// was applied. In each case deltas may be in flight for longer than Quiet.
// Measuring from the count, not from now, keeps an event just before the
// count from slipping out of the window while the repair waits.
func (rc *Recounter) behind(countedAt time.Time) string {
	ru := rc.ru
	if ru.failing.Load() {
		return "pipeline behind: a message failed to apply and none has been applied since"
	}
	from := countedAt.Add(-rc.cfg.Quiet).UnixNano()
	if f := ru.lastFail.Load(); f >= from {
		return fmt.Sprintf("pipeline behind: a message failed to apply %v before the count (quiet is %v)",
			countedAt.Sub(time.Unix(0, f)).Round(time.Millisecond), rc.cfg.Quiet)
	}
	lag := time.Duration(ru.stats.LagMillis.Load()) * time.Millisecond
	if lag > rc.cfg.Quiet && ru.lastApply.Load() >= from {
		return fmt.Sprintf("pipeline behind: the newest message was applied %v after its flush (quiet is %v)", lag, rc.cfg.Quiet)
	}
	return ""
}

// owns reports whether this rollup applies partition p.
func (rc *Recounter) owns(p uint32) bool {
	if rc.cfg.Owns != nil {
		return rc.cfg.Owns(p)
	}
	return rc.owned == nil || rc.owned[p]
}

// Run runs a pass every Interval until ctx ends, then returns nil. With a
// zero Interval it only waits for ctx. Errors of a pass are logged and
// counted; the next pass starts where the failed one would have.
func (rc *Recounter) Run(ctx context.Context) error {
	if rc.cfg.Interval == 0 {
		<-ctx.Done()
		return nil
	}
	t := time.NewTicker(rc.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		rep, err := rc.Pass(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			rc.logger.Warn("recount pass failed", "err", err)
			continue
		}
		rc.logger.Debug("recount pass", "rows_scanned", rep.RowsScanned, "stale", rep.Stale, "sampled", rep.Sampled,
			"wrapped", rep.Wrapped)
	}
}

// Pass scans the next Batch rows of ContentStats from where the previous
// pass stopped and checks the items among them that this rollup owns: all
// stale ones and Sample others at random. It returns what it found. On an
// error the cursor stays, so the next pass scans the same rows again.
func (rc *Recounter) Pass(ctx context.Context) (PassReport, error) {
	rc.passMu.Lock()
	defer rc.passMu.Unlock()
	rows, next, err := rc.st.ScanStats(ctx, rc.cursor, rc.cfg.Batch)
	if err != nil {
		rc.stats.Errors.Add(1)
		return PassReport{}, fmt.Errorf("cannot scan totals: %w", err)
	}
	rep := PassReport{RowsScanned: len(rows), Wrapped: next == ""}
	// The rows of one item are adjacent; an item's newest row says
	// whether the pipeline still updates it.
	staleBefore := rc.ru.now().Add(-rc.cfg.StaleAfter)
	var stale, fresh []string
	for i := 0; i < len(rows); {
		id := rows[i].ContentID
		newest := rows[i].UpdatedAt
		j := i + 1
		for ; j < len(rows) && rows[j].ContentID == id; j++ {
			if rows[j].UpdatedAt.After(newest) {
				newest = rows[j].UpdatedAt
			}
		}
		i = j
		if !rc.owns(partial.PartitionOf(id, rc.cfg.Partitions)) {
			continue
		}
		if newest.Before(staleBefore) {
			stale = append(stale, id)
		} else {
			fresh = append(fresh, id)
		}
	}
	rand.Shuffle(len(fresh), func(i, j int) { fresh[i], fresh[j] = fresh[j], fresh[i] })
	sampled := fresh[:min(rc.cfg.Sample, len(fresh))]
	rep.Stale, rep.Sampled = len(stale), len(sampled)
	ids := append(stale, sampled...)
	// Unfinished counts continue first, a few per pass.
	var resumed []string
	for _, id := range rc.unfinished(maxResumesPerPass) {
		if !slices.Contains(ids, id) && rc.owns(partial.PartitionOf(id, rc.cfg.Partitions)) {
			resumed = append(resumed, id)
		}
	}
	rep.Resumed = len(resumed)
	ids = append(resumed, ids...)
	if len(ids) > 0 {
		rep.Items, err = rc.check(ctx, ids, RecountOptions{})
		if err != nil {
			return rep, err
		}
	}
	rc.cursor = next
	if next == "" {
		rc.stats.ScanCycles.Add(1)
	}
	rc.stats.Passes.Add(1)
	rc.stats.LastPassMillis.Store(time.Now().UnixMilli())
	rc.logUnrepaired(rep.Items)
	return rep, nil
}

// Recount checks and repairs the items ids now, as a pass does, and
// returns one result per distinct id in the order given. It takes at least
// Quiet when an item has drift. An id that no item can have fails the
// whole call with an *IDError before anything is read; so do more than
// MaxRecountIDs ids (store.ErrInvalid). Store failures are reported per
// item; the error is non-nil only for bad input, a failed read of the
// totals or an ended ctx.
func (rc *Recounter) Recount(ctx context.Context, ids []string, opts RecountOptions) ([]ItemResult, error) {
	if len(ids) == 0 || len(ids) > MaxRecountIDs {
		return nil, fmt.Errorf("cannot recount: %w: %d ids, want 1..%d", store.ErrInvalid, len(ids), MaxRecountIDs)
	}
	for i, id := range ids {
		if !engagement.ValidID(id) {
			return nil, fmt.Errorf("cannot recount: %w", &IDError{Index: i, ID: id})
		}
	}
	seen := make(map[string]bool, len(ids))
	distinct := make([]string, 0, len(ids))
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			distinct = append(distinct, id)
		}
	}
	res, err := rc.check(ctx, distinct, opts)
	rc.logUnrepaired(res)
	return res, err
}

// candidate is an item with drift, waiting for its repair.
type candidate struct {
	i       int                // index in the results
	rows    []engagement.Stats // the rows as read before the count began
	started time.Time          // when they were read
}

// check compares each item of ids with its reactions and repairs the
// drifted ones (see docs/recount.md for the rule).
func (rc *Recounter) check(ctx context.Context, ids []string, opts RecountOptions) ([]ItemResult, error) {
	results := make([]ItemResult, len(ids))
	var owned []string
	for i, id := range ids {
		p := partial.PartitionOf(id, rc.cfg.Partitions)
		results[i] = ItemResult{ContentID: id, Partition: p}
		if !rc.owns(p) {
			results[i].Status = ItemNotOwned
			results[i].Reason = fmt.Sprintf("partition %d is applied by another rollup instance; ask the one that owns it", p)
			continue
		}
		owned = append(owned, id)
	}
	if len(owned) == 0 {
		return results, nil
	}
	// 1. The rows, before any count: a delta applied after this read
	// changes them.
	readAt := time.Now()
	before, err := rc.st.ReadStats(ctx, owned)
	if err != nil {
		rc.stats.Errors.Add(1)
		return nil, fmt.Errorf("cannot read totals: %w", err)
	}
	// 2. The counts.
	var cands []candidate
	for i := range results {
		res := &results[i]
		if res.Status != "" {
			continue
		}
		rows, started := before[res.ContentID], readAt
		if p := rc.takeProgress(res.ContentID); p != nil {
			if sameRows(rows, p.Rows) {
				// The rows did not change since the count began: it
				// continues, against the rows it began with.
				rows, started = p.Rows, p.Started
				res.cursor = p.Cursor
				rc.stats.CountsResumed.Add(1)
			}
		}
		drift, err := rc.count(ctx, res, rows, started, opts)
		if err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("cannot recount: %w", ctx.Err())
			}
			rc.stats.Errors.Add(1)
			res.Status, res.Reason = ItemFailed, err.Error()
			continue
		}
		if drift {
			cands = append(cands, candidate{i: i, rows: rows, started: started})
		}
	}
	if len(cands) == 0 {
		return results, nil
	}
	countedAt := time.Now()
	from := countedAt
	for _, c := range cands {
		if c.started.Before(from) {
			from = c.started
		}
	}
	// 3. Wait until every delta of a change the counts saw has been
	// applied (the Quiet assumption)...
	if !backoff.Sleep(ctx, time.Until(countedAt.Add(rc.cfg.Quiet))) {
		return nil, fmt.Errorf("cannot recount: %w", ctx.Err())
	}
	// 4. ...then repair the items whose rows did not change meanwhile,
	// with no message applied between that check and the write.
	if err := rc.repair(ctx, results, cands, from); err != nil {
		return nil, err
	}
	return results, nil
}

// count fills res from the item's rows and reactions and reports whether
// the item has drift that a repair may fix. rows were read at started,
// before the count began (or continues from res.cursor). A count that does
// not finish within ItemTimeout, or that cannot read part of the index,
// keeps its cursor for the next check.
func (rc *Recounter) count(ctx context.Context, res *ItemResult, rows []engagement.Stats, started time.Time, opts RecountOptions) (bool, error) {
	cctx, cancel := context.WithTimeout(ctx, rc.cfg.ItemTimeout)
	defer cancel()
	var (
		tallies  []engagement.RegionTally
		complete bool
		err      error
		cursor   = res.cursor
	)
	for {
		var next string
		tallies, next, complete, err = rc.st.RecountReactions(cctx, res.ContentID, cursor, rc.cfg.CountBudget)
		if next != "" {
			cursor = next
		}
		if err == nil && next == "" {
			break
		}
		if err == nil && cctx.Err() == nil {
			continue
		}
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		switch {
		case err == nil || cctx.Err() != nil:
			res.Status = ItemDeferred
			res.Reason = fmt.Sprintf("the count did not finish within %v; it resumes at the next check of the item", rc.cfg.ItemTimeout)
		case errors.Is(err, store.ErrUnavailable):
			res.Status = ItemUnrepaired
			res.Reason = fmt.Sprintf("part of the item's index cannot be read, so the count stops there (never taking it as empty) and resumes at the next check: %v", err)
		default:
			return false, err
		}
		rc.stats.CountsUnfinished.Add(1)
		rc.keepProgress(res.ContentID, &countProgress{Cursor: cursor, Rows: rows, Started: started})
		return false, nil
	}
	if len(rows) == 0 && len(tallies) == 0 {
		res.Status = ItemUnknown
		res.Reason = "no totals and no reactions exist for this id"
		return false, nil
	}
	rc.stats.ItemsChecked.Add(1)
	if complete {
		rc.stats.CountComplete.Store(1)
	} else {
		rc.stats.CountComplete.Store(0)
	}
	plan, err := planRows(rows, tallies, complete, opts.AllowLower)
	if err != nil {
		return false, err
	}
	if v, ok := rc.st.(Verifier); ok && !complete && raises(plan) {
		// An index that may be stale must not raise a total: count the
		// rows the entries name instead (each cell a lower bound).
		rc.stats.Verifies.Add(1)
		vctx, cancel := context.WithTimeout(ctx, rc.cfg.ItemTimeout)
		tallies, err = v.VerifyReactions(vctx, res.ContentID)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return false, ctx.Err()
			}
			if errors.Is(err, store.ErrUnavailable) || vctx.Err() != nil {
				res.Status = ItemUnrepaired
				res.Reason = fmt.Sprintf("the count would raise a total, and verifying it by the reaction rows failed: %v", err)
				return false, nil
			}
			return false, err
		}
		if plan, err = planRows(rows, tallies, false, opts.AllowLower); err != nil {
			return false, err
		}
	}
	res.Rows = plan
	rc.stats.RowsChecked.Add(uint64(len(plan)))
	n, short := changed(plan), unrepaired(plan)
	switch {
	case n > 0:
		return true, nil
	case short > 0:
		res.Status = ItemUnrepaired
		res.Reason = unrepairedReason(short)
		rc.stats.RowsUnrepaired.Add(uint64(short))
	default:
		res.Status = ItemClean
	}
	return false, nil
}

// raises reports whether a plan raises a cell.
func raises(plan []RowResult) bool {
	for _, r := range plan {
		if r.After.Likes > r.Before.Likes || r.After.Dislikes > r.Before.Dislikes {
			return true
		}
	}
	return false
}

func unrepairedReason(rows int) string {
	return fmt.Sprintf("%d row(s) are above a count that may be short (the store's index is not known complete: a keyspace made before pending entries, until index-migrate -repair ran); left as they are, recount with allow_lower to lower them", rows)
}

// repair re-reads the candidates' rows under the apply lock and writes
// the repairs of those that did not change since they were counted.
func (rc *Recounter) repair(ctx context.Context, results []ItemResult, cands []candidate, from time.Time) error {
	ids := make([]string, len(cands))
	for k, c := range cands {
		ids[k] = results[c.i].ContentID
	}
	now := rc.ru.now()
	resume := rc.ru.pauseApplies()
	behind := rc.behind(from)
	current, err := rc.st.ReadStats(ctx, ids)
	var (
		writes []engagement.Stats
		byPart = map[uint32][]engagement.Stats{} // writes by partition, for the rows hook
		fixed  []int                             // indexes into cands
	)
	if err == nil && behind == "" {
		for k, c := range cands {
			if !rc.owns(results[c.i].Partition) || !sameRows(c.rows, current[ids[k]]) {
				continue
			}
			rows := repairRows(ids[k], c.rows, results[c.i].Rows, now)
			writes = append(writes, rows...)
			p := results[c.i].Partition
			byPart[p] = append(byPart[p], rows...)
			fixed = append(fixed, k)
		}
		if len(writes) > 0 {
			err = rc.st.WriteStats(ctx, writes)
		}
		if err == nil && len(writes) > 0 {
			// Before applies resume: a push of the repaired rows must not
			// follow (and undo in the agents' caches) a push of rows an
			// apply writes after the repair.
			rc.pushRows(byPart)
		}
	}
	resume()
	if err != nil {
		rc.stats.Errors.Add(1)
		if ctx.Err() != nil {
			return fmt.Errorf("cannot recount: %w", ctx.Err())
		}
		for _, c := range cands {
			results[c.i].Status = ItemFailed
			results[c.i].Reason = fmt.Sprintf("cannot write the repair (the next pass checks again): %v", err)
		}
		return nil
	}
	for k, c := range cands {
		res := &results[c.i]
		if !slices.Contains(fixed, k) {
			res.Status = ItemDeferred
			switch {
			case behind != "":
				res.Reason = behind
			case !rc.owns(res.Partition):
				res.Reason = fmt.Sprintf("partition %d moved to another rollup instance while the item was counted", res.Partition)
			default:
				res.Reason = "totals changed while the item was counted; a later pass checks again"
			}
			rc.stats.RowsDeferred.Add(uint64(changed(res.Rows)))
			rc.logger.Debug("recount deferred", "content_id", res.ContentID, "reason", res.Reason)
			continue
		}
		res.Status = ItemRepaired
		if short := unrepaired(res.Rows); short > 0 {
			res.Reason = unrepairedReason(short)
			rc.stats.RowsUnrepaired.Add(uint64(short))
		}
		for _, r := range res.Rows {
			if r.After == r.Before {
				continue
			}
			d := abs(r.After.Likes-r.Before.Likes) + abs(r.After.Dislikes-r.Before.Dislikes)
			res.Drift += d
			rc.stats.RowsRepaired.Add(1)
			if r.After.Likes > r.Before.Likes || r.After.Dislikes > r.Before.Dislikes {
				rc.stats.RowsRaised.Add(1)
			}
			if r.After.Likes < r.Before.Likes || r.After.Dislikes < r.Before.Dislikes {
				rc.stats.RowsLowered.Add(1)
			}
			rc.stats.DriftRepaired.Add(uint64(d))
			rc.logger.Info("recount repaired a total", "content_id", res.ContentID, "scope", r.Scope,
				"likes_before", r.Before.Likes, "likes_after", r.After.Likes,
				"dislikes_before", r.Before.Dislikes, "dislikes_after", r.After.Dislikes, "drift", d)
		}
	}
	return nil
}

// pushRows tells the rollup's rows hook (the agents' read caches, through
// rollupd's pusher) of repaired rows, partition by partition. Without it a
// warm item would be served at its drifted total until its cache entry
// expired.
func (rc *Recounter) pushRows(byPart map[uint32][]engagement.Stats) {
	if rc.ru.rowsHook == nil {
		return
	}
	for p, rows := range byPart {
		rc.ru.rowsHook(p, rows)
	}
}

// logUnrepaired logs, once per call, the items whose drift was left.
func (rc *Recounter) logUnrepaired(items []ItemResult) {
	var ids []string
	for _, it := range items {
		if unrepaired(it.Rows) > 0 && (it.Status == ItemUnrepaired || it.Status == ItemRepaired) {
			ids = append(ids, it.ContentID)
		}
	}
	if len(ids) > 0 {
		rc.logger.Warn("recount left totals above a count that may be short", "items", len(ids),
			"first", ids[:min(len(ids), 5)])
	}
}

// planRows compares an item's rows with its counted tallies and returns one
// RowResult per scope: every existing row, every counted region and the
// global row. A cell moves to its count unless the count is not complete,
// lowering is not allowed and the count is below the cell.
func planRows(rows []engagement.Stats, tallies []engagement.RegionTally, complete, allowLower bool) ([]RowResult, error) {
	byScope := make(map[string]*RowResult, len(rows)+len(tallies)+1)
	get := func(scope string) *RowResult {
		r, ok := byScope[scope]
		if !ok {
			r = &RowResult{Scope: scope}
			byScope[scope] = r
		}
		return r
	}
	for _, row := range rows {
		r := get(row.Scope)
		r.Exists = true
		r.Before = Tally{row.Likes, row.Dislikes}
	}
	g := get(engagement.GlobalScope)
	for _, t := range tallies {
		if !engagement.ValidRegion(t.Region) {
			return nil, fmt.Errorf("cannot recount: a reaction's region %q cannot name a totals row", t.Region)
		}
		r := get(t.Region)
		r.Counted = Tally{t.Likes, t.Dislikes}
		g.Counted.Likes += t.Likes
		g.Counted.Dislikes += t.Dislikes
	}
	out := make([]RowResult, 0, len(byScope))
	for _, r := range byScope {
		r.After = Tally{
			Likes:    target(r.Before.Likes, r.Counted.Likes, complete || allowLower),
			Dislikes: target(r.Before.Dislikes, r.Counted.Dislikes, complete || allowLower),
		}
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b RowResult) int { return cmp.Compare(a.Scope, b.Scope) })
	return out, nil
}

// target is the value a cell is repaired to: the count, unless the count
// may be short (not exact) and is below the cell.
func target(before, counted int64, exact bool) int64 {
	if counted < before && !exact {
		return before
	}
	return counted
}

// changed counts the rows a repair writes.
func changed(plan []RowResult) int {
	return countRows(plan, func(r RowResult) bool { return r.After != r.Before })
}

// unrepaired counts the rows left above their count.
func unrepaired(plan []RowResult) int {
	return countRows(plan, func(r RowResult) bool { return r.After != r.Counted })
}

func countRows(plan []RowResult, match func(RowResult) bool) int {
	n := 0
	for _, r := range plan {
		if match(r) {
			n++
		}
	}
	return n
}

// repairRows returns the rows that repair an item: each changed row with
// its new totals, keeping its other counters, stamped now and with the
// highest LastSeq of the item's rows. Every message up to that sequence
// was applied to the item before it was counted (messages apply in order,
// an item's rows together), so a redelivery of one of them must not touch
// the repaired row, and a later one must.
func repairRows(id string, rows []engagement.Stats, plan []RowResult, now time.Time) []engagement.Stats {
	var seq uint64
	byScope := make(map[string]engagement.Stats, len(rows))
	for _, row := range rows {
		seq = max(seq, row.LastSeq)
		byScope[row.Scope] = row
	}
	var out []engagement.Stats
	for _, r := range plan {
		if r.After == r.Before {
			continue
		}
		row, ok := byScope[r.Scope]
		if !ok {
			row = engagement.Stats{ContentID: id, Scope: r.Scope}
		}
		row.Counters = maps.Clone(row.Counters)
		row.Likes, row.Dislikes = r.After.Likes, r.After.Dislikes
		row.LastSeq = seq
		row.UpdatedAt = now
		out = append(out, row)
	}
	return out
}

// sameRows reports whether two reads of an item's rows are the same: no
// row appeared, vanished or changed.
func sameRows(a, b []engagement.Stats) bool {
	if len(a) != len(b) {
		return false
	}
	byScope := make(map[string]*engagement.Stats, len(a))
	for i := range a {
		byScope[a[i].Scope] = &a[i]
	}
	for i := range b {
		x, ok := byScope[b[i].Scope]
		y := &b[i]
		if !ok || x.LastSeq != y.LastSeq || !x.UpdatedAt.Equal(y.UpdatedAt) || x.Likes != y.Likes ||
			x.Dislikes != y.Dislikes || !maps.Equal(x.Counters, y.Counters) {
			return false
		}
	}
	return true
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// maxResumesPerPass bounds the unfinished counts one pass continues.
const maxResumesPerPass = 10

// countProgress is an unfinished count of one item: its cursor, and the
// item's rows as read before the count began (the repair compares the rows
// with these, however many checks the count takes).
type countProgress struct {
	Cursor  string             `json:"cursor"`
	Rows    []engagement.Stats `json:"rows"`
	Started time.Time          `json:"started"`
}

// unfinished returns up to n items with an unfinished count, oldest first.
func (rc *Recounter) unfinished(n int) []string {
	rc.progMu.Lock()
	defer rc.progMu.Unlock()
	ids := slices.Collect(maps.Keys(rc.progress))
	slices.SortFunc(ids, func(a, b string) int { return rc.progress[a].Started.Compare(rc.progress[b].Started) })
	return ids[:min(n, len(ids))]
}

// takeProgress removes and returns the unfinished count of id, if any.
func (rc *Recounter) takeProgress(id string) *countProgress {
	rc.progMu.Lock()
	defer rc.progMu.Unlock()
	p := rc.progress[id]
	if p != nil {
		delete(rc.progress, id)
		rc.saveProgressLocked()
	}
	return p
}

// keepProgress records the unfinished count of id. Beyond MaxInProgress the
// oldest is dropped (its item is counted from the start next time).
func (rc *Recounter) keepProgress(id string, p *countProgress) {
	rc.progMu.Lock()
	defer rc.progMu.Unlock()
	rc.progress[id] = p
	for len(rc.progress) > MaxInProgress {
		var oldest string
		for k, v := range rc.progress {
			if oldest == "" || v.Started.Before(rc.progress[oldest].Started) {
				oldest = k
			}
		}
		delete(rc.progress, oldest)
	}
	rc.saveProgressLocked()
}

// saveProgressLocked writes the unfinished counts to ProgressFile, if set:
// to a temporary file first, renamed over the old one, so a crash leaves
// the old or the new file. A failure is logged: progress is an
// optimisation, never needed for a correct repair.
func (rc *Recounter) saveProgressLocked() {
	rc.stats.InProgress.Store(int64(len(rc.progress)))
	if rc.cfg.ProgressFile == "" {
		return
	}
	b, err := json.Marshal(rc.progress)
	if err == nil {
		tmp := rc.cfg.ProgressFile + ".tmp"
		if err = os.WriteFile(tmp, b, 0o600); err == nil {
			err = os.Rename(tmp, rc.cfg.ProgressFile)
		}
	}
	if err != nil {
		rc.logger.Warn("cannot save the recount's unfinished counts", "file", rc.cfg.ProgressFile, "err", err)
	}
}

// loadProgress reads ProgressFile, if set and present. A file that cannot
// be parsed is logged and ignored (the counts start over).
func (rc *Recounter) loadProgress() error {
	if rc.cfg.ProgressFile == "" {
		return nil
	}
	b, err := os.ReadFile(rc.cfg.ProgressFile)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cannot read progress file: %w", err)
	}
	m := map[string]*countProgress{}
	if err := json.Unmarshal(b, &m); err != nil {
		rc.logger.Warn("ignoring an unreadable recount progress file", "file", rc.cfg.ProgressFile, "err", err)
		return nil
	}
	for id, p := range m {
		if engagement.ValidID(id) && p != nil && p.Cursor != "" {
			rc.progress[id] = p
		}
	}
	rc.stats.InProgress.Store(int64(len(rc.progress)))
	return nil
}
