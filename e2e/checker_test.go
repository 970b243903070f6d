package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/edgecount/edgecount/client"
)

// The checker of the fault suite: a load driver that records every
// attempted and every acknowledged write per item, and a judge that
// compares that record with the totals the agents serve once the system
// has drained.
//
// Increments: per item, lost = acked − counted and doubled = counted −
// attempted (each when positive). An increment batch that got no answer
// (timeout, reset, a 5xx) is attempted and not acked: it may or may not
// have been counted. A batch refused at connect was never sent, so it is
// not attempted; the driver sends it to another agent instead.
//
// Reactions: each user's rows are written by one goroutine at a time, so
// the totals must equal, per item, the tally of every user's last
// acknowledged action. A (user, item) pair whose reaction ever went
// unanswered (timeout, reset, a 5xx) is settled by reading its row: a
// reaction in flight may still apply after the client gave up. The row of
// a pair without such a reaction must hold its last acknowledged action;
// one that does not is a lost write too.

// outcome is what a write's answer says about it.
type outcome int

const (
	acked    outcome = iota // 2xx: applied
	rejected                // 4xx: applied nothing (the API's contract)
	unknown                 // no answer, a reset or a 5xx: may have applied
	refused                 // connection refused: never sent
)

// answerOf turns a call's error into what classify takes: the status of
// an answer (200 for a 2xx, the error's for a *client.Error) or the error
// of getting none.
func answerOf(err error) (int, error) {
	var e *client.Error
	switch {
	case err == nil:
		return http.StatusOK, nil
	case errors.As(err, &e):
		return e.Status, nil
	}
	return 0, err
}

// errSent marks an error of a request that was written to a connection at
// least once. net/http sends a request with an Idempotency-Key again on a
// new connection when a reused one fails before the answer (it counts it
// as replayable): when the agent died after taking the request, the new
// connection is refused, yet the first copy may have been applied, so the
// batch is not "refused" (never sent) but unanswered.
var errSent = errors.New("the request was written before the error")

// sentTracker wraps every error of a request that was written in errSent.
type sentTracker struct{ base http.RoundTripper }

func (s sentTracker) RoundTrip(req *http.Request) (*http.Response, error) {
	var wrote atomic.Bool
	trace := &httptrace.ClientTrace{WroteRequest: func(i httptrace.WroteRequestInfo) {
		if i.Err == nil {
			wrote.Store(true)
		}
	}}
	resp, err := s.base.RoundTrip(req.WithContext(httptrace.WithClientTrace(req.Context(), trace)))
	if err != nil && wrote.Load() {
		err = fmt.Errorf("%w: %w", errSent, err)
	}
	return resp, err
}

// classify maps an answer (or the error of getting none) to an outcome.
func classify(status int, err error) outcome {
	switch {
	case err != nil && errors.Is(err, errSent):
		return unknown // written once: it may have been applied
	case err != nil && errors.Is(err, syscall.ECONNREFUSED):
		return refused
	case err != nil:
		return unknown
	case status/100 == 2:
		return acked
	case status == http.StatusConflict, status == http.StatusTooManyRequests:
		// A reaction's race or its row's change limit: not the driver's
		// fault. A 409 may leave its outcome for the agent to settle (a
		// Paxos timeout), so both count as unanswered: the pair is then
		// judged by its row.
		return unknown
	case status/100 == 4:
		return rejected
	default:
		return unknown
	}
}

// pair is one user's reaction to one item.
type pair struct{ user, item string }

// pairState is what the driver knows of a pair: its last acknowledged
// action, and whether any reaction of it went unanswered.
type pairState struct {
	acked     string // "none" before the first acknowledged reaction
	uncertain bool
}

// loadStats counts requests by outcome.
type loadStats struct {
	batches, batchesAcked, batchesUnknown, batchesRejected, batchesRefused, batchesSkipped int64
	batchesRedirected                                                                      int64 // sent again after a refused connect
	reactions, reactionsAcked, reactionsUnknown, reactionsRejected, reactionsRefused       int64
}

