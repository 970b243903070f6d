package natsjs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgecount/edgecount/internal/testenv"
)

func TestGroupConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(*GroupConfig)
		wantErr string
	}{
		{"default", func(*GroupConfig) {}, ""},
		{"zero takes defaults", func(c *GroupConfig) { *c = GroupConfig{} }, ""},
		{"member id", func(c *GroupConfig) { c.MemberID = "rollup-1_a" }, ""},
		{"bad member id", func(c *GroupConfig) { c.MemberID = "a.b" }, `member id "a.b" is not 1-64 characters`},
		{"bad group", func(c *GroupConfig) { c.Group = "seventeen-chars-x" }, `group "seventeen-chars-x" is not 1-16 characters`},
		{"short ttl", func(c *GroupConfig) { c.MemberTTL = 100 * time.Millisecond }, "member ttl 100ms is shorter than 200ms"},
		{"margin too wide", func(c *GroupConfig) { c.FenceMargin = 20 * time.Second }, "fence margin 20s is not in (0, ack wait/2 = 15s]"},
		{"negative margin", func(c *GroupConfig) { c.FenceMargin = -time.Second }, "fence margin -1s is not in"},
		{"bad members stream", func(c *GroupConfig) { c.MembersStream = "a.b" }, `members stream "a.b" is not a valid name`},
		{"members stream is the sums stream", func(c *GroupConfig) { c.MembersStream = "EDGECOUNT_SUMS" }, `members stream "EDGECOUNT_SUMS" is the partial-sum stream`},
		{"bad consumer", func(c *GroupConfig) { c.Consumer.Durable = "a b" }, `durable prefix "a b" is not a valid name`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultGroupConfig()
			tt.edit(&cfg)
			checkErr(t, cfg.Validate(), tt.wantErr)
		})
	}
}

func TestGroupDefaults(t *testing.T) {
	cfg := NewGroupConsumer(nil, DefaultGroupConfig()).Config()
	if got, want := cfg.FenceMargin, cfg.Consumer.AckWait/3; got != want {
		t.Errorf("FenceMargin = %s, want AckWait/3 = %s", got, want)
	}
	if got, want := cfg.MembersStream, "EDGECOUNT_SUMS_MEMBERS"; got != want {
		t.Errorf("MembersStream = %q, want %q", got, want)
	}
	if got, want := cfg.HandoverBound(), 30*time.Second; got != want {
		t.Errorf("HandoverBound = %s, want AckWait = %s", got, want)
	}
	custom := DefaultGroupConfig()
	custom.Consumer.AckWait = time.Second
	custom.Consumer.Stream.Name = "OTHER"
	got := NewGroupConsumer(nil, custom).Config()
	if got.FenceMargin != time.Second/3 || got.MembersStream != "OTHER_MEMBERS" {
		t.Errorf("with AckWait 1s and stream OTHER: FenceMargin %s, MembersStream %q; want 333.333333ms and OTHER_MEMBERS",
			got.FenceMargin, got.MembersStream)
	}
	cfg.Consumer.AckWait = time.Second
	if got, want := cfg.HandoverBound(), 6500*time.Millisecond; got != want {
		t.Errorf("HandoverBound with AckWait 1s = %s, want 1.25·MemberTTL + 250ms = %s", got, want)
	}
	a, b := NewGroupConsumer(nil, GroupConfig{}), NewGroupConsumer(nil, GroupConfig{})
	if a.MemberID() == b.MemberID() || !validMember.MatchString(a.MemberID()) {
		t.Errorf("default member ids %q and %q: want two different valid ids", a.MemberID(), b.MemberID())
	}
}

