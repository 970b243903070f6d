package natsjs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/bits"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"

	"github.com/edgecount/edgecount/backoff"
	"github.com/edgecount/edgecount/internal/periodic"
)

// Handler applies one message. streamSeq is the message's stream sequence:
// it grows with every message of the stream and stays the same when the
// message is delivered again, so a handler that records the last sequence it
// applied can skip a redelivery. A non-nil error is retried (with backoff,
// same message, forever) unless it is permanent (see IsPermanent). The handler
// runs on its partition's goroutine, one message at a time, and should
// return promptly when ctx is done. It may keep data.
type Handler func(ctx context.Context, streamSeq uint64, data []byte) error

// BatchMsg is one message of a batch handed to a BatchHandler: its stream
// sequence and body, and Err, which the handler sets to a permanent error
// (see IsPermanent) for a message that can never be applied.
type BatchMsg struct {
	Seq  uint64
	Data []byte
	Err  error
}

// BatchHandler applies consecutive messages of one partition at once, in
// stream order: every message the partition's consumer has delivered and
// not yet had acknowledged (ConsumerConfig.Batch at most). A nil return
// acknowledges every message, except those whose Err the handler set to a
// permanent error: they are terminated. A non-nil error acknowledges none
// and the same batch, possibly with more messages after it, is handed
// again after a backoff (a permanent one terminates every message). It
// runs on its partition's goroutine, one batch at a time, may keep data,
// and should return promptly when ctx is done.
type BatchHandler func(ctx context.Context, msgs []BatchMsg) error

// single applies a batch one message at a time with h.
func single(h Handler) BatchHandler {
	return func(ctx context.Context, msgs []BatchMsg) error {
		for i := range msgs {
			msgs[i].Err = nil
			if err := h(ctx, msgs[i].Seq, msgs[i].Data); err != nil {
				if !IsPermanent(err) {
					return err
				}
				msgs[i].Err = err
			}
		}
		return nil
	}
}

// Permanent marks a handler error as permanent: the message can never be
// applied (a poison message). The consumer terminates it — the broker never
// delivers it again — counts and logs it, and goes on with the next one.
// Permanent(nil) is nil. An error type of the handler's own can say the
// same by implementing interface{ Permanent() bool } (see IsPermanent).
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

// IsPermanent reports whether err, or any error it wraps (errors.Unwrap,
// errors.Join), is permanent: marked with Permanent, or implementing
// interface{ Permanent() bool } with Permanent reporting true.
func IsPermanent(err error) bool {
	if p, ok := err.(interface{ Permanent() bool }); ok && p.Permanent() {
		return true
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		return IsPermanent(u.Unwrap())
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if IsPermanent(e) {
				return true
			}
		}
	}
	return false
}

type permanentError struct{ err error }

func (e *permanentError) Error() string   { return e.err.Error() }
func (e *permanentError) Unwrap() error   { return e.err }
func (e *permanentError) Permanent() bool { return true }

// ConsumerConfig configures a Consumer. Zero fields take the values of
// DefaultConsumerConfig.
type ConsumerConfig struct {
	// Stream is the stream to consume (default DefaultStreamConfig()).
	Stream StreamConfig
	// Durable prefixes the durable consumer names: partition p is consumed
	// by <Durable>-p<p> (default "rollup"). Every rollup instance uses the
	// same prefix; ownership of a partition moves by running it elsewhere.
	Durable string
	// AckWait is how long the broker waits for an ack before it delivers the
	// message again (default 30s). A message being handled or retried is
	// kept alive with a progress signal every AckWait/3.
	AckWait time.Duration
	// RetryMin and RetryMax bound the exponential backoff between attempts
	// of a failing handler, and between failing fetches (default 50ms..5s).
	RetryMin, RetryMax time.Duration
	// Batch is the most messages of a partition handed to a handler at
	// once, and the durable consumers' MaxAckPending (0 means 1: one
	// message at a time). A batch holds what the broker has ready, up to
	// Batch: when the first message says more wait behind it, the
	// consumer pulls them, waiting at most BatchWait. At most 1000. Every consumer of a durable consumer must
	// use the same Batch.
	Batch int
	// BatchWait is how long the consumer waits for more messages after
	// the first of a batch (default 2ms; only with Batch above 1); for
	// messages the broker says are already pending behind the first, it
	// waits up to 100ms (they arrive at once unless the broker is slow).
	BatchWait time.Duration
	// Logger receives warnings (retries, poison messages); nil discards.
	Logger *slog.Logger
}

// DefaultConsumerConfig returns the default consumer configuration.
func DefaultConsumerConfig() ConsumerConfig {
	return ConsumerConfig{
		Stream:    DefaultStreamConfig(),
		Durable:   "rollup",
		AckWait:   30 * time.Second,
		RetryMin:  50 * time.Millisecond,
		RetryMax:  5 * time.Second,
		BatchWait: 2 * time.Millisecond,
	}
}

