package cassandra

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/store"
)

// errCut is what a connection cut by cutDialer reports.
var errCut = errors.New("connection cut by test")

// cutDialer opens real connections to the node and can lose the answer to
// one chosen request: after the next write that contains the armed marker,
// its connection still delivers the request and lets the node answer, but
// drops the answer and reports a broken connection. The node has then run
// the request while the client cannot know its outcome.
type cutDialer struct {
	d      net.Dialer
	mu     sync.Mutex
	marker []byte
	skip   int // writes containing marker to let through first
}

func (c *cutDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := c.d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &cutConn{Conn: conn, d: c}, nil
}

// arm makes the write containing marker after the next skip such writes
// the last answered one of its connection.
func (c *cutDialer) arm(marker string, skip int) {
	c.mu.Lock()
	c.marker, c.skip = []byte(marker), skip
	c.mu.Unlock()
}

// armed reports whether the marker still waits for its write.
func (c *cutDialer) armed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.marker != nil
}

func (c *cutDialer) take(p []byte) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.marker != nil && bytes.Contains(p, c.marker) {
		if c.skip > 0 {
			c.skip--
			return false
		}
		c.marker = nil
		return true
	}
	return false
}

type cutConn struct {
	net.Conn
	d    *cutDialer
	mu   sync.Mutex
	dead bool
}

func (c *cutConn) Write(p []byte) (int, error) {
	// Marked dead before the write, so that no part of the answer, however
	// fast, gets through.
	if c.d.take(p) {
		c.mu.Lock()
		c.dead = true
		c.mu.Unlock()
	}
	return c.Conn.Write(p)
}

// Read passes the node's bytes on until the connection is cut; from then
// on the next answer is read (the node has run the request) and dropped.
func (c *cutConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	dead := c.dead
	c.mu.Unlock()
	if dead {
		return 0, errCut
	}
	return n, err
}

