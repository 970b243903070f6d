package natsjs

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"

	"github.com/edgecount/edgecount/internal/periodic"
)

// ErrLeaseExpired is the cause (context.Cause) of a GroupConsumer handler's
// context when the message's lease ran out: from then on the broker may
// hand the message to another member, and the handler must not write.
var ErrLeaseExpired = errors.New("message lease expired")

// ErrAlreadyRunning is returned by GroupConsumer.Run while another Run of
// the same GroupConsumer is active.
var ErrAlreadyRunning = errors.New("group consumer is already running")

// pinIDHeader is the header the broker puts on every message it delivers
// to the pinned member of a priority group.
const pinIDHeader = "Nats-Pin-Id"

// ackProgress is the body of a progress signal ("working on it").
var ackProgress = []byte("+WPI")

// GroupConfig configures a GroupConsumer. Zero fields take the values of
// DefaultGroupConfig.
type GroupConfig struct {
	// Consumer configures the partition consumers as for Consumer: the
	// stream, the durable prefix (the same for every member: all members
	// share the durable consumers), AckWait, retry backoff and logger.
	Consumer ConsumerConfig
	// Group names the priority group of the durable consumers: 1–16
	// characters of A–Z a–z 0–9 _ = - (default "rollup").
	Group string
	// MemberID names this process in the group: 1–64 characters of
	// A–Z a–z 0–9 _ -, unique among the members (default
	// <hostname>-<random>, new for every GroupConsumer).
	MemberID string
	// MemberTTL is how long a member stays in the group after its last
	// renewal, and the durable consumers' PinnedTTL: how long the broker
	// keeps a partition pinned to a member that sends no pull request.
	// Members renew and re-read the membership every MemberTTL/4 and pull
	// at least every MemberTTL/3. Default 5s, at least 200ms.
	MemberTTL time.Duration
	// FenceMargin is the part of AckWait that a message's lease keeps back:
	// a member stops acting on a message FenceMargin before the broker can
	// hand it to another member. It must cover clock-rate drift and the
	// longest time a store write that started before the lease ended can
	// take to land. Zero means AckWait/3; at most AckWait/2.
	FenceMargin time.Duration
	// MembersStream names the stream that holds the membership (empty means
	// <stream name>_MEMBERS). Its MaxAge is MemberTTL, so every group
	// sharing it must use the same MemberTTL.
	MembersStream string
	// OnRelease, if set, is called when this member stops holding a
	// partition it held: it is about to hand the pin back (handedBack:
	// it still holds it during the call), or the broker moved it, or it
	// came back under a new pin (so another member may have held it
	// meanwhile). State kept per partition must be dropped then. It runs
	// on the partition's goroutine, between messages; a hand-back waits
	// for it, so it must be short.
	OnRelease func(partition uint32, handedBack bool)
}

// DefaultGroupConfig returns the default group configuration. FenceMargin
// and MembersStream are left zero: they derive from Consumer (AckWait/3,
// <stream name>_MEMBERS) when the consumer is built, so that a caller who
// changes Consumer afterwards gets them right.
func DefaultGroupConfig() GroupConfig {
	return GroupConfig{
		Consumer:  DefaultConsumerConfig(),
		Group:     "rollup",
		MemberTTL: 5 * time.Second,
	}
}

func (c GroupConfig) withDefaults() GroupConfig {
	d := DefaultGroupConfig()
	c.Consumer = c.Consumer.withDefaults()
	c.Group = cmp.Or(c.Group, d.Group)
	c.MemberTTL = cmp.Or(c.MemberTTL, d.MemberTTL)
	c.FenceMargin = cmp.Or(c.FenceMargin, c.Consumer.AckWait/3)
	c.MembersStream = cmp.Or(c.MembersStream, c.Consumer.Stream.Name+"_MEMBERS")
	return c
}

var (
	validGroup  = regexp.MustCompile(`^[A-Za-z0-9_=-]{1,16}$`)
	validMember = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
)