func (c ConsumerConfig) withDefaults() ConsumerConfig {
	return withDefaults(c, DefaultConsumerConfig())
}

// Validate reports every problem with c (after defaults are applied).
func (c ConsumerConfig) Validate() error {
	c = c.withDefaults()
	var errs []error
	if err := c.Stream.Validate(); err != nil {
		errs = append(errs, err)
	}
	if !validName(c.Durable + "-p0") {
		errs = append(errs, fmt.Errorf("durable prefix %q is not a valid name", c.Durable))
	}
	if c.AckWait < 100*time.Millisecond {
		errs = append(errs, fmt.Errorf("ack wait %s is shorter than 100ms", c.AckWait))
	}
	if c.Batch < 0 || c.Batch > maxBatch {
		errs = append(errs, fmt.Errorf("batch %d is not in 0..%d", c.Batch, maxBatch))
	}
	if c.BatchWait < 0 || c.BatchWait >= pullWait {
		errs = append(errs, fmt.Errorf("batch wait %s is not in [0, %s)", c.BatchWait, pullWait))
	}
	if c.RetryMin <= 0 || c.RetryMax < c.RetryMin {
		errs = append(errs, fmt.Errorf("retry backoff %s..%s is not a range", c.RetryMin, c.RetryMax))
	}
	return errors.Join(errs...)
}

// maxBatch bounds ConsumerConfig.Batch.
const maxBatch = 1000

// fillWait bounds the wait for the messages the broker said were pending
// behind the first of a batch.
const fillWait = 100 * time.Millisecond

// batch is the most messages handed to the handler at once.
func (c ConsumerConfig) batch() int { return max(c.Batch, 1) }

// ConsumerStats are a consumer's counters since it was created.
type ConsumerStats struct {
	// Applied counts messages the handler accepted (a redelivery the
	// handler skipped included).
	Applied uint64
	// Retries counts failed handler attempts that were retried.
	Retries uint64
	// Terminated counts poison messages (Permanent errors), never retried.
	Terminated uint64
	// Redelivered counts deliveries of a message delivered before (after a
	// crash, a lost ack or a stop while retrying).
	Redelivered uint64
	// AckErrors counts applied messages whose ack was not confirmed; the
	// broker delivers them again.
	AckErrors uint64
	// FetchErrors counts failed fetches (other than "no message yet").
	FetchErrors uint64
	// Batches counts batches handed to the handler and acknowledged
	// (Batch above 1).
	Batches uint64
	// HeldBack counts batches a consumer taking over a partition held
	// back until the messages its predecessor had not acknowledged came
	// again (Batch above 1).
	HeldBack uint64
	// Gaps counts jumps of a partition's consumer sequence: deliveries
	// this consumer never received (lost in transit when a broker died or
	// the consumer's leader moved, or taken by another member). The batch
	// after a gap is held back until they come again (Batch above 1).
	Gaps uint64
	// ConsumersRecreated counts durable consumers created again after the
	// broker lost them (a restart without its store, or a deletion).
	ConsumersRecreated uint64
	// StreamsRecreated counts creations of the partial-sum stream after
	// the broker lost it.
	StreamsRecreated uint64
}

// Consumer consumes partitions of the stream in order, one durable pull
// consumer per partition. It is safe for concurrent use.
type Consumer struct {
	js  jetstream.JetStream
	cfg ConsumerConfig
	log *slog.Logger
	// pinned, when set, makes the durable consumers priority-group
	// consumers with the pinned-client policy (see GroupConsumer).
	pinned *pinnedPolicy

	applied, retries, terminated, redelivered, ackErrors, fetchErrors atomic.Uint64
	batches, heldBack, gaps                                           atomic.Uint64
	consumersRecreated, streamsRecreated                              atomic.Uint64
	// seen is the highest stream sequence delivered: a stream created
	// again starts above it.
	seen atomic.Uint64
	// fenced counts messages given up because their lease ran out (only a
	// GroupConsumer's keeper fences; see GroupStats.Fenced).
	fenced atomic.Uint64
}

// NewConsumer returns a consumer; zero fields of cfg take their defaults.
// Run validates the configuration.
func NewConsumer(js jetstream.JetStream, cfg ConsumerConfig) *Consumer {
	cfg = cfg.withDefaults()
	l := cfg.Logger
	if l == nil {
		l = slog.New(slog.DiscardHandler)
	}
	return &Consumer{js: js, cfg: cfg, log: l.With("component", "natsjs-consumer", "stream", cfg.Stream.Name)}
}

// Name returns the durable consumer name of a partition.
func (c *Consumer) Name(partition uint32) string {
	return c.cfg.Durable + "-p" + strconv.FormatUint(uint64(partition), 10)
}