// TestSettleLostAnswer runs reaction writes whose answer is lost after the
// node ran them, and checks that the store settles each outcome correctly
// by reading the row at serial consistency.
func TestSettleLostAnswer(t *testing.T) {
	cfg, _ := testKeyspace(t)
	d := &cutDialer{}
	cfg.dialer = d
	cfg.Timeout = time.Second // the wait before settling; the node is idle
	s := openStore(t, cfg)
	ctx := t.Context()

	t0 := time.Now().Truncate(time.Microsecond)
	newRow := func(user string) engagement.Reaction {
		return engagement.Reaction{UserID: user, ContentID: "c-" + user, Action: engagement.ActionLike, Region: "eu-west",
			Version: 1, Incarnation: uint64(len(user)) << 40, UpdatedAt: t0}
	}
	bump := func(r engagement.Reaction) engagement.Reaction {
		r.Action, r.Region, r.Version = engagement.ActionDislike, "us-east", r.Version+1
		r.UpdatedAt = r.UpdatedAt.Add(time.Millisecond)
		return r
	}
	mustInsert := func(r engagement.Reaction) {
		t.Helper()
		if ok, err := s.InsertReaction(ctx, r); err != nil || !ok {
			t.Fatalf("InsertReaction = %v, %v; want true, nil", ok, err)
		}
	}

	tests := []struct {
		name        string
		user        string
		call        func(user string) (applied bool, err error)
		wantApplied bool
		wantUnknown bool
		wantRow     func(user string) *engagement.Reaction // nil: no row
		wantCount   []engagement.RegionTally
	}{
		{
			name: "insert applied",
			user: "u-insert",
			call: func(u string) (bool, error) {
				d.arm(u, 1) // the first write naming u is the change's pending entry
				return s.InsertReaction(ctx, newRow(u))
			},
			wantApplied: true,
			wantRow:     func(u string) *engagement.Reaction { r := newRow(u); return &r },
			wantCount:   []engagement.RegionTally{{Region: "eu-west", Likes: 1}},
		},
		{
			name: "insert refused",
			user: "u-insert-refused",
			call: func(u string) (bool, error) {
				mustInsert(newRow(u))
				other := newRow(u)
				other.Incarnation++
				d.arm(u, 1) // the first write naming u is the change's pending entry
				return s.InsertReaction(ctx, other)
			},
			wantRow:   func(u string) *engagement.Reaction { r := newRow(u); return &r },
			wantCount: []engagement.RegionTally{{Region: "eu-west", Likes: 1}},
		},
		{
			name: "update applied",
			user: "u-update",
			call: func(u string) (bool, error) {
				mustInsert(newRow(u))
				d.arm(u, 1) // the first write naming u is the change's pending entry
				return s.UpdateReaction(ctx, newRow(u), bump(newRow(u)))
			},
			wantApplied: true,
			wantRow:     func(u string) *engagement.Reaction { r := bump(newRow(u)); return &r },
			wantCount:   []engagement.RegionTally{{Region: "us-east", Dislikes: 1}},
		},
		{
			name: "update refused",
			user: "u-update-refused",
			call: func(u string) (bool, error) {
				mustInsert(newRow(u))
				stale := newRow(u)
				stale.Version = 7
				d.arm(u, 1) // the first write naming u is the change's pending entry
				return s.UpdateReaction(ctx, stale, bump(stale))
			},
			wantRow:   func(u string) *engagement.Reaction { r := newRow(u); return &r },
			wantCount: []engagement.RegionTally{{Region: "eu-west", Likes: 1}},
		},
		{
			// The marker carries the delete's own token.
			name: "delete applied",
			user: "u-delete",
			call: func(u string) (bool, error) {
				mustInsert(newRow(u))
				d.arm(u, 1) // the first write naming u is the change's pending entry
				return s.DeleteReaction(ctx, newRow(u))
			},
			wantApplied: true,
			wantRow:     func(string) *engagement.Reaction { return nil },
		},
		{
			// The insert over a marker: only its UPDATE carries the
			// marker's action as a value.
			name: "insert over an undone row applied",
			user: "u-revive",
			call: func(u string) (bool, error) {
				mustInsert(newRow(u))
				if ok, err := s.DeleteReaction(ctx, newRow(u)); err != nil || !ok {
					t.Fatalf("DeleteReaction = %v, %v; want true, nil", ok, err)
				}
				again := newRow(u)
				again.Incarnation++
				d.arm(markerAction, 0)
				return s.InsertReaction(ctx, again)
			},
			wantApplied: true,
			wantRow: func(u string) *engagement.Reaction {
				r := newRow(u)
				r.Incarnation++
				return &r
			},
			wantCount: []engagement.RegionTally{{Region: "eu-west", Likes: 1}},
		},
		{
			name: "delete refused",
			user: "u-delete-refused",
			call: func(u string) (bool, error) {
				mustInsert(newRow(u))
				stale := newRow(u)
				stale.Version = 7
				d.arm(u, 1) // the first write naming u is the change's pending entry
				return s.DeleteReaction(ctx, stale)
			},
			wantRow:   func(u string) *engagement.Reaction { r := newRow(u); return &r },
			wantCount: []engagement.RegionTally{{Region: "eu-west", Likes: 1}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			settled := s.Counters().Settled.Load()
			applied, err := tt.call(tt.user)
			if d.armed() {
				t.Fatal("the request never went out with its marker; the test proves nothing")
			}
			if got := s.Counters().Settled.Load() - settled; got != 1 {
				t.Fatalf("%d calls settled; want 1 (call = %v, %v)", got, applied, err)
			}
			switch {
			case tt.wantUnknown:
				if applied || !errors.Is(err, ErrOutcomeUnknown) || !errors.Is(err, store.ErrUnavailable) {
					t.Fatalf("call = %v, %v; want false, ErrOutcomeUnknown and store.ErrUnavailable", applied, err)
				}
			case err != nil || applied != tt.wantApplied:
				t.Fatalf("call = %v, %v; want %v, nil", applied, err, tt.wantApplied)
			}
			got, found, err := s.GetReaction(ctx, tt.user, "c-"+tt.user)
			want := tt.wantRow(tt.user)
			switch {
			case err != nil:
				t.Fatalf("GetReaction: %v", err)
			case want == nil && found:
				t.Fatalf("row = %+v; want none", got)
			case want != nil && (!found || !sameContent(got, *want)):
				t.Fatalf("row = %+v (found %v); want %+v", got, found, *want)
			}
			tally, err := s.CountReactions(ctx, "c-"+tt.user)
			if err != nil || len(tally) != len(tt.wantCount) || (len(tally) == 1 && tally[0] != tt.wantCount[0]) {
				t.Fatalf("CountReactions = %+v, %v; want %+v", tally, err, tt.wantCount)
			}
		})
	}
}