// testGroupConfig is a group member with short timings: it holds a message
// for AckWait − FenceMargin = 700ms per lease and leaves the group 1s after
// its last renewal.
func testGroupConfig(t testing.TB, stream StreamConfig, member string) GroupConfig {
	cc := testConsumerConfig(t, stream)
	cc.AckWait = time.Second
	return GroupConfig{
		Consumer:    cc,
		Group:       "test",
		MemberID:    member,
		MemberTTL:   time.Second,
		FenceMargin: 300 * time.Millisecond,
	}
}

// member is a group member with its own connection, as a rollup process.
type member struct {
	id  string
	nc  *nats.Conn
	g   *GroupConsumer
	run *running
}

func startMember(t testing.TB, s *Server, cfg GroupConfig, h Handler) *member {
	t.Helper()
	nc, err := s.Connect(cfg.MemberID)
	if err != nil {
		t.Fatal(err)
	}
	g := NewGroupConsumer(jsFor(t, nc), cfg)
	r := startFunc(t, func(ctx context.Context) error { return g.Run(ctx, h) })
	return &member{id: cfg.MemberID, nc: nc, g: g, run: r}
}

// waitConverged waits until every member sees all of them and their
// assignments cover the partitions.
func waitConverged(t testing.TB, partitions int, ms ...*member) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, "membership views to converge", testenv.Until(func() bool {
		total := 0
		for _, m := range ms {
			if len(m.g.Members()) != len(ms) {
				return false
			}
			total += len(m.g.Assigned())
		}
		return total == partitions
	}))
}

func partitionsOf(n int) []uint32 {
	ps := make([]uint32, n)
	for p := range ps {
		ps[p] = uint32(p)
	}
	return ps
}

// call is one handler call of a group member.
type call struct {
	member    string
	partition uint32
	seq       uint64
	data      string
	at        time.Time
}

// ledger is the shared store of a group test. It records every handler
// call and applies a message only if its sequence is above the last one
// applied to its partition, as the rollup does per row.
type ledger struct {
	mu      sync.Mutex
	calls   []call
	last    map[uint32]uint64
	applied map[uint64]int
}

func newLedger() *ledger {
	return &ledger{last: make(map[uint32]uint64), applied: make(map[uint64]int)}
}

// handler returns the handler of one member. Messages are "<partition>/<i>".
func (l *ledger) handler(member string) Handler {
	return func(_ context.Context, seq uint64, data []byte) error {
		var p uint32
		if _, err := fmt.Sscanf(string(data), "%d/", &p); err != nil {
			return Permanent(err)
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		l.calls = append(l.calls, call{member, p, seq, string(data), time.Now()})
		if seq > l.last[p] {
			l.last[p] = seq
			l.applied[seq]++
		}
		return nil
	}
}

func (l *ledger) snapshot() []call {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.calls)
}

// check verifies that want messages were applied once each, that no
// message was handled twice (by the same or another member), and that each
// partition's messages were handled in stream order.
func (l *ledger) check(t *testing.T, want int) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.applied) != want {
		t.Errorf("applied %d distinct messages, want %d", len(l.applied), want)
	}
	for seq, n := range l.applied {
		if n != 1 {
			t.Errorf("seq %d applied %d times, want once", seq, n)
		}
	}
	handled := make(map[uint64]string)
	lastSeq := make(map[uint32]uint64)
	for _, c := range l.calls {
		if by, ok := handled[c.seq]; ok {
			t.Errorf("seq %d (%s) handled by %s and again by %s, want once", c.seq, c.data, by, c.member)
		}
		handled[c.seq] = c.member
		if c.seq < lastSeq[c.partition] {
			t.Errorf("partition %d: seq %d handled after %d, want stream order", c.partition, c.seq, lastSeq[c.partition])
		}
		lastSeq[c.partition] = c.seq
	}
}