// Stats returns a snapshot of the counters.
func (c *Consumer) Stats() ConsumerStats {
	return ConsumerStats{
		Applied:     c.applied.Load(),
		Retries:     c.retries.Load(),
		Terminated:  c.terminated.Load(),
		Redelivered: c.redelivered.Load(),
		AckErrors:   c.ackErrors.Load(),
		FetchErrors: c.fetchErrors.Load(),
		Batches:     c.batches.Load(),
		HeldBack:    c.heldBack.Load(),
		Gaps:        c.gaps.Load(),

		ConsumersRecreated: c.consumersRecreated.Load(),
		StreamsRecreated:   c.streamsRecreated.Load(),
	}
}

// Run creates (or updates) the durable consumers of the partitions and
// feeds their messages to h, one goroutine per partition, until ctx is done.
// It returns after every goroutine it started has exited: nil when ctx was
// cancelled, an error when the consumers cannot be set up or the connection
// was closed. Transient broker errors are retried with backoff and logged.
func (c *Consumer) Run(ctx context.Context, partitions []uint32, h Handler) error {
	if h == nil {
		return errors.New("cannot run consumer: handler is nil")
	}
	return c.RunBatch(ctx, partitions, single(h))
}

// RunBatch is Run with a handler of batches (see ConsumerConfig.Batch).
func (c *Consumer) RunBatch(ctx context.Context, partitions []uint32, h BatchHandler) error {
	if err := c.cfg.Validate(); err != nil {
		return fmt.Errorf("cannot run consumer: %w", err)
	}
	if h == nil {
		return errors.New("cannot run consumer: handler is nil")
	}
	if err := c.checkPartitions(partitions); err != nil {
		return fmt.Errorf("cannot run consumer: %w", err)
	}
	if len(partitions) == 0 {
		<-ctx.Done() // nothing owned now; stay up like any other Run
		return nil
	}
	cons := make([]jetstream.Consumer, len(partitions))
	for i, p := range partitions {
		err := c.setUp(ctx, "durable consumer "+c.Name(p), func(ctx context.Context) (err error) {
			cons[i], err = c.ensure(ctx, p)
			return err
		})
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	for i, p := range partitions {
		g.Go(func() error { return c.runPartition(gctx, p, cons[i], h) })
	}
	err := g.Wait()
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// setUp runs f, one step of setting a Run up, until it succeeds. A broker
// that is down, restarting or electing a leader only delays the step: it
// is retried with backoff, logged once per episode. A refusal by the
// broker (a missing stream, a bad configuration: a 4xx answer) or a
// closed connection ends it with f's error, as does the end of ctx.
func (c *Consumer) setUp(ctx context.Context, what string, f func(context.Context) error) error {
	var failing episode
	for {
		err := f(ctx)
		if err == nil {
			if n, d, ended := failing.end(); ended {
				c.log.Info("set up after the broker came back", "what", what, "failures", n, "after", d.Round(time.Millisecond))
			}
			return nil
		}
		if ctx.Err() != nil || errors.Is(err, nats.ErrConnectionClosed) || refused(err) {
			return err
		}
		n, warn := failing.fail()
		if warn {
			c.log.Warn("cannot set up, retrying", "what", what, "attempt", n, "err", err)
		}
		if !backoff.Sleep(ctx, backoff.Delay(c.cfg.RetryMin, c.cfg.RetryMax, n)) {
			return err
		}
	}
}

// refused reports whether the broker answered err with a 4xx: the request
// itself is wrong (or names what does not exist), and repeating it cannot
// help.
func refused(err error) bool {
	var jsErr jetstream.JetStreamError
	if !errors.As(err, &jsErr) || jsErr.APIError() == nil {
		return false
	}
	code := jsErr.APIError().Code
	return code >= 400 && code < 500
}

func (c *Consumer) checkPartitions(partitions []uint32) error {
	sorted := slices.Clone(partitions)
	slices.Sort(sorted)
	for i, p := range sorted {
		if p >= uint32(c.cfg.Stream.Partitions) {
			return fmt.Errorf("partition %d of %d: %w", p, c.cfg.Stream.Partitions, ErrBadPartition)
		}
		if i > 0 && sorted[i-1] == p {
			return fmt.Errorf("partition %d listed twice", p)
		}
	}
	return nil
}

// ensure creates or updates the durable consumer of a partition.
func (c *Consumer) ensure(ctx context.Context, p uint32) (jetstream.Consumer, error) {
	name := c.Name(p)
	cfg := jetstream.ConsumerConfig{
		Durable:       name,
		Description:   "edgecount rollup, partition " + strconv.FormatUint(uint64(p), 10),
		FilterSubject: c.cfg.Stream.Subject(p),
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       c.cfg.AckWait,
		MaxDeliver:    -1,
		// Strict order: with 1, k+1 is not delivered before k is acked;
		// with more, a batch is applied only once the consumer holds
		// every message delivered and not acknowledged (see handle).
		MaxAckPending: c.cfg.batch(),
		ReplayPolicy:  jetstream.ReplayInstantPolicy,
	}
	if c.pinned != nil {
		cfg.PriorityPolicy = jetstream.PriorityPolicyPinned
		cfg.PriorityGroups = []string{c.pinned.group}
		cfg.PinnedTTL = c.pinned.ttl
	}
	cons, err := c.js.CreateOrUpdateConsumer(ctx, c.cfg.Stream.Name, cfg)
	if err != nil {
		return nil, fmt.Errorf("cannot create consumer %s on stream %s: %w", name, c.cfg.Stream.Name, err)
	}
	return cons, nil
}

// runPartition fetches and handles one partition's messages until ctx is
// done. It returns an error only when the connection was closed.
func (c *Consumer) runPartition(ctx context.Context, p uint32, cons jetstream.Consumer, h BatchHandler) error {
	log := c.log.With("partition", p, "consumer", c.Name(p))
	keep := &keepAlive{log: log}
	defer background(ctx, func(ctx context.Context) { periodic.Run(ctx, c.cfg.AckWait/3, keep.signal) })()

	pl := partLoop{log: log, keeper: keep, cons: cons, h: h}
	failures, ok := 0, false
	for ctx.Err() == nil {
		msg, err := c.next(ctx, pl.cons)
		switch {
		case err == nil:
			failures = fetchRecovered(log, failures)
			c.handle(ctx, &pl, msg, time.Time{})
			continue
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, nats.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
			// No message within the pull's expiry. After failures this
			// is a pull the broker answered, unless the connection is
			// still down (the request waits in its buffer).
			if failures > 0 && c.js.Conn().IsConnected() {
				failures = fetchRecovered(log, failures)
			}
			continue
		case errors.Is(err, nats.ErrConnectionClosed):
			return fmt.Errorf("cannot fetch from %s: %w", c.Name(p), err)
		}
		failures++
		if pl.cons, ok = c.fetchFailed(ctx, log, p, pl.cons, err, failures); !ok {
			return nil
		}
	}
	return nil
}

// fetchFailed counts and logs a failed fetch (the failures-th in a row),
// waits out its backoff and, when the durable consumer is gone, creates it
// again (and the stream first, if the broker lost that too). It returns the
// consumer to pull from next, and false when ctx ended the wait.
func (c *Consumer) fetchFailed(ctx context.Context, log *slog.Logger, p uint32, cons jetstream.Consumer, err error, failures int) (jetstream.Consumer, bool) {
	c.fetchErrors.Add(1)
	if logAttempt(failures) {
		log.Warn("cannot fetch message, retrying", "attempt", failures, "err", err)
	}
	if !backoff.Sleep(ctx, backoff.Delay(c.cfg.RetryMin, c.cfg.RetryMax, failures)) {
		return cons, false
	}
	if errors.Is(err, jetstream.ErrConsumerDeleted) || errors.Is(err, jetstream.ErrConsumerNotFound) ||
		errors.Is(err, nats.ErrNoResponders) || streamGone(err) {
		// The durable consumer was deleted (no responders: nothing
		// serves its pull requests, or JetStream is restarting). A
		// new one resumes at the oldest message still in the work
		// queue, so nothing is skipped.
		if nc, err := c.recreate(ctx, log, p); err == nil {
			cons = nc
		} else if ctx.Err() == nil && logAttempt(failures) {
			log.Warn("cannot re-create consumer", "err", err)
		}
	}
	return cons, true
}

// recreate creates the durable consumer of p again, and first the stream
// if the broker lost it (starting above every sequence this consumer saw).
// A consumer that still exists is bound again as it is, without a change.
func (c *Consumer) recreate(ctx context.Context, log *slog.Logger, p uint32) (jetstream.Consumer, error) {
	cons, err := c.js.Consumer(ctx, c.cfg.Stream.Name, c.Name(p))
	if err == nil {
		return cons, nil
	}
	if streamGone(err) {
		created, err := recreateStream(ctx, c.js, c.cfg.Stream, c.seen.Load())
		if err != nil {
			return nil, err
		}
		if created {
			c.streamsRecreated.Add(1)
			log.Warn("partial-sum stream created again after the broker lost it; messages it held and no one had consumed are lost with the broker's state")
		}
	} else if !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil, fmt.Errorf("cannot look up consumer %s: %w", c.Name(p), err)
	}
	if cons, err = c.ensure(ctx, p); err != nil {
		return nil, err
	}
	c.consumersRecreated.Add(1)
	log.Info("durable consumer created again")
	return cons, nil
}

// raise sets v to x if x is larger.
func raise(v *atomic.Uint64, x uint64) {
	for old := v.Load(); x > old && !v.CompareAndSwap(old, x); old = v.Load() {
	}
}

// fetchRecovered logs the end of a run of failed fetches and returns the
// new count, 0.
func fetchRecovered(log *slog.Logger, failures int) int {
	if failures > 0 {
		log.Info("fetching again", "failures", failures)
	}
	return 0
}

// Pull requests wait up to pullWait for a message; the server sends a
// heartbeat every pullHeartbeat while one waits, so a pull lost with a
// broker restart or a reconnect is noticed within 2·pullHeartbeat.
const (
	pullWait      = 10 * time.Second
	pullHeartbeat = time.Second
)

// next waits for the partition's next message.
func (c *Consumer) next(ctx context.Context, cons jetstream.Consumer) (jetstream.Msg, error) {
	ctx, cancel := context.WithTimeout(ctx, pullWait)
	defer cancel()
	return cons.Next(jetstream.FetchContext(ctx), jetstream.FetchHeartbeat(pullHeartbeat))
}

// sequence returns msg's metadata and counts a redelivery. A message
// without metadata can never be applied: it is terminated and ok is false.
func (c *Consumer) sequence(log *slog.Logger, msg jetstream.Msg) (meta *jetstream.MsgMetadata, ok bool) {
	meta, err := msg.Metadata()
	if err != nil {
		c.terminated.Add(1)
		log.Error("cannot read message metadata, terminating message", "subject", msg.Subject(), "err", err)
		if err := msg.TermWithReason("bad metadata"); err != nil {
			log.Warn("cannot terminate message", "err", err)
		}
		return nil, false
	}
	if meta.NumDelivered > 1 {
		c.redelivered.Add(1)
	}
	raise(&c.seen, meta.Sequence.Stream)
	return meta, true
}

// A keeper keeps the messages being handled from being delivered
// elsewhere while the handler works on them: the plain consumer's progress
// signals (keepAlive), or a group member's lease, which also fences the
// member off the messages once another member may have them.
type keeper interface {
	// start keeps msgs, the first of them pulled with a request sent at
	// sent.
	start(msgs []jetstream.Msg, sent time.Time)
	// add keeps msgs too, pulled after those given to start with a
	// request sent at sent.
	add(msgs []jetstream.Msg, sent time.Time)
	// stop ends keeping the messages: no progress signal is sent for them
	// after stop returns, except one already on its way. It may be called
	// more than once.
	stop()
	// attempt returns the context of the next handler attempt, or false
	// when the member may no longer act on the messages.
	attempt(ctx context.Context) (context.Context, context.CancelFunc, bool)
	// holds reports whether the member still holds the messages after an
	// attempt returned.
	holds() bool
}

// partState is what a partition's goroutine knows between batches.
type partState struct {
	// whole: every message of the partition delivered and not
	// acknowledged was in the last batch handled, so the next one, pulled
	// by the same goroutine, follows it. False at start, after a change of
	// pin, after a batch was given up and after a gap in the consumer
	// sequence (with Batch above 1).
	whole bool
	// next is the consumer sequence the next delivery has when every
	// delivery of the partition's consumer reached this goroutine (0:
	// unknown). The broker numbers each delivery, a redelivery included,
	// one above the last; a message that reaches this goroutine under
	// another number means deliveries it never received: the broker sent
	// them and they were lost (a broker that died with them in flight, a
	// consumer leader that moved, a pull the client had given up), or
	// another member took them. They are pending at the broker, which
	// delivers them again after AckWait — after later messages this
	// goroutine may already have received. Applying those first would set
	// the rollup's high-water marks past the lost ones, and drop them as
	// copies when they came (docs/delivery.md, "Gaps").
	next uint64
}

// follow checks that a delivery with metadata meta follows the last one
// this goroutine received, and records it as the last. A gap clears
// whole, is counted and logged, and is reported.
func (c *Consumer) follow(log *slog.Logger, ps *partState, meta *jetstream.MsgMetadata) bool {
	dseq := meta.Sequence.Consumer
	gap := ps.next != 0 && dseq != ps.next
	if gap {
		c.gaps.Add(1)
		log.Info("deliveries of the partition did not reach this consumer; holding the next batch back until they come again",
			"want_consumer_seq", ps.next, "got_consumer_seq", dseq, "stream_seq", meta.Sequence.Stream,
			"delivered", meta.NumDelivered, "pending", meta.NumPending, "was_whole", ps.whole)
		ps.whole = false
	}
	ps.next = dseq + 1
	return !gap
}

// fetchOpts are the options of one pull besides its count and wait.
type fetchOpts []jetstream.FetchOpt

// more pulls up to n more messages the broker has ready, waiting at most
// wait for them.
func (c *Consumer) more(cons jetstream.Consumer, opts fetchOpts, n int, wait time.Duration) []jetstream.Msg {
	if n <= 0 {
		return nil
	}
	batch, err := cons.Fetch(n, append([]jetstream.FetchOpt{jetstream.FetchMaxWait(max(wait, time.Millisecond))}, opts...)...)
	if err != nil {
		return nil
	}
	var out []jetstream.Msg
	for m := range batch.Messages() {
		out = append(out, m)
	}
	if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
		// What it delivered and this pull did not receive is pending at
		// the broker: the next delivery shows the gap (partState.next).
		c.log.Debug("pull for more messages ended early", "got", len(out), "of", n, "err", err)
	}
	return out
}

