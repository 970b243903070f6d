package cassandra

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/internal/testenv"
	"github.com/edgecount/edgecount/store"
	"github.com/edgecount/edgecount/store/storetest"
)

var _ storetest.Store = (*Store)(nil)

// addrEnv names the host:port of the test node; default 127.0.0.1:9042.
const addrEnv = "EDGECOUNT_CASSANDRA"

// nodeConfig returns the configuration of the test node with keyspace ks,
// or skips the test (fails it under CI=true) when no node answers.
func nodeConfig(tb testing.TB, ks string) Config {
	tb.Helper()
	addr := testenv.Addr(addrEnv, "127.0.0.1:9042")
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		tb.Fatalf("%s=%q is not host:port: %v", addrEnv, addr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		tb.Fatalf("%s=%q has a bad port: %v", addrEnv, addr, err)
	}
	testenv.NeedService(tb, "Cassandra", addr, "./scripts/cassandra.sh install && ./scripts/cassandra.sh start")
	cfg := DefaultConfig()
	cfg.Hosts, cfg.Port, cfg.Keyspace = []string{host}, port, ks
	return cfg
}

// testKeyspace returns a fresh random keyspace name, dropped at cleanup
// through a store opened on it.
func testKeyspace(tb testing.TB) (Config, *Store) {
	tb.Helper()
	cfg := nodeConfig(tb, fmt.Sprintf("edgecount_test_%016x", rand.Uint64()))
	s := openStore(tb, cfg)
	tb.Cleanup(func() {
		// Cleanups run last-registered first: this one runs after the
		// stores of subtests are closed, and before s is.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := s.execSchema(ctx, "DROP KEYSPACE IF EXISTS "+cfg.Keyspace); err != nil {
			tb.Errorf("cannot drop keyspace %s: %v", cfg.Keyspace, err)
		}
	})
	return cfg, s
}

// openStore opens a store, closed at cleanup.
func openStore(tb testing.TB, cfg Config) *Store {
	tb.Helper()
	s, err := Open(tb.Context(), cfg)
	if err != nil {
		tb.Fatalf("Open(%s): %v", cfg.Keyspace, err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("Close: %v", err)
		}
	})
	return s
}

// TestConformance runs the shared suite. Every subtest opens its own Store
// (its own session) on one fresh keyspace, so Open also runs concurrently
// against existing tables.
func TestConformance(t *testing.T) {
	cfg, _ := testKeyspace(t)
	storetest.Run(t, func(t *testing.T) storetest.Store {
		return openStore(t, cfg)
	})
	storetest.RunRecount(t, func(t *testing.T) storetest.RecountStore { return openStore(t, cfg) })
}

// TestOpenIdempotent opens the same keyspace twice and checks that the
// second Open keeps the data of the first.
func TestOpenIdempotent(t *testing.T) {
	cfg, first := testKeyspace(t)
	ctx := t.Context()
	r := engagement.Reaction{UserID: "u", ContentID: "c", Action: engagement.ActionLike, Region: "eu-west", Version: 1, Incarnation: 7,
		UpdatedAt: time.Now().Truncate(time.Microsecond)}
	if ok, err := first.InsertReaction(ctx, r); err != nil || !ok {
		t.Fatalf("InsertReaction = %v, %v; want true, nil", ok, err)
	}
	second := openStore(t, cfg)
	got, ok, err := second.GetReaction(ctx, "u", "c")
	if err != nil || !ok || !got.UpdatedAt.Equal(r.UpdatedAt) || got.Incarnation != r.Incarnation {
		t.Fatalf("GetReaction after second Open = %+v, %v, %v; want %+v", got, ok, err, r)
	}
	tally, err := second.CountReactions(ctx, "c")
	if err != nil || len(tally) != 1 || tally[0] != (engagement.RegionTally{Region: "eu-west", Likes: 1}) {
		t.Fatalf("CountReactions after second Open = %+v, %v; want eu-west 1 like", tally, err)
	}
}

func TestPing(t *testing.T) {
	cfg, _ := testKeyspace(t)
	s, err := Open(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if err := s.Ping(t.Context()); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Ping(t.Context()); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Ping after Close = %v; want store.ErrUnavailable", err)
	}
}

// TestUnreachable checks that a node that does not answer gives
// store.ErrUnavailable. The port is one that was just free.
func TestUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("cannot reserve a port: %v", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cfg := DefaultConfig()
	cfg.Port = port
	cfg.ConnectTimeout = time.Second
	s, err := Open(t.Context(), cfg)
	if err == nil {
		s.Close()
		t.Fatalf("Open of 127.0.0.1:%d = nil error; want store.ErrUnavailable", port)
	}
	if !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), fmt.Sprintf("127.0.0.1:%d", port)) {
		t.Fatalf("Open of 127.0.0.1:%d error = %q; want store.ErrUnavailable naming the address", port, err)
	}
}

