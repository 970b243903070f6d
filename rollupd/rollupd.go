package rollupd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/edgecount/edgecount/config"
	"github.com/edgecount/edgecount/metrics"
	"github.com/edgecount/edgecount/natsjs"
	"github.com/edgecount/edgecount/rollup"
)

// Store is what a rollup process needs of its store.
type Store interface {
	rollup.RecountStore
	rollup.TrendingStore
}

// Config configures a Process.
type Config struct {
	// Partitions lists the partitions this process consumes alone, with a
	// plain natsjs.Consumer: it is their one writer. Empty: the process
	// shares every partition of the stream with the other members of
	// Group (natsjs.GroupConsumer).
	Partitions []uint32
	// Group configures the consumer: Group.Consumer (stream, durable
	// prefix, ack wait, retries, batch, logger) either kind, the rest only
	// a shared one. OnRelease must be nil: the process sets its own.
	// Group.Consumer.Batch 0 means DefaultBatch.
	Group natsjs.GroupConfig
	// Trending configures the rollup's trending lists.
	Trending rollup.TrendingConfig
	// Recount configures the recount job. Owned and Owns are set by New:
	// the process repairs what it consumes.
	Recount rollup.RecountConfig
	// RowsPrefix is the subject prefix the rollup pushes the rows it writes
	// under, for the agents' read caches (empty: natsjs.DefaultRowsPrefix).
	RowsPrefix string
	// NoPush turns the row pushes off.
	NoPush bool
	// Logger receives the parts' logs; nil discards them.
	Logger *slog.Logger
}

// ConfigFrom is the configuration of a rollup process from the process's
// configuration cfg: it consumes partitions alone, or shares every
// partition with the group when partitions is empty.
func ConfigFrom(cfg config.Config, partitions []uint32, logger *slog.Logger) Config {
	return Config{
		Partitions: partitions,
		Group:      cfg.GroupConfig(logger),
		Trending:   cfg.RollupTrendingConfig(),
		Recount:    cfg.RecountConfig(),
		Logger:     logger,
	}
}

// DefaultBatch is how many consecutive messages of a partition the rollup
// coalesces into one write of each row at most (what the broker has ready;
// see natsjs.ConsumerConfig.Batch and rollup.HandleBatch).
const DefaultBatch = 64

// writeTimeout bounds the trending write of a partition handed back and
// the final write at stop.
const (
	releaseWriteTimeout = 5 * time.Second
	finalWriteTimeout   = 10 * time.Second
)

// Process is a rollup process: see the package documentation.
type Process struct {
	log      *slog.Logger
	ru       *rollup.Rollup
	rc       *rollup.Recounter
	parts    []uint32              // fixed partitions; nil when shared
	consumer *natsjs.Consumer      // fixed partitions
	group    *natsjs.GroupConsumer // shared partitions
	pusher   *natsjs.RowPusher     // nil: NoPush
}