// TestFenceStopsQueuedCopy checks that a settled "not applied" is final: a
// copy of the transaction that the cluster runs only after the settling
// read (queued on a stalled node) can no longer apply, and the row keeps
// its content and stays writable through the normal calls.
func TestFenceStopsQueuedCopy(t *testing.T) {
	cfg, _ := testKeyspace(t)
	s := openStore(t, cfg)
	ctx := t.Context()
	t0 := time.Now().Truncate(time.Microsecond)
	row := func(user string, inc uint64) engagement.Reaction {
		return engagement.Reaction{UserID: user, ContentID: "c-" + user, Action: engagement.ActionLike, Region: "eu-west",
			Version: 1, Incarnation: inc, UpdatedAt: t0}
	}
	mustApply := func(ok bool, err error) {
		t.Helper()
		if err != nil || !ok {
			t.Fatalf("write = %v, %v; want true, nil", ok, err)
		}
	}
	// copyOf runs stmt as the queued copy would: a transaction with the
	// original's values, after the settle.
	copyOf := func(stmt string, values ...any) bool {
		t.Helper()
		applied, err := s.query(stmt, values...).SerialConsistency(s.serialCons).MapScanCASContext(ctx, map[string]any{})
		if err != nil {
			t.Fatalf("queued copy: %v", err)
		}
		return applied
	}
	lost := errors.New("test: the answer was lost before the node ran it")

	tests := []struct {
		name string
		user string
		// setup writes the row the transaction expects and returns the
		// decision of its settle and the queued copy's statement.
		setup func(u string) (decide func(engagement.Reaction, bool) outcome, stmt string, values []any)
		// then writes through the normal calls after the fence.
		then func(u string)
		want func(u string) *engagement.Reaction // nil: no row
	}{
		{
			name: "insert over no row",
			user: "f-insert",
			setup: func(u string) (func(engagement.Reaction, bool) outcome, string, []any) {
				r := row(u, 11)
				return func(c engagement.Reaction, f bool) outcome { return decideInsert(r, 1111, nil, c, f) },
					s.q.insertReaction, []any{u, r.ContentID, "like", r.Region, r.Version, int64(r.Incarnation), micros(r.UpdatedAt), []int64{1111}}
			},
			then: func(u string) { mustApply(s.InsertReaction(ctx, row(u, 12))) },
			want: func(u string) *engagement.Reaction { r := row(u, 12); return &r },
		},
		{
			name: "insert over a marker",
			user: "f-revive",
			setup: func(u string) (func(engagement.Reaction, bool) outcome, string, []any) {
				mustApply(s.InsertReaction(ctx, row(u, 21)))
				mustApply(s.DeleteReaction(ctx, row(u, 21)))
				marker, found, err := s.readReaction(ctx, s.serialCons, u, "c-"+u)
				if err != nil || !found || marker.Action != engagement.ActionNone {
					t.Fatalf("marker = %+v, %v, %v", marker, found, err)
				}
				r := row(u, 22)
				return func(c engagement.Reaction, f bool) outcome { return decideInsert(r, 2222, &marker, c, f) },
					s.q.reviveReaction, []any{"like", r.Region, r.Version, int64(r.Incarnation), micros(r.UpdatedAt),
						toBigints(engagement.NextWriters(marker.Writers, 2222, time.Now())), u, r.ContentID, markerAction, marker.Version, int64(marker.Incarnation)}
			},
			then: func(u string) { mustApply(s.InsertReaction(ctx, row(u, 23))) },
			want: func(u string) *engagement.Reaction { r := row(u, 23); return &r },
		},
		{
			name: "update",
			user: "f-update",
			setup: func(u string) (func(engagement.Reaction, bool) outcome, string, []any) {
				prev := row(u, 31)
				mustApply(s.InsertReaction(ctx, prev))
				next := prev
				next.Action, next.Version = engagement.ActionDislike, 2
				return func(c engagement.Reaction, f bool) outcome { return decideUpdate(prev, next, 3333, c, f) },
					s.q.updateReaction, []any{"dislike", next.Region, next.Version, micros(next.UpdatedAt), []int64{3333},
						u, prev.ContentID, prev.Version, int64(prev.Incarnation)}
			},
			then: func(u string) {
				cur, _, err := s.GetReaction(ctx, u, "c-"+u)
				if err != nil || cur.Version != 2 {
					t.Fatalf("fenced row = %+v, %v; want version 2", cur, err)
				}
				next := cur
				next.Action, next.Version = engagement.ActionDislike, 3
				mustApply(s.UpdateReaction(ctx, cur, next))
			},
			want: func(u string) *engagement.Reaction {
				r := row(u, 31)
				r.Action, r.Version = engagement.ActionDislike, 3
				return &r
			},
		},
		{
			name: "delete",
			user: "f-delete",
			setup: func(u string) (func(engagement.Reaction, bool) outcome, string, []any) {
				prev := row(u, 41)
				mustApply(s.InsertReaction(ctx, prev))
				const token = 4242
				return func(c engagement.Reaction, f bool) outcome { return decideDelete(prev, token, 4444, c, f) },
					s.q.delReact, []any{markerAction, prev.Version + 1, int64(token), micros(t0), []int64{4444},
						u, prev.ContentID, prev.Version, int64(prev.Incarnation)}
			},
			then: func(u string) {
				cur, _, err := s.GetReaction(ctx, u, "c-"+u)
				if err != nil || cur.Version != 2 || cur.Action != engagement.ActionLike {
					t.Fatalf("fenced row = %+v, %v; want the like at version 2", cur, err)
				}
				mustApply(s.DeleteReaction(ctx, cur))
			},
			want: func(string) *engagement.Reaction { return nil },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			decide, stmt, values := tt.setup(tt.user)
			fenced := s.Counters().Fenced.Load()
			res, err := s.settle(ctx, tt.user, "c-"+tt.user, lost, decide)
			if err != nil || res.applied || !res.settled {
				t.Fatalf("settle = %+v, %v; want settled, not applied", res, err)
			}
			if got := s.Counters().Fenced.Load() - fenced; got != 1 {
				t.Fatalf("%d fences; want 1", got)
			}
			if copyOf(stmt, values...) {
				t.Fatal("the queued copy applied after the settle said it did not")
			}
			tt.then(tt.user)
			got, found, err := s.GetReaction(ctx, tt.user, "c-"+tt.user)
			want := tt.want(tt.user)
			switch {
			case err != nil:
				t.Fatalf("GetReaction: %v", err)
			case want == nil && found:
				t.Fatalf("row = %+v; want none", got)
			case want != nil && (!found || got.Action != want.Action || got.Version != want.Version || got.Incarnation != want.Incarnation):
				t.Fatalf("row = %+v (found %v); want %+v", got, found, *want)
			}
		})
	}
}

