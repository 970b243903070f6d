package e2e

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/internal/linearize"
)

// linearizeSize is the shape of a TestLinearizableReactions run.
type linearizeSize struct {
	name      string
	keys      string // names the pairs' users and items ("lin" when empty)
	pairs     int    // (user, item) pairs
	clients   int    // per pair
	reactions int    // in all, shared evenly by the clients
}

// The sizes: small runs in go test ./e2e/ (and so in CI), large (G21:
// ~1,200 reactions from 4 clients on each of 12 pairs) with
// EDGECOUNT_LINEARIZE=large, as the fault suite runs it.
var (
	linearizeSmall = linearizeSize{name: "small", pairs: 4, clients: 4, reactions: 480}
	linearizeLarge = linearizeSize{name: "large", pairs: 12, clients: 4, reactions: 1200}
)

// linearizeAnswerTimeout bounds a request of the race: a reaction write
// returns within about five times cassandra.timeout (docs/fence.md), so a
// request without an answer by then is one whose outcome stays unknown.
const linearizeAnswerTimeout = 6 * cassTimeout

// TestLinearizableReactions races reactions on the three-region topology:
// several clients per (user, item) pair, each request through a random
// agent of any region, writes (like, dislike, none) and reads of the
// pair's row. Every operation's call, return and answer is recorded, and
// Porcupine checks each pair's history against a register whose writes
// answer the value before them (G21). A write without a definite answer
// (no answer, a 503, a 5xx, a 409 whose outcome the agent settles later)
// may take effect at any time after its call. Reads are checked for what
// GET /v1/reactions promises (linearize.SiteMonotonic): it reads the
// region's data centre's replica at LOCAL_QUORUM, which can lag a write
// committed through the other data centre, so a linearizable read is not
// promised; the run reports whether the reads happened to be linearizable
// too. G21 also requires no ambiguous intent and no 503: contention is a
// 409 with Retry-After.
func TestLinearizableReactions(t *testing.T) {
	size := linearizeSmall
	switch v := os.Getenv("EDGECOUNT_LINEARIZE"); v {
	case "", "small":
	case "large":
		size = linearizeLarge
	default:
		t.Fatalf("EDGECOUNT_LINEARIZE=%s: want small or large", v)
	}
	s := newRegionSystem(t, regionOptions{agents: 2})
	began := time.Now()
	h := raceReactions(s, size)
	took := time.Since(began)

	writes, reads := h.counts()
	t.Logf("%s: %d pairs × %d clients over %d agents in %d regions, %.1f s: %d reactions attempted (%s), %d reads (%s)",
		size.name, size.pairs, size.clients, len(s.agents), len(topologyRegions), took.Seconds(),
		h.attempted(linearize.Write), writes, h.attempted(linearize.Read), reads)
	for _, e := range h.problems {
		t.Error(e)
	}

	// Contended writes leave intents the agents settle in the background:
	// wait for them before judging ambiguity.
	bases := s.urls()
	waitFor(t, 2*time.Minute, "no reaction intent pending", func() error {
		if n := metricSum(bases, "edgecount_agent_intents_pending"); n != 0 {
			return fmt.Errorf("%v intents pending", n)
		}
		return nil
	})
	var ambiguous, contended, settled, applied float64
	for _, b := range bases {
		ambiguous += metric(t, b, "edgecount_agent_intents_ambiguous_total")
		contended += metric(t, b, "edgecount_cassandra_contended_total")
		settled += metric(t, b, "edgecount_agent_intents_settled_total")
		applied += metric(t, b, "edgecount_agent_intents_applied_total")
	}
	t.Logf("agents: %v writes left open by Paxos contention, %v intents settled (%v applied), %v ambiguous",
		contended, settled, applied, ambiguous)
	if ambiguous != 0 {
		t.Errorf("%v ambiguous intents, want 0 (G21)", ambiguous)
	}
	if n := h.status[linearize.Write][http.StatusServiceUnavailable]; n != 0 {
		t.Errorf("%d reactions answered 503, want 0 (G21: contention is a 409)", n)
		for _, op := range h.ops {
			if op.Kind == linearize.Write && strings.Contains(op.Note, ": 503") {
				t.Logf("  %v of %s %s", op.Action, op.Key, op.Note)
			}
		}

	}
	if h.attempted(linearize.Write) < size.reactions {
		t.Errorf("%d reactions attempted, want %d", h.attempted(linearize.Write), size.reactions)
	}
	if h.status[linearize.Write][http.StatusOK] == 0 || h.status[linearize.Read][http.StatusOK] == 0 {
		t.Fatalf("no write or no read answered 200: nothing to check")
	}

	check := func(rule linearize.ReadRule) linearize.Result {
		checkBegan := time.Now()
		res := linearize.Check(h.ops, rule, 5*time.Minute)
		t.Logf("Porcupine, %v: %v on %d operations (%d pending to the end) in %v; pairs not linearizable: %v",
			rule, res.Result, res.Ops, res.Pending, time.Since(checkBegan).Round(time.Millisecond), res.Failed)
		return res
	}
	if res := check(linearize.SiteMonotonic); res.Result != porcupine.Ok {
		t.Errorf("the history is not linearizable (%v) for pairs %v", res.Result, res.Failed)
		h.report(t, &res, s)
	}
	// Not promised (see above): measured, not judged.
	check(linearize.Linearizable)
}

