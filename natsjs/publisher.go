package natsjs

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ErrNoMsgID is returned by Publish for an empty message id: without one the
// broker cannot de-duplicate a retried publish.
var ErrNoMsgID = errors.New("message id is required")

// ErrBadPartition is returned by Publish for a partition the stream does not
// have.
var ErrBadPartition = errors.New("partition out of range")

// Publisher publishes partial-sum messages to the stream. It is safe for
// concurrent use.
type Publisher struct {
	js       jetstream.JetStream
	stream   string
	subjects []string

	published  atomic.Uint64
	duplicates atomic.Uint64
}

// PublisherStats are the publisher's counters since it was created.
type PublisherStats struct {
	// Published counts messages the broker acknowledged, duplicates
	// included.
	Published uint64
	// Duplicates counts acknowledgements that reported the message id as
	// already stored (a retry of a publish that had succeeded).
	Duplicates uint64
}

// NewPublisher returns a publisher to the stream of cfg, which must be
// valid (see StreamConfig.Validate); EnsureStream creates the stream.
func NewPublisher(js jetstream.JetStream, cfg StreamConfig) *Publisher {
	return &Publisher{js: js, stream: cfg.Name, subjects: cfg.subjects()}
}

// Publish stores data on the partition's subject with the given message id
// and returns once the broker has stored it (or had stored it before: a
// duplicate id is success). On error nothing is known to be stored; the
// caller retries with the same id, in order. ctx bounds the wait; without a
// deadline the JetStream context's default timeout applies.
func (p *Publisher) Publish(ctx context.Context, partition uint32, msgID string, data []byte) error {
	if msgID == "" {
		return fmt.Errorf("cannot publish to partition %d: %w", partition, ErrNoMsgID)
	}
	if partition >= uint32(len(p.subjects)) {
		return fmt.Errorf("cannot publish to partition %d of %d: %w", partition, len(p.subjects), ErrBadPartition)
	}
	msg := &nats.Msg{Subject: p.subjects[partition], Data: data}
	ack, err := p.js.PublishMsg(ctx, msg,
		jetstream.WithMsgID(msgID),
		jetstream.WithExpectStream(p.stream),
	)
	if err != nil {
		return fmt.Errorf("cannot publish message %s to %s: %w", msgID, msg.Subject, err)
	}
	p.published.Add(1)
	if ack.Duplicate {
		p.duplicates.Add(1)
	}
	return nil
}

// Stats returns a snapshot of the counters.
func (p *Publisher) Stats() PublisherStats {
	return PublisherStats{Published: p.published.Load(), Duplicates: p.duplicates.Load()}
}