// partLoop is what a partition's goroutine carries from one delivery to
// the next: its logger; its keeper (a plain consumer's keepAlive or a
// group member's lease); the durable consumer it pulls from, replaced when
// the broker lost it (fetchFailed), and the options of its pulls; the
// handler; and what it knows of the partition's deliveries (partState).
// It belongs to that goroutine.
type partLoop struct {
	log    *slog.Logger
	keeper keeper
	cons   jetstream.Consumer
	opts   fetchOpts
	h      BatchHandler
	partState
}

// heldBatch is the batch being handled: the messages this goroutine holds
// and, index for index, their stream sequences and bodies as the handler
// gets them.
type heldBatch struct {
	msgs  []jetstream.Msg
	batch []BatchMsg
}

// handle applies the batch that begins with first, pulled with a request
// sent at sent: the messages the broker has ready after it (Batch at
// most), retried until success, a permanent error, ctx done or the keeper
// fences them off. Messages fenced off are neither acknowledged nor handed
// back: the broker has delivered them, or will, to the member the
// partition is pinned to.
//
// With Batch above 1 the broker may deliver later messages of a partition
// while earlier ones are still out (with a consumer that died, or lost its
// pin, holding them), and a row that took a later message would skip an
// earlier one. So a batch is applied only once it holds every message the
// durable consumer has delivered and not had acknowledged: on taking a
// partition over, the consumer keeps pulling, keeping what it got, until
// those come again (after AckWait), then applies everything in stream
// order. Later batches of the same goroutine follow the last one.
//
// The steps: take first and what the broker has ready behind it (ready),
// hold them, keep them alive, complete the batch (the above), apply it,
// stop keeping it alive, acknowledge it.
func (c *Consumer) handle(ctx context.Context, pl *partLoop, first jetstream.Msg, sent time.Time) {
	hb := c.hold(pl, append([]jetstream.Msg{first}, c.ready(pl, first)...))
	if len(hb.msgs) == 0 {
		return
	}
	pl.keeper.start(hb.msgs, sent)
	defer pl.keeper.stop()
	if !c.complete(ctx, pl, &hb) || !c.applyBatch(ctx, pl, &hb) {
		return
	}
	pl.keeper.stop()
	if c.cfg.batch() > 1 {
		c.batches.Add(1)
	}
	c.ack(ctx, pl.log, &hb)
}