// Validate reports every problem with c (after defaults are applied). An
// empty MemberID is valid: NewGroupConsumer picks one.
func (c GroupConfig) Validate() error {
	c = c.withDefaults()
	var errs []error
	if err := c.Consumer.Validate(); err != nil {
		errs = append(errs, err)
	}
	if !validGroup.MatchString(c.Group) {
		errs = append(errs, fmt.Errorf("group %q is not 1-16 characters of A-Z a-z 0-9 _ = -", c.Group))
	}
	if c.MemberID != "" && !validMember.MatchString(c.MemberID) {
		errs = append(errs, fmt.Errorf("member id %q is not 1-64 characters of A-Z a-z 0-9 _ -", c.MemberID))
	}
	if c.MemberTTL < 200*time.Millisecond {
		errs = append(errs, fmt.Errorf("member ttl %s is shorter than 200ms", c.MemberTTL))
	}
	if c.FenceMargin <= 0 || c.FenceMargin > c.Consumer.AckWait/2 {
		errs = append(errs, fmt.Errorf("fence margin %s is not in (0, ack wait/2 = %s]", c.FenceMargin, c.Consumer.AckWait/2))
	}
	if !validName(c.MembersStream) {
		errs = append(errs, fmt.Errorf("members stream %q is not a valid name", c.MembersStream))
	} else if c.MembersStream == c.Consumer.Stream.Name {
		errs = append(errs, fmt.Errorf("members stream %q is the partial-sum stream", c.MembersStream))
	}
	return errors.Join(errs...)
}

// HandoverBound is the longest time, after a member dies, until its
// partitions are consumed by the survivors: the dead member's membership
// expires after MemberTTL (plus up to 250ms until the broker's age check
// runs), the survivors see that within MemberTTL/4, and by then its pins
// (PinnedTTL = MemberTTL) have expired too. A message the dead member was
// applying comes again after at most AckWait. Add one broker round trip.
func (c GroupConfig) HandoverBound() time.Duration {
	c = c.withDefaults()
	b := c.MemberTTL + c.MemberTTL/4 + 250*time.Millisecond
	return max(b, c.Consumer.AckWait)
}

// GroupStats are a group consumer's counters and its current share of the
// partitions.
type GroupStats struct {
	ConsumerStats
	// Members is the number of live members in this member's view, itself
	// included.
	Members int
	// Assigned is the number of partitions the view assigns to this member.
	Assigned int
	// Pinned is the number of partitions whose pin this member holds, as
	// far as it knows: it receives their messages.
	Pinned int
	// Acquired counts pins received: partitions handed over to this member.
	Acquired uint64
	// Released counts pins handed back on purpose (rebalancing, stop).
	Released uint64
	// Lost counts pins the broker moved away because this member sent no
	// pull request for PinnedTTL (a stall, or a long handler call).
	Lost uint64
	// Fenced counts messages given up because their lease ran out before
	// the handler returned: neither acknowledged nor handed back, the
	// broker delivers them again.
	Fenced uint64
	// LeaseRenewals counts confirmed progress signals; LeaseErrors those
	// not confirmed in time.
	LeaseRenewals, LeaseErrors uint64
	// MembershipErrors counts failed membership renewals or reads.
	MembershipErrors uint64
	// MembershipRejoins counts creations of the membership stream after
	// the broker lost it, each followed by joining again.
	MembershipRejoins uint64
}

// GroupConsumer consumes every partition of the stream together with the
// other members of its group: each partition is consumed by one member at
// a time, partitions are spread evenly over the live members, and they
// move to the survivors when a member dies. See the package documentation,
// "Partition ownership and fencing". It is safe for concurrent use; Run
// runs once at a time.
type GroupConsumer struct {
	c       *Consumer
	cfg     GroupConfig
	log     *slog.Logger
	members *membership
	// expiry and heartbeat of one pull request.
	expiry, heartbeat time.Duration

	running atomic.Bool

	mu   sync.Mutex
	pins []string // partition → pin id this member holds, "" for none

	pinned                                          atomic.Int64
	acquired, released, lost, renewals, leaseErrors atomic.Uint64
}

