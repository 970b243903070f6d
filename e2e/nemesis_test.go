package e2e

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/edgecount/edgecount/client"
	"github.com/edgecount/edgecount/internal/linearize"
)

// The nemesis row: faults picked at random from a seed, overlapping, on the
// three-region topology (two agents per region, two rollups, a broker per
// region sourced into a hub of three, the two-DC Cassandra cluster, a Redis
// of the row's own), under the checker's load. The same seed gives the same
// schedule; the row prints both. The frame judges it as every row (lost =
// acked − counted, doubled = counted − attempted, reaction totals = the
// users' final rows after the drain, which outlasts a recount pass), and
// the row adds a check during the run: no count read exceeds the
// increments sent so far.
//
//	EDGECOUNT_NEMESIS_SEED      the seed (default: random, printed)
//	EDGECOUNT_NEMESIS_DURATION  how long faults are injected (default 5 min,
//	                            60 s in the CI subset)

// nemesisAckWait is the rollups' nats.ack_wait in the nemesis row: a frozen
// rollup is frozen for longer, so that the broker gives its partitions'
// messages to the other rollup while it sleeps, and it wakes up as an owner
// whose partitions moved.
const nemesisAckWait = 8 * time.Second

// faultKind is one kind of fault the nemesis injects.
type faultKind string

const (
	faultAgentKill     faultKind = "agent-kill"  // SIGKILL an agent; restart it on its data
	faultRollupKill    faultKind = "rollup-kill" // SIGKILL a rollup; restart it
	faultRollupStop    faultKind = "rollup-stop" // SIGSTOP a rollup longer than ack_wait; SIGCONT
	faultBrokerKill    faultKind = "broker-kill" // SIGKILL a region's broker; restart it on its store
	faultHubKill       faultKind = "hub-kill"    // SIGKILL a hub server; restart it
	faultCassandra     faultKind = "cassandra"   // SIGSTOP a Cassandra node; SIGCONT
	faultRedisStop     faultKind = "redis-stop"  // stop Redis; start it
	faultLeafCut       faultKind = "leaf-cut"    // cut a region's leaf link to the hub; give it back
	nemesisWarmup                = 5 * time.Second
	nemesisMinGap                = 3 * time.Second // between two faults' starts
	nemesisMaxGap                = 8 * time.Second
	nemesisMaxLeafCut            = 15 * time.Second
	nemesisMaxDownTime           = nemesisAckWait + 5*time.Second // the longest fault
)

var faultKinds = []faultKind{faultAgentKill, faultRollupKill, faultRollupStop, faultBrokerKill, faultHubKill, faultCassandra, faultRedisStop, faultLeafCut}

// nemesisFault is one fault of a schedule: kind on target from at for dur.
type nemesisFault struct {
	at, dur time.Duration
	kind    faultKind
	target  int // agent, rollup, region, hub server or data centre index
}

func (f nemesisFault) String() string {
	return fmt.Sprintf("%6.1fs  %-12s target %d for %.1fs", f.at.Seconds(), f.kind, f.target, f.dur.Seconds())
}

// nemesisShape is what a schedule runs on: how many of each target.
type nemesisShape struct {
	regions, agentsPerRegion, rollups, hubs, dcs int
}

// group is the target group of a fault, of which at most limit may be
// faulted at once: the system keeps a majority of the hub, a rollup, an
// agent per region, and one Cassandra node.
func (s nemesisShape) group(f nemesisFault) (string, int) {
	switch f.kind {
	case faultAgentKill:
		return fmt.Sprintf("agents of region %d", f.target/s.agentsPerRegion), 1
	case faultRollupKill, faultRollupStop:
		return "rollups", s.rollups - 1
	case faultBrokerKill:
		return "region brokers", 1
	case faultHubKill:
		return "hub servers", (s.hubs - 1) / 2
	case faultCassandra:
		return "cassandra", 1
	case faultRedisStop:
		return "redis", 1
	}
	return fmt.Sprintf("leaf link %d", f.target), 1
}

