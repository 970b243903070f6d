package natsjs_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgecount/edgecount/internal/testenv"
	"github.com/edgecount/edgecount/metrics"
	"github.com/edgecount/edgecount/natsjs"
	"github.com/edgecount/edgecount/natsjs/natsjstest"
)

const hubParts = 4

func hubBase() natsjs.StreamConfig {
	return natsjs.StreamConfig{
		Name: "SUMS", SubjectPrefix: "sums", Partitions: hubParts, Replicas: 1,
		MaxAge: time.Hour, DuplicateWindow: time.Minute,
	}
}

// originStream is a region's stream on its own server.
func originStream(domain string) natsjs.StreamConfig {
	sc := hubBase()
	sc.Domain, sc.MaxBytes = domain, 64<<20
	return sc
}

// hubStream is the R3 hub stream sourcing the regions' streams.
func hubStream(domains ...string) natsjs.StreamConfig {
	sc := hubBase()
	sc.Replicas = 3
	sc.Hub = &natsjs.Hub{}
	for _, d := range domains {
		sc.Hub.Sources = append(sc.Hub.Sources, natsjs.Source{Region: d, Domain: d})
	}
	return sc
}

// world is a hub of 3 and regions on their own servers, each with an
// agent-side client that made its origin stream, and a rollup-side client
// on the hub that made the hub stream.
type world struct {
	hub     *natsjstest.Hub
	regions map[string]*natsjstest.Region
	agents  map[string]*natsjs.Client
	rollup  *natsjs.Client
	hubCfg  natsjs.StreamConfig
}

func dial(t *testing.T, cc natsjs.ConnConfig) *natsjs.Client {
	t.Helper()
	cc.ReconnectMin, cc.ReconnectMax, cc.PingInterval = 50*time.Millisecond, 500*time.Millisecond, time.Second
	c, err := natsjs.Dial(cc, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func newWorld(t *testing.T, domains ...string) *world {
	t.Helper()
	w := &world{hub: natsjstest.StartHub(t, 3), regions: map[string]*natsjstest.Region{}, agents: map[string]*natsjs.Client{}, hubCfg: hubStream(domains...)}
	ctx := t.Context()
	for _, d := range domains {
		w.regions[d] = natsjstest.StartRegion(t, w.hub, d)
		a := dial(t, natsjs.ConnConfig{URL: w.regions[d].URL(), Name: "agent-" + d, Domain: d})
		if err := a.EnsureStream(ctx, originStream(d)); err != nil {
			t.Fatal(err)
		}
		w.agents[d] = a
	}
	w.rollup = dial(t, natsjs.ConnConfig{URL: w.hub.URLs(), Name: "rollup"})
	// The meta leader may still be settling: retry as the rollup's start-up
	// does on a broker that is not ready yet.
	eventually(t, 30*time.Second, "the hub stream made", func() error {
		ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		return w.rollup.EnsureStream(ctx, w.hubCfg)
	})
	return w
}

// eventually waits until f returns nil.
func eventually(t *testing.T, timeout time.Duration, what string, f func() error) {
	t.Helper()
	testenv.Eventually(t, timeout, what, func() (string, bool) {
		if err := f(); err != nil {
			return err.Error(), false
		}
		return "", true
	})
}

// ledger records what the rollup's consumer handled: each payload with the
// stream sequences it came under. A redelivery keeps its sequence (the
// rollup skips it); a payload under two sequences is doubled.
type ledger struct {
	mu    sync.Mutex
	seqs  map[string]map[uint64]bool
	first map[string]time.Time
}

func newLedger() *ledger {
	return &ledger{seqs: map[string]map[uint64]bool{}, first: map[string]time.Time{}}
}

func (l *ledger) handle(_ context.Context, seq uint64, data []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := string(data)
	if l.seqs[k] == nil {
		l.seqs[k] = map[uint64]bool{}
		l.first[k] = time.Now()
	}
	l.seqs[k][seq] = true
	return nil
}

// check counts, over the acknowledged payloads, those never handled and
// those handled under more than one sequence, and any payload handled
// that was never attempted.
func (l *ledger) check(acked, attempted []string) (lost, doubled, unknown int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	known := make(map[string]bool, len(attempted))
	for _, k := range attempted {
		known[k] = true
	}
	for _, k := range acked {
		switch n := len(l.seqs[k]); {
		case n == 0:
			lost++
		case n > 1:
			doubled++
		}
	}
	for k := range l.seqs {
		if !known[k] {
			unknown++
		}
	}
	return lost, doubled, unknown
}

// has reports whether every payload of acked was handled, and when the
// last of them first was.
func (l *ledger) has(acked []string) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var last time.Time
	for _, k := range acked {
		f, ok := l.first[k]
		if !ok {
			return time.Time{}, false
		}
		if f.After(last) {
			last = f
		}
	}
	return last, true
}

// consume runs the rollup's consumer on every partition of the hub stream
// until the test ends.
func (w *world) consume(t *testing.T, l *ledger) {
	t.Helper()
	// Batches of up to 64, as the rollup process consumes (rollupd.DefaultBatch).
	c := w.rollup.Consumer(natsjs.ConsumerConfig{Stream: w.hubCfg, Durable: "rollup", AckWait: 5 * time.Second, Batch: 64})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- c.RunBatch(ctx, []uint32{0, 1, 2, 3}, func(ctx context.Context, msgs []natsjs.BatchMsg) error {
			for _, m := range msgs {
				l.handle(ctx, m.Seq, m.Data) //nolint:errcheck // never fails
			}
			return nil
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("consumer: %v", err)
		}
	})
}

