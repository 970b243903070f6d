package rollupd

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/internal/testenv"
	"github.com/edgecount/edgecount/natsjs"
	"github.com/edgecount/edgecount/natsjs/natsjstest"
	"github.com/edgecount/edgecount/partial"
	"github.com/edgecount/edgecount/rollup"
	"github.com/edgecount/edgecount/store/embedded"
	"github.com/edgecount/edgecount/store/embedded/embeddedtest"
)

const testPartitions = 2

// rig is a real in-process NATS JetStream server with the partial-sum
// stream, a client of it and an embedded store.
type rig struct {
	bus    *natsjs.Client
	stream natsjs.StreamConfig
	st     *embedded.Store
}

func newRig(t *testing.T) *rig {
	t.Helper()
	scfg := natsjs.DefaultServerConfig(t.TempDir())
	scfg.SyncAlways = false
	stream := natsjs.DefaultStreamConfig()
	stream.Partitions = testPartitions
	bus := natsjstest.Stream(t, scfg, "rollupd-test", stream)
	st := embeddedtest.Open(t, embedded.Config{NoSync: true})
	return &rig{bus: bus, stream: stream, st: st}
}

// config is a process configuration over the rig's stream: trending lists
// written only at the end (or at a hand-back), no periodic recount.
func (r *rig) config(partitions []uint32) Config {
	gcfg := natsjs.DefaultGroupConfig()
	gcfg.Consumer.Stream = r.stream
	gcfg.Consumer.RetryMin, gcfg.Consumer.RetryMax = 10*time.Millisecond, 50*time.Millisecond
	gcfg.MemberTTL = time.Second
	trending := rollup.DefaultTrendingConfig(testPartitions)
	trending.Interval = time.Hour
	recount := rollup.DefaultRecountConfig()
	recount.Partitions, recount.Interval = testPartitions, 0
	return Config{Partitions: partitions, Group: gcfg, Trending: trending, Recount: recount}
}

// publish sends one like of id with the agent's trending list naming it,
// or raw bytes when data is not nil.
func (r *rig) publish(t *testing.T, seq uint64, id string, data []byte) {
	t.Helper()
	p := partial.PartitionOf(id, testPartitions)
	if data == nil {
		b := &partial.Batch{Agent: "us-a1", Region: "us", Epoch: 1, Seq: seq, Partition: p, FlushedAt: time.Now(),
			Sums: []partial.Sum{{ContentID: id, Counter: engagement.CounterLike, Region: "us", Delta: 1}},
			Tops: []partial.TopList{{Counter: engagement.CounterLike, Window: "5m", Items: []partial.TopItem{{ContentID: id, Count: 1}}}}}
		data = partial.Append(nil, b)
	}
	msgID := "us-a1-1-" + strings.Repeat("x", int(seq))
	if err := r.bus.Publisher(r.stream).Publish(t.Context(), p, msgID, data); err != nil {
		t.Fatal(err)
	}
}

// run starts p.Run and returns a function that stops it and returns its
// error.
func run(t *testing.T, p *Process) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return func() error {
		cancel()
		err := <-done
		done <- err // for the cleanup
		return err
	}
}

func likes(t *testing.T, st *embedded.Store, id string) int64 {
	t.Helper()
	rows, err := st.ReadStats(t.Context(), []string{id})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows[id] {
		if r.Scope == engagement.GlobalScope {
			return r.Likes
		}
	}
	return 0
}