// ready returns, with Batch above 1, the messages the broker has ready
// behind first (Batch−1 at most).
func (c *Consumer) ready(pl *partLoop, first jetstream.Msg) []jetstream.Msg {
	n := c.cfg.batch() - 1
	if n <= 0 {
		return nil
	}
	// The broker says how many messages wait behind this one: none,
	// and the batch is this one alone, without another round trip.
	meta, err := first.Metadata()
	if err == nil && meta.NumPending == 0 {
		return nil
	}
	wait := c.cfg.BatchWait
	if err == nil {
		n = int(min(uint64(n), meta.NumPending))
		// The broker already holds these n: wait until they
		// arrive (the pull ends as soon as they do). BatchWait
		// alone cut a catching-up rollup's batches to half their
		// size on a busy machine, and every batch is a store write.
		wait = max(wait, fillWait)
	}
	return c.more(pl.cons, pl.opts, n, wait)
}

// hold returns the batch msgs make, each message checked against the
// partition's deliveries (follow). A message without metadata is
// terminated instead (sequence), and the partition's next consumer
// sequence becomes unknown.
func (c *Consumer) hold(pl *partLoop, msgs []jetstream.Msg) heldBatch {
	var hb heldBatch
	for _, m := range msgs {
		meta, ok := c.sequence(pl.log, m)
		if !ok {
			pl.whole, pl.next = false, 0 // its consumer sequence is unknown
			continue
		}
		c.follow(pl.log, &pl.partState, meta)
		hb.msgs = append(hb.msgs, m)
		hb.batch = append(hb.batch, BatchMsg{Seq: meta.Sequence.Stream, Data: m.Data()})
	}
	return hb
}