func TestDecide(t *testing.T) {
	base := engagement.Reaction{UserID: "u", ContentID: "c", Action: engagement.ActionLike, Region: "eu-west", Version: 4, Incarnation: 9,
		UpdatedAt: time.Unix(100, 0)}
	next := base
	next.Action, next.Version, next.UpdatedAt = engagement.ActionDislike, 5, time.Unix(101, 0)
	competitor := next
	competitor.Region = "us-east"
	later := next
	later.Version = 6
	reborn := base
	reborn.Incarnation, reborn.Version = 10, 1
	fresh := base
	fresh.Version = 1
	const token = 77
	marker := base
	marker.Action, marker.Version, marker.Incarnation = engagement.ActionNone, 5, token
	// A marker can never hold a live incarnation; the decisions must not
	// rely on that.
	marker2 := marker
	marker2.Incarnation = base.Incarnation
	// A fence bumps the version and keeps the content.
	fenced := base
	fenced.Version++
	fencedMarker := marker
	fencedMarker.Version++
	// The marker of a later undo (another token).
	laterMarker := marker
	laterMarker.Version, laterMarker.Incarnation = 8, token+5
	// The decided write's token, made now; mine adds it to a row's
	// writers, full fills them with others' tokens (a history that may
	// have dropped it), and old is a token made before the writer history
	// (engagement.WriterHistory) of which a later write may have dropped.
	tk := engagement.NewToken(time.Now())
	old := engagement.NewToken(time.Now().Add(-engagement.WriterHistory))
	mine := func(r engagement.Reaction) engagement.Reaction {
		r.Writers = []uint64{5, tk, 6}
		return r
	}
	others := func(r engagement.Reaction, n int) engagement.Reaction {
		r.Writers = make([]uint64, n)
		for i := range r.Writers {
			r.Writers[i] = engagement.NewToken(time.Now())
		}
		return r
	}
	full := func(r engagement.Reaction) engagement.Reaction {
		r.Writers = make([]uint64, engagement.MaxWritersKept)
		for i := range r.Writers {
			r.Writers[i] = engagement.NewToken(time.Now())
		}
		return r
	}

	tests := []struct {
		name string
		got  outcome
		want outcome
	}{
		{"insert: own row", decideInsert(fresh, tk, nil, fresh, true), outcomeApplied},
		{"insert: own row, changed since", decideInsert(fresh, tk, nil, later, true), outcomeApplied},
		{"insert: another incarnation", decideInsert(fresh, tk, nil, reborn, true), outcomeNotApplied},
		// A full list without the token: the insert may have applied and
		// been undone, then the key re-created and changed MaxWritersKept
		// times.
		{"insert: another incarnation, writers full", decideInsert(fresh, tk, nil, full(reborn), true), outcomeUnknown},
		{"insert: no row", decideInsert(fresh, tk, nil, engagement.Reaction{}, false), outcomeOpen},
		{"update: still prev", decideUpdate(base, next, tk, base, true), outcomeOpen},
		{"update: fenced", decideUpdate(base, next, tk, fenced, true), outcomeNotApplied},
		{"update: next", decideUpdate(base, next, tk, next, true), outcomeApplied},
		{"update: competitor at next version", decideUpdate(base, next, tk, competitor, true), outcomeNotApplied},
		{"update: past next", decideUpdate(base, next, tk, later, true), outcomeNotApplied},
		{"update: past next, its token kept", decideUpdate(base, next, tk, mine(later), true), outcomeApplied},
		{"update: past next, writers full", decideUpdate(base, next, tk, full(later), true), outcomeUnknown},
		{"update: past next, many writes since", decideUpdate(base, next, tk, others(later, 3*engagement.MaxWriters), true), outcomeNotApplied},
		{"update: past next, token older than the history", decideUpdate(base, next, old, later, true), outcomeUnknown},
		{"update: deleted", decideUpdate(base, next, tk, engagement.Reaction{}, false), outcomeUnknown},
		{"update: re-created", decideUpdate(base, next, tk, reborn, true), outcomeNotApplied},
		{"update: re-created after it", decideUpdate(base, next, tk, mine(reborn), true), outcomeApplied},
		{"delete: row lives", decideDelete(base, token, tk, base, true), outcomeOpen},
		{"delete: fenced", decideDelete(base, token, tk, fenced, true), outcomeNotApplied},
		{"delete: row moved on", decideDelete(base, token, tk, later, true), outcomeNotApplied},
		{"delete: own marker", decideDelete(base, token, tk, marker, true), outcomeApplied},
		{"delete: competitor's marker", decideDelete(base, token+1, tk, marker, true), outcomeNotApplied},
		{"delete: competitor's marker, writers full", decideDelete(base, token+1, tk, full(marker), true), outcomeUnknown},
		{"delete: gone", decideDelete(base, token, tk, engagement.Reaction{}, false), outcomeUnknown},
		{"delete: re-created", decideDelete(base, token, tk, reborn, true), outcomeNotApplied},
		{"delete: re-created after it", decideDelete(base, token, tk, mine(reborn), true), outcomeApplied},
		{"insert: over a marker of its incarnation", decideInsert(fresh, tk, &marker2, marker2, true), outcomeOpen},
		{"insert: over a marker", decideInsert(fresh, tk, &marker, marker, true), outcomeOpen},
		{"insert: over a fenced marker", decideInsert(fresh, tk, &marker, fencedMarker, true), outcomeNotApplied},
		{"insert: applied, then undone", decideInsert(fresh, tk, nil, mine(marker), true), outcomeApplied},
		{"insert: applied over a marker, then undone", decideInsert(fresh, tk, &marker, mine(laterMarker), true), outcomeApplied},
		// IF NOT EXISTS can never apply over a marker: the marker is a
		// competitor's, or this insert's undone by a competitor since.
		{"insert: a marker appeared", decideInsert(fresh, tk, nil, marker, true), outcomeNotApplied},
		{"insert: a marker appeared, writers full", decideInsert(fresh, tk, nil, full(marker), true), outcomeUnknown},
		{"insert: another marker", decideInsert(fresh, tk, &marker, laterMarker, true), outcomeNotApplied},
		{"insert: another marker, writers full", decideInsert(fresh, tk, &marker, full(laterMarker), true), outcomeUnknown},
		{"insert: the marker vanished", decideInsert(fresh, tk, &marker, engagement.Reaction{}, false), outcomeUnknown},
		{"update: undone", decideUpdate(base, next, tk, marker2, true), outcomeNotApplied},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: outcome %d; want %d", tt.name, tt.got, tt.want)
		}
	}
}