func TestGroupSpreadsPartitionsOverMembers(t *testing.T) {
	const parts, perPart = 16, 3
	s, js, cfg := setup(t, parts)
	led := newLedger()
	a := startMember(t, s, testGroupConfig(t, cfg, "m0"), led.handler("m0"))
	b := startMember(t, s, testGroupConfig(t, cfg, "m1"), led.handler("m1"))
	waitConverged(t, parts, a, b)

	pub := NewPublisher(js, cfg)
	all := partitionsOf(parts)
	// Round 0 may still meet a pull request that m0 sent while it was
	// alone; from round 1 on only the assigned member pulls.
	for i := range perPart {
		for p := range uint32(parts) {
			publish(t, pub, p, msgID(p, i), fmt.Sprintf("%d/%d", p, i))
		}
		testenv.Eventually(t, 30*time.Second, "round to drain", testenv.Until(func() bool { return pending(t, a.g.c, all) == 0 }))
	}

	led.check(t, parts*perPart)
	byMember := make(map[string][]uint32)
	for _, c := range led.snapshot() {
		if c.data == fmt.Sprintf("%d/0", c.partition) {
			continue
		}
		if !slices.Contains(byMember[c.member], c.partition) {
			byMember[c.member] = append(byMember[c.member], c.partition)
		}
	}
	for _, m := range []*member{a, b} {
		assigned := m.g.Assigned()
		if len(assigned) != parts/2 {
			t.Errorf("%s is assigned %d partitions %v, want %d", m.id, len(assigned), assigned, parts/2)
		}
		got := byMember[m.id]
		slices.Sort(got)
		if !slices.Equal(got, assigned) {
			t.Errorf("%s handled partitions %v, want its assigned %v", m.id, got, assigned)
		}
		if pinned := m.g.Pinned(); !slices.Equal(pinned, assigned) {
			t.Errorf("%s holds pins of %v, want its assigned %v", m.id, pinned, assigned)
		}
		st := m.g.Stats()
		if st.Members != 2 || st.Pinned != parts/2 || st.Acquired != parts/2+st.Released || st.Fenced != 0 || st.Redelivered != 0 || st.Lost != 0 {
			t.Errorf("%s Stats() = %+v, want Members 2, Pinned %d, Acquired %[3]d + Released, no fenced, lost or redelivered", m.id, st, parts/2)
		}
	}
}

// TestGroupHandsOverPartitionsOfDeadMember kills one of three members the
// way a crash looks to the broker (its connection drops, nothing is handed
// back) and measures how long its partitions take to reach the survivors.
func TestGroupHandsOverPartitionsOfDeadMember(t *testing.T) {
	const parts = 16
	s, js, cfg := setup(t, parts)
	led := newLedger()
	var ms []*member
	for i := range 3 {
		id := fmt.Sprintf("m%d", i)
		ms = append(ms, startMember(t, s, testGroupConfig(t, cfg, id), led.handler(id)))
	}
	waitConverged(t, parts, ms...)
	pub := NewPublisher(js, cfg)
	all := partitionsOf(parts)
	// Round 0 may meet pull requests sent before the views converged; from
	// round 1 on each partition is pinned to its assigned member.
	for i := range 2 {
		for p := range uint32(parts) {
			publish(t, pub, p, msgID(p, i), fmt.Sprintf("%d/%d", p, i))
		}
		testenv.Eventually(t, 30*time.Second, "round to drain", testenv.Until(func() bool { return pending(t, ms[0].g.c, all) == 0 }))
	}

	dead, survivors := ms[2], ms[:2]
	// A pin is taken with the partition's first pull after the views
	// converged; on a loaded machine one may come after the rounds drained.
	var owned []uint32
	testenv.Eventually(t, 30*time.Second, "the member to kill pinned to its assigned partitions", func() (string, bool) {
		owned = dead.g.Pinned()
		assigned := dead.g.Assigned()
		return fmt.Sprintf("pins %v, assigned %v", owned, assigned), len(owned) > 0 && slices.Equal(owned, assigned)
	})
	killed := time.Now()
	dead.nc.Close()
	if err := dead.run.wait(t); !errors.Is(err, nats.ErrConnectionClosed) {
		t.Fatalf("Run of the killed member: got %v, want ErrConnectionClosed", err)
	}
	for p := range uint32(parts) {
		publish(t, pub, p, msgID(p, 2), fmt.Sprintf("%d/2", p))
	}
	testenv.Eventually(t, 30*time.Second, "round after the kill to drain", testenv.Until(func() bool { return pending(t, ms[0].g.c, all) == 0 }))

	led.check(t, 3*parts)
	var handover time.Duration
	for _, c := range led.snapshot() {
		if !slices.Contains(owned, c.partition) || c.data != fmt.Sprintf("%d/2", c.partition) {
			continue
		}
		if c.member == dead.id {
			t.Errorf("partition %d: %s handled by the dead member", c.partition, c.data)
		}
		handover = max(handover, c.at.Sub(killed))
	}
	cfgUsed := survivors[0].g.Config()
	t.Logf("handover of %d partitions after a kill: %v (bound %v plus a round trip; MemberTTL %v, AckWait %v)",
		len(owned), handover.Round(time.Millisecond), cfgUsed.HandoverBound(), cfgUsed.MemberTTL, cfgUsed.Consumer.AckWait)
	assigned := 0
	for _, m := range survivors {
		st := m.g.Stats()
		if st.Members != 2 {
			t.Errorf("%s sees %d members after the kill, want 2", m.id, st.Members)
		}
		assigned += st.Assigned
	}
	if assigned != parts {
		t.Errorf("survivors are assigned %d partitions, want all %d", assigned, parts)
	}
}

