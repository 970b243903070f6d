// Package linearize checks a recorded history of reaction writes and reads
// for linearizability with Porcupine (github.com/anishathalye/porcupine).
//
// Each (user, item) pair is a register holding the pair's action (none,
// like or dislike), checked on its own (the model's partition). A write
// that was answered carries the value before it (Previous): it linearizes
// only where the register holds Previous, and leaves Action there; a
// repeat answers Changed false with Previous equal to Action. A write whose
// outcome is unknown (no answer, a 503, a conflict whose outcome the agent
// settles later) is kept pending to the end of the history, as Porcupine
// handles an operation that never returned: it may linearize anywhere after
// its call, and linearizing it after every other operation is the same as
// its never having happened, so it accepts any state. A write the system
// answered as certainly not applied is left out.
//
// Reads are checked by one of two rules (ReadRule): Linearizable (a read
// returns the register's value at its linearization point), or
// SiteMonotonic, what a read at a data centre's own replica promises
// (docs/consistency.md).
package linearize

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/edgecount/edgecount/engagement"
)

// Kind tells a write from a read.
type Kind uint8

// The kinds of operation.
const (
	Write Kind = iota
	Read
)

// Outcome is what a write's caller learnt of it.
type Outcome uint8

// The outcomes of a write.
const (
	// Applied: answered 200, with Previous and Changed.
	Applied Outcome = iota
	// NotApplied: the system answered that nothing was applied; the write
	// is left out of the history.
	NotApplied
	// Unknown: no answer, or an answer that leaves the outcome open; it
	// may have taken effect at any time after its call.
	Unknown
)

// MaxSites bounds Op.Site.
const MaxSites = 4

// Op is one recorded operation on one pair.
type Op struct {
	Key    string // the pair, e.g. "user/item"
	Client int    // the client that sent it (for the visualization)
	// Site is the data centre the operation went through (0 ≤ Site <
	// MaxSites): the one whose replica a read reads and whose coordinator
	// commits a write.
	Site int
	Kind Kind
	// Action is what a write asked for, or what a read returned.
	Action engagement.Action
	// Previous and Changed are a write's answer when Outcome is Applied.
	Previous engagement.Action
	Changed  bool
	Outcome  Outcome
	// Call and Return are when the request was sent and its answer came
	// back; Return is ignored for an Unknown write.
	Call, Return time.Time
	// Note is shown in the visualization (agent, status, version).
	Note string
}

// ReadRule is what a read is checked against.
type ReadRule uint8

// The read rules.
const (
	// Linearizable: a read returns the register's value at its
	// linearization point.
	Linearizable ReadRule = iota
	// SiteMonotonic: a read at site d returns a value the register held
	// at or before its linearization point, no older than (a) what an
	// earlier read at d returned and (b) what a write through d that
	// changed the register and returned before the read was sent left.
	// That is what a read of a data centre's only replica at
	// LOCAL_QUORUM promises when writes are Paxos rounds across data
	// centres committed at LOCAL_QUORUM: the local replica only moves
	// forward, a write's commit reaches its coordinator's data centre
	// before it answers, and another data centre's commits arrive later.
	SiteMonotonic
)

// String names the rule.
func (r ReadRule) String() string {
	if r == SiteMonotonic {
		return "site-monotonic reads"
	}
	return "linearizable reads"
}

// Result is the outcome of Check.
type Result struct {
	// Result is Ok, Illegal or Unknown (the timeout passed).
	Result porcupine.CheckResult
	// Failed lists the pairs whose history is not linearizable (or whose
	// check timed out), in order.
	Failed []string
	// Ops is how many operations were checked (NotApplied writes are
	// not), Pending how many of them were Unknown writes.
	Ops, Pending int

	model porcupine.Model
	info  porcupine.LinearizationInfo
}

// Visualize writes Porcupine's HTML visualization of the history and its
// longest partial linearizations to w.
func (r *Result) Visualize(w io.Writer) error { return porcupine.Visualize(r.model, r.info, w) }

// input is an operation's call as the model sees it.
type input struct {
	key    string
	id     uint32 // the operation's index in the history
	site   int
	kind   Kind
	action engagement.Action
	// done: for a read, the ids of writes through its site that changed
	// the register and returned before it was sent, sorted.
	done []uint32
	note string
}

// output is an operation's answer as the model sees it.
type output struct {
	outcome  Outcome
	previous engagement.Action
	changed  bool
}

// noWrite marks the register's first entry, which no write made.
const noWrite = math.MaxUint32

// entryLen is one entry of state.hist: the action, then the id of the
// write that set it (big endian).
const entryLen = 5

// state is a pair's register: every value it held, in order, each with
// the write that set it, and per site the entry its reads have reached.
// It is comparable, so Porcupine's default equality applies.
type state struct {
	hist  string
	floor [MaxSites]int32
}

func (s state) entries() int { return len(s.hist) / entryLen }

func (s state) action(i int) engagement.Action { return engagement.Action(s.hist[i*entryLen]) }