// New builds a process that consumes through bus and writes to st.
func New(bus *natsjs.Client, st Store, cfg Config) (*Process, error) {
	if cfg.Group.OnRelease != nil {
		return nil, errors.New("cannot create rollup process: Group.OnRelease is set by the process")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.Group.Consumer.Batch == 0 {
		cfg.Group.Consumer.Batch = DefaultBatch
	}
	p := &Process{log: log, ru: rollup.New(st, nil, log)}
	if !cfg.NoPush {
		p.pusher = bus.RowPusher(cfg.RowsPrefix, log)
		p.ru.SetRowsHook(p.pusher.Push)
	}
	if err := p.ru.EnableTrending(cfg.Trending, st); err != nil {
		return nil, fmt.Errorf("cannot create rollup process: %w", err)
	}
	rcfg := cfg.Recount
	rcfg.Owned, rcfg.Owns = nil, nil
	if len(cfg.Partitions) > 0 {
		p.parts = slices.Clone(cfg.Partitions)
		p.consumer = bus.Consumer(cfg.Group.Consumer)
		rcfg.Owned = p.parts
	} else {
		// Shared partitions: each is pinned to one rollup at a time. The
		// recount repairs the partitions the membership assigns to this
		// rollup (pinned or idle; a repair also needs the item's rows
		// unchanged for the quiet period, which a handover in progress
		// breaks), and the trending state of a partition that moves away
		// is dropped.
		gcfg := cfg.Group
		gcfg.OnRelease = p.released
		p.group = bus.GroupConsumer(gcfg)
		rcfg.Owns = func(part uint32) bool { return slices.Contains(p.group.Assigned(), part) }
	}
	var err error
	if p.rc, err = rollup.NewRecounter(p.ru, st, rcfg, log); err != nil {
		return nil, fmt.Errorf("cannot create rollup process: %w", err)
	}
	return p, nil
}

// released is the group's OnRelease: a partition handed back still has this
// process as its writer during the call, so its last lists are stored; in
// every case what the rollup keeps of the partition in memory is dropped,
// because another rollup may apply its messages before it comes back (also
// when it comes back under a new pin, as after a broker restart).
func (p *Process) released(part uint32, handedBack bool) {
	if handedBack {
		ctx, cancel := context.WithTimeout(context.Background(), releaseWriteTimeout)
		if err := p.ru.WriteTrendingPartition(ctx, part); err != nil {
			p.log.Warn("cannot write the last trending lists of a partition handed back", "partition", part, "err", err)
		}
		cancel()
	}
	// Marks and trending state: the partition may come back later, after
	// another rollup moved its marks on.
	p.ru.ForgetPartition(part)
}

// handle applies a batch of one partition's messages, coalesced.
func (p *Process) handle(ctx context.Context, msgs []natsjs.BatchMsg) error {
	batch := make([]rollup.Message, len(msgs))
	for i, m := range msgs {
		batch[i] = rollup.Message{Seq: m.Seq, Data: m.Data}
	}
	if err := p.ru.HandleBatch(ctx, batch); err != nil {
		return err
	}
	for i := range batch {
		msgs[i].Err = batch[i].Err
	}
	return nil
}

// owned lists the partitions this process writes now: its fixed ones, or
// those pinned to it in the group.
func (p *Process) owned() []uint32 {
	if p.group != nil {
		return p.group.Pinned()
	}
	return p.parts
}

// Rollup returns the rollup.
func (p *Process) Rollup() *rollup.Rollup { return p.ru }

// Recounter returns the recount job (for the admin routes).
func (p *Process) Recounter() *rollup.Recounter { return p.rc }

// Group returns the group member, or nil when the process consumes fixed
// partitions.
func (p *Process) Group() *natsjs.GroupConsumer { return p.group }

// Partitions returns the fixed partitions, or nil when they are shared.
func (p *Process) Partitions() []uint32 { return slices.Clone(p.parts) }

// RegisterMetrics exports the rollup's, its trending's, the consumer's and
// the recount job's metrics on reg.
func (p *Process) RegisterMetrics(reg prometheus.Registerer) error {
	errs := []error{metrics.RegisterRollup(reg, p.ru), metrics.RegisterRollupTrending(reg, p.ru), metrics.RegisterRecount(reg, p.rc)}
	if p.group != nil {
		errs = append(errs, metrics.RegisterGroupConsumer(reg, p.group))
	} else {
		errs = append(errs, metrics.RegisterConsumer(reg, p.consumer))
	}
	errs = append(errs, p.registerCoalescing(reg))
	return errors.Join(errs...)
}

// Run consumes and applies messages, and runs the recount job and the
// periodic trending writer beside, until ctx is done or the consumer
// fails (which stops the others). A message being applied when ctx ends is
// finished or left unacknowledged for redelivery. With fixed partitions it
// then writes the trending lists of what was applied since the last
// periodic write (a group member writes each partition's as it hands the
// partition back); a failure of that write is logged. Run returns after
// every goroutine it started has exited: nil after ctx ended, else the
// consumer's error.
func (p *Process) Run(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		var err error
		if p.group != nil {
			err = p.group.RunBatch(gctx, p.handle)
		} else {
			err = p.consumer.RunBatch(gctx, p.parts, p.handle)
		}
		if err != nil {
			return fmt.Errorf("rollup consumer: %w", err)
		}
		return nil
	})
	g.Go(func() error { return p.rc.Run(gctx) })
	if p.pusher != nil {
		// The agents' read caches learn from the heartbeats that no push
		// of an owned partition was lost (docs/read-cache.md).
		g.Go(func() error {
			p.pusher.RunHeartbeats(gctx, 0, p.owned)
			return nil
		})
	}
	g.Go(func() error {
		p.ru.RunTrending(gctx)
		return nil
	})
	err := g.Wait()
	if p.group == nil {
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finalWriteTimeout)
		defer cancel()
		if err := p.ru.WriteTrending(wctx); err != nil {
			// Not a failed stop: the next start rebuilds the lists
			// from the agents' (see the rollup package, Restart).
			p.log.Warn("cannot write the last trending lists", "err", err)
		}
	}
	p.ru.WaitTrendingWrites()
	return err
}

// WaitApplied waits until every message published to the partitions this
// process holds (fixed, or pinned to it in a group) has been applied, or
// ctx ends.
func (p *Process) WaitApplied(ctx context.Context) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		var (
			pending uint64
			err     error
		)
		if p.group != nil {
			pending, err = p.group.Pending(ctx, p.group.Pinned())
		} else {
			pending, err = p.consumer.Pending(ctx, p.parts)
		}
		if err == nil && pending == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("rollup did not apply %d pending messages before stopping (they are kept by the broker and applied at next start): %w", pending, ctx.Err())
		case <-t.C:
		}
	}
}