// raceHistory is what the clients of a race recorded.
type raceHistory struct {
	mu       sync.Mutex
	ops      []linearize.Op
	status   map[linearize.Kind]map[int]int // status (0: no answer) → requests
	problems []string                       // answers that break the API's contract
}

func (h *raceHistory) add(op linearize.Op, status int, problem string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops = append(h.ops, op)
	h.status[op.Kind][status]++
	if problem != "" {
		h.problems = append(h.problems, problem)
	}
}

func (h *raceHistory) attempted(k linearize.Kind) int {
	n := 0
	for _, c := range h.status[k] {
		n += c
	}
	return n
}

// counts describes the answers of writes and of reads by status.
func (h *raceHistory) counts() (writes, reads string) {
	describe := func(m map[int]int) string {
		var codes []int
		for c := range m {
			codes = append(codes, c)
		}
		slices.Sort(codes)
		var parts []string
		for _, c := range codes {
			name := fmt.Sprint(c)
			if c == 0 {
				name = "no answer"
			}
			parts = append(parts, fmt.Sprintf("%s: %d", name, m[c]))
		}
		return strings.Join(parts, ", ")
	}
	return describe(h.status[linearize.Write]), describe(h.status[linearize.Read])
}

// raceReactions runs size's race on s and returns its history.
func raceReactions(s *regionSystem, size linearizeSize) *raceHistory {
	h := newRaceHistory()
	h.race(s, size)
	return h
}

func newRaceHistory() *raceHistory {
	return &raceHistory{status: map[linearize.Kind]map[int]int{linearize.Write: {}, linearize.Read: {}}}
}

// race runs size's race on s and adds it to h; races run one after the
// other on the same pairs make one history.
func (h *raceHistory) race(s *regionSystem, size linearizeSize) {
	dcIndex := map[string]int{"dc1": 0, "dc2": 1}
	type target struct {
		base, name string
		site       int
	}
	var targets []target
	for _, a := range s.agents {
		targets = append(targets, target{a.base(), a.id, dcIndex[topologyDC[a.region]]})
	}
	client := &http.Client{Timeout: linearizeAnswerTimeout}
	perClient := (size.reactions + size.pairs*size.clients - 1) / (size.pairs * size.clients)
	var wg sync.WaitGroup
	for p := range size.pairs {
		keys := cmp.Or(size.keys, "lin")
		user, item := fmt.Sprintf("%s-%s-u%d", s.run, keys, p), fmt.Sprintf("%s-%s-i%d", s.run, keys, p)
		key := user + "/" + item
		for c := range size.clients {
			id := p*size.clients + c
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(id), uint64(time.Now().UnixNano())))
				actions := []engagement.Action{engagement.ActionLike, engagement.ActionDislike, engagement.ActionNone}
				for range perClient {
					tg := targets[rng.IntN(len(targets))]
					h.add(raceWrite(client, tg.base, key, user, item, actions[rng.IntN(3)], id, tg.site, tg.name))
					if rng.IntN(2) == 0 {
						tg = targets[rng.IntN(len(targets))]
						if op, status, problem, ok := raceRead(client, tg.base, key, user, item, id, tg.site, tg.name); ok {
							h.add(op, status, problem)
						} else {
							h.mu.Lock()
							h.status[linearize.Read][status]++
							h.mu.Unlock()
						}
					}
				}
			})
		}
	}
	wg.Wait()
}

// raceWrite sends one reaction and records it; status 0 is no answer.
func raceWrite(client *http.Client, base, key, user, item string, action engagement.Action, clientID, site int, agent string) (linearize.Op, int, string) {
	op := linearize.Op{Key: key, Client: clientID, Site: site, Kind: linearize.Write, Action: action, Outcome: linearize.Unknown}
	op.Call = time.Now()
	got, err := send(client, base+"/v1/reactions", reaction{user, item, action.String()})
	op.Return = time.Now()
	op.Note = fmt.Sprintf("via %s: ", agent)
	if err != nil {
		op.Note += "no answer"
		return op, 0, ""
	}
	op.Note += fmt.Sprint(got.status)
	problem := ""
	switch got.status {
	case http.StatusOK:
		var ans struct {
			User     string `json:"user_id"`
			Content  string `json:"content_id"`
			Action   string `json:"action"`
			Previous string `json:"previous"`
			Version  int64  `json:"version"`
			Changed  *bool  `json:"changed"`
		}
		err := json.Unmarshal([]byte(got.body), &ans)
		prev, okPrev := engagement.ParseAction(ans.Previous)
		if err != nil || !okPrev || ans.Changed == nil || ans.Action != action.String() || ans.User != user || ans.Content != item {
			return op, got.status, fmt.Sprintf("POST /v1/reactions %s %v via %s: 200 %s does not answer the request", key, action, agent, got.body)
		}
		op.Outcome, op.Previous, op.Changed = linearize.Applied, prev, *ans.Changed
		op.Note += fmt.Sprintf(" v%d", ans.Version)
	case http.StatusConflict, http.StatusTooManyRequests:
		if got.retryAfter == "" {
			problem = fmt.Sprintf("POST /v1/reactions via %s: %d without Retry-After: %s", agent, got.status, got.body)
		}
		// The agent says which conflicts left nothing applied; the others
		// it settles later (a Paxos contention timeout).
		if strings.Contains(got.body, "nothing was applied") {
			op.Outcome = linearize.NotApplied
		}
	case http.StatusServiceUnavailable:
		op.Note += " " + strings.TrimSpace(got.body)
	default:
		if got.status < 500 {
			problem = fmt.Sprintf("POST /v1/reactions %s %v via %s: %d %s", key, action, agent, got.status, got.body)
		}
	}
	return op, got.status, problem
}