// loadConfig shapes the driver's load.
type loadConfig struct {
	items     int           // view items (a few hundred)
	batch     int           // increments per POST /v1/increments
	rate      int           // increments per second
	workers   int           // concurrent increment requests at most
	timeout   time.Duration // increment request timeout
	users     int           // reacting users
	rxItems   int           // items they react to
	pace      time.Duration // pause between one user's reactions
	rxTimeout time.Duration // reaction request timeout
}

func defaultLoadConfig() loadConfig {
	return loadConfig{
		items: 300, batch: 100, rate: 1500, workers: 32, timeout: 5 * time.Second,
		users: 16, rxItems: 4, pace: 200 * time.Millisecond, rxTimeout: 10 * time.Second,
	}
}

// load drives writes at a set of agents and keeps the ledger. Its methods
// are safe for concurrent use.
type load struct {
	cfg     loadConfig
	urls    []string
	items   []string
	rxItems []string
	users   []string
	// One client of each agent (urls[i]) for increments and one for
	// reactions, each with its timeout and without retries: every call
	// is one request, whose outcome the ledger records.
	incs []*client.Client
	rx   []*client.Client

	next      atomic.Uint64
	downUntil []atomic.Int64 // per agent: unix ns until which it is avoided

	mu        sync.Mutex
	attempted map[string]int64
	// sent counts each item's increments before their batch is sent
	// (attempted only after its answer), for reads during the run: no
	// count may exceed it.
	sent map[string]int64
	// rxSent counts each reaction item's like and dislike writes before
	// they are sent: no like or dislike total read may exceed them.
	rxSent map[string]*[2]int64
	ackedN map[string]int64
	pairs  map[pair]*pairState
	stats  loadStats

	stopOnce sync.Once
	stopCh   chan struct{}
	wg       sync.WaitGroup
	began    time.Time
	ended    time.Time
}

func newLoad(cfg loadConfig, urls []string) *load {
	l := &load{
		cfg:       cfg,
		urls:      urls,
		downUntil: make([]atomic.Int64, len(urls)),
		attempted: map[string]int64{},
		sent:      map[string]int64{},
		rxSent:    map[string]*[2]int64{},
		ackedN:    map[string]int64{},
		pairs:     map[pair]*pairState{},
		stopCh:    make(chan struct{}),
	}
	for _, u := range urls {
		l.incs = append(l.incs, newClient(u, cfg.timeout))
		l.rx = append(l.rx, newClient(u, cfg.rxTimeout))
	}
	for i := range cfg.items {
		l.items = append(l.items, fmt.Sprintf("v%03d", i))
	}
	for i := range cfg.rxItems {
		l.rxItems = append(l.rxItems, fmt.Sprintf("r%d", i))
		l.rxSent[l.rxItems[i]] = new([2]int64)
	}
	for i := range cfg.users {
		l.users = append(l.users, fmt.Sprintf("u%02d", i))
	}
	for _, u := range l.users {
		for _, it := range l.rxItems {
			l.pairs[pair{u, it}] = &pairState{acked: "none"}
		}
	}
	return l
}

// start begins the load: a pacer hands out one token per batch due at
// the configured rate to the increment workers (catching up after a late
// tick; a token no worker is free to take is counted as skipped), and one
// goroutine per user toggles reactions.
func (l *load) start() {
	l.began = time.Now()
	tokens := make(chan struct{}, l.cfg.workers)
	l.wg.Go(func() {
		tk := time.NewTicker(10 * time.Millisecond)
		defer tk.Stop()
		issued := 0
		for {
			select {
			case <-l.stopCh:
				return
			case <-tk.C:
				due := int(time.Since(l.began).Seconds() * float64(l.cfg.rate) / float64(l.cfg.batch))
				for ; issued < due; issued++ {
					select {
					case tokens <- struct{}{}:
					default:
						l.mu.Lock()
						l.stats.batchesSkipped++
						l.mu.Unlock()
					}
				}
			}
		}
	})
	for range l.cfg.workers {
		l.wg.Go(func() {
			for {
				select {
				case <-l.stopCh:
					return
				case <-tokens:
					l.sendBatch()
				}
			}
		})
	}
	for _, u := range l.users {
		l.wg.Go(func() { l.react(u) })
	}
}