// schedule returns the faults a seed picks over d: one every 3–8 s from
// the warm-up on, each of a random kind on a random target, for a random
// time, overlapping the ones before; a fault that would take a group past
// its limit (group) is not injected, and nothing starts in the last
// nemesisMaxDownTime, so every fault is healed by d. The same seed and shape
// give the same schedule.
func schedule(seed uint64, d time.Duration, s nemesisShape) []nemesisFault {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	between := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rng.Int64N(int64(hi-lo)+1)) }
	var out []nemesisFault
	for at := nemesisWarmup; at+nemesisMaxDownTime <= d; at += between(nemesisMinGap, nemesisMaxGap).Round(100 * time.Millisecond) {
		f := nemesisFault{at: at, kind: faultKinds[rng.IntN(len(faultKinds))]}
		switch f.kind {
		case faultAgentKill:
			f.target, f.dur = rng.IntN(s.regions*s.agentsPerRegion), between(time.Second, 3*time.Second)
		case faultRollupKill:
			f.target, f.dur = rng.IntN(s.rollups), between(time.Second, 3*time.Second)
		case faultRollupStop:
			f.target, f.dur = rng.IntN(s.rollups), nemesisAckWait+between(time.Second, 5*time.Second)
		case faultBrokerKill:
			f.target, f.dur = rng.IntN(s.regions), between(2*time.Second, 5*time.Second)
		case faultHubKill:
			f.target, f.dur = rng.IntN(s.hubs), between(3*time.Second, 8*time.Second)
		case faultCassandra:
			f.target, f.dur = rng.IntN(s.dcs), between(3*time.Second, 8*time.Second)
		case faultRedisStop:
			f.dur = between(3*time.Second, 8*time.Second)
		case faultLeafCut:
			f.target, f.dur = rng.IntN(s.regions), between(5*time.Second, nemesisMaxLeafCut)
		}
		f.dur = f.dur.Round(100 * time.Millisecond)
		group, limit := s.group(f)
		busy, same := 0, false
		for _, g := range out {
			if gg, _ := s.group(g); gg != group || g.at+g.dur <= f.at {
				continue
			}
			busy++
			same = same || g.target == f.target
		}
		if busy >= limit || same {
			continue
		}
		out = append(out, f)
	}
	return out
}

// nemesisSettings reads the seed and the duration.
func nemesisSettings(t *testing.T, short bool) (uint64, time.Duration) {
	t.Helper()
	seed := rand.Uint64() % 1_000_000
	if v := os.Getenv("EDGECOUNT_NEMESIS_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("EDGECOUNT_NEMESIS_SEED=%q: %v", v, err)
		}
		seed = n
	}
	d := 5 * time.Minute
	if short {
		d = time.Minute
	}
	if v := os.Getenv("EDGECOUNT_NEMESIS_DURATION"); v != "" {
		var err error
		if d, err = time.ParseDuration(v); err != nil || d < 30*time.Second {
			t.Fatalf("EDGECOUNT_NEMESIS_DURATION=%q: want a duration of 30s or more (%v)", v, err)
		}
	}
	return seed, d
}