// TestGroupRebalancesWithoutDuplicates lets a second member join while
// messages flow, then stops the first one cleanly: partitions change hands
// twice, and no message is handled twice or out of order.
func TestGroupRebalancesWithoutDuplicates(t *testing.T) {
	const parts = 8
	s, js, cfg := setup(t, parts)
	led := newLedger()
	a := startMember(t, s, testGroupConfig(t, cfg, "m0"), led.handler("m0"))
	waitConverged(t, parts, a)

	pub := NewPublisher(js, cfg)
	var sent atomic.Int64
	pubCtx, stopPub := context.WithCancel(context.Background())
	pubDone := make(chan error, 1)
	go func() {
		for i := 0; pubCtx.Err() == nil; i++ {
			p := uint32(i % parts)
			if err := pub.Publish(context.Background(), p, msgID(p, i), fmt.Appendf(nil, "%d/%d", p, i)); err != nil {
				pubDone <- err
				return
			}
			sent.Add(1)
			time.Sleep(2 * time.Millisecond)
		}
		pubDone <- nil
	}()
	testenv.Eventually(t, 30*time.Second, "the first member to hold every pin", testenv.Until(func() bool { return len(a.g.Pinned()) == parts }))
	b := startMember(t, s, testGroupConfig(t, cfg, "m1"), led.handler("m1"))
	testenv.Eventually(t, 30*time.Second, "partitions to move to the new member under load", testenv.Until(func() bool {
		return len(a.g.Pinned()) == parts/2 && len(b.g.Pinned()) == parts/2
	}))
	stopPub()
	if err := <-pubDone; err != nil {
		t.Fatalf("Publish: %v", err)
	}
	all := partitionsOf(parts)
	testenv.Eventually(t, 30*time.Second, "backlog to drain", testenv.Until(func() bool { return pending(t, a.g.c, all) == 0 }))

	if err := a.run.stop(); err != nil {
		t.Fatalf("Run of the stopped member: %v", err)
	}
	for p := range uint32(parts) {
		publish(t, pub, p, msgID(p, -1), fmt.Sprintf("%d/after", p))
	}
	sent.Add(parts)
	testenv.Eventually(t, 30*time.Second, "the remaining member to take every partition", testenv.Until(func() bool { return pending(t, b.g.c, all) == 0 }))

	led.check(t, int(sent.Load()))
	if got := len(b.g.Pinned()); got != parts {
		t.Errorf("remaining member holds %d pins, want %d", got, parts)
	}
	sa, sb := a.g.Stats(), b.g.Stats()
	if sa.Released != parts {
		t.Errorf("first member handed back %d pins, want %d (half on the join, half on stop)", sa.Released, parts)
	}
	if sa.Redelivered+sb.Redelivered+sa.Fenced+sb.Fenced+sa.Lost+sb.Lost != 0 {
		t.Errorf("Stats() = %+v and %+v, want no redelivery, fenced message or lost pin", sa, sb)
	}
	t.Logf("%d messages over a join and a leave; pins acquired by the newcomer: %d", sent.Load(), sb.Acquired)
}

