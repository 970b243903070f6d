package natsjs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// membership keeps this member in the group's membership stream and
// maintains its view of the live members. The stream holds at most one
// message per member subject (<prefix>.<member id>) and drops messages
// older than the member TTL, so the subjects it holds are the members that
// renewed within the TTL.
type membership struct {
	js         jetstream.JetStream
	stream     string
	subjects   string // the stream's subjects: <SubjectPrefix>-members.>
	prefix     string // this group's members: <SubjectPrefix>-members.<durable>
	id         string
	ttl        time.Duration
	replicas   int
	partitions int
	log        *slog.Logger
	errors     atomic.Uint64

	rejoins atomic.Uint64 // membership stream created again
	// lost: this member found the stream gone and its create failed; the
	// stream may exist since (that create, or another member's).
	lost atomic.Bool

	// st is the membership stream, set by ensure (on join, and on a round
	// that created the stream again); nil before a successful join. Only
	// the goroutine that joins, runs and leaves uses it, in that order.
	st jetstream.Stream

	mu  sync.Mutex
	cur *view
}

// view is one membership view: the live members and the partitions
// assigned to each. A view is immutable; changed is closed when the next
// one replaces it.
type view struct {
	members []string // sorted
	owners  []string // partition → member
	changed chan struct{}
}

func (v *view) owner(p uint32) string {
	if int(p) >= len(v.owners) {
		return ""
	}
	return v.owners[p]
}

func (v *view) assigned(member string) []uint32 {
	var ps []uint32
	for p, m := range v.owners {
		if m == member {
			ps = append(ps, uint32(p))
		}
	}
	return ps
}

func (m *membership) view() *view {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cur
}

func (m *membership) subject() string { return m.prefix + "." + m.id }

// membersMaxBytes bounds the membership stream: one small message per
// member (a subject and no body, about a hundred bytes stored), so a
// megabyte holds thousands of members and no bug or stray publisher can
// grow it without bound.
const membersMaxBytes = 1 << 20

// streamConfig is the membership stream. It is kept in files (and
// replicated like the partial-sum stream), so that a broker restart keeps
// it: members go on renewing without a gap, and a member that dies right
// after the restart expires from it as from any other.
func (m *membership) streamConfig() jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:              m.stream,
		Description:       "edgecount consumer group membership: one subject per live member",
		Subjects:          []string{m.subjects},
		Retention:         jetstream.LimitsPolicy,
		Storage:           jetstream.FileStorage,
		Replicas:          m.replicas,
		MaxAge:            m.ttl,
		MaxMsgsPerSubject: 1,
		MaxMsgs:           -1,
		MaxBytes:          membersMaxBytes,
		Discard:           jetstream.DiscardOld,
	}
}

// join creates or updates the membership stream, announces this member
// and reads the first view.
func (m *membership) join(ctx context.Context) error {
	if _, err := m.ensure(ctx); err != nil {
		return err
	}
	return m.round(ctx)
}

// ensure creates or updates the membership stream and reports whether it
// had to create it. A stream kept in memory (what earlier versions
// created, and a broker restart erased) is replaced: every member renews
// its entry within MemberTTL/4 anyway.
func (m *membership) ensure(ctx context.Context) (created bool, _ error) {
	cfg := m.streamConfig()
	st, err := m.js.Stream(ctx, m.stream)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		created = true
	case err == nil && st.CachedInfo().Config.Storage != cfg.Storage:
		m.log.Info("replacing the membership stream kept in memory by one kept in files", "members_stream", m.stream)
		if err := m.js.DeleteStream(ctx, m.stream); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
			return false, fmt.Errorf("cannot replace membership stream %s: %w", m.stream, err)
		}
		created = true
	}
	if st, err = m.js.CreateOrUpdateStream(ctx, cfg); err != nil {
		// A create that timed out may still have created the stream (a
		// broker just back is slow): the next round that renews counts
		// the rejoin.
		m.lost.Store(m.lost.Load() || created)
		return false, fmt.Errorf("cannot create membership stream %s: %w", m.stream, err)
	}
	// lost stays set: the round that renews into the stream counts the
	// rejoin (clearing it here lost the count when the stream a timed-out
	// create had made was found on the next try).
	m.st = st
	return created, nil
}

