package natsjs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgecount/edgecount/backoff"
)

// ErrNoMsgID is returned by Publish for an empty message id: without one the
// broker cannot de-duplicate a retried publish.
var ErrNoMsgID = errors.New("message id is required")

// ErrBadPartition is returned by Publish for a partition the stream does not
// have.
var ErrBadPartition = errors.New("partition out of range")

// Stream re-creation after a broker lost the stream is tried at most once
// per backoff step, from recreateMin up to recreateMax between tries.
const (
	recreateMin = 100 * time.Millisecond
	recreateMax = 5 * time.Second
)

// Publisher publishes partial-sum messages to the stream. It is safe for
// concurrent use.
type Publisher struct {
	js       jetstream.JetStream
	cfg      StreamConfig
	subjects []string
	log      *slog.Logger

	published, duplicates, recreated atomic.Uint64
	seen                             atomic.Uint64 // highest stream sequence acknowledged

	failing atomic.Bool // gone holds an episode
	mu      sync.Mutex
	gone    episode   // the stream is missing
	next    time.Time // no re-creation attempt before
	tries   int       // re-creation attempts that failed in a row
	// unsure: a creation of the stream found missing ended without an
	// answer (its context ran out); the broker may have created it all
	// the same.
	unsure bool
}

// PublisherStats are the publisher's counters since it was created.
type PublisherStats struct {
	// Published counts messages the broker acknowledged, duplicates
	// included.
	Published uint64
	// Duplicates counts acknowledgements that reported the message id as
	// already stored (a retry of a publish that had succeeded).
	Duplicates uint64
	// StreamsRecreated counts creations of the stream after the broker had
	// lost it (or it was deleted).
	StreamsRecreated uint64
}

// NewPublisher returns a publisher to the stream of cfg, which must be
// valid (see StreamConfig.Validate); EnsureStream creates the stream.
func NewPublisher(js jetstream.JetStream, cfg StreamConfig) *Publisher {
	return &Publisher{js: js, cfg: cfg, subjects: cfg.subjects(), log: slog.New(slog.DiscardHandler)}
}

// WithLogger makes p log to l (component natsjs-publisher): the loss and
// re-creation of the stream, once per episode. It returns p.
func (p *Publisher) WithLogger(l *slog.Logger) *Publisher {
	if l != nil {
		p.log = l.With("component", "natsjs-publisher", "stream", p.cfg.Name)
	}
	return p
}

// Publish stores data on the partition's subject with the given message id
// and returns once the broker has stored it (or had stored it before: a
// duplicate id is success). On error nothing is known to be stored; the
// caller retries with the same id, in order. ctx bounds the wait; without a
// deadline the JetStream context's default timeout applies.
//
// When the broker has lost the stream (a restart without its store, or a
// deleted stream), Publish creates it again (at most once per backoff
// step, counted in StreamsRecreated) and publishes once more. A publish
// sent while the connection is down waits in the connection's reconnect
// buffer and may reach the broker after Publish gave up; the retry carries
// the same id, so the broker keeps one copy (within DuplicateWindow).
func (p *Publisher) Publish(ctx context.Context, partition uint32, msgID string, data []byte) error {
	_, err := p.PublishSeq(ctx, partition, msgID, data)
	return err
}

// PublishSeq is Publish that also returns the stream sequence the broker
// stored the message under (the original's for a duplicate): the sequence
// the rollup records in the rows the message changes (region.SeqPublisher).
func (p *Publisher) PublishSeq(ctx context.Context, partition uint32, msgID string, data []byte) (uint64, error) {
	if msgID == "" {
		return 0, fmt.Errorf("cannot publish to partition %d: %w", partition, ErrNoMsgID)
	}
	if partition >= uint32(len(p.subjects)) {
		return 0, fmt.Errorf("cannot publish to partition %d of %d: %w", partition, len(p.subjects), ErrBadPartition)
	}
	msg := &nats.Msg{Subject: p.subjects[partition], Data: data}
	msgID = p.cfg.MsgID(msgID)
	seq, err := p.publish(ctx, msg, msgID)
	if streamGone(err) && p.recreate(ctx, err) {
		seq, err = p.publish(ctx, msg, msgID)
	}
	if err != nil {
		return 0, fmt.Errorf("cannot publish message %s to %s: %w", msgID, msg.Subject, err)
	}
	return seq, nil
}

func (p *Publisher) publish(ctx context.Context, msg *nats.Msg, msgID string) (uint64, error) {
	ack, err := p.js.PublishMsg(ctx, msg,
		jetstream.WithMsgID(msgID),
		jetstream.WithExpectStream(p.cfg.Name),
		// One try: nats.go's retries on "no responders" (2 × 250ms)
		// would use up a short ctx and hide that the stream is gone.
		// The caller retries anyway, and a stream that still exists
		// (a leader election) costs one lookup in recreate.
		jetstream.WithRetryAttempts(0),
	)
	if err != nil {
		return 0, err
	}
	p.published.Add(1)
	if ack.Duplicate {
		p.duplicates.Add(1)
	}
	raise(&p.seen, ack.Sequence)
	if p.failing.Load() {
		p.mu.Lock()
		if n, d, ended := p.gone.end(); ended {
			p.log.Info("stream is back; publishing again", "failures", n, "after", d.Round(time.Millisecond))
		}
		p.failing.Store(false)
		// Back before another attempt to create it (backoff): the one
		// that got no answer created it, as when recreate finds it.
		p.countUnsure()
		p.mu.Unlock()
	}
	return ack.Sequence, nil
}

// recreate creates the lost stream again unless an attempt was made less
// than a backoff step ago. It reports whether the stream exists now.
func (p *Publisher) recreate(ctx context.Context, cause error) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failing.Store(true)
	n, warn := p.gone.fail()
	if warn {
		p.log.Warn("stream is missing on the broker; creating it again", "attempt", n, "err", cause)
	}
	if time.Now().Before(p.next) {
		return false
	}
	p.tries++
	created, err := recreateStream(ctx, p.js, p.cfg, p.seen.Load())
	if err != nil {
		p.next = time.Now().Add(backoff.Delay(recreateMin, recreateMax, p.tries))
		var ce *createError
		if errors.As(err, &ce) && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || errors.Is(err, nats.ErrTimeout)) {
			p.unsure = true
		}
		if warn {
			p.log.Warn("cannot create the stream again", "attempt", n, "err", err)
		}
		return false
	}
	p.next, p.tries = time.Time{}, 0
	// Found existing after an attempt that got no answer: that attempt
	// created it (a CI run saw the creation outlive a 200ms publish).
	p.unsure = p.unsure || created
	p.countUnsure()
	return true
}

// countUnsure counts the creation of the stream that p.unsure stands for.
// p.mu is held.
func (p *Publisher) countUnsure() {
	if !p.unsure {
		return
	}
	p.unsure = false
	p.recreated.Add(1)
	p.log.Warn("stream created again; messages it held and no one had consumed are lost with the broker's state")
}

// Stats returns a snapshot of the counters.
func (p *Publisher) Stats() PublisherStats {
	return PublisherStats{Published: p.published.Load(), Duplicates: p.duplicates.Load(), StreamsRecreated: p.recreated.Load()}
}