// loader publishes through a region's agent client at a steady rate, each
// message retried with its id until acknowledged, as the agent's flusher
// does.
type loader struct {
	mu        sync.Mutex
	acked     []string
	attempted []string // acked, and the one in flight at the stop
	errs      int
	stop      context.CancelFunc
	done      chan struct{}
}

// ids are the same in every region (agent a, epoch 1): the publisher's
// domain prefix keeps them apart in the hub's de-duplication window.
func startLoader(w *world, domain string, every time.Duration) *loader {
	ctx, cancel := context.WithCancel(context.Background())
	l := &loader{stop: cancel, done: make(chan struct{})}
	pub := w.agents[domain].Publisher(originStream(domain))
	go func() {
		defer close(l.done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			part := uint32(n % hubParts)
			id, payload := "a/1/"+strconv.Itoa(n)+"/"+strconv.Itoa(int(part)), domain+"/"+strconv.Itoa(n)
			l.mu.Lock()
			l.attempted = append(l.attempted, payload)
			l.mu.Unlock()
			for {
				pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
				err := pub.Publish(pctx, part, id, []byte(payload))
				pcancel()
				if err == nil {
					break
				}
				if ctx.Err() != nil {
					return
				}
				l.mu.Lock()
				l.errs++
				l.mu.Unlock()
				time.Sleep(20 * time.Millisecond)
			}
			l.mu.Lock()
			l.acked = append(l.acked, payload)
			l.mu.Unlock()
		}
	}()
	return l
}

// halt stops the loader and returns what the broker acknowledged, what
// was attempted (a publish cut short by the stop may be stored) and the
// publish errors.
func (l *loader) halt() (acked, attempted []string, errs int) {
	l.stop()
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.acked...), append([]string(nil), l.attempted...), l.errs
}

func (l *loader) snapshot() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.acked...)
}