// raceRead reads the pair's row; ok is false when it got no 200 (a read
// without an answer constrains nothing).
func raceRead(client *http.Client, base, key, user, item string, clientID, site int, agent string) (op linearize.Op, status int, problem string, ok bool) {
	op = linearize.Op{Key: key, Client: clientID, Site: site, Kind: linearize.Read}
	op.Call = time.Now()
	resp, err := client.Get(base + "/v1/reactions/" + url.PathEscape(user) + "?content_id=" + url.QueryEscape(item))
	if err != nil {
		return op, 0, "", false
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	op.Return = time.Now()
	if err != nil || resp.StatusCode != http.StatusOK {
		return op, resp.StatusCode, "", false
	}
	var ans struct {
		Reactions []struct {
			User    string `json:"user_id"`
			Content string `json:"content_id"`
			Action  string `json:"action"`
			Version int64  `json:"version"`
		} `json:"reactions"`
	}
	err = json.Unmarshal(body, &ans)
	if err != nil || len(ans.Reactions) != 1 || ans.Reactions[0].User != user || ans.Reactions[0].Content != item {
		return op, resp.StatusCode, fmt.Sprintf("GET /v1/reactions %s via %s: 200 %s does not answer the request", key, agent, body), false
	}
	a, okAction := engagement.ParseAction(ans.Reactions[0].Action)
	if !okAction {
		return op, resp.StatusCode, fmt.Sprintf("GET /v1/reactions %s via %s: action %q", key, agent, ans.Reactions[0].Action), false
	}
	op.Action = a
	op.Note = fmt.Sprintf("via %s: v%d", agent, ans.Reactions[0].Version)
	return op, resp.StatusCode, "", true
}

// report logs the history of every pair res found not linearizable, in
// call order, writes Porcupine's visualization to EDGECOUNT_FAULTS_LOGS
// (else a directory the run leaves behind) and logs the agents' tails.
func (h *raceHistory) report(t *testing.T, res *linearize.Result, s *regionSystem) {
	t.Helper()
	dir := os.Getenv("EDGECOUNT_FAULTS_LOGS")
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "edgecount-linearize-"); err != nil {
			t.Errorf("no directory for the visualization: %v", err)
		}
	}
	if dir != "" {
		f := filepath.Join(dir, s.run+"-linearize.html")
		out, err := os.Create(f)
		if err == nil {
			err = errors.Join(res.Visualize(out), out.Close())
		}
		if err != nil {
			t.Errorf("cannot write the visualization: %v", err)
		} else {
			t.Logf("Porcupine's visualization: %s", f)
		}
	}
	t0 := slices.MinFunc(h.ops, func(a, b linearize.Op) int { return a.Call.Compare(b.Call) }).Call
	for _, key := range res.Failed {
		var ops []linearize.Op
		for _, op := range h.ops {
			if op.Key == key {
				ops = append(ops, op)
			}
		}
		slices.SortFunc(ops, func(a, b linearize.Op) int { return a.Call.Compare(b.Call) })
		var b strings.Builder
		for _, op := range ops {
			ret := fmt.Sprintf("%9.3f", op.Return.Sub(t0).Seconds())
			if op.Kind == linearize.Write && op.Outcome == linearize.Unknown {
				ret = "  pending"
			}
			what := fmt.Sprintf("read → %v", op.Action)
			if op.Kind == linearize.Write {
				switch op.Outcome {
				case linearize.Applied:
					what = fmt.Sprintf("%v → previous %v, changed %v", op.Action, op.Previous, op.Changed)
				case linearize.NotApplied:
					what = fmt.Sprintf("%v → not applied", op.Action)
				default:
					what = fmt.Sprintf("%v → unknown", op.Action)
				}
			}
			fmt.Fprintf(&b, "  [%9.3f, %s] client %2d dc%d %-40s %s\n", op.Call.Sub(t0).Seconds(), ret, op.Client, op.Site+1, what, op.Note)
		}
		t.Logf("pair %s, %d operations (seconds from the first call):\n%s", key, len(ops), b.String())
	}
	t.Log(s.logs(30))
}