// add appends the messages of more to the batch.
func (hb *heldBatch) add(more heldBatch) {
	hb.msgs = append(hb.msgs, more.msgs...)
	hb.batch = append(hb.batch, more.batch...)
}

// complete makes a batch of Batch above 1 that does not follow the last
// one this goroutine handled (partState.whole) hold every message the
// durable consumer has out (gather), in stream order. It is false when ctx
// ended or the keeper fenced the messages off first.
func (c *Consumer) complete(ctx context.Context, pl *partLoop, hb *heldBatch) bool {
	if c.cfg.batch() <= 1 || pl.whole {
		return true
	}
	if !c.gather(ctx, pl, hb) {
		return false
	}
	pl.whole = true
	sort.Sort(byStreamSeq{hb.msgs, hb.batch})
	return true
}

// applyBatch hands the batch to the handler until it succeeds, and reports
// whether it did. When the keeper fences the messages off they are left
// to their next delivery; a permanent error terminates them all; when ctx
// ends, or ends the wait for a retry, they are handed back (nak).
func (c *Consumer) applyBatch(ctx context.Context, pl *partLoop, hb *heldBatch) bool {
	for attempt := 1; ; attempt++ {
		actx, cancel, ok := pl.keeper.attempt(ctx)
		if !ok {
			pl.whole = false
			c.giveUp(pl.log, hb.batch[0].Seq, attempt)
			return false
		}
		err := pl.h(actx, hb.batch)
		cancel()
		if !pl.keeper.holds() {
			pl.whole = false
			c.giveUp(pl.log, hb.batch[0].Seq, attempt)
			return false
		}
		if err == nil {
			return true
		}
		if IsPermanent(err) {
			pl.keeper.stop()
			for i, m := range hb.msgs {
				c.terminate(pl.log, m, hb.batch[i].Seq, err)
			}
			return false
		}
		if ctx.Err() != nil || !c.retryWait(ctx, pl.log, hb.batch[0].Seq, attempt, err) {
			// Stopping: hand the messages back so whoever runs the
			// partition next gets them at once rather than after AckWait.
			pl.keeper.stop()
			pl.whole = false
			for i, m := range hb.msgs {
				if err := m.Nak(); err != nil {
					pl.log.Debug("cannot nak message on stop", "seq", hb.batch[i].Seq, "err", err)
				}
			}
			return false
		}
	}
}