func runNemesis(t *testing.T, r *rowRun) {
	seed, d := nemesisSettings(t, r.short)
	const agentsPerRegion = 2
	shape := nemesisShape{regions: len(topologyRegions), agentsPerRegion: agentsPerRegion, rollups: 2, hubs: 3, dcs: 2}
	plan := schedule(seed, d, shape)
	var lines strings.Builder
	for _, f := range plan {
		lines.WriteString("\n  " + f.String())
	}
	t.Logf("nemesis seed %d, %v, %d faults (replay: EDGECOUNT_NEMESIS_SEED=%d EDGECOUNT_NEMESIS_DURATION=%v):%s", seed, d, len(plan), seed, d, lines.String())
	kinds := map[faultKind]int{}
	for _, f := range plan {
		kinds[f.kind]++
	}
	var mix []string
	for _, k := range faultKinds {
		mix = append(mix, fmt.Sprintf("%s %d", k, kinds[k]))
	}
	r.describe("seed %d: %d overlapping faults at random over %v (%s)", seed, len(plan), d, strings.Join(mix, ", "))

	// Reactions spread over 16 items: each (user, item) pair then changes
	// about 0.3 times a second, within the 255 changes in 10 minutes a row
	// takes (engagement.MaxWritersKept) over a 5-minute run.
	lc := defaultLoadConfig()
	lc.rxItems = 16
	r.loadCfg = &lc
	rs := startRedisServer(t)
	s := r.startRegions(regionOptions{agents: agentsPerRegion, redis: rs.addr, ackWait: nemesisAckWait})
	nodes := map[int]int{} // data centre index → its node's pid
	for i := range shape.dcs {
		pid := listenerPID(t, s.cass.hosts[fmt.Sprintf("dc%d", i+1)]+":9042")
		nodes[i] = pid
		t.Cleanup(func() { syscall.Kill(pid, syscall.SIGCONT) })
	}
	mon := startCountMonitor(r.ld)
	n := newNemesis(t, s, rs, nodes)
	race := startNemesisRace(s)
	defer race.judge(t, r)
	defer func() {
		v := mon.stop()
		if len(v) > 0 {
			t.Errorf("%d count reads above the increments sent so far, e.g. %s", len(v), v[0])
		}
		neg, above := mon.reordered()
		r.note("%d count reads during the run, %d above the writes sent so far; reaction totals read while a fault held one region's deltas back behind a later change's from another region: %d negative, %d above the number of users (both converge)",
			mon.reads(), len(v), neg, above)
		amb := n.ambiguous + n.countLogs("reaction outcome ambiguous")
		r.note("%d reaction intents settled ambiguous (agents' logs)", amb)
		if amb > 0 {
			t.Errorf("%d reaction intents settled ambiguous; want 0", amb)
		}
	}()
	n.run(plan)
	r.note("%d faults injected: %s", len(plan), strings.Join(mix, ", "))
	r.hold(5 * time.Second)
}

// nemesis injects and heals the faults of a schedule on a regional system.
type nemesis struct {
	t     *testing.T
	s     *regionSystem
	redis *server
	nodes map[int]int
	// ambiguous counts the ambiguous settles in the logs of the agents
	// killed so far (a restart starts a new log).
	ambiguous int
	// starting holds, per agent or rollup being restarted, a channel
	// closed when its restart has ended.
	starting map[string]chan struct{}
}

// countLogs counts the lines with msg in the running agents' logs.
func (n *nemesis) countLogs(msg string) int {
	c := 0
	for _, a := range n.s.agents {
		if a.p != nil {
			c += strings.Count(a.p.stderr.String(), msg)
		}
	}
	return c
}

func newNemesis(t *testing.T, s *regionSystem, redis *server, nodes map[int]int) *nemesis {
	return &nemesis{t: t, s: s, redis: redis, nodes: nodes, starting: map[string]chan struct{}{}}
}

// step is one action of a schedule: a fault's injection or its heal.
type step struct {
	at   time.Duration
	heal bool
	f    nemesisFault
}

// run executes the schedule on the test's goroutine, one action at a time
// in time order (an action due while another runs, a restart that waits
// for readiness, runs right after it).
func (n *nemesis) run(plan []nemesisFault) {
	var steps []step
	for _, f := range plan {
		steps = append(steps, step{at: f.at, f: f}, step{at: f.at + f.dur, heal: true, f: f})
	}
	slices.SortStableFunc(steps, func(a, b step) int { return int(a.at - b.at) })
	began := time.Now()
	for _, st := range steps {
		time.Sleep(time.Until(began.Add(st.at)))
		if st.heal {
			n.heal(st.f)
		} else {
			n.inject(st.f)
		}
		n.t.Logf("nemesis %6.1fs: %s %s", time.Since(began).Seconds(), map[bool]string{false: "inject", true: "heal  "}[st.heal], st.f)
	}
	for key := range n.starting {
		n.settle(key)
	}
	if n.t.Failed() {
		n.t.FailNow()
	}
}