// TestGroupFencesOwnerCutOffFromBroker cuts the owner of a partition off
// from the broker while its handler is stuck before its write (a stalled
// store call, or a process pause). The broker gives the message to the
// other member only after the owner's lease ran out, and the owner's write,
// when it finally comes, is refused.
func TestGroupFencesOwnerCutOffFromBroker(t *testing.T) {
	s, js, cfg := setup(t, 1)
	type attempt struct {
		member   string
		at       time.Time
		deadline time.Time
		err      error
	}
	var (
		mu       sync.Mutex
		attempts []attempt
		writes   []string
		stuck    atomic.Bool
		first    = make(chan string, 1)
		release  = make(chan struct{})
	)
	handler := func(id string) Handler {
		return func(ctx context.Context, seq uint64, data []byte) error {
			dl, _ := ctx.Deadline()
			at := time.Now()
			if stuck.CompareAndSwap(false, true) {
				first <- id
				<-release // stuck past the lease, not watching ctx
			}
			// The write, guarded as a store guards it: by the clock (a
			// timer may not have fired yet after a pause) and by ctx.
			var err error
			switch {
			case !time.Now().Before(dl):
				err = fmt.Errorf("cannot write: %w", ErrLeaseExpired)
			case ctx.Err() != nil:
				err = fmt.Errorf("cannot write: %w", context.Cause(ctx))
			}
			mu.Lock()
			defer mu.Unlock()
			attempts = append(attempts, attempt{id, at, dl, err})
			if err != nil {
				return err
			}
			writes = append(writes, id+":"+string(data))
			return nil
		}
	}
	ms := map[string]*member{}
	for _, id := range []string{"m0", "m1"} {
		ms[id] = startMember(t, s, testGroupConfig(t, cfg, id), handler(id))
	}
	waitConverged(t, 1, ms["m0"], ms["m1"])
	publish(t, NewPublisher(js, cfg), 0, msgID(0, 0), "0/0")

	ownerID := <-first
	otherID := "m0"
	if ownerID == "m0" {
		otherID = "m1"
	}
	owner, other := ms[ownerID], ms[otherID]
	owner.nc.Close() // cut off from the broker; the store is still reachable
	testenv.Eventually(t, 30*time.Second, "the message at the other member", testenv.Until(func() bool { return other.g.Stats().Applied == 1 }))
	close(release)
	if err := owner.run.wait(t); !errors.Is(err, nats.ErrConnectionClosed) {
		t.Fatalf("Run of the cut-off owner: got %v, want ErrConnectionClosed", err)
	}

	mu.Lock()
	defer mu.Unlock()
	if want := []string{otherID + ":0/0"}; !slices.Equal(writes, want) {
		t.Errorf("writes = %v, want %v (the cut-off owner's write refused)", writes, want)
	}
	var ownerAt, otherAt attempt
	for _, a := range attempts {
		switch a.member {
		case ownerID:
			ownerAt = a
		case otherID:
			otherAt = a
		}
	}
	if !errors.Is(ownerAt.err, ErrLeaseExpired) {
		t.Errorf("owner's write error = %v, want ErrLeaseExpired (its deadline passed)", ownerAt.err)
	}
	if !ownerAt.deadline.Before(otherAt.at) {
		t.Errorf("owner's lease ended at %s, after the other member got the message at %s: two writers",
			ownerAt.deadline.Format(time.StampMicro), otherAt.at.Format(time.StampMicro))
	}
	t.Logf("owner's lease ended %v before the other member got the message",
		otherAt.at.Sub(ownerAt.deadline).Round(time.Millisecond))
	if st := owner.g.Stats(); st.Fenced != 1 || st.Applied != 0 {
		t.Errorf("owner Stats() = %+v, want Fenced 1 and Applied 0", st)
	}
	if st := other.g.Stats(); st.Redelivered != 1 || st.Applied != 1 {
		t.Errorf("other Stats() = %+v, want Redelivered 1 and Applied 1", st)
	}
}