func (s state) writer(i int) uint32 {
	return binary.BigEndian.Uint32([]byte(s.hist[i*entryLen+1 : (i+1)*entryLen]))
}

func (s state) current() engagement.Action { return s.action(s.entries() - 1) }

// set returns s with action a set by write id.
func (s state) set(a engagement.Action, id uint32) state {
	var e [entryLen]byte
	e[0] = byte(a)
	binary.BigEndian.PutUint32(e[1:], id)
	s.hist += string(e[:])
	return s
}

func initial() state { return state{}.set(engagement.ActionNone, noWrite) }

// newModel returns the register's model under rule.
func newModel(rule ReadRule) porcupine.Model {
	return porcupine.Model{
		Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
			byKey := map[string][]porcupine.Operation{}
			var keys []string
			for _, op := range history {
				k := op.Input.(input).key
				if _, ok := byKey[k]; !ok {
					keys = append(keys, k)
				}
				byKey[k] = append(byKey[k], op)
			}
			var parts [][]porcupine.Operation
			for _, k := range keys {
				parts = append(parts, byKey[k])
			}
			return parts
		},
		Init: func() any { return initial() },
		Step: func(st, in, out any) (bool, any) {
			return step(rule, st.(state), in.(input), out.(output))
		},
		DescribeOperation: func(in, out any) string {
			i, o := in.(input), out.(output)
			if i.kind == Read {
				return fmt.Sprintf("read@dc%d → %v  %s", i.site+1, i.action, i.note)
			}
			switch o.outcome {
			case Applied:
				return fmt.Sprintf("%v@dc%d → previous %v, changed %v  %s", i.action, i.site+1, o.previous, o.changed, i.note)
			default:
				return fmt.Sprintf("%v@dc%d → unknown  %s", i.action, i.site+1, i.note)
			}
		},
		DescribeState: func(st any) string {
			s := st.(state)
			var b strings.Builder
			fmt.Fprintf(&b, "%v", s.current())
			if rule == SiteMonotonic {
				b.WriteString(" (held:")
				for i := range s.entries() {
					fmt.Fprintf(&b, " %v", s.action(i))
				}
				fmt.Fprintf(&b, "; reads reached %v)", s.floor[:])
			}
			return b.String()
		},
	}
}

// step is the register's sequential specification.
func step(rule ReadRule, s state, in input, out output) (bool, state) {
	cur := s.current()
	if in.kind == Write {
		if out.outcome == Applied {
			if out.previous != cur || out.changed != (in.action != cur) {
				return false, s
			}
		}
		if in.action == cur {
			return true, s
		}
		return true, s.set(in.action, in.id)
	}
	if rule == Linearizable {
		return in.action == cur, s
	}
	lo := int(s.floor[in.site])
	for i := lo + 1; i < s.entries(); i++ {
		if _, seen := slices.BinarySearch(in.done, s.writer(i)); seen {
			lo = i
		}
	}
	for i := lo; i < s.entries(); i++ {
		if s.action(i) == in.action {
			s.floor[in.site] = int32(i)
			return true, s
		}
	}
	return false, s
}

// Check checks ops, partitioned by Key, under rule; a partition not
// decided within timeout (0: no limit) makes the result Unknown.
func Check(ops []Op, rule ReadRule, timeout time.Duration) Result {
	model := newModel(rule)
	var history []porcupine.Operation
	var pending int
	for i, op := range ops {
		if op.Site < 0 || op.Site >= MaxSites {
			panic(fmt.Sprintf("linearize: site %d of op %d out of range", op.Site, i))
		}
		if op.Kind == Write && op.Outcome == NotApplied {
			continue
		}
		in := input{key: op.Key, id: uint32(i), site: op.Site, kind: op.Kind, action: op.Action, note: op.Note}
		out := output{outcome: op.Outcome, previous: op.Previous, changed: op.Changed}
		ret := op.Return.UnixNano()
		if op.Kind == Write && op.Outcome == Unknown {
			ret = math.MaxInt64
			pending++
		}
		if op.Kind == Read {
			for j, w := range ops {
				if w.Key == op.Key && w.Kind == Write && w.Site == op.Site && w.Outcome == Applied &&
					w.Changed && w.Return.Before(op.Call) {
					in.done = append(in.done, uint32(j))
				}
			}
			sort.Slice(in.done, func(a, b int) bool { return in.done[a] < in.done[b] })
		}
		history = append(history, porcupine.Operation{
			ClientId: op.Client, Input: in, Output: out, Call: op.Call.UnixNano(), Return: ret,
		})
	}
	res, info := porcupine.CheckOperationsVerbose(model, history, timeout)
	r := Result{Result: res, Ops: len(history), Pending: pending, model: model, info: info}
	if res != porcupine.Ok {
		for _, part := range model.Partition(history) {
			if porcupine.CheckOperationsTimeout(model, part, timeout) != porcupine.Ok {
				r.Failed = append(r.Failed, part[0].Input.(input).key)
			}
		}
	}
	return r
}