// TestCrossIncarnationEntries plants the by-content entry that a crash
// between a delete and its entry's removal leaves behind, and checks that
// CountReactions counts the user once, by the live row.
func TestCrossIncarnationEntries(t *testing.T) {
	_, s := testKeyspace(t)
	ctx := t.Context()
	live := engagement.Reaction{UserID: "u1", ContentID: "c", Action: engagement.ActionDislike, Region: "us-east", Version: 1, Incarnation: 2}
	if ok, err := s.InsertReaction(ctx, live); err != nil || !ok {
		t.Fatalf("InsertReaction = %v, %v; want true, nil", ok, err)
	}
	stale := engagement.Reaction{UserID: "u1", ContentID: "c", Action: engagement.ActionLike, Region: "eu-west", Version: 3, Incarnation: 1}
	if err := s.putIndex(ctx, &stale); err != nil {
		t.Fatalf("putIndex: %v", err)
	}
	gone := engagement.Reaction{UserID: "u2", ContentID: "c", Action: engagement.ActionLike, Region: "eu-west", Version: 1, Incarnation: 5}
	gone2 := gone
	gone2.Incarnation = 6
	for _, r := range []engagement.Reaction{gone, gone2} { // two entries, no row
		if err := s.putIndex(ctx, &r); err != nil {
			t.Fatalf("putIndex: %v", err)
		}
	}
	got, err := s.CountReactions(ctx, "c")
	want := []engagement.RegionTally{{Region: "us-east", Dislikes: 1}}
	if err != nil || len(got) != 1 || got[0] != want[0] {
		t.Fatalf("CountReactions = %+v, %v; want %+v", got, err, want)
	}
}

// TestIndexOrder writes the by-content entries of one row out of order and
// checks that the newest version wins, and that after a delete no late
// write of the deleted incarnation brings its entry back.
func TestIndexOrder(t *testing.T) {
	_, s := testKeyspace(t)
	ctx := t.Context()
	r := engagement.Reaction{UserID: "u", ContentID: "c", Action: engagement.ActionLike, Region: "eu-west", Version: 3, Incarnation: 9}
	older := r
	older.Action, older.Region, older.Version = engagement.ActionDislike, "us-east", 2
	for _, e := range []engagement.Reaction{r, older} { // the newer entry lands first
		if err := s.putIndex(ctx, &e); err != nil {
			t.Fatalf("putIndex: %v", err)
		}
	}
	got, err := s.CountReactions(ctx, "c")
	if err != nil || len(got) != 1 || got[0] != (engagement.RegionTally{Region: "eu-west", Likes: 1}) {
		t.Fatalf("CountReactions after out-of-order entries = %+v, %v; want eu-west 1 like", got, err)
	}
	if err := s.delIndex(ctx, &r); err != nil {
		t.Fatalf("delIndex: %v", err)
	}
	if got, err := s.CountReactions(ctx, "c"); err != nil || len(got) != 0 {
		t.Fatalf("CountReactions after delete = %+v, %v; want none", got, err)
	}
	if err := s.putIndex(ctx, &r); err != nil { // a late retry of the last entry
		t.Fatalf("putIndex: %v", err)
	}
	if got, err := s.CountReactions(ctx, "c"); err != nil || len(got) != 0 {
		t.Fatalf("CountReactions after a late entry write = %+v, %v; want none", got, err)
	}
}

// TestReadStatsModes checks that the IN read returns what the parallel
// read returns.
func TestReadStatsModes(t *testing.T) {
	_, s := testKeyspace(t)
	ctx := t.Context()
	var rows []engagement.Stats
	var ids []string
	for i := range 30 {
		id := fmt.Sprintf("c%02d", i)
		ids = append(ids, id, id+"-missing")
		rows = append(rows,
			engagement.Stats{ContentID: id, Scope: engagement.GlobalScope, Likes: int64(i), Counters: map[string]int64{"view": int64(i * 10)}, LastSeq: uint64(i)},
			engagement.Stats{ContentID: id, Scope: "eu-west", Dislikes: int64(i), LastSeq: uint64(i)})
	}
	if err := s.WriteStats(ctx, rows); err != nil {
		t.Fatalf("WriteStats: %v", err)
	}
	par, err := s.readStats(ctx, ids, statsParallel)
	if err != nil {
		t.Fatalf("parallel read: %v", err)
	}
	in, err := s.readStats(ctx, ids, statsIn)
	if err != nil {
		t.Fatalf("IN read: %v", err)
	}
	if len(par) != 30 || fmt.Sprint(par) != fmt.Sprint(in) {
		t.Fatalf("parallel read = %v;\nIN read = %v; want 30 equal items", par, in)
	}
	if got := par["c07"]; len(got) != 2 || got[0].Scope != "eu-west" || got[1].Counters["view"] != 70 {
		t.Fatalf("item c07 = %+v; want eu-west then global with 70 views", got)
	}
}