// NewGroupConsumer returns a group member; zero fields of cfg take their
// defaults and an empty MemberID a random one. Run validates the
// configuration.
func NewGroupConsumer(js jetstream.JetStream, cfg GroupConfig) *GroupConsumer {
	cfg = cfg.withDefaults()
	if cfg.MemberID == "" {
		cfg.MemberID = defaultMemberID()
	}
	c := NewConsumer(js, cfg.Consumer)
	c.pinned = &pinnedPolicy{group: cfg.Group, ttl: cfg.MemberTTL}
	log := cfg.Consumer.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("component", "natsjs-group", "stream", cfg.Consumer.Stream.Name, "member", cfg.MemberID)
	expiry, heartbeat := min(pullWait, cfg.MemberTTL/3), pullHeartbeat
	if expiry < 4*pullHeartbeat {
		// A lost pull request is noticed when it expires anyway; heartbeats
		// this frequent would only raise false alarms on a busy machine.
		heartbeat = 0
	}
	g := &GroupConsumer{
		c:         c,
		cfg:       cfg,
		log:       log,
		expiry:    expiry,
		heartbeat: heartbeat,
		pins:      make([]string, max(cfg.Consumer.Stream.Partitions, 0)),
	}
	g.members = &membership{
		js:         js,
		stream:     cfg.MembersStream,
		subjects:   cfg.Consumer.Stream.SubjectPrefix + "-members.>",
		prefix:     cfg.Consumer.Stream.SubjectPrefix + "-members." + cfg.Consumer.Durable,
		id:         cfg.MemberID,
		ttl:        cfg.MemberTTL,
		replicas:   cfg.Consumer.Stream.Replicas,
		partitions: max(cfg.Consumer.Stream.Partitions, 0),
		log:        log,
		cur:        &view{changed: make(chan struct{})},
	}
	return g
}

// GroupConsumer returns a member of a consumer group (see GroupConsumer).
func (c *Client) GroupConsumer(cfg GroupConfig) *GroupConsumer { return NewGroupConsumer(c.js, cfg) }

// pinnedPolicy makes durable consumers pinned-client priority consumers.
type pinnedPolicy struct {
	group string
	ttl   time.Duration
}

// defaultMemberID returns <hostname>-<8 random hex digits>, the hostname
// cut to the allowed characters.
func defaultMemberID() string {
	host, _ := os.Hostname()
	host = strings.Map(func(r rune) rune {
		if r < 0x80 && validMember.MatchString(string(r)) {
			return r
		}
		return '_'
	}, host)
	if len(host) > 40 {
		host = host[:40]
	}
	if host == "" {
		host = "member"
	}
	var b [4]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return host + "-" + hex.EncodeToString(b[:])
}

// MemberID returns this member's id.
func (g *GroupConsumer) MemberID() string { return g.cfg.MemberID }

// Config returns the configuration in force (defaults applied).
func (g *GroupConsumer) Config() GroupConfig { return g.cfg }

// Name returns the durable consumer name of a partition.
func (g *GroupConsumer) Name(partition uint32) string { return g.c.Name(partition) }

// Pending returns the backlog of the partitions (see Consumer.Pending).
func (g *GroupConsumer) Pending(ctx context.Context, partitions []uint32) (uint64, error) {
	return g.c.Pending(ctx, partitions)
}

// Stats returns a snapshot of the counters.
func (g *GroupConsumer) Stats() GroupStats {
	v := g.members.view()
	return GroupStats{
		ConsumerStats:    g.c.Stats(),
		Members:          len(v.members),
		Assigned:         len(v.assigned(g.cfg.MemberID)),
		Pinned:           int(g.pinned.Load()),
		Acquired:         g.acquired.Load(),
		Released:         g.released.Load(),
		Lost:             g.lost.Load(),
		Fenced:           g.c.fenced.Load(),
		LeaseRenewals:    g.renewals.Load(),
		LeaseErrors:      g.leaseErrors.Load(),
		MembershipErrors: g.members.errors.Load(),

		MembershipRejoins: g.members.rejoins.Load(),
	}
}

// Members returns the live members in this member's view, sorted.
func (g *GroupConsumer) Members() []string {
	return append([]string(nil), g.members.view().members...)
}

// Assigned returns the partitions the current view assigns to this member.
func (g *GroupConsumer) Assigned() []uint32 { return g.members.view().assigned(g.cfg.MemberID) }

// Pinned returns the partitions whose pin this member holds, as far as it
// knows.
func (g *GroupConsumer) Pinned() []uint32 {
	g.mu.Lock()
	defer g.mu.Unlock()
	var ps []uint32
	for p, id := range g.pins {
		if id != "" {
			ps = append(ps, uint32(p))
		}
	}
	return ps
}