// ack acknowledges the messages of an applied batch, and terminates those
// the handler marked poison (a permanent BatchMsg.Err). It acks even when
// ctx is done: the messages were applied. The last ack is confirmed, the
// others sent before it on the same connection; an ack that is lost makes
// its message come again, and it is skipped.
func (c *Consumer) ack(ctx context.Context, log *slog.Logger, hb *heldBatch) {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.AckWait)
	defer cancel()
	for i, m := range hb.msgs {
		if IsPermanent(hb.batch[i].Err) {
			c.terminate(log, m, hb.batch[i].Seq, hb.batch[i].Err)
			continue
		}
		c.applied.Add(1)
		var err error
		if i < len(hb.msgs)-1 {
			err = m.Ack()
		} else {
			err = m.DoubleAck(actx)
		}
		if err != nil {
			c.ackErrors.Add(1)
			log.Warn("cannot ack applied message; it will be delivered again", "seq", hb.batch[i].Seq, "err", err)
		}
	}
}

// terminate counts, logs and terminates m (stream sequence seq), a poison
// message: err, the handler's permanent error, says why.
func (c *Consumer) terminate(log *slog.Logger, m jetstream.Msg, seq uint64, err error) {
	c.terminated.Add(1)
	log.Error("poison message terminated", "seq", seq, "err", err)
	if err := m.TermWithReason("permanent handler error"); err != nil {
		log.Warn("cannot terminate message", "seq", seq, "err", err)
	}
}

// gather pulls until the batch holds every message the durable consumer
// has delivered and not had acknowledged, keeping the messages alive. It
// is false when ctx ended or the keeper fenced the messages off first.
func (c *Consumer) gather(ctx context.Context, pl *partLoop, hb *heldBatch) bool {
	warned := false
	for attempt := 1; ; attempt++ {
		if ctx.Err() != nil || !pl.keeper.holds() {
			return false
		}
		ictx, cancel := context.WithTimeout(ctx, c.cfg.AckWait/3)
		info, err := pl.cons.Info(ictx)
		cancel()
		switch {
		case err != nil:
			if logAttempt(attempt) {
				pl.log.Warn("cannot read the consumer's pending messages, retrying", "attempt", attempt, "err", err)
			}
			if !backoff.Sleep(ctx, backoff.Delay(c.cfg.RetryMin, c.cfg.RetryMax, attempt)) {
				return false
			}
			continue
		case info.NumAckPending <= len(hb.msgs):
			return true
		}
		if !warned {
			warned = true
			c.heldBack.Add(1)
			pl.log.Info("holding a batch back until the messages a previous consumer left unacknowledged come again",
				"held", len(hb.msgs), "unacknowledged", info.NumAckPending, "within", c.cfg.AckWait)
		}
		sent := time.Now()
		got := c.hold(pl, c.more(pl.cons, pl.opts, c.cfg.batch()-len(hb.msgs), min(time.Second, c.cfg.AckWait/3)))
		hb.add(got)
		if len(got.msgs) > 0 {
			pl.keeper.add(got.msgs, sent)
		}
	}
}