// TestWriteStatsDuplicateKey checks that of two rows with one key in one
// call the later wins, whatever their values.
func TestWriteStatsDuplicateKey(t *testing.T) {
	_, s := testKeyspace(t)
	ctx := t.Context()
	rows := []engagement.Stats{
		{ContentID: "c", Scope: engagement.GlobalScope, Likes: 9, LastSeq: 2},
		{ContentID: "c", Scope: "eu-west", Likes: 1, LastSeq: 2},
		{ContentID: "c", Scope: engagement.GlobalScope, Likes: 1, LastSeq: 1},
	}
	if err := s.WriteStats(ctx, rows); err != nil {
		t.Fatalf("WriteStats: %v", err)
	}
	got, err := s.ReadStats(ctx, []string{"c"})
	if err != nil || len(got["c"]) != 2 || got["c"][1].Likes != 1 || got["c"][1].LastSeq != 1 {
		t.Fatalf("ReadStats = %+v, %v; want the global row of the later write (1 like, sequence 1)", got, err)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name   string
		change func(c *Config)
		want   string // "" for valid
	}{
		{"default", func(c *Config) {}, ""},
		{"network topology", func(c *Config) {
			c.Replication = Replication{DataCenters: map[string]int{"eu-west": 3, "us_east1": 3}}
			c.LocalDC = "eu-west"
		}, ""},
		{"local serial", func(c *Config) { c.SerialConsistency = "local_serial" }, ""},
		{"one", func(c *Config) { c.Consistency = "LOCAL_ONE" }, ""},
		{"no hosts", func(c *Config) { c.Hosts = nil }, "hosts is empty"},
		{"empty host", func(c *Config) { c.Hosts = []string{" "} }, "host 0 is empty"},
		{"port", func(c *Config) { c.Port = 0 }, "port 0 is not in 1…65535"},
		{"keyspace upper case", func(c *Config) { c.Keyspace = "Edge" }, `keyspace "Edge"`},
		{"keyspace injection", func(c *Config) { c.Keyspace = "x; DROP" }, `keyspace "x; DROP"`},
		{"dc name", func(c *Config) { c.LocalDC = "eu'west" }, `local data centre "eu'west"`},
		{"factor", func(c *Config) { c.Replication = Replication{} }, "replication factor 0 is not positive"},
		{"both", func(c *Config) { c.Replication = Replication{Factor: 1, DataCenters: map[string]int{"a": 1}} }, "names both"},
		{"dc factor", func(c *Config) { c.Replication = Replication{DataCenters: map[string]int{"a": 0}} }, `factor 0 of data centre "a"`},
		{"consistency", func(c *Config) { c.Consistency = "SERIAL" }, "consistency SERIAL cannot serve"},
		{"consistency any", func(c *Config) { c.Consistency = "ANY" }, "consistency ANY cannot serve"},
		{"consistency typo", func(c *Config) { c.Consistency = "QUORUMM" }, `consistency "QUORUMM"`},
		{"serial", func(c *Config) { c.SerialConsistency = "QUORUM" }, `serial consistency "QUORUM"`},
		{"timeout", func(c *Config) { c.Timeout = 0 }, "timeout 0s is not positive"},
		{"connect timeout", func(c *Config) { c.ConnectTimeout = -time.Second }, "connect timeout -1s is not positive"},
		{"several dcs without local", func(c *Config) {
			c.Replication = Replication{DataCenters: map[string]int{"dc1": 1, "dc2": 1}}
		}, "replication names 2 data centres"},
		{"local dc not replicated", func(c *Config) {
			c.Replication = Replication{DataCenters: map[string]int{"dc1": 1, "dc2": 1}}
			c.LocalDC = "dc3"
		}, `local data centre "dc3" is not one of the replication's data centres (dc1, dc2)`},
		{"fallback without local dc", func(c *Config) { c.RemoteDCFallback = true }, "fallback needs a local data centre"},
		{"fallback", func(c *Config) { c.LocalDC, c.RemoteDCFallback = "dc1", true }, ""},
		{"credentials", func(c *Config) { c.Username, c.Password = "u", "p" }, ""},
		{"user without password", func(c *Config) { c.Username = "u" }, "give both or neither"},
		{"tls insecure", func(c *Config) { c.TLS.InsecureSkipVerify = true }, ""},
		{"tls missing ca", func(c *Config) { c.TLS.CAFile = "/nonexistent/ca.pem" }, "tls ca file: open /nonexistent/ca.pem"},
		{"tls ca not pem", func(c *Config) { c.TLS.CAFile = "cassandra_test.go" }, "no PEM certificate"},
		{"tls cert without key", func(c *Config) { c.TLS.CertFile = "cert.pem" }, "cert file and key file: give both or neither"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			tt.change(&c)
			err := c.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Validate() = %v; want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("Validate() = %v; want an error containing %q", err, tt.want)
			}
			if tt.want != "" {
				if s, err := Open(t.Context(), c); err == nil {
					s.Close()
					t.Fatal("Open with an invalid config = nil error")
				}
			}
		})
	}
	// Every problem is reported, not only the first.
	err := Config{}.Validate()
	if err == nil || len(strings.Split(err.Error(), "\n")) < 7 {
		t.Fatalf("Validate() of the zero Config = %v; want every problem", err)
	}
}

