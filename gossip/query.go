package gossip

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/memberlist"
)

// Queries: a node asks every live member a question and collects their
// answers, each over memberlist's reliable (TCP, encrypted with the
// gossip keys) user messages. The payloads are opaque here; the agent
// uses them for the held deltas of a fresh read (region.HeldPeers).

// Query limits.
const (
	// MaxQueryBytes bounds a question and an answer.
	MaxQueryBytes = 1 << 20
	// queryQueue bounds the questions waiting for the handler; more are
	// dropped (Stats.QueriesDropped) and their askers time out.
	queryQueue = 64
)

// ErrNoAnswer is a member that did not answer before the query's context
// ended; ErrNoHandler a member that runs no query handler.
var (
	ErrNoAnswer  = errors.New("no answer")
	ErrNoHandler = errors.New("member answers no queries")
)

// QueryHandler answers a question: it returns the answer's payload, or an
// error (sent back as the member's error). It runs on one goroutine of the
// node, one question at a time, and should be quick; payload is its own.
type QueryHandler func(payload []byte) ([]byte, error)

// Answer is one member's answer to a query.
type Answer struct {
	Node, AgentID string
	Data          []byte
	// Err is ErrNoAnswer, a send failure, or the member's handler error.
	Err error
}

// queryState is a node's side of queries.
type queryState struct {
	handler atomic.Pointer[QueryHandler]
	next    atomic.Uint64
	in      chan question
	mu      sync.Mutex
	pending map[uint64]*asked

	asked, answered, failed, served, dropped atomic.Uint64
}

type question struct {
	id      uint64
	from    string
	payload []byte
}

type asked struct {
	to  map[string]bool // members asked, not yet answered
	out chan Answer
}

// SetQueryHandler makes the node answer queries with h (nil: answer
// ErrNoHandler).
func (n *Node) SetQueryHandler(h QueryHandler) {
	if h == nil {
		n.q.handler.Store(nil)
		return
	}
	n.q.handler.Store(&h)
}

// QueryStats are the query counters: questions asked by this node
// (one per member), answers received, members that failed (no answer in
// time, or an error), questions this node served and dropped (queue full).
type QueryStats struct {
	Asked, Answered, Failed, Served, Dropped uint64
}

// QueryStats returns the query counters.
func (n *Node) QueryStats() QueryStats {
	return QueryStats{Asked: n.q.asked.Load(), Answered: n.q.answered.Load(), Failed: n.q.failed.Load(),
		Served: n.q.served.Load(), Dropped: n.q.dropped.Load()}
}

// Query asks every live member but this node payload (at most
// MaxQueryBytes) and returns their answers, one per member asked, when
// all have answered or ctx ends (members still silent then get
// ErrNoAnswer). Sends run in goroutines of the node, so a member that
// does not accept the connection costs the caller no more than ctx.
func (n *Node) Query(ctx context.Context, payload []byte) ([]Answer, error) {
	if n.closed.Load() {
		return nil, ErrClosed
	}
	if len(payload) > MaxQueryBytes {
		return nil, fmt.Errorf("%w: query of %d bytes exceeds %d", ErrInvalid, len(payload), MaxQueryBytes)
	}
	targets := n.targets()
	if len(targets) == 0 {
		return nil, nil
	}
	id := n.q.next.Add(1)
	a := &asked{to: make(map[string]bool, len(targets)), out: make(chan Answer, len(targets))}
	for _, t := range targets {
		a.to[t.Name] = true
	}
	n.q.mu.Lock()
	if n.q.pending == nil {
		n.q.pending = make(map[uint64]*asked)
	}
	n.q.pending[id] = a
	n.q.mu.Unlock()
	defer func() {
		n.q.mu.Lock()
		delete(n.q.pending, id)
		n.q.mu.Unlock()
	}()
	msg := encodeQuery(kindQuery, id, n.name, payload, nil)
	for _, t := range targets {
		n.q.asked.Add(1)
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			if err := n.ml.SendReliable(t, msg); err != nil {
				n.deliver(id, Answer{Node: t.Name, Err: fmt.Errorf("cannot send query: %w", err)})
			}
		}()
	}
	got := make(map[string]Answer, len(targets))
	for len(got) < len(targets) {
		select {
		case ans := <-a.out:
			got[ans.Node] = ans
		case <-ctx.Done():
			goto done
		case <-n.ctx.Done():
			goto done
		}
	}
