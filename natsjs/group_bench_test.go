package natsjs

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/edgecount/edgecount/internal/testenv"
)

// BenchmarkGroupHandover measures how long the partitions of a member that
// dies (its connection drops, nothing is handed back) take to reach the
// survivor: two members share 16 partitions on an embedded server, one is
// killed, and the time runs from the kill until the survivor applied a
// message on every partition the dead member held. With mid=true the dead
// member is in the middle of a message when it dies, which the broker
// hands out again only after AckWait. The handover-s metric is the mean,
// max-s the longest and bound-s GroupConfig.HandoverBound. Each iteration
// takes a few seconds: run with -benchtime=3x.
func BenchmarkGroupHandover(b *testing.B) {
	for _, tc := range []struct {
		ttl, ackWait time.Duration
		mid          bool
	}{
		{time.Second, 2 * time.Second, false},
		{time.Second, 2 * time.Second, true},
		{5 * time.Second, 10 * time.Second, false},
	} {
		b.Run(fmt.Sprintf("ttl=%s/ackwait=%s/mid=%t", tc.ttl, tc.ackWait, tc.mid), func(b *testing.B) {
			var total, longest time.Duration
			var bound time.Duration
			for range b.N {
				d, bd := handoverOnce(b, tc.ttl, tc.ackWait, tc.mid)
				total += d
				longest = max(longest, d)
				bound = bd
			}
			b.ReportMetric((total / time.Duration(b.N)).Seconds(), "handover-s")
			b.ReportMetric(longest.Seconds(), "max-s")
			b.ReportMetric(bound.Seconds(), "bound-s")
			b.ReportMetric(0, "ns/op") // the time per iteration is mostly setup
		})
	}
}

// handoverOnce runs one kill on a fresh server and returns the handover
// time and its bound.
func handoverOnce(b *testing.B, ttl, ackWait time.Duration, mid bool) (time.Duration, time.Duration) {
	const parts = 16
	s := startServer(b, b.TempDir(), 0)
	_, js := connect(b, s)
	cfg := testStreamConfig(parts)
	if err := EnsureStream(context.Background(), js, cfg); err != nil {
		b.Fatal(err)
	}
	var (
		mu      sync.Mutex
		applied = make(map[string]time.Time) // data → first applied
		block   = make(map[string]bool)      // data the handler sits on until ctx ends
		entered = make(chan string, 1)
	)
	handler := func(ctx context.Context, _ uint64, data []byte) error {
		d := string(data)
		mu.Lock()
		stuck := block[d]
		delete(block, d)
		mu.Unlock()
		if stuck {
			entered <- d
			<-ctx.Done()
			return ctx.Err()
		}
		mu.Lock()
		if _, ok := applied[d]; !ok {
			applied[d] = time.Now()
		}
		mu.Unlock()
		return nil
	}
	var ms []*member
	for i := range 2 {
		gc := testGroupConfig(b, cfg, fmt.Sprintf("m%d", i))
		gc.MemberTTL, gc.Consumer.AckWait, gc.FenceMargin = ttl, ackWait, ackWait/4
		gc.Consumer.Logger = nil
		ms = append(ms, startMember(b, s, gc, handler))
	}
	waitConverged(b, parts, ms...)
	pub := NewPublisher(js, cfg)
	all := partitionsOf(parts)
	for i := range 2 { // round 0 may meet pulls sent before convergence
		for p := range uint32(parts) {
			publish(b, pub, p, msgID(p, i), fmt.Sprintf("%d/%d", p, i))
		}
		testenv.Eventually(b, 30*time.Second, "round to drain", testenv.Until(func() bool { return pending(b, ms[0].g.c, all) == 0 }))
	}
	dead, survivor := ms[1], ms[0]
	owned := dead.g.Pinned()
	if !slices.Equal(owned, dead.g.Assigned()) || len(owned) == 0 {
		b.Fatalf("dead member holds pins of %v, want its assigned %v", owned, dead.g.Assigned())
	}
	var want []string
	if mid {
		d := fmt.Sprintf("%d/mid", owned[0])
		mu.Lock()
		block[d] = true
		mu.Unlock()
		publish(b, pub, owned[0], msgID(owned[0], 2), d)
		<-entered
		want = append(want, d)
	}
	killed := time.Now()
	dead.nc.Close()
	for _, p := range owned {
		d := fmt.Sprintf("%d/after", p)
		publish(b, pub, p, msgID(p, 3), d)
		want = append(want, d)
	}
	testenv.Eventually(b, 30*time.Second, "the survivor to apply the dead member's partitions", testenv.Until(func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, d := range want {
			if _, ok := applied[d]; !ok {
				return false
			}
		}
		return true
	}))
	var handover time.Duration
	mu.Lock()
	for _, d := range want {
		handover = max(handover, applied[d].Sub(killed))
	}
	mu.Unlock()
	dead.run.wait(b)
	if err := survivor.run.stop(); err != nil {
		b.Fatalf("Run of the survivor: %v", err)
	}
	return handover, survivor.g.Config().HandoverBound()
}