// originLastSeq is the last sequence of a region's stream.
func (w *world) originLastSeq(t *testing.T, domain string) uint64 {
	t.Helper()
	nc, err := nats.Connect(w.regions[domain].URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	st, err := js.Stream(t.Context(), originStream(domain).Name)
	if err != nil {
		t.Fatal(err)
	}
	return st.CachedInfo().State.LastSeq
}

// sourceSeq is the last sequence of a region's stream the hub stream has
// taken (0 when the hub does not answer).
func (w *world) sourceSeq(t *testing.T, domain string) uint64 {
	t.Helper()
	nc, err := nats.Connect(w.hub.URLs())
	if err != nil {
		return 0
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, w.hubCfg.Name)
	if err != nil {
		return 0
	}
	for _, s := range st.CachedInfo().Sources {
		if s.External != nil && s.External.APIPrefix == "$JS."+domain+".API" {
			return s.Seq
		}
	}
	return 0
}

// TestHubSourcesRegions: what agents publish on their regions' servers,
// with the same message ids in both regions, reaches the rollup's consumer
// on the R3 hub stream exactly once, and the streams are configured as
// docs/regions.md says.
func TestHubSourcesRegions(t *testing.T) {
	w := newWorld(t, "r1", "r2")
	l := newLedger()
	w.consume(t, l)
	var acked []string
	for _, d := range []string{"r1", "r2"} {
		pub := w.agents[d].Publisher(originStream(d))
		for n := range 200 {
			part := uint32(n % hubParts)
			id := "a/1/" + strconv.Itoa(n) + "/" + strconv.Itoa(int(part))
			payload := d + "/" + strconv.Itoa(n)
			if err := pub.Publish(t.Context(), part, id, []byte(payload)); err != nil {
				t.Fatal(err)
			}
			acked = append(acked, payload)
		}
		// A retried publish (same id) is kept once.
		if err := pub.Publish(t.Context(), 0, "a/1/0/0", []byte(d+"/0")); err != nil {
			t.Fatal(err)
		}
		if s := pub.Stats(); s.Duplicates != 1 {
			t.Errorf("%s: duplicates %d, want 1 (the retry)", d, s.Duplicates)
		}
	}
	eventually(t, 30*time.Second, "every message handled", func() error {
		if _, ok := l.has(acked); !ok {
			return errors.New("the hub's consumer has not handled every message yet")
		}
		return nil
	})
	if lost, doubled, unknown := l.check(acked, acked); lost+doubled+unknown != 0 {
		t.Fatalf("lost %d, doubled %d, unknown %d of %d", lost, doubled, unknown, len(acked))
	}

	// The streams as configured: origin limits retention with the budget,
	// the hub R3 without subjects, an explicit window, durable sources.
	nc, err := nats.Connect(w.regions["r1"].URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ojs, _ := jetstream.New(nc)
	st, err := ojs.Stream(t.Context(), "SUMS")
	if err != nil {
		t.Fatal(err)
	}
	oc := st.CachedInfo().Config
	if oc.Retention != jetstream.LimitsPolicy || oc.MaxBytes != 64<<20 || oc.MaxAge != time.Hour || oc.Duplicates != time.Minute {
		t.Errorf("origin stream config %+v", oc)
	}
	u, err := w.agents["r1"].Usage(t.Context(), originStream("r1"))
	if err != nil {
		t.Fatal(err)
	}
	if u.Msgs != 200 || u.Bytes == 0 || u.LimitBytes != 64<<20 || u.MaxAge != time.Hour || time.Since(u.Oldest) > time.Minute {
		t.Errorf("origin usage %+v", u)
	}
	reg := prometheus.NewPedanticRegistry()
	if err := errors.Join(metrics.RegisterRegionStream(reg, w.agents["r1"], originStream("r1")), metrics.RegisterHubSources(reg, w.rollup, w.hubCfg)); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			k := mf.GetName()
			for _, lp := range m.GetLabel() {
				k += "{" + lp.GetValue() + "}"
			}
			got[k] = m.GetGauge().GetValue()
		}
	}
	if got["edgecount_region_stream_messages"] != 200 || got["edgecount_region_stream_limit_bytes"] != 64<<20 || got["edgecount_region_stream_up"] != 1 ||
		got["edgecount_hub_stream_up"] != 1 || got["edgecount_hub_source_lag{r2}"] != 0 || got["edgecount_hub_source_active_seconds{r1}"] < 0 {
		t.Errorf("metrics %v", got)
	}
	if got := st.CachedInfo().State.Msgs; got != 200 { // its own, none of r2's
		t.Errorf("origin holds %d messages after the hub took them, want 200 (limits retention)", got)
	}
	cons, err := ojs.PushConsumer(t.Context(), "SUMS", natsjs.HubConsumer)
	if err != nil {
		t.Fatal(err)
	}
	if cc := cons.CachedInfo().Config; cc.AckPolicy != jetstream.AckFlowControlPolicy || !cc.FlowControl || cc.IdleHeartbeat != time.Second || cc.DeliverSubject != "sums-hub.r1" || len(oc.Subjects) != hubParts || oc.Subjects[0] != "sums.r1.0" {
		t.Errorf("hub consumer on the origin %+v", cc)
	}
	hnc, err := nats.Connect(w.hub.URLs())
	if err != nil {
		t.Fatal(err)
	}
	defer hnc.Close()
	hjs, _ := jetstream.New(hnc)
	hs, err := hjs.Stream(t.Context(), "SUMS")
	if err != nil {
		t.Fatal(err)
	}
	hi := hs.CachedInfo()
	if hc := hi.Config; hc.Replicas != 3 || len(hc.Subjects) != 0 || hc.Duplicates != time.Minute || hc.Retention != jetstream.WorkQueuePolicy || len(hc.Sources) != 2 {
		t.Errorf("hub stream config %+v", hc)
	}
	for _, s := range hi.Sources {
		if s.Error != nil {
			t.Errorf("source %s: %v", s.Name, s.Error)
		}
	}
}