// round renews this member and installs the current view. When the broker
// has lost the membership stream (a restart without its store, or a
// deletion), round creates it again and renews into it: the view is then
// rebuilt from the stream as every member renews within MemberTTL/4.
func (m *membership) round(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, m.ttl/2)
	defer cancel()
	// One try each: the round comes again in MemberTTL/4, and the retries
	// a publish makes on "no responders" would use up the round's time
	// and hide that the stream is gone.
	_, err := m.js.Publish(ctx, m.subject(), nil, jetstream.WithRetryAttempts(0))
	if streamGone(err) {
		// Gone, or not answering for a moment (a leader election): ensure
		// creates it only in the first case.
		created, err := m.ensure(ctx)
		if err != nil {
			return fmt.Errorf("cannot renew membership %s: the stream is not answering: %w", m.subject(), err)
		}
		if created {
			m.lost.Store(false) // counted here
			m.rejoins.Add(1)
			m.log.Warn("membership stream created again after the broker lost it; joining again", "members_stream", m.stream)
		}
		_, err = m.js.Publish(ctx, m.subject(), nil, jetstream.WithRetryAttempts(0))
	}
	if err != nil {
		return fmt.Errorf("cannot renew membership %s: %w", m.subject(), err)
	}
	if m.lost.Swap(false) {
		m.rejoins.Add(1)
		m.log.Warn("membership stream back after the broker lost it; joined again", "members_stream", m.stream)
	}
	info, err := m.st.Info(ctx, jetstream.WithSubjectFilter(m.prefix+".*"))
	if err != nil {
		return fmt.Errorf("cannot read membership: %w", err)
	}
	members := []string{m.id} // renewed just now, whatever the listing says
	for subj := range info.State.Subjects {
		if id, ok := strings.CutPrefix(subj, m.prefix+"."); ok && id != m.id {
			members = append(members, id)
		}
	}
	slices.Sort(members)
	m.install(members)
	return nil
}

// install replaces the view if the members changed.
func (m *membership) install(members []string) {
	m.mu.Lock()
	old := m.cur
	if slices.Equal(old.members, members) {
		m.mu.Unlock()
		return
	}
	v := &view{members: members, owners: assign(members, m.partitions), changed: make(chan struct{})}
	m.cur = v
	m.mu.Unlock()
	close(old.changed)
	m.log.Info("group membership changed", "members", members, "assigned", len(v.assigned(m.id)))
}

// run renews the membership and refreshes the view every TTL/4 until ctx
// is done. A failed round keeps the last view. It returns an error only
// when the connection was closed.
func (m *membership) run(ctx context.Context) error {
	t := time.NewTicker(m.ttl / 4)
	defer t.Stop()
	var failing episode
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if err := m.round(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, nats.ErrConnectionClosed) {
				return err
			}
			m.errors.Add(1)
			if n, warn := failing.fail(); warn {
				m.log.Warn("cannot refresh group membership, keeping the last view", "attempt", n, "err", err)
			}
			continue
		}
		if n, d, ended := failing.end(); ended {
			m.log.Info("group membership renewed again", "failures", n, "after", d.Round(time.Millisecond))
		}
	}
}

// leave removes this member at once, so that the others need not wait for
// its membership to expire.
func (m *membership) leave(ctx context.Context) error {
	if m.st == nil {
		return nil
	}
	if err := m.st.Purge(ctx, jetstream.WithPurgeSubject(m.subject())); err != nil {
		return fmt.Errorf("cannot leave group: %w", err)
	}
	return nil
}

// assign spreads partitions over members by rendezvous hashing with
// bounded load. Every (member, partition) pair has a score, the hash of
// both; pairs are taken from the highest score down, and a pair assigns its
// partition to its member unless the partition is taken or the member is
// full: it has ⌊P/n⌋ partitions and P mod n members already took one more.
// Every member that computes it from the same set gets the same answer,
// each member gets ⌊P/n⌋ or ⌈P/n⌉ partitions, and a partition's owner
// depends on the member set only, so most partitions stay where they are
// when a member joins or leaves (measured over 16 partitions: a third
// member joining moves about 6 partitions where 5.3 must move; a member
// leaving three moves its own and about one more between the survivors).
func assign(members []string, partitions int) []string {
	owners := make([]string, partitions)
	if len(members) == 0 {
		return owners
	}
	type pair struct {
		score     uint64
		member    string
		partition int
	}
	pairs := make([]pair, 0, len(members)*partitions)
	var buf []byte
	for _, m := range members {
		for p := range partitions {
			buf = strconv.AppendInt(append(append(buf[:0], m...), '/'), int64(p), 10)
			pairs = append(pairs, pair{xxhash.Sum64(buf), m, p})
		}
	}
	slices.SortFunc(pairs, func(a, b pair) int {
		if a.score != b.score {
			return cmp.Compare(b.score, a.score)
		}
		if a.member != b.member {
			return strings.Compare(a.member, b.member)
		}
		return cmp.Compare(a.partition, b.partition)
	})
	// Each member takes floor partitions, and extra members one more.
	floor, extra := partitions/len(members), partitions%len(members)
	load := make(map[string]int, len(members))
	for _, pr := range pairs {
		if owners[pr.partition] != "" {
			continue
		}
		switch l := load[pr.member]; {
		case l < floor:
		case l == floor && extra > 0:
			extra--
		default:
			continue
		}
		owners[pr.partition] = pr.member
		load[pr.member]++
	}
	return owners
}