func TestUnknownOutcome(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"CAS write timeout", &gocql.RequestErrWriteTimeout{WriteType: "CAS"}, true},
		{"commit write timeout", &gocql.RequestErrWriteTimeout{WriteType: "SIMPLE"}, true},
		{"CAS write unknown", &gocql.RequestErrCASWriteUnknown{}, true},
		{"read timeout", &gocql.RequestErrReadTimeout{}, true},
		{"no answer", gocql.ErrTimeoutNoResponse, true},
		{"connection lost", gocql.ErrConnectionClosed, true},
		{"abandoned", context.DeadlineExceeded, true},
		{"unavailable", &gocql.RequestErrUnavailable{}, false},
		{"overloaded", &gocql.RequestErrOverloaded{}, false},
		{"no connections", gocql.ErrNoConnections, false},
		{"closed", gocql.ErrSessionClosed, false},
		{"invalid", &gocql.RequestErrInvalid{}, false},
	}
	for _, tt := range tests {
		if got := unknownOutcome(tt.err); got != tt.want {
			t.Errorf("unknownOutcome(%s) = %v; want %v", tt.name, got, tt.want)
		}
	}
}

// TestPaxosVariantRead: the store reads the node's paxos_variant; the
// scripts start their nodes on v2 unless EDGECOUNT_CASSANDRA_PAXOS says v1.
func TestPaxosVariantRead(t *testing.T) {
	_, s := testKeyspace(t)
	want := os.Getenv("EDGECOUNT_CASSANDRA_PAXOS") != "v1"
	if s.paxosV2 != want {
		t.Fatalf("paxos v2 = %v, want %v (EDGECOUNT_CASSANDRA_PAXOS=%q)", s.paxosV2, want, os.Getenv("EDGECOUNT_CASSANDRA_PAXOS"))
	}
}