// byStreamSeq sorts a batch and its messages by stream sequence.
type byStreamSeq struct {
	msgs  []jetstream.Msg
	batch []BatchMsg
}

func (b byStreamSeq) Len() int           { return len(b.msgs) }
func (b byStreamSeq) Less(i, j int) bool { return b.batch[i].Seq < b.batch[j].Seq }
func (b byStreamSeq) Swap(i, j int) {
	b.msgs[i], b.msgs[j] = b.msgs[j], b.msgs[i]
	b.batch[i], b.batch[j] = b.batch[j], b.batch[i]
}

// giveUp counts and logs a message fenced off before its handler finished.
func (c *Consumer) giveUp(log *slog.Logger, seq uint64, attempt int) {
	c.fenced.Add(1)
	log.Warn("message lease expired before the handler finished; leaving the message to the next delivery",
		"seq", seq, "attempt", attempt)
}

// retryWait counts and logs a failed attempt and waits before the next one.
// It returns false if ctx ended the wait.
func (c *Consumer) retryWait(ctx context.Context, log *slog.Logger, seq uint64, attempt int, err error) bool {
	c.retries.Add(1)
	d := backoff.Delay(c.cfg.RetryMin, c.cfg.RetryMax, attempt)
	if logAttempt(attempt) {
		log.Warn("cannot apply message, retrying", "seq", seq, "attempt", attempt, "next", d, "err", err)
	}
	return backoff.Sleep(ctx, d)
}

// Pending returns the backlog of the partitions: messages not yet delivered
// plus delivered but not yet acknowledged — the NumPending + NumAckPending
// of their consumers. It counts the messages the stream still holds on the
// partitions' subjects, which with work-queue retention is the same number,
// and unlike a consumer's NumPending is exact right after the consumer was
// created (the server computes that lazily and may briefly report 0) and
// before it exists. In a cluster an acked message may be counted for a
// moment longer, never shorter.
func (c *Consumer) Pending(ctx context.Context, partitions []uint32) (uint64, error) {
	if err := c.checkPartitions(partitions); err != nil {
		return 0, fmt.Errorf("cannot count pending messages: %w", err)
	}
	if len(partitions) == 0 {
		return 0, nil
	}
	st, err := c.js.Stream(ctx, c.cfg.Stream.Name)
	if err != nil {
		return 0, fmt.Errorf("cannot look up stream %s: %w", c.cfg.Stream.Name, err)
	}
	filter := c.cfg.Stream.SubjectPrefix + ".>"
	if len(partitions) == 1 {
		filter = c.cfg.Stream.Subject(partitions[0])
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		return 0, fmt.Errorf("cannot count messages on %s: %w", filter, err)
	}
	var total uint64
	for _, p := range partitions {
		total += info.State.Subjects[c.cfg.Stream.Subject(p)]
	}
	return total, nil
}

// keepAlive sends a progress signal for the messages being handled, so
// the broker does not deliver them again while a slow or failing handler
// works on them. set and the signal are serialized: after set(nil)
// returns no signal is sent for the previous messages.
type keepAlive struct {
	log *slog.Logger

	mu   sync.Mutex
	msgs []jetstream.Msg
}

func (k *keepAlive) start(m []jetstream.Msg, _ time.Time) { k.set(slices.Clone(m)) }
func (k *keepAlive) stop()                                { k.set(nil) }

func (k *keepAlive) add(m []jetstream.Msg, _ time.Time) {
	k.mu.Lock()
	k.msgs = append(k.msgs, m...)
	k.mu.Unlock()
}

// attempt never fences: a plain consumer owns its partitions.
func (k *keepAlive) attempt(ctx context.Context) (context.Context, context.CancelFunc, bool) {
	return ctx, func() {}, true
}
func (k *keepAlive) holds() bool { return true }

func (k *keepAlive) set(m []jetstream.Msg) {
	k.mu.Lock()
	k.msgs = m
	k.mu.Unlock()
}

// signal sends a progress signal for the messages being handled, if any.
func (k *keepAlive) signal() {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, m := range k.msgs {
		if err := m.InProgress(); err != nil {
			k.log.Debug("cannot signal progress", "err", err)
		}
	}
}

// background runs f on a goroutine of its own until the returned stop is
// called; stop cancels f's context and waits for f to return.
func background(ctx context.Context, f func(context.Context)) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		f(ctx)
	}()
	return func() {
		cancel()
		wg.Wait()
	}
}

// logAttempt throttles repeated warnings: attempts 1, 2, 4, 8, …
func logAttempt(attempt int) bool {
	return attempt > 0 && bits.OnesCount(uint(attempt)) == 1
}