// restart runs launch, the restart of the process key names, on a
// goroutine of its own: a process waits at start for what it needs (an
// agent or a rollup opens its Cassandra session), and a heal due meanwhile
// may be what it waits for (a frozen node's SIGCONT). A failed restart
// fails the test when the schedule ends; the process stays down until then.
func (n *nemesis) restart(key string, launch func() error) {
	done := make(chan struct{})
	n.starting[key] = done
	go func() {
		defer close(done)
		if err := launch(); err != nil {
			n.t.Errorf("nemesis: restart of %s failed: %v", key, err)
		}
	}()
}

// settle waits until the restart of key, if one runs, has ended: before
// the next action on its process.
func (n *nemesis) settle(key string) {
	if done, ok := n.starting[key]; ok {
		<-done
		delete(n.starting, key)
	}
}

// agentKey and rollupKey name an agent's and a rollup's restarts.
func agentKey(i int) string  { return fmt.Sprintf("agent %d", i) }
func rollupKey(i int) string { return fmt.Sprintf("rollup %d", i) }

func (n *nemesis) inject(f nemesisFault) {
	s := n.s
	switch f.kind {
	case faultAgentKill:
		n.settle(agentKey(f.target))
		a := s.agents[f.target]
		if a.p == nil {
			return // its restart failed: the test fails at the end
		}
		kill(n.t, a.p)
		n.ambiguous += strings.Count(a.p.stderr.String(), "reaction outcome ambiguous")
		a.p = nil
	case faultRollupKill:
		n.settle(rollupKey(f.target))
		if s.rollups[f.target] == nil {
			return
		}
		kill(n.t, s.rollups[f.target])
		s.rollups[f.target] = nil
	case faultRollupStop:
		n.settle(rollupKey(f.target))
		if s.rollups[f.target] == nil {
			return
		}
		signal(n.t, s.rollups[f.target].cmd.Process.Pid, syscall.SIGSTOP)
	case faultBrokerKill:
		s.b.regions[topologyRegions[f.target]].kill()
	case faultHubKill:
		s.b.killHub(f.target)
	case faultCassandra:
		signal(n.t, n.nodes[f.target], syscall.SIGSTOP)
	case faultRedisStop:
		n.redis.stop()
	case faultLeafCut:
		s.b.links[topologyRegions[f.target]].cut()
	}
}

func (n *nemesis) heal(f nemesisFault) {
	s := n.s
	switch f.kind {
	case faultAgentKill:
		n.restart(agentKey(f.target), func() error { return s.launchAgent(f.target) })
	case faultRollupKill:
		n.restart(rollupKey(f.target), func() error { return s.launchRollup(f.target) })
	case faultRollupStop:
		if s.rollups[f.target] == nil {
			return
		}
		signal(n.t, s.rollups[f.target].cmd.Process.Pid, syscall.SIGCONT)
	case faultBrokerKill:
		s.b.regions[topologyRegions[f.target]].start()
	case faultHubKill:
		s.b.hub[f.target].start()
	case faultCassandra:
		signal(n.t, n.nodes[f.target], syscall.SIGCONT)
	case faultRedisStop:
		n.redis.start()
	case faultLeafCut:
		if err := s.b.links[topologyRegions[f.target]].restore(); err != nil {
			n.t.Fatal(err)
		}
	}
}

// signal sends sig to pid.
func signal(t *testing.T, pid int, sig syscall.Signal) {
	t.Helper()
	if err := syscall.Kill(pid, sig); err != nil {
		t.Fatalf("cannot send %v to pid %d: %v", sig, pid, err)
	}
}

