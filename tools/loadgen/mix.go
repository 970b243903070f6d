package main

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
)

// An op is one kind of request loadgen sends.
type op uint8

const (
	opIncr1   op = iota // POST /v1/increments, one increment
	opIncr100           // POST /v1/increments, 100 increments
	opGet1              // GET /v1/counts/{id}
	opGet16             // one batched read of 16 ids
	opReact             // POST /v1/reactions, a distinct user
	numOps
)

var opNames = [numOps]string{"incr1", "incr100", "get1", "get16", "react"}

// units is how many increments or counts one request of the op carries.
var opUnits = [numOps]int{1, 100, 1, 16, 1}

// opAliases are the short names a mix may use.
var opAliases = map[string]op{"incr": opIncr1, "get": opGet1, "reaction": opReact}

func parseOp(name string) (op, bool) {
	for i, n := range opNames {
		if n == name {
			return op(i), true
		}
	}
	o, ok := opAliases[name]
	return o, ok
}

func (o op) String() string { return opNames[o] }

// mix is a weighted choice of ops. Weights are relative: incr=70,get=30 and
// incr=7,get=3 are the same mix.
type mix struct {
	weights [numOps]int
	cum     [numOps]int // cumulative weights, for next
	total   int
}

// parseMix reads "name=weight,name=weight"; a bare op name alone ("get16")
// is that op only.
func parseMix(s string) (mix, error) {
	var m mix
	s = strings.TrimSpace(s)
	if s == "" {
		return m, fmt.Errorf("mix: empty; want e.g. incr=70,react=10,get=20 (ops: %s)", strings.Join(opNames[:], ", "))
	}
	for _, part := range strings.Split(s, ",") {
		name, w, hasW := strings.Cut(strings.TrimSpace(part), "=")
		o, ok := parseOp(name)
		if !ok {
			return m, fmt.Errorf("mix: unknown op %q; want one of %s (or incr, get, reaction)", name, strings.Join(opNames[:], ", "))
		}
		weight := 1
		if hasW {
			n, err := strconv.Atoi(w)
			if err != nil || n < 0 || n > 1_000_000 {
				return m, fmt.Errorf("mix: weight of %s %q: want an integer 0..1000000", name, w)
			}
			weight = n
		}
		if m.weights[o] != 0 {
			return m, fmt.Errorf("mix: op %s given twice", o)
		}
		m.weights[o] = weight
	}
	for i, w := range m.weights {
		m.total += w
		m.cum[i] = m.total
	}
	if m.total == 0 {
		return m, fmt.Errorf("mix %q: every weight is 0", s)
	}
	return m, nil
}

// only reports the op if the mix holds one op alone.
func (m mix) only() (op, bool) {
	for i, w := range m.weights {
		if w == m.total {
			return op(i), true
		}
	}
	return 0, false
}

func (m mix) next(r *rand.Rand) op {
	if o, ok := m.only(); ok {
		return o
	}
	x := r.IntN(m.total)
	for i, c := range m.cum {
		if x < c {
			return op(i)
		}
	}
	return numOps - 1 // unreachable: x < total = cum[last]
}

// String gives the canonical form, e.g. "incr1=70,get1=20,react=10".
func (m mix) String() string {
	if o, ok := m.only(); ok {
		return o.String()
	}
	var parts []string
	for i, w := range m.weights {
		if w > 0 {
			parts = append(parts, opNames[i]+"="+strconv.Itoa(w))
		}
	}
	return strings.Join(parts, ",")
}