// Run joins the group and consumes the partitions assigned to this member,
// feeding their messages to h, until ctx is done. It starts one goroutine
// per partition of the stream (each with a lease keeper) and one for the
// membership, and returns after every one of them has exited: nil when ctx
// was cancelled, an error when the group cannot be set up or the
// connection was closed. On return it hands back the pins it holds and
// leaves the group, so that the others take over at once; after a crash
// they take over within HandoverBound.
func (g *GroupConsumer) Run(ctx context.Context, h Handler) error {
	if h == nil {
		return errors.New("cannot run group consumer: handler is nil")
	}
	return g.RunBatch(ctx, single(h))
}

// RunBatch is Run with a handler of batches (see ConsumerConfig.Batch).
func (g *GroupConsumer) RunBatch(ctx context.Context, h BatchHandler) error {
	if err := g.cfg.Validate(); err != nil {
		return fmt.Errorf("cannot run group consumer: %w", err)
	}
	if h == nil {
		return errors.New("cannot run group consumer: handler is nil")
	}
	if !g.running.CompareAndSwap(false, true) {
		return fmt.Errorf("cannot run group consumer: %w", ErrAlreadyRunning)
	}
	defer g.running.Store(false)

	// Each step waits out a broker that is down or restarting (setUp).
	n := g.cfg.Consumer.Stream.Partitions
	cons := make([]jetstream.Consumer, n)
	for p := range cons {
		err := g.c.setUp(ctx, "durable consumer "+g.Name(uint32(p)), func(ctx context.Context) (err error) {
			cons[p], err = g.c.ensure(ctx, uint32(p))
			return err
		})
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("cannot run group consumer: %w", err)
		}
	}
	var st jetstream.Stream
	err := g.c.setUp(ctx, "stream lookup", func(ctx context.Context) (err error) {
		if st, err = g.c.js.Stream(ctx, g.cfg.Consumer.Stream.Name); err != nil {
			return fmt.Errorf("cannot look up stream %s: %w", g.cfg.Consumer.Stream.Name, err)
		}
		return nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("cannot run group consumer: %w", err)
	}
	if err := g.c.setUp(ctx, "membership", g.members.join); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("cannot run group consumer: %w", err)
	}

	// The membership outlives the partition goroutines: while they finish
	// their messages and hand back their pins this member still counts as
	// live, so nobody else starts pulling its partitions too early.
	// If the membership cannot go on (the connection was closed), the
	// partition goroutines stop too, even those that wait for a view
	// change that can no longer come.
	pctx, stopPartitions := context.WithCancelCause(ctx)
	defer stopPartitions(nil)
	mctx, stopMembers := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := g.members.run(mctx); err != nil {
			stopPartitions(err)
		}
	}()
	eg, gctx := errgroup.WithContext(pctx)
	for p := range cons {
		eg.Go(func() error { return g.runPartition(gctx, uint32(p), cons[p], st, h) })
	}
	runErr := eg.Wait()
	stopMembers()
	wg.Wait()
	if runErr == nil {
		if cause := context.Cause(pctx); cause != nil && !errors.Is(cause, context.Canceled) {
			runErr = cause
		}
	}
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.releaseTimeout())
	defer cancel()
	if err := g.members.leave(lctx); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
		g.log.Warn("cannot leave group; the others take over when the membership expires", "err", err)
	}
	if ctx.Err() != nil {
		return nil
	}
	return runErr
}

func (g *GroupConsumer) releaseTimeout() time.Duration {
	return min(5*time.Second, g.cfg.Consumer.AckWait)
}