// TestGroupSplitViewsKeepOneWriter runs two members that both believe they
// own the partition (they share a member id, so each sees only itself).
// The first message keeps failing for several AckWaits: the holder's lease
// renewals must keep the broker from handing it to the other, and the next
// message must not be handed out before it is done.
func TestGroupSplitViewsKeepOneWriter(t *testing.T) {
	s, js, cfg := setup(t, 1)
	pub := NewPublisher(js, cfg)
	for i := range 3 {
		publish(t, pub, 0, msgID(0, i), fmt.Sprintf("0/%d", i))
	}
	var (
		mu        sync.Mutex
		inside    int
		maxInside int
		applied   []uint64
	)
	failUntil := time.Now().Add(2500 * time.Millisecond)
	h := func(_ context.Context, seq uint64, data []byte) error {
		mu.Lock()
		inside++
		maxInside = max(maxInside, inside)
		mu.Unlock()
		time.Sleep(20 * time.Millisecond) // long enough to overlap if two ran
		mu.Lock()
		defer mu.Unlock()
		inside--
		if string(data) == "0/0" && time.Now().Before(failUntil) {
			return errors.New("store slow")
		}
		applied = append(applied, seq)
		return nil
	}
	var ms []*member
	for range 2 {
		gc := testGroupConfig(t, cfg, "same")
		gc.Consumer.RetryMin, gc.Consumer.RetryMax = 100*time.Millisecond, 200*time.Millisecond
		ms = append(ms, startMember(t, s, gc, h))
	}
	testenv.Eventually(t, 30*time.Second, "backlog to drain", testenv.Until(func() bool { return pending(t, ms[0].g.c, []uint32{0}) == 0 }))

	mu.Lock()
	defer mu.Unlock()
	if maxInside != 1 {
		t.Errorf("up to %d handler calls ran at once, want 1", maxInside)
	}
	if len(applied) != 3 || !slices.IsSorted(applied) || applied[0] == applied[1] || applied[1] == applied[2] {
		t.Errorf("applied %v, want 3 distinct sequences in order", applied)
	}
	var renewals, redelivered uint64
	for _, m := range ms {
		st := m.g.Stats()
		renewals += st.LeaseRenewals
		redelivered += st.Redelivered
	}
	if redelivered != 0 || renewals == 0 {
		t.Errorf("Redelivered %d and LeaseRenewals %d, want none redelivered thanks to renewals", redelivered, renewals)
	}
}