// listenerPID returns the pid of the process listening on addr
// (127.0.0.N:port), from /proc: the socket's inode in /proc/net/tcp, then
// the process holding it.
func listenerPID(t *testing.T, addr string) int {
	t.Helper()
	host, port, ok := strings.Cut(addr, ":")
	p, err := strconv.Atoi(port)
	parts := strings.Split(host, ".")
	if !ok || err != nil || len(parts) != 4 {
		t.Fatalf("listenerPID(%q): want 127.0.0.N:port", addr)
	}
	var ip [4]int
	for i, s := range parts {
		ip[i], _ = strconv.Atoi(s)
	}
	// /proc/net/tcp writes the address as the little-endian hex of the
	// IPv4 address, then the port in hex; state 0A is LISTEN.
	want := fmt.Sprintf("%02X%02X%02X%02X:%04X", ip[3], ip[2], ip[1], ip[0], p)
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	inode := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) > 9 && fs[1] == want && fs[3] == "0A" {
			inode = fs[9]
		}
	}
	if inode == "" {
		t.Fatalf("nothing listens on %s", addr)
	}
	link := "socket:[" + inode + "]"
	pids, _ := filepath.Glob("/proc/[0-9]*/fd")
	for _, dir := range pids {
		fds, _ := os.ReadDir(dir)
		for _, fd := range fds {
			if l, err := os.Readlink(filepath.Join(dir, fd.Name())); err == nil && l == link {
				pid, _ := strconv.Atoi(strings.Split(dir, "/")[2])
				return pid
			}
		}
	}
	t.Fatalf("no process holds the socket listening on %s (inode %s)", addr, inode)
	return 0
}

// countMonitor reads counts through random agents while the load runs and
// records every read above what the load has sent of the item so far: a
// count no write can explain.
type countMonitor struct {
	l          *load
	stopCh     chan struct{}
	done       chan struct{}
	mu         sync.Mutex
	n          int
	negative   int // reads of a negative like or dislike total
	aboveUsers int // reads of more likes and dislikes than users
	invalid    []string
}

func startCountMonitor(l *load) *countMonitor {
	m := &countMonitor{l: l, stopCh: make(chan struct{}), done: make(chan struct{})}
	readers := make([]*client.Client, len(l.urls))
	for i, u := range l.urls {
		readers[i] = newClient(u, 2*time.Second)
	}
	go func() {
		defer close(m.done)
		tk := time.NewTicker(100 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-m.stopCh:
				return
			case <-tk.C:
			}
			ids := []string{l.items[rand.IntN(len(l.items))], l.rxItems[rand.IntN(len(l.rxItems))]}
			got, err := readers[rand.IntN(len(readers))].Counts(context.Background(), "", ids...)
			if err != nil || len(got) != len(ids) {
				continue // a fault: reads may fail
			}
			l.mu.Lock()
			sent, rxSent := l.sent[ids[0]], *l.rxSent[ids[1]]
			l.mu.Unlock()
			m.mu.Lock()
			m.n++
			if v := got[0].Counters["view"]; v > sent {
				m.invalid = append(m.invalid, fmt.Sprintf("%s: view %d read, %d sent", ids[0], v, sent))
			}
			rx := got[1]
			if rx.Likes > rxSent[0] || rx.Dislikes > rxSent[1] {
				m.invalid = append(m.invalid, fmt.Sprintf("%s: likes %d dislikes %d read, %d and %d sent", ids[1], rx.Likes, rx.Dislikes, rxSent[0], rxSent[1]))
			}
			// Deltas of one user's changes recorded by agents of
			// different regions travel different brokers: while a fault
			// holds one region's back, a later change's delta can be
			// applied before an earlier one's. An undo's −1 before the +1
			// it undoes reads a total too low (even negative); a new
			// reaction's +1 before the undo's −1 of the one it replaced
			// reads more reactions than users. Both converge once the
			// held-back deltas arrive (the checker's final totals).
			if rx.Likes < 0 || rx.Dislikes < 0 {
				m.negative++
			}
			if rx.Likes+rx.Dislikes > int64(len(l.users)) {
				m.aboveUsers++
			}
			m.mu.Unlock()
		}
	}()
	return m
}

// stop ends the monitor and returns the invalid reads.
func (m *countMonitor) stop() []string {
	close(m.stopCh)
	<-m.done
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.invalid
}

// reordered returns the reads of a negative reaction total and those of
// more reactions than users (see startCountMonitor).
func (m *countMonitor) reordered() (negative, aboveUsers int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.negative, m.aboveUsers
}

func (m *countMonitor) reads() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.n
}