func TestReplicationCQL(t *testing.T) {
	tests := []struct {
		r    Replication
		want string
	}{
		{Replication{Factor: 1}, "{'class': 'SimpleStrategy', 'replication_factor': 1}"},
		{Replication{DataCenters: map[string]int{"us-east": 3, "eu-west": 2}},
			"{'class': 'NetworkTopologyStrategy', 'eu-west': 2, 'us-east': 3}"},
	}
	for _, tt := range tests {
		if got := tt.r.cql(); got != tt.want {
			t.Errorf("%+v.cql() = %s; want %s", tt.r, got, tt.want)
		}
	}
}

// TestTimeRoundTrip checks the microsecond encoding of times at the edges
// the suite and the store rely on.
func TestTimeRoundTrip(t *testing.T) {
	for _, ts := range []time.Time{
		{},
		time.Unix(0, 0),
		time.Date(1969, 12, 31, 23, 59, 59, 1000, time.UTC),
		time.Date(2262, 4, 11, 0, 0, 0, 1000, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC),
	} {
		if got := fromMicros(micros(ts)); !got.Equal(ts) {
			t.Errorf("fromMicros(micros(%v)) = %v; want it back", ts, got)
		}
	}
}

func TestWriteTimestampMonotonic(t *testing.T) {
	var s Store
	s.lastTS.Store(time.Now().Add(time.Hour).UnixMicro()) // a clock that went back
	prev := s.lastTS.Load()
	for range 1000 {
		ts := s.writeTimestamp()
		if ts <= prev {
			t.Fatalf("writeTimestamp() = %d after %d; want it to grow", ts, prev)
		}
		prev = ts
	}
}

// TestGetReactionSerial: the serial read answers what GetReaction answers
// on one node: the row after an insert, nothing (with the writers) after
// its undo, and bad ids are refused like GetReaction's.
func TestGetReactionSerial(t *testing.T) {
	_, s := testKeyspace(t)
	ctx := t.Context()
	r := engagement.Reaction{UserID: "u", ContentID: "v", Action: engagement.ActionLike, Region: "us",
		Version: 1, Incarnation: 9, UpdatedAt: time.Now(), Token: 42}
	if ok, err := s.InsertReaction(ctx, r); err != nil || !ok {
		t.Fatalf("insert: %v, %v", ok, err)
	}
	got, found, err := s.GetReactionSerial(ctx, "u", "v")
	if err != nil || !found || got.Action != engagement.ActionLike || got.Version != 1 {
		t.Fatalf("serial read after the insert: %+v, %v, %v", got, found, err)
	}
	got.Token = 43
	if ok, err := s.DeleteReaction(ctx, got); err != nil || !ok {
		t.Fatalf("delete: %v, %v", ok, err)
	}
	got, found, err = s.GetReactionSerial(ctx, "u", "v")
	if err != nil || found || !got.WrittenBy(42) || !got.WrittenBy(43) {
		t.Fatalf("serial read after the undo: %+v, found %v, %v; want no row with both writers", got, found, err)
	}
	if _, _, err := s.GetReactionSerial(ctx, "", "v"); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("empty user: %v; want ErrInvalid", err)
	}
}