// TestFixedPartitions: the process applies what was published to its
// partitions, terminates a poison message without any adapter, exports its
// metrics, and writes the last trending lists when it stops.
func TestFixedPartitions(t *testing.T) {
	r := newRig(t)
	p, err := New(r.bus, r.st, r.config([]uint32{0, 1}))
	if err != nil {
		t.Fatal(err)
	}
	if p.Group() != nil || len(p.Partitions()) != 2 {
		t.Fatalf("Group() = %v, Partitions() = %v; want no group and 2 partitions", p.Group(), p.Partitions())
	}
	reg := prometheus.NewRegistry()
	if err := p.RegisterMetrics(reg); err != nil {
		t.Fatal(err)
	}
	r.publish(t, 1, "v1", nil)
	r.publish(t, 2, "v1", []byte{0xff, 0xff}) // poison
	r.publish(t, 3, "v1", nil)
	stop := run(t, p)
	if err := p.WaitApplied(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := likes(t, r.st, "v1"); got != 2 {
		t.Errorf("global likes of v1 = %d, want 2", got)
	}
	if got := p.Rollup().Stats().Poison.Load(); got != 1 {
		t.Errorf("poison messages = %d, want 1", got)
	}
	if got := metricValue(t, reg, "edgecount_consumer_terminated_total"); got != 1 {
		t.Errorf("edgecount_consumer_terminated_total = %v, want 1", got)
	}
	written := p.Rollup().TrendingStats().RowsWritten.Load()
	if err := stop(); err != nil {
		t.Fatalf("Run = %v, want nil after cancel", err)
	}
	if got := p.Rollup().TrendingStats().RowsWritten.Load(); got <= written {
		t.Errorf("trending rows written = %d at stop, %d before; want a final write", got, written)
	}
	lists, err := r.st.ReadTrending(t.Context(), engagement.GlobalScope, engagement.CounterLike, "5m")
	if err != nil || len(lists) == 0 {
		t.Fatalf("ReadTrending = %v, %v; want the stored lists", lists, err)
	}
}

// TestSharedPartitions: a group member applies every partition, and when
// it stops it hands each back, writing its lists and dropping its trending
// state.
func TestSharedPartitions(t *testing.T) {
	r := newRig(t)
	p, err := New(r.bus, r.st, r.config(nil))
	if err != nil {
		t.Fatal(err)
	}
	if p.Group() == nil || p.Partitions() != nil {
		t.Fatalf("Group() = %v, Partitions() = %v; want a group and no fixed partitions", p.Group(), p.Partitions())
	}
	if err := p.RegisterMetrics(prometheus.NewRegistry()); err != nil {
		t.Fatal(err)
	}
	r.publish(t, 1, "v1", nil)
	r.publish(t, 2, "v2", nil)
	stop := run(t, p)
	testenv.Eventually(t, 20*time.Second, "both messages applied", testenv.Until(func() bool { return p.Rollup().Stats().Messages.Load() == 2 }))
	if err := p.WaitApplied(t.Context()); err != nil {
		t.Fatal(err)
	}
	ts := p.Rollup().TrendingStats()
	if ts.Candidates.Load() == 0 {
		t.Fatal("no trending candidates after two lists")
	}
	written := ts.RowsWritten.Load()
	if err := stop(); err != nil {
		t.Fatalf("Run = %v, want nil after cancel", err)
	}
	if got := ts.RowsWritten.Load(); got <= written {
		t.Errorf("trending rows written = %d at stop, %d before; want the lists of the partitions handed back", got, written)
	}
	if got := ts.Candidates.Load(); got != 0 {
		t.Errorf("trending candidates after the hand-back = %d, want 0 (state dropped)", got)
	}
}

// TestConsumerFailureEndsRun: when the connection closes under the
// consumer, Run stops its other parts and returns the consumer's error.
func TestConsumerFailureEndsRun(t *testing.T) {
	r := newRig(t)
	p, err := New(r.bus, r.st, r.config([]uint32{0, 1}))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Run(context.Background()) }()
	r.publish(t, 1, "v1", nil)
	testenv.Eventually(t, 20*time.Second, "the message applied", testenv.Until(func() bool { return p.Rollup().Stats().Messages.Load() == 1 }))
	r.bus.Close()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "rollup consumer") {
			t.Fatalf("Run = %v, want the consumer's error", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after its connection closed")
	}
}

func TestNewRejectsOnRelease(t *testing.T) {
	r := newRig(t)
	cfg := r.config(nil)
	cfg.Group.OnRelease = func(uint32, bool) {}
	if _, err := New(r.bus, r.st, cfg); err == nil {
		t.Fatal("New accepted a Group.OnRelease")
	}
	cfg = r.config([]uint32{0})
	cfg.Recount.Quiet = 0
	if _, err := New(r.bus, r.st, cfg); err == nil || !strings.Contains(err.Error(), "quiet") {
		t.Fatalf("New with a bad recount configuration = %v, want its error", err)
	}
}

// metricValue returns the value of the registered counter or gauge name.
func metricValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			m := mf.GetMetric()[0]
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}