// TestNemesisSchedule checks the schedule without a system: a seed always
// gives the same schedule, other seeds other ones, and no schedule takes a
// group past its limit or faults past its end.
func TestNemesisSchedule(t *testing.T) {
	shape := nemesisShape{regions: 3, agentsPerRegion: 2, rollups: 2, hubs: 3, dcs: 2}
	a, b := schedule(42, 5*time.Minute, shape), schedule(42, 5*time.Minute, shape)
	if !slices.Equal(a, b) || len(a) < 20 {
		t.Fatalf("seed 42 gave %d then %d faults (or differing ones); want the same schedule of 20 or more", len(a), len(b))
	}
	if slices.Equal(a, schedule(43, 5*time.Minute, shape)) {
		t.Fatal("seeds 42 and 43 gave the same schedule")
	}
	for seed := range uint64(200) {
		d := time.Duration(30+seed%300) * time.Second
		plan := schedule(seed, d, shape)
		seen := map[faultKind]bool{}
		for i, f := range plan {
			seen[f.kind] = true
			if f.at+f.dur > d {
				t.Fatalf("seed %d: %v ends after %v", seed, f, d)
			}
			group, limit := shape.group(f)
			busy := 0
			for _, g := range plan[:i+1] {
				if gg, _ := shape.group(g); gg == group && g.at <= f.at && f.at < g.at+g.dur {
					busy++
				}
			}
			if busy > limit {
				t.Fatalf("seed %d: %d faults of %s at %v, limit %d:\n%v", seed, busy, group, f.at, limit, plan)
			}
		}
		if d >= 5*time.Minute && len(seen) < len(faultKinds) {
			t.Errorf("seed %d over %v used %d of the %d kinds", seed, d, len(seen), len(faultKinds))
		}
	}
}

// nemesisRaceSize is one round of the reaction race the nemesis row runs
// beside its load (linearizable_test.go): rounds follow one another until
// the faults end, each on pairs of its own, so that no pair takes the 255
// changes in 10 minutes a row allows (a 5-minute run on the same 4 pairs
// had 2,574 of its writes refused 429), and Porcupine checks short
// histories (on one long one, with 114 writes left without an answer, it
// gave up after 2 minutes).
var nemesisRaceSize = linearizeSize{name: "nemesis", pairs: 4, clients: 3, reactions: 36}

// nemesisRace is the race of the nemesis row: its rounds run until stop.
type nemesisRace struct {
	s      *regionSystem
	h      *raceHistory
	stopCh chan struct{}
	done   chan struct{}
	rounds int
}

func startNemesisRace(s *regionSystem) *nemesisRace {
	r := &nemesisRace{s: s, h: newRaceHistory(), stopCh: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(r.done)
		for {
			select {
			case <-r.stopCh:
				return
			case <-time.After(500 * time.Millisecond):
			}
			size := nemesisRaceSize
			size.keys = fmt.Sprintf("nem%d", r.rounds)
			r.h.race(s, size)
			r.rounds++
		}
	}()
	return r
}

// judge stops the race and checks its history with Porcupine: writes
// linearizable, reads as GET /v1/reactions promises (site-monotonic). A
// check that does not finish in time (many writes without an answer make
// the search long) is reported, not failed.
func (r *nemesisRace) judge(t *testing.T, row *rowRun) {
	close(r.stopCh)
	<-r.done
	writes, reads := r.h.counts()
	res := linearize.Check(r.h.ops, linearize.SiteMonotonic, 2*time.Minute)
	row.note("Porcupine on %d race rounds beside the faults (%d pairs × %d clients; writes %s; reads %s): %v on %d operations, %d without an answer",
		r.rounds, nemesisRaceSize.pairs, nemesisRaceSize.clients, writes, reads, res.Result, res.Ops, res.Pending)
	for _, p := range r.h.problems {
		t.Error(p)
	}
	if res.Result == porcupine.Illegal {
		t.Errorf("the reaction race under the nemesis is not linearizable for pairs %v", res.Failed)
		r.h.report(t, &res, r.s)
	}
}