done:
	out := make([]Answer, 0, len(targets))
	n.mu.Lock()
	for _, t := range targets {
		ans, ok := got[t.Name]
		if !ok {
			ans = Answer{Node: t.Name, Err: ErrNoAnswer}
		}
		if m := n.members[t.Name]; m != nil {
			ans.AgentID = m.meta.AgentID
		}
		out = append(out, ans)
	}
	n.mu.Unlock()
	for _, ans := range out {
		if ans.Err != nil {
			n.q.failed.Add(1)
		} else {
			n.q.answered.Add(1)
		}
	}
	return out, nil
}

// deliver hands ans to the query id, if it still waits for ans.Node.
func (n *Node) deliver(id uint64, ans Answer) {
	n.q.mu.Lock()
	defer n.q.mu.Unlock()
	a := n.q.pending[id]
	if a == nil || !a.to[ans.Node] {
		return
	}
	delete(a.to, ans.Node)
	a.out <- ans // room for one answer per member
}

// receiveQuery handles a question or an answer (from memberlist's
// goroutines: it does not block).
func (n *Node) receiveQuery(m message) {
	if m.kind == kindAnswer {
		ans := Answer{Node: m.from, Data: m.payload}
		if m.errMsg != "" {
			ans.Data, ans.Err = nil, errors.New(m.errMsg)
		}
		n.deliver(m.id, ans)
		return
	}
	select {
	case n.q.in <- question{id: m.id, from: m.from, payload: m.payload}:
	default:
		n.q.dropped.Add(1)
	}
}

// serveLoop answers questions, one at a time.
func (n *Node) serveLoop() {
	defer n.wg.Done()
	for {
		var q question
		select {
		case <-n.ctx.Done():
			return
		case q = <-n.q.in:
		}
		n.mu.Lock()
		r := n.members[q.from]
		var to *memberlist.Node
		if r != nil && r.state.live() {
			to = &memberlist.Node{Name: r.name, Addr: r.addr, Port: r.port}
		}
		n.mu.Unlock()
		if to == nil {
			n.q.dropped.Add(1) // not a live member: nobody to answer
			continue
		}
		var data []byte
		err := ErrNoHandler
		if h := n.q.handler.Load(); h != nil {
			data, err = (*h)(q.payload)
		}
		if err == nil && len(data) > MaxQueryBytes {
			data, err = nil, fmt.Errorf("answer of %d bytes exceeds %d", len(data), MaxQueryBytes)
		}
		msg := encodeQuery(kindAnswer, q.id, n.name, data, err)
		if err := n.ml.SendReliable(to, msg); err != nil {
			n.logger.Debug("gossip query answer not sent", "to", to.Name, "err", err)
			continue
		}
		n.q.served.Add(1)
	}
}

// encodeQuery returns the wire form of a question or an answer:
//
//	version:1 (=1)  kind:1 (=3 question, 4 answer)  id:uvarint
//	from:uvarint-len bytes  payload:uvarint-len bytes
//	[answer only] error:uvarint-len bytes (empty: none)
func encodeQuery(kind byte, id uint64, from string, payload []byte, err error) []byte {
	b := make([]byte, 0, 24+len(from)+len(payload))
	b = append(b, wireVersion, kind)
	b = binary.AppendUvarint(b, id)
	b = binary.AppendUvarint(b, uint64(len(from)))
	b = append(b, from...)
	b = binary.AppendUvarint(b, uint64(len(payload)))
	b = append(b, payload...)
	if kind == kindAnswer {
		var e string
		if err != nil {
			e = err.Error()
			if len(e) > maxErrLen {
				e = e[:maxErrLen]
			}
		}
		b = binary.AppendUvarint(b, uint64(len(e)))
		b = append(b, e...)
	}
	return b
}

// maxErrLen bounds an answer's error text.
const maxErrLen = 256