// stop ends the load and waits for every request in flight to end.
func (l *load) stop() {
	l.stopOnce.Do(func() {
		close(l.stopCh)
		l.wg.Wait()
		l.ended = time.Now()
	})
}

// pick returns the index of the agent to send to, the way a load balancer
// with passive health checks would: round robin over the agents not
// avoided after a failure, any of them when all are.
func (l *load) pick() int {
	now := time.Now().UnixNano()
	n := len(l.urls)
	start := int(l.next.Add(1) % uint64(n))
	for k := range n {
		i := (start + k) % n
		if l.downUntil[i].Load() <= now {
			return i
		}
	}
	return start
}

// avoid keeps requests away from agent i for a second.
func (l *load) avoid(i int) { l.downUntil[i].Store(time.Now().Add(time.Second).UnixNano()) }

// sendBatch posts one batch of increments (delta 1 to batch distinct
// items) and records its outcome. A refused connection is tried on the
// next agent, as it was never sent.
func (l *load) sendBatch() {
	off := rand.IntN(len(l.items))
	ids := make([]string, l.cfg.batch)
	incs := make([]client.Increment, l.cfg.batch)
	for j := range ids {
		ids[j] = l.items[(off+j)%len(l.items)]
		incs[j] = client.Increment{ContentID: ids[j], Counter: "view", Delta: 1}
	}
	l.mu.Lock()
	for _, id := range ids {
		l.sent[id]++
	}
	l.mu.Unlock()
	o, redirected := refused, false
	for try := range l.urls {
		redirected = try > 0
		i := l.pick()
		accepted, err := l.incs[i].Increments(context.Background(), incs)
		o = classify(answerOf(err))
		if o == acked && accepted != len(ids) {
			o = unknown // an answer the contract does not allow
		}
		if o != acked {
			l.avoid(i)
		}
		if o != refused {
			break
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if o == refused {
		l.stats.batchesRefused++
		return
	}
	l.stats.batches++
	if redirected {
		l.stats.batchesRedirected++
	}
	for _, id := range ids {
		l.attempted[id]++
	}
	switch o {
	case acked:
		l.stats.batchesAcked++
		for _, id := range ids {
			l.ackedN[id]++
		}
	case rejected:
		l.stats.batchesRejected++
	case unknown:
		l.stats.batchesUnknown++
	}
}

// react toggles user's reactions (like, dislike, none on a random item)
// until the load stops, one at a time.
func (l *load) react(user string) {
	actions := []string{"like", "dislike", "none"}
	for {
		select {
		case <-l.stopCh:
			return
		case <-time.After(l.cfg.pace):
		}
		r := reaction{user, l.rxItems[rand.IntN(len(l.rxItems))], actions[rand.IntN(len(actions))]}
		l.mu.Lock()
		switch r.Action {
		case "like":
			l.rxSent[r.Content][0]++
		case "dislike":
			l.rxSent[r.Content][1]++
		}
		l.mu.Unlock()
		o := refused
		for range l.urls {
			i := l.pick()
			_, err := l.rx[i].React(context.Background(), r.User, r.Content, r.Action)
			o = classify(answerOf(err))
			if o != acked {
				l.avoid(i)
			}
			if o != refused {
				break
			}
		}
		l.mu.Lock()
		ps := l.pairs[pair{r.User, r.Content}]
		switch o {
		case refused:
			l.stats.reactionsRefused++
		case acked:
			l.stats.reactions++
			l.stats.reactionsAcked++
			ps.acked = r.Action
		case rejected:
			l.stats.reactions++
			l.stats.reactionsRejected++
		case unknown:
			l.stats.reactions++
			l.stats.reactionsUnknown++
			ps.uncertain = true
		}
		l.mu.Unlock()
	}
}

// ledger is a copy of what the driver recorded.
type ledger struct {
	attempted, acked map[string]int64
	pairs            map[pair]pairState
	stats            loadStats
}

func (l *load) ledger() ledger {
	l.mu.Lock()
	defer l.mu.Unlock()
	g := ledger{attempted: maps.Clone(l.attempted), acked: maps.Clone(l.ackedN), pairs: map[pair]pairState{}, stats: l.stats}
	for k, v := range l.pairs {
		g.pairs[k] = *v
	}
	return g
}

// rate is the attempted increments per second over the load's run.
func (l *load) rate() float64 {
	g := l.ledger()
	var n int64
	for _, v := range g.attempted {
		n += v
	}
	d := l.ended.Sub(l.began)
	if l.ended.IsZero() {
		d = time.Since(l.began)
	}
	return float64(n) / d.Seconds()
}

// totals is what the agents serve: the global row of every item.
type totals struct {
	views           map[string]int64
	likes, dislikes map[string]int64
}

func (a totals) equal(b totals) bool {
	return maps.Equal(a.views, b.views) && maps.Equal(a.likes, b.likes) && maps.Equal(a.dislikes, b.dislikes)
}

// newClient is a client of the agent at base whose calls are one request
// each (no retries), within timeout.
func newClient(base string, timeout time.Duration) *client.Client {
	hc := &http.Client{Timeout: timeout, Transport: sentTracker{http.DefaultTransport}}
	c, err := client.New(base, client.WithHTTPClient(hc), client.WithRetries(1, 0, 0))
	if err != nil {
		panic(err) // base is an agent's http://host:port
	}
	return c
}

// readTotals reads the global totals of ids through c, 100 ids a request.
func readTotals(c *client.Client, ids []string) (totals, error) {
	t := totals{views: map[string]int64{}, likes: map[string]int64{}, dislikes: map[string]int64{}}
	for len(ids) > 0 {
		n := min(len(ids), 100)
		got, err := c.Counts(context.Background(), "", ids[:n]...)
		if err != nil {
			return t, err
		}
		if len(got) != n {
			return t, fmt.Errorf("GET /v1/counts of %d ids answered %d counts", n, len(got))
		}
		for _, c := range got {
			t.views[c.ContentID] = c.Counters["view"]
			t.likes[c.ContentID] = c.Likes
			t.dislikes[c.ContentID] = c.Dislikes
		}
		ids = ids[n:]
	}
	return t, nil
}

// readRows reads every user's rows of items through c.
func readRows(c *client.Client, users, items []string) (map[pair]string, error) {
	rows := map[pair]string{}
	for _, u := range users {
		got, err := c.Reactions(context.Background(), u, items...)
		if err != nil {
			return nil, err
		}
		for _, r := range got {
			rows[pair{u, r.ContentID}] = r.Action
		}
		for _, it := range items {
			if _, ok := rows[pair{u, it}]; !ok {
				return nil, fmt.Errorf("GET /v1/reactions/%s has no row for %s", u, it)
			}
		}
	}
	return rows, nil
}

// verdict is the judge's comparison of a ledger with the totals.
type verdict struct {
	// Attempted, Acked and Counted are view increments over every item.
	Attempted, Acked, Counted int64
	// Lost and Doubled add up the increments' and the reactions'.
	Lost, Doubled int64

	ViewsLost, ViewsDoubled int64
	// ReactionsWant and ReactionsCounted are likes plus dislikes over the
	// reaction items: what the users' states add up to, and the totals.
	ReactionsWant, ReactionsCounted int64
	ReactionsLost, ReactionsDoubled int64
	// RowsLost counts pairs without an unanswered reaction whose row is
	// not their last acknowledged action (counted in Lost).
	RowsLost int64
	// Settled counts pairs settled by reading their row.
	Settled int64
}

// ok reports whether nothing was lost or doubled.
func (v verdict) ok() bool { return v.Lost == 0 && v.Doubled == 0 }

// judge compares the ledger with the totals served and the rows read.
func judge(g ledger, t totals, rows map[pair]string) verdict {
	var v verdict
	ids := map[string]bool{}
	for id := range g.attempted {
		ids[id] = true
	}
	for id := range t.views {
		ids[id] = true
	}
	for id := range ids {
		a, k, c := g.attempted[id], g.acked[id], t.views[id]
		v.Attempted += a
		v.Acked += k
		v.Counted += c
		v.ViewsLost += max(0, k-c)
		v.ViewsDoubled += max(0, c-a)
	}
	wantLikes, wantDislikes := map[string]int64{}, map[string]int64{}
	items := map[string]bool{}
	for p, s := range g.pairs {
		items[p.item] = true
		state := s.acked
		if s.uncertain {
			state = rows[p]
			v.Settled++
		} else if row, ok := rows[p]; ok && row != s.acked {
			v.RowsLost++
		}
		switch state {
		case "like":
			wantLikes[p.item]++
		case "dislike":
			wantDislikes[p.item]++
		}
	}
	for it := range items {
		wl, wd, cl, cd := wantLikes[it], wantDislikes[it], t.likes[it], t.dislikes[it]
		v.ReactionsWant += wl + wd
		v.ReactionsCounted += cl + cd
		v.ReactionsLost += max(0, wl-cl) + max(0, wd-cd)
		v.ReactionsDoubled += max(0, cl-wl) + max(0, cd-wd)
	}
	v.Lost = v.ViewsLost + v.ReactionsLost + v.RowsLost
	v.Doubled = v.ViewsDoubled + v.ReactionsDoubled
	return v
}

// drainResult is how the totals ended after the load.
type drainResult struct {
	v verdict
	// took is from the end of the load until the totals reached their
	// final values; settled is false when they did not stop changing
	// and match before the timeout (took is then the wait).
	took    time.Duration
	settled bool
	how     string
}

// drainTimes bound the wait for the totals.
type drainTimes struct {
	quiet time.Duration // unchanged this long and matching: drained
	stuck time.Duration // unchanged this long and not matching: give up
	// stuckReactions replaces stuck when only reaction totals differ:
	// those the recount job repairs from the rows.
	stuckReactions time.Duration
	timeout        time.Duration // after the end of the load: give up
}

func defaultDrainTimes() drainTimes {
	// stuck outlasts the broker's redelivery of an unacknowledged message
	// (nats.ack_wait, 30 s by default) and a partition's handover;
	// stuckReactions outlasts a recount pass (rollup.recount.interval,
	// 1 min by default) after the item's quiet period (recount.quiet,
	// 30 s by default at a 200 ms flush).
	return drainTimes{quiet: 5 * time.Second, stuck: 35 * time.Second, stuckReactions: 100 * time.Second, timeout: 150 * time.Second}
}

// drain polls the totals (and the rows of pairs to settle) through the
// agents until they stop changing and match the ledger, or stop changing
// without matching, or the timeout passes.
func (l *load) drain(dt drainTimes) drainResult {
	g := l.ledger()
	readers := make([]*client.Client, len(l.urls))
	for i, u := range l.urls {
		readers[i] = newClient(u, 10*time.Second)
	}
	ids := append(append([]string(nil), l.items...), l.rxItems...)
	var (
		last       totals
		lastRows   map[pair]string
		lastChange time.Time
		have       bool
		v          verdict
		lastErr    error
	)
	for i := 0; ; i++ {
		now := time.Now()
		c := readers[i%len(readers)]
		t, err := readTotals(c, ids)
		var rows map[pair]string
		if err == nil {
			rows, err = readRows(c, l.users, l.rxItems)
		}
		if err != nil {
			lastErr = err
		} else {
			if !have || !t.equal(last) || !maps.Equal(rows, lastRows) {
				last, lastRows, lastChange, have = t, rows, now, true
			}
			v = judge(g, t, rows)
			stuck := dt.stuck
			if v.ViewsLost == 0 && v.ViewsDoubled == 0 {
				stuck = dt.stuckReactions
			}
			switch {
			case v.ok() && now.Sub(lastChange) >= dt.quiet:
				return drainResult{v: v, took: max(0, lastChange.Sub(l.ended)), settled: true, how: "matched"}
			case !v.ok() && now.Sub(lastChange) >= stuck:
				return drainResult{v: v, took: now.Sub(l.ended), how: fmt.Sprintf("stopped changing for %v without matching", stuck)}
			}
		}
		if now.Sub(l.ended) > dt.timeout {
			how := fmt.Sprintf("still changing when the %v timeout passed", dt.timeout)
			if have && !v.ok() {
				how = fmt.Sprintf("not matching when the %v timeout passed, %.0f s after the last change", dt.timeout, now.Sub(lastChange).Seconds())
			}
			if !have {
				how = fmt.Sprintf("no totals read in %v: %v", dt.timeout, lastErr)
			}
			return drainResult{v: v, took: now.Sub(l.ended), how: how}
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// TestJudge checks the checker's arithmetic on hand-made ledgers, without
// any server.
func TestJudge(t *testing.T) {
	type views struct{ attempted, acked, counted int64 }
	tests := []struct {
		name  string
		views map[string]views
		// pairs: user/item → acked action, "?" prefix = uncertain.
		pairs    map[pair]string
		rows     map[pair]string
		likes    map[string]int64
		dislikes map[string]int64
		want     verdict
	}{
		{
			name:  "exact",
			views: map[string]views{"a": {3, 3, 3}, "b": {2, 1, 1}},
			want:  verdict{Attempted: 5, Acked: 4, Counted: 4},
		},
		{
			name:  "an unanswered batch may count or not",
			views: map[string]views{"a": {3, 2, 3}, "b": {3, 2, 2}},
			want:  verdict{Attempted: 6, Acked: 4, Counted: 5},
		},
		{
			name:  "lost and doubled per item, not netted across items",
			views: map[string]views{"a": {5, 5, 3}, "b": {2, 2, 4}},
			want:  verdict{Attempted: 7, Acked: 7, Counted: 7, Lost: 2, ViewsLost: 2, Doubled: 2, ViewsDoubled: 2},
		},
		{
			name:     "reactions: the acknowledged states",
			pairs:    map[pair]string{{"u1", "r"}: "like", {"u2", "r"}: "dislike", {"u3", "r"}: "none"},
			rows:     map[pair]string{{"u1", "r"}: "like", {"u2", "r"}: "dislike", {"u3", "r"}: "none"},
			likes:    map[string]int64{"r": 1},
			dislikes: map[string]int64{"r": 1},
			want:     verdict{ReactionsWant: 2, ReactionsCounted: 2},
		},
		{
			name:     "reactions: an unanswered one is settled by its row",
			pairs:    map[pair]string{{"u1", "r"}: "?like", {"u2", "r"}: "?like"},
			rows:     map[pair]string{{"u1", "r"}: "dislike", {"u2", "r"}: "none"},
			dislikes: map[string]int64{"r": 1},
			want:     verdict{ReactionsWant: 1, ReactionsCounted: 1, Settled: 2},
		},
		{
			name:  "reactions: a lost delta and a doubled one",
			pairs: map[pair]string{{"u1", "r"}: "like", {"u2", "s"}: "none"},
			rows:  map[pair]string{{"u1", "r"}: "like", {"u2", "s"}: "none"},
			// r lost its like; s counts a dislike nobody holds.
			dislikes: map[string]int64{"s": 1},
			want:     verdict{ReactionsWant: 1, ReactionsCounted: 1, Lost: 1, ReactionsLost: 1, Doubled: 1, ReactionsDoubled: 1},
		},
		{
			name:  "reactions: a row that lost its acknowledged action",
			pairs: map[pair]string{{"u1", "r"}: "like"},
			rows:  map[pair]string{{"u1", "r"}: "none"},
			likes: map[string]int64{"r": 1},
			want:  verdict{ReactionsWant: 1, ReactionsCounted: 1, Lost: 1, RowsLost: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := ledger{attempted: map[string]int64{}, acked: map[string]int64{}, pairs: map[pair]pairState{}}
			tot := totals{views: map[string]int64{}, likes: tt.likes, dislikes: tt.dislikes}
			for id, v := range tt.views {
				g.attempted[id], g.acked[id], tot.views[id] = v.attempted, v.acked, v.counted
			}
			for p, s := range tt.pairs {
				act, uncertain := strings.CutPrefix(s, "?")
				g.pairs[p] = pairState{acked: act, uncertain: uncertain}
			}
			if got := judge(g, tot, tt.rows); got != tt.want {
				t.Errorf("judge = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestClassify(t *testing.T) {
	refusedErr := &url.Error{Op: "Post", URL: "http://x", Err: &net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}}
	tests := []struct {
		status int
		err    error
		want   outcome
	}{
		{http.StatusOK, nil, acked},
		{http.StatusAccepted, nil, acked},
		{http.StatusBadRequest, nil, rejected},
		{http.StatusServiceUnavailable, nil, unknown},
		{http.StatusInternalServerError, nil, unknown},
		{0, errors.New("read: connection reset by peer"), unknown},
		{0, refusedErr, refused},
	}
	for _, tt := range tests {
		if got := classify(tt.status, tt.err); got != tt.want {
			t.Errorf("classify(%d, %v) = %v, want %v", tt.status, tt.err, got, tt.want)
		}
	}
}

// TestAnswerOf: the client's answers reach classify as the statuses and
// errors it knows, a refused connect included (through the client's
// wrapping of net/http's error), so the ledger's outcomes are those of the
// raw requests the checker sent before it used package client.
func TestAnswerOf(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String()
	l.Close()
	_, refusedErr := newClient(closed, time.Second).Increments(context.Background(), []client.Increment{{ContentID: "a", Counter: "view", Delta: 1}})
	tests := []struct {
		err  error
		want outcome
	}{
		{nil, acked},
		{&client.Error{Status: http.StatusBadRequest, Message: "bad", Field: "increments[0].delta"}, rejected},
		{&client.Error{Status: http.StatusServiceUnavailable}, unknown},
		{&client.Error{Status: http.StatusConflict}, unknown}, // a reaction's race, possibly settled later
		{&client.Error{Status: http.StatusTooManyRequests}, unknown},
		{&client.Error{Status: http.StatusUnprocessableEntity, Field: "action"}, rejected},
		{fmt.Errorf("edgecount: POST /v1/increments: %w", errors.New("read: connection reset by peer")), unknown},
		{refusedErr, refused},
	}
	for _, tt := range tests {
		if got := classify(answerOf(tt.err)); got != tt.want {
			t.Errorf("classify(answerOf(%v)) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

// TestTakenThenRefusedIsUnknown: an agent that takes a request on a kept-
// alive connection and dies before answering makes net/http send the keyed
// request again on a new connection, which is refused; the batch was sent
// (and may be applied), so it is unanswered, not refused.
func TestTakenThenRefusedIsUnknown(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	served := make(chan struct{})
	go func() {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		r := bufio.NewReader(conn)
		// The first request is answered (the connection is kept alive),
		// the second is read and left unanswered: the agent dies.
		for i := range 2 {
			req, err := http.ReadRequest(r)
			if err != nil {
				break
			}
			io.Copy(io.Discard, req.Body) //nolint:errcheck // a test server
			if i == 0 {
				io.WriteString(conn, "HTTP/1.1 202 Accepted\r\nContent-Type: application/json\r\nContent-Length: 14\r\n\r\n{\"accepted\":1}") //nolint:errcheck // a test server
				continue
			}
			l.Close() // the agent is gone: new connections are refused
			conn.Close()
		}
		close(served)
	}()
	c := newClient("http://"+addr, 5*time.Second)
	incs := []client.Increment{{ContentID: "a", Counter: "view", Delta: 1}}
	if _, err := c.Increments(context.Background(), incs); err != nil {
		t.Fatalf("first batch: %v", err)
	}
	_, err = c.Increments(context.Background(), incs)
	<-served
	if got := classify(answerOf(err)); got != unknown {
		t.Fatalf("classify(%v) = %v, want unknown (the batch was sent)", err, got)
	}
}