// TestHubRegionCut cuts a region's leaf link under publishing: the region
// keeps taking publishes, and after the link returns the hub's consumer
// has the whole backlog within G16's 5 s; nothing is lost or doubled.
func TestHubRegionCut(t *testing.T) {
	w := newWorld(t, "r1", "r2")
	l := newLedger()
	w.consume(t, l)
	started := time.Now()
	l1, l2 := startLoader(w, "r1", 10*time.Millisecond), startLoader(w, "r2", 10*time.Millisecond)
	time.Sleep(2 * time.Second)
	const cut = 10 * time.Second
	w.regions["r1"].Cut()
	cutAt, before := time.Now(), len(l1.snapshot())
	time.Sleep(cut)
	// During the cut the hub shows no error and a stale lag of 0; only
	// the source's Active keeps growing (what the rollup exports and the
	// alert watches).
	srcs, err := w.rollup.Sources(t.Context(), w.hubCfg)
	if err != nil {
		t.Fatal(err)
	}
	if srcs[0].Region != "r1" || srcs[0].Active < cut/2 || srcs[1].Active > cut/2 {
		t.Errorf("sources during r1's cut: %+v; want r1 inactive for about %v, r2 active", srcs, cut)
	}
	t.Logf("sources during the cut: %+v", srcs)
	during := l1.snapshot()
	last := w.originLastSeq(t, "r1")
	w.regions["r1"].Restore()
	back := time.Now()
	w.regions["r1"].WaitLinked(t, 30*time.Second)
	linked := time.Since(back)
	// The backlog: everything r1's server had stored when the link
	// returned. The hub holds it when its source has seen r1's last
	// sequence; the rollup has it when its consumer handled every message.
	eventually(t, 30*time.Second, "the hub's source of r1 at r1's last sequence", func() error {
		if seq := w.sourceSeq(t, "r1"); seq < last {
			return fmt.Errorf("source at %d, r1 at %d", seq, last)
		}
		return nil
	})
	held := time.Since(back)
	var handled time.Duration
	eventually(t, 45*time.Second, "the backlog handled", func() error {
		at, ok := l.has(during)
		if !ok {
			return errors.New("backlog not handled yet")
		}
		handled = max(at.Sub(back), 0)
		return nil
	})
	time.Sleep(time.Second)
	a1, t1, e1 := l1.halt()
	a2, t2, e2 := l2.halt()
	acked, attempted := append(a1, a2...), append(t1, t2...)
	eventually(t, 30*time.Second, "every message handled", func() error {
		if _, ok := l.has(acked); !ok {
			return errors.New("not everything handled yet")
		}
		return nil
	})
	lost, doubled, unknown := l.check(acked, attempted)
	t.Logf("row: cut %v of r1 at %s, each region publishing at %.0f msgs/s: acked %d, counted %d, lost %d, doubled %d; r1 publish errors %d, r2 %d; after the link's return: leaf up %v, hub holds r1's backlog (%d msgs) %v, rollup handled it %v",
		cut, cutAt.Format("15:04:05"), float64(len(during))/back.Sub(started).Seconds(), len(acked), len(acked)-lost, lost, doubled, e1, e2, linked.Round(time.Millisecond), len(during), held.Round(time.Millisecond), handled.Round(time.Millisecond))
	fmt.Printf("hub-cut: cut=%v acked=%d lost=%d doubled=%d hub-holds-backlog=%v rollup-handled=%v\n", cut, len(acked), lost, doubled, held.Round(time.Millisecond), handled.Round(time.Millisecond))
	if lost+doubled+unknown != 0 {
		t.Fatalf("lost %d, doubled %d, unknown %d", lost, doubled, unknown)
	}
	if e1 != 0 {
		t.Errorf("r1 had %d publish errors while cut off: its own server must keep taking them", e1)
	}
	if n := len(during) - before; n < 10 {
		t.Errorf("r1 acknowledged %d messages while cut off: its own server must keep taking them", n)
	}
}