// runPartition consumes one partition while the view assigns it to this
// member, and hands its pin back when it is not (any more). It returns an
// error only when the connection was closed.
func (g *GroupConsumer) runPartition(ctx context.Context, p uint32, cons jetstream.Consumer, st jetstream.Stream, h BatchHandler) error {
	log := g.log.With("partition", p, "consumer", g.Name(p))
	l := g.newLease()
	defer background(ctx, l.keep)()
	defer g.release(ctx, p, st, log)

	pl := partLoop{log: log, keeper: l, cons: cons, opts: fetchOpts{jetstream.FetchPriorityGroup(g.cfg.Group)}, h: h}
	failures, ok := 0, false
	for ctx.Err() == nil {
		v := g.members.view()
		if v.owner(p) != g.cfg.MemberID {
			pl.whole = false
			g.release(ctx, p, st, log)
			select {
			case <-ctx.Done():
				return nil
			case <-v.changed:
			}
			continue
		}
		sent := time.Now() // not after the broker delivered: the lease starts here
		msg, err := g.next(ctx, pl.cons)
		switch {
		case err == nil:
			failures = fetchRecovered(log, failures)
			if g.notePin(p, msg, log) {
				pl.whole = false
			}
			g.c.handle(ctx, &pl, msg, sent)
			continue
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, jetstream.ErrPinIDMismatch):
			// The broker moved the pin while this member did not pull
			// (PinnedTTL); the library forgot the old pin id and the
			// next pull competes for the pin again.
			g.losePin(p, log)
			pl.whole = false
			continue
		case errors.Is(err, nats.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
			if failures > 0 && g.c.js.Conn().IsConnected() {
				failures = fetchRecovered(log, failures)
			}
			continue
		case errors.Is(err, nats.ErrConnectionClosed):
			return fmt.Errorf("cannot fetch from %s: %w", g.Name(p), err)
		}
		failures++
		if pl.cons, ok = g.c.fetchFailed(ctx, log, p, pl.cons, err, failures); !ok {
			return nil
		}
	}
	return nil
}

// next waits for the partition's next message as a member of the group.
func (g *GroupConsumer) next(ctx context.Context, cons jetstream.Consumer) (jetstream.Msg, error) {
	ctx, cancel := context.WithTimeout(ctx, g.expiry)
	defer cancel()
	opts := []jetstream.FetchOpt{jetstream.FetchContext(ctx), jetstream.FetchPriorityGroup(g.cfg.Group)}
	if g.heartbeat > 0 {
		opts = append(opts, jetstream.FetchHeartbeat(g.heartbeat))
	}
	return cons.Next(opts...)
}

// swapPin records id ("" for none) as the pin this member holds of p and
// returns the one it held.
func (g *GroupConsumer) swapPin(p uint32, id string) (old string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	old, g.pins[p] = g.pins[p], id
	return old
}

// notePin records the pin id the broker delivered msg under, and reports
// whether it changed.
func (g *GroupConsumer) notePin(p uint32, msg jetstream.Msg, log *slog.Logger) bool {
	id := msg.Headers().Get(pinIDHeader)
	old := g.swapPin(p, id)
	if id == old || id == "" {
		if id == "" && old != "" {
			g.pinned.Add(-1)
		}
		return id != old
	}
	if old == "" {
		g.pinned.Add(1)
	} else {
		g.released1(p, false)
	}
	g.acquired.Add(1)
	log.Info("partition pinned to this member", "pin", id)
	return true
}

// losePin forgets the pin of p after the broker moved it.
func (g *GroupConsumer) losePin(p uint32, log *slog.Logger) {
	old := g.swapPin(p, "")
	if old == "" {
		return
	}
	g.pinned.Add(-1)
	g.lost.Add(1)
	g.released1(p, false)
	log.Warn("partition pin moved away (no pull for the pinned ttl)", "pin", old)
}

// released1 tells the OnRelease hook that p is no longer held.
func (g *GroupConsumer) released1(p uint32, handedBack bool) {
	if g.cfg.OnRelease != nil {
		g.cfg.OnRelease(p, handedBack)
	}
}

// release hands the pin of p back to the broker, so that the member the
// view assigns p to gets it with the next message instead of after
// PinnedTTL. Only called between messages.
func (g *GroupConsumer) release(ctx context.Context, p uint32, st jetstream.Stream, log *slog.Logger) {
	old := g.swapPin(p, "")
	if old == "" {
		return
	}
	g.pinned.Add(-1)
	g.released1(p, true)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.releaseTimeout())
	defer cancel()
	if err := st.UnpinConsumer(rctx, g.Name(p), g.cfg.Group); err != nil {
		// It expires by itself after PinnedTTL without a pull.
		log.Debug("cannot hand back partition pin", "pin", old, "err", err)
		return
	}
	g.released.Add(1)
	log.Info("partition pin handed back", "pin", old)
}

// newLease returns the lease keeper of one partition goroutine.
func (g *GroupConsumer) newLease() *lease {
	return &lease{
		nc:       g.c.js.Conn(),
		usable:   g.cfg.Consumer.AckWait - g.cfg.FenceMargin,
		renewals: &g.renewals,
		errors:   &g.leaseErrors,
	}
}

