package embedded

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	bolt "go.etcd.io/bbolt"
)

// maxGroup bounds how many writes share one transaction.
const maxGroup = 1000

// committer is a group commit without a timer. A writer that finds no commit
// running commits at once; writers that arrive while a commit runs queue up
// and share the next transaction and fsync. A lone writer therefore waits for
// its own commit only, and under load the group grows to whatever arrived
// during the previous fsync. (bbolt's DB.Batch instead holds every batch for
// MaxBatchDelay unless MaxBatchSize writers are queued; see the benchmarks.)
//
// No goroutine is started. The writer that commits a group is its leader;
// when done it hands the lead to the first writer still queued. Before it
// takes the queue, a leader yields to the scheduler while the queue grows
// (gather), so that writers already runnable join its transaction instead
// of each committing one of their own; see docs/embedded.md.
type committer struct {
	db      *bolt.DB
	commits *atomic.Int64 // transactions committed; nil: not counted

	mu    sync.Mutex
	queue []*commitCall
	busy  bool // a leader is committing, or has been named and will
}

type commitCall struct {
	fn   func(*bolt.Tx) error
	done chan error // the result, errLead or errSolo
}

// Signals on commitCall.done that never reach a caller.
var (
	// errLead tells a queued writer to lead the next commit.
	errLead = errors.New("lead the next commit")
	// errSolo tells a writer that its fn failed and must be run again in a
	// transaction of its own, by the writer's own goroutine, so that the
	// failure (or panic) surfaces there.
	errSolo = errors.New("run alone")
)

// write runs fn in a write transaction, usually shared with concurrent
// writers. fn may run more than once and must set its results afresh on every
// run.
func (c *committer) write(fn func(*bolt.Tx) error) error {
	call := &commitCall{fn: fn, done: make(chan error, 1)}
	c.mu.Lock()
	c.queue = append(c.queue, call)
	lead := !c.busy
	c.busy = true
	c.mu.Unlock()

	err := errLead
	if !lead {
		err = <-call.done
	}
	if err == errLead {
		c.lead()
		err = <-call.done
	}
	if err == errSolo {
		if c.commits != nil {
			c.commits.Add(1)
		}
		err = c.db.Update(fn)
	}
	return err
}

// maxGatherYields bounds the yields of gather.
const maxGatherYields = 8

// gather lets the writers that are ready to run queue before the leader
// takes the queue: it yields while the queue grows, at most maxGatherYields
// times. A yield costs well under a microsecond when nothing else is
// runnable, so a lone writer still commits at once. With one P (a process
// pinned to one core) the rollup's partition consumers, woken together by
// one flush of the agents, would otherwise commit one transaction each:
// every transaction rewrites the B+tree pages its rows touch, and rows of
// one flush spread over most leaf pages, so n transactions write nearly n
// times the pages one would.
func (c *committer) gather() {
	c.mu.Lock()
	n := len(c.queue)
	c.mu.Unlock()
	for range maxGatherYields {
		if n >= maxGroup {
			return
		}
		runtime.Gosched()
		c.mu.Lock()
		m := len(c.queue)
		c.mu.Unlock()
		if m == n {
			return
		}
		n = m
	}
}

// lead commits the queued calls (up to maxGroup) and hands the lead on.
func (c *committer) lead() {
	c.gather()
	c.mu.Lock()
	n := min(len(c.queue), maxGroup)
	group := c.queue[:n:n]
	c.queue = append([]*commitCall(nil), c.queue[n:]...)
	c.mu.Unlock()
	defer c.handOff()
	c.commit(group)
}

// handOff names the first queued writer leader, or marks the committer idle.
func (c *committer) handOff() {
	c.mu.Lock()
	var next *commitCall
	if len(c.queue) > 0 {
		next = c.queue[0] // busy stays set: next leads
	} else {
		c.busy = false
	}
	c.mu.Unlock()
	if next != nil {
		next.done <- errLead
	}
}

// commit runs group in one transaction and sends each call its result. A call
// whose fn fails is taken out and told to run alone; the transaction is rolled
// back and the rest run again.
func (c *committer) commit(group []*commitCall) {
	for len(group) > 0 {
		failed := -1
		if c.commits != nil {
			c.commits.Add(1)
		}
		err := c.db.Update(func(tx *bolt.Tx) error {
			for i, call := range group {
				if err := safeCall(call.fn, tx); err != nil {
					failed = i
					return err
				}
			}
			return nil
		})
		if failed < 0 {
			for _, call := range group {
				call.done <- err
			}
			return
		}
		group[failed].done <- errSolo
		group = append(group[:failed], group[failed+1:]...)
	}
}

// safeCall runs fn, turning a panic into an error so that one bad call cannot
// wedge the committer; the call then runs alone and panics in its own
// goroutine.
func safeCall(fn func(*bolt.Tx) error, tx *bolt.Tx) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return fn(tx)
}