// TestHubServerKill stops one of the three hub servers (the hub stream's
// leader) under publishing and starts it again: nothing lost or doubled.
func TestHubServerKill(t *testing.T) {
	w := newWorld(t, "r1", "r2")
	l := newLedger()
	w.consume(t, l)
	l1, l2 := startLoader(w, "r1", 10*time.Millisecond), startLoader(w, "r2", 10*time.Millisecond)
	time.Sleep(2 * time.Second)
	hnc, err := nats.Connect(w.hub.URLs())
	if err != nil {
		t.Fatal(err)
	}
	defer hnc.Close()
	hjs, _ := jetstream.New(hnc)
	var leader string
	eventually(t, 10*time.Second, "a hub stream leader", func() error {
		st, err := hjs.Stream(t.Context(), "SUMS")
		if err != nil {
			return err
		}
		if c := st.CachedInfo().Cluster; c != nil && c.Leader != "" {
			leader = c.Leader
			return nil
		}
		return errors.New("no leader")
	})
	victim := 0
	for i := range 3 {
		if w.hub.Name(i) == leader {
			victim = i
		}
	}
	w.hub.Stop(victim)
	stopped := time.Now()
	time.Sleep(8 * time.Second)
	w.hub.Start(victim)
	restarted := time.Now()
	time.Sleep(3 * time.Second)
	a1, t1, e1 := l1.halt()
	a2, t2, e2 := l2.halt()
	all, attempted := append(a1, a2...), append(t1, t2...)
	halted := time.Now()
	var drained time.Duration
	eventually(t, 40*time.Second, "every message handled", func() error {
		last, ok := l.has(all)
		if !ok {
			return errors.New("not everything handled yet")
		}
		drained = max(last.Sub(halted), 0)
		return nil
	})
	lost, doubled, unknown := l.check(all, attempted)
	t.Logf("row: hub server %s (stream leader) stopped under publishing (2 regions, one every 10 ms each): acked %d, counted %d, lost %d, doubled %d; publish errors r1 %d, r2 %d; restarted after %v, every message handled %v after the load stopped",
		leader, len(all), len(all)-lost, lost, doubled, e1, e2, restarted.Sub(stopped).Round(time.Millisecond), drained.Round(time.Millisecond))
	fmt.Printf("hub-kill: acked=%d lost=%d doubled=%d drain=%v\n", len(all), lost, doubled, drained.Round(time.Millisecond))
	if lost+doubled+unknown != 0 {
		t.Fatalf("lost %d, doubled %d, unknown %d", lost, doubled, unknown)
	}
	if e1+e2 != 0 {
		t.Errorf("publish errors r1 %d, r2 %d: the regions' servers take publishes whatever the hub does", e1, e2)
	}
}