// lease is how long a member may still act on the message it holds. The
// broker does not deliver a message again before AckWait has passed since
// the later of its delivery and the last progress signal it processed. A
// pull request sent at t therefore gives a lease until
// t + AckWait − FenceMargin, and a progress signal sent at t whose
// confirmation arrives while the lease still holds extends it to the same
// bound. A lease that has run out is never extended: by then the broker
// may have handed the message to someone else (and it confirms progress
// signals for messages it no longer keeps for this member).
type lease struct {
	nc       *nats.Conn
	usable   time.Duration // AckWait − FenceMargin
	renewals *atomic.Uint64
	errors   *atomic.Uint64

	mu   sync.Mutex
	msgs []jetstream.Msg // nil: none held
	end  time.Time
	gen  uint64 // counts starts and stops
}

func (l *lease) start(msgs []jetstream.Msg, sent time.Time) {
	l.mu.Lock()
	l.msgs, l.end = slices.Clone(msgs), sent.Add(l.usable)
	l.gen++
	l.mu.Unlock()
}

// add holds msgs too, pulled with a request sent at sent: the lease ends
// no later than theirs.
func (l *lease) add(msgs []jetstream.Msg, sent time.Time) {
	l.mu.Lock()
	if l.msgs != nil {
		l.msgs = append(l.msgs, msgs...)
		if e := sent.Add(l.usable); e.Before(l.end) {
			l.end = e
		}
	}
	l.mu.Unlock()
}

// stop ends the lease: no progress signal is sent for the messages after
// stop returns, except one already on its way.
func (l *lease) stop() {
	l.mu.Lock()
	l.msgs = nil
	l.gen++
	l.mu.Unlock()
}

func (l *lease) deadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.end
}

// attempt gives a handler attempt the lease as its deadline (cause
// ErrLeaseExpired), renewing the lease first if less than half is left; it
// is false when the lease does not hold.
func (l *lease) attempt(ctx context.Context) (context.Context, context.CancelFunc, bool) {
	if !l.prepare(ctx) {
		return nil, nil, false
	}
	actx, cancel := context.WithDeadlineCause(ctx, l.deadline(), ErrLeaseExpired)
	return actx, cancel, true
}

// holds reports whether the lease still holds, by the clock: after a
// process pause a timer may not have fired yet.
func (l *lease) holds() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.msgs != nil && time.Now().Before(l.end)
}

// prepare renews the lease first if less than half of it is left, so that
// every handler attempt gets at least (AckWait − FenceMargin)/2. It
// reports whether the lease holds.
func (l *lease) prepare(ctx context.Context) bool {
	l.mu.Lock()
	left := time.Until(l.end)
	l.mu.Unlock()
	if left < l.usable/2 {
		l.renew(ctx)
	}
	return l.holds()
}

// renew sends a confirmed progress signal for every message held and
// extends the lease if every confirmation arrives while the lease still
// holds.
func (l *lease) renew(ctx context.Context) {
	l.mu.Lock()
	msgs, end, gen := slices.Clone(l.msgs), l.end, l.gen
	l.mu.Unlock()
	sent := time.Now()
	if len(msgs) == 0 || !sent.Before(end) || ctx.Err() != nil {
		return
	}
	rctx, cancel := context.WithDeadline(ctx, end)
	var err error
	for _, msg := range msgs {
		if _, err = l.nc.RequestWithContext(rctx, msg.Reply(), ackProgress); err != nil {
			break
		}
	}
	cancel()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.gen != gen {
		return // done meanwhile
	}
	if err != nil || !time.Now().Before(l.end) {
		l.errors.Add(1)
		return
	}
	if e := sent.Add(l.usable); e.After(l.end) {
		l.end = e
	}
	l.renewals.Add(1)
}

// keep renews the lease of the message being handled whenever less than
// two thirds of it are left, checking every sixth of it.
func (l *lease) keep(ctx context.Context) {
	periodic.Run(ctx, max(l.usable/6, time.Millisecond), func() {
		l.mu.Lock()
		due := l.msgs != nil && time.Until(l.end) < l.usable*2/3
		l.mu.Unlock()
		if due {
			l.renew(ctx)
		}
	})
}
