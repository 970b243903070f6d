package client

import (
	"context"
	"errors"
	"sync"
	"time"
)

// MaxDelta is the largest delta of one increment the API takes.
const MaxDelta = 1_000_000

// BatchOptions configure a Batcher.
type BatchOptions struct {
	// MaxIncrements sends a batch once it holds this many distinct
	// (content, counter) pairs (default 100, at most 10,000).
	MaxIncrements int
	// MaxDelay sends a batch at the latest this long after its first add
	// (default 50 ms).
	MaxDelay time.Duration
	// Timeout bounds one send, retries included (default 10 s).
	Timeout time.Duration
	// OnError is told about every batch that could not be sent (after the
	// client's retries), with the increments it held. Default: dropped.
	OnError func(err error, incs []Increment)
}

// Batcher coalesces increments (the deltas of one content and counter are
// summed) and sends them in batches by size or time from one goroutine.
// Add never waits for the network unless a batch is being sent and the
// next one is full already (back-pressure). It is safe for concurrent use.
type Batcher struct {
	c    *Client
	opts BatchOptions

	mu      sync.Mutex
	pending map[pairKey]int64
	order   []pairKey
	first   time.Time // when the pending batch got its first add
	closed  bool
	taken   *sync.Cond // broadcast when a batch is taken or at Close

	full  chan struct{} // a full batch waits
	done  chan struct{}
	wg    sync.WaitGroup
	stats BatchStats
}

// BatchStats count a Batcher's work.
type BatchStats struct {
	Added, Sent, Failed, Batches int64
}

type pairKey struct{ content, counter string }

// ErrClosed is returned by Add after Close.
var ErrClosed = errors.New("edgecount: batcher closed")

// NewBatcher starts a batcher sending through c. Close it to send what it
// holds.
func NewBatcher(c *Client, opts BatchOptions) *Batcher {
	if opts.MaxIncrements <= 0 || opts.MaxIncrements > 10_000 {
		opts.MaxIncrements = 100
	}
	if opts.MaxDelay <= 0 {
		opts.MaxDelay = 50 * time.Millisecond
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	b := &Batcher{c: c, opts: opts, pending: map[pairKey]int64{}, full: make(chan struct{}, 1), done: make(chan struct{})}
	b.taken = sync.NewCond(&b.mu)
	b.wg.Add(1)
	go b.loop()
	return b
}

// Add adds delta (1..MaxDelta) to counter of contentID in the next batch.
func (b *Batcher) Add(contentID, counter string, delta int64) error {
	if delta < 1 || delta > MaxDelta {
		return errors.New("edgecount: delta must be 1..1000000")
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	k := pairKey{contentID, counter}
	for {
		if b.closed {
			return ErrClosed
		}
		if _, ok := b.pending[k]; ok || len(b.order) < b.opts.MaxIncrements {
			break
		}
		// Full: wait until the sender takes the batch.
		b.signal()
		b.taken.Wait()
	}
	cur, ok := b.pending[k]
	if !ok {
		if len(b.order) == 0 {
			b.first = time.Now()
		}
		b.order = append(b.order, k)
	}
	b.pending[k] = cur + delta
	b.stats.Added += delta
	if len(b.order) >= b.opts.MaxIncrements {
		b.signal()
	}
	return nil
}

func (b *Batcher) signal() {
	select {
	case b.full <- struct{}{}:
	default:
	}
}

// take removes the pending batch, splitting sums above MaxDelta into
// several increments.
func (b *Batcher) take() []Increment {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.order) == 0 {
		return nil
	}
	incs := make([]Increment, 0, len(b.order))
	for _, k := range b.order {
		for d := b.pending[k]; d > 0; d -= MaxDelta {
			incs = append(incs, Increment{ContentID: k.content, Counter: k.counter, Delta: min(d, MaxDelta)})
		}
	}
	clear(b.pending)
	b.order = b.order[:0]
	b.taken.Broadcast()
	return incs
}

// due returns how long until the pending batch must go (MaxDelay after its
// first add), or MaxDelay when nothing is pending.
func (b *Batcher) due() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.order) == 0 {
		return b.opts.MaxDelay
	}
	return max(time.Until(b.first.Add(b.opts.MaxDelay)), 0)
}

func (b *Batcher) loop() {
	defer b.wg.Done()
	t := time.NewTimer(b.opts.MaxDelay)
	defer t.Stop()
	for {
		select {
		case <-b.done:
			b.send(b.take())
			return
		case <-b.full:
		case <-t.C:
		}
		if b.due() == 0 || b.size() >= b.opts.MaxIncrements {
			b.send(b.take())
		}
		t.Reset(b.due())
	}
}

func (b *Batcher) size() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.order)
}

// send posts one batch (at most 10,000 increments a request).
func (b *Batcher) send(incs []Increment) {
	for len(incs) > 0 {
		part := incs[:min(len(incs), 10_000)]
		incs = incs[len(part):]
		ctx, cancel := context.WithTimeout(context.Background(), b.opts.Timeout)
		_, err := b.c.Increments(ctx, part)
		cancel()
		var sum int64
		for _, in := range part {
			sum += in.Delta
		}
		b.mu.Lock()
		b.stats.Batches++
		if err != nil {
			b.stats.Failed += sum
		} else {
			b.stats.Sent += sum
		}
		b.mu.Unlock()
		if err != nil && b.opts.OnError != nil {
			b.opts.OnError(err, part)
		}
	}
}

// Stats returns the deltas added, sent and failed so far, and the batches.
func (b *Batcher) Stats() BatchStats {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stats
}

// Close sends what is pending and stops the batcher. Adds after Close fail
// with ErrClosed.
func (b *Batcher) Close() {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return
	}
	b.closed = true
	b.taken.Broadcast()
	b.mu.Unlock()
	close(b.done)
	b.wg.Wait()
}