// TestGroupTakesOverPlainConsumers starts a group on durable consumers
// that a plain Consumer created and used: the group turns them into
// priority-group consumers and goes on from where they were.
func TestGroupTakesOverPlainConsumers(t *testing.T) {
	s, js, cfg := setup(t, 2)
	pub := NewPublisher(js, cfg)
	publish(t, pub, 1, msgID(1, 0), "1/0")
	led := newLedger()
	plain := NewConsumer(js, testConsumerConfig(t, cfg))
	r := start(t, plain, []uint32{0, 1}, led.handler("plain"))
	testenv.Eventually(t, 30*time.Second, "plain consumer to apply 1/0", testenv.Until(func() bool { return pending(t, plain, []uint32{1}) == 0 }))
	if err := r.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}

	m := startMember(t, s, testGroupConfig(t, cfg, "m0"), led.handler("m0"))
	publish(t, pub, 1, msgID(1, 1), "1/1")
	testenv.Eventually(t, 30*time.Second, "group to apply 1/1", testenv.Until(func() bool { return m.g.Stats().Applied == 1 }))
	led.check(t, 2)
	info, err := js.Consumer(context.Background(), cfg.Name, m.g.Name(1))
	if err != nil {
		t.Fatal(err)
	}
	got := info.CachedInfo().Config
	if got.PriorityPolicy != jetstream.PriorityPolicyPinned || !slices.Equal(got.PriorityGroups, []string{"test"}) || got.PinnedTTL != time.Second {
		t.Errorf("consumer config: policy %v groups %v pinned ttl %v, want pinned, [test], 1s", got.PriorityPolicy, got.PriorityGroups, got.PinnedTTL)
	}
}

func TestGroupRunRejectsBadUse(t *testing.T) {
	s, _, cfg := setup(t, 1)
	nc, err := s.Connect("bad")
	if err != nil {
		t.Fatal(err)
	}
	js := jsFor(t, nc)
	bad := testGroupConfig(t, cfg, "a.b")
	checkErr(t, NewGroupConsumer(js, bad).Run(context.Background(), newLedger().handler("x")), "member id")
	checkErr(t, NewGroupConsumer(js, testGroupConfig(t, cfg, "m0")).Run(context.Background(), nil), "handler is nil")

	g := NewGroupConsumer(js, testGroupConfig(t, cfg, "m0"))
	startFunc(t, func(ctx context.Context) error { return g.Run(ctx, newLedger().handler("m0")) })
	testenv.Eventually(t, 30*time.Second, "the member to join", testenv.Until(func() bool { return len(g.Members()) == 1 }))
	if err := g.Run(context.Background(), newLedger().handler("m0")); !errors.Is(err, ErrAlreadyRunning) {
		t.Errorf("second Run: got %v, want ErrAlreadyRunning", err)
	}
}

// TestGroupOnRelease: a member that hands partitions back (a new member
// takes half, then it stops) tells OnRelease, while it still holds each
// pin, and only for partitions it held.
func TestGroupOnRelease(t *testing.T) {
	const parts = 4
	s, js, cfg := setup(t, parts)
	var mu sync.Mutex
	released := map[uint32]int{}
	gc := testGroupConfig(t, cfg, "m0")
	gc.OnRelease = func(p uint32, handedBack bool) {
		if !handedBack {
			t.Errorf("partition %d released without a hand-back", p)
		}
		mu.Lock()
		released[p]++
		mu.Unlock()
	}
	led := newLedger()
	a := startMember(t, s, gc, led.handler("m0"))
	waitConverged(t, parts, a)
	pub := NewPublisher(js, cfg)
	for p := range uint32(parts) {
		publish(t, pub, p, msgID(p, 0), "x")
	}
	testenv.Eventually(t, 30*time.Second, "m0 to pin every partition", testenv.Until(func() bool { return len(a.g.Pinned()) == parts }))

	b := startMember(t, s, testGroupConfig(t, cfg, "m1"), led.handler("m1"))
	waitConverged(t, parts, a, b)
	testenv.Eventually(t, 30*time.Second, "m0 to hand back m1's partitions", testenv.Until(func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(released) == parts/2
	}))
	for _, p := range b.g.Assigned() {
		mu.Lock()
		n := released[p]
		mu.Unlock()
		if n != 1 {
			t.Errorf("partition %d (now m1's) released %d times, want 1", p, n)
		}
	}
	if err := a.run.stop(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(released) != parts {
		t.Errorf("after m0 stopped, released %v; want every partition once", released)
	}
}
