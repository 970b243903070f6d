package embedded

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.uber.org/goleak"

	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/store"
	"github.com/edgecount/edgecount/store/storetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var _ storetest.Store = (*Store)(nil)

// openTemp opens a store in a fresh file, closed at cleanup. It skips fsync:
// these tests check behaviour, and the machine's fsync latency (milliseconds
// when it is busy) would dominate their run time. TestReopenKeepsData and the
// benchmarks use fsync.
func openTemp(t *testing.T) *Store {
	t.Helper()
	s, err := Open(Config{Path: filepath.Join(t.TempDir(), "edgecount.db"), NoSync: true})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func TestConformance(t *testing.T) {
	for _, mode := range []struct {
		name string
		mode commitMode
	}{{"group commit", commitGroup}, {"solo commit", commitSolo}, {"bbolt batch", commitBatch}} {
		t.Run(mode.name, func(t *testing.T) {
			storetest.Run(t, func(t *testing.T) storetest.Store {
				s := openTemp(t)
				s.commit = mode.mode
				// bbolt's 10 ms default would make the contended
				// compare-and-set test take seconds.
				s.db.MaxBatchDelay = 250 * time.Microsecond
				return s
			})
		})
	}
	storetest.RunRecount(t, func(t *testing.T) storetest.RecountStore { return openTemp(t) })
}

// TestReopenKeepsData checks that every kind of record survives Close and
// Open of the same file.
func TestReopenKeepsData(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "dir", "edgecount.db") // Open creates the directory
	ts := time.Date(2030, 1, 2, 3, 4, 5, 123456789, time.UTC)
	r := engagement.Reaction{UserID: "u1", ContentID: "c1", Action: engagement.ActionDislike, Region: "eu-west", Version: 1, Incarnation: 42, UpdatedAt: ts,
		Token: 7}
	r2 := r
	r2.Action, r2.Version, r2.Token = engagement.ActionLike, 2, 8
	stats := []engagement.Stats{
		{ContentID: "c1", Scope: "eu-west", Likes: 1, Counters: map[string]int64{"view": 3}, UpdatedAt: ts, LastSeq: 9},
		{ContentID: "c1", Scope: engagement.GlobalScope, Likes: 1, Counters: map[string]int64{"view": 3}, UpdatedAt: ts, LastSeq: 9},
	}
	tr := engagement.Trending{
		TrendingKey: engagement.TrendingKey{Scope: engagement.GlobalScope, Counter: "view", Window: "1h"},
		AsOf:        ts,
		Items:       []engagement.TrendingItem{{ContentID: "c1", Count: 3, Error: 1}},
	}

	s, err := Open(Config{Path: path})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	ctx := t.Context()
	if ok, err := s.InsertReaction(ctx, r); err != nil || !ok {
		t.Fatalf("InsertReaction = %v, %v", ok, err)
	}
	if ok, err := s.UpdateReaction(ctx, r, r2); err != nil || !ok {
		t.Fatalf("UpdateReaction = %v, %v", ok, err)
	}
	if err := s.WriteStats(ctx, stats); err != nil {
		t.Fatalf("WriteStats: %v", err)
	}
	if err := s.PutTrending(ctx, tr); err != nil {
		t.Fatalf("PutTrending: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	s = openAt(t, path)
	got, ok, err := s.GetReaction(ctx, "u1", "c1")
	want := r2
	want.Token, want.Writers = 0, []uint64{7, 8}
	if err != nil || !ok || !reflect.DeepEqual(got, want) {
		t.Fatalf("GetReaction after reopen = %+v, %v, %v; want %+v", got, ok, err, want)
	}
	tally, err := s.CountReactions(ctx, "c1")
	if err != nil || len(tally) != 1 || tally[0] != (engagement.RegionTally{Region: "eu-west", Likes: 1}) {
		t.Fatalf("CountReactions after reopen = %+v, %v; want eu-west 1 like", tally, err)
	}
	rows, err := s.ReadStats(ctx, []string{"c1"})
	if err != nil || len(rows["c1"]) != 2 || rows["c1"][0].LastSeq != 9 || rows["c1"][1].Counters["view"] != 3 || !rows["c1"][1].UpdatedAt.Equal(ts) {
		t.Fatalf("ReadStats after reopen = %+v, %v; want %+v", rows, err, stats)
	}
	gotTr, ok, err := s.GetTrending(ctx, tr.TrendingKey)
	if err != nil || !ok || !gotTr.AsOf.Equal(ts) || len(gotTr.Items) != 1 || gotTr.Items[0] != tr.Items[0] {
		t.Fatalf("GetTrending after reopen = %+v, %v, %v; want %+v", gotTr, ok, err, tr)
	}
}

// openAt opens a durable store at path, closed at cleanup.
func openAt(t *testing.T, path string) *Store {
	t.Helper()
	s, err := Open(Config{Path: path})
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func TestSecondOpenLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "edgecount.db")
	first, err := Open(Config{Path: path})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	second, err := Open(Config{Path: path, Timeout: 100 * time.Millisecond})
	if err == nil {
		second.Close()
		t.Fatal("second Open of a locked file = nil error; want ErrLocked")
	}
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), path) {
		t.Fatalf("second Open error = %q; want ErrLocked naming %s", err, path)
	}
	if err := first.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	openAt(t, path) // the lock goes with Close
}

// TestOpenDir: OpenDir creates a missing data directory and keeps the store
// in its edgecount.db.
func TestOpenDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "not", "yet")
	s, err := OpenDir(dir)
	if err != nil {
		t.Fatalf("OpenDir(%s): %v", dir, err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "edgecount.db")); err != nil {
		t.Fatalf("the store's file: %v; want %s/edgecount.db", err, dir)
	}
}

func TestOpenInvalidConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"no path", Config{}, "path is empty"},
		{"negative timeout", Config{Path: "x", Timeout: -1}, "timeout -1ns is negative"},
		{"path is a directory", Config{Path: t.TempDir()}, "cannot open store"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Open(tt.cfg)
			if err == nil {
				s.Close()
				t.Fatalf("Open(%+v) = nil error; want %q", tt.cfg, tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Open(%+v) error = %q; want it to contain %q", tt.cfg, err, tt.want)
			}
		})
	}
	if err := DefaultConfig("x").Validate(); err != nil {
		t.Fatalf("DefaultConfig().Validate() = %v; want nil", err)
	}
}

// TestClosedStore checks that every call after Close fails with
// store.ErrUnavailable.
func TestClosedStore(t *testing.T) {
	s, err := Open(Config{Path: filepath.Join(t.TempDir(), "edgecount.db")})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	ctx := t.Context()
	r := engagement.Reaction{UserID: "u", ContentID: "c", Action: engagement.ActionLike, Version: 1}
	next := r
	next.Version++
	tk := engagement.TrendingKey{Scope: "global", Counter: "like", Window: "5m"}
	calls := map[string]func() error{
		"Ping":           func() error { return s.Ping(ctx) },
		"GetReaction":    func() error { _, _, err := s.GetReaction(ctx, "u", "c"); return err },
		"GetReactions":   func() error { _, err := s.GetReactions(ctx, "u", []string{"c"}); return err },
		"InsertReaction": func() error { _, err := s.InsertReaction(ctx, r); return err },
		"UpdateReaction": func() error { _, err := s.UpdateReaction(ctx, r, next); return err },
		"DeleteReaction": func() error { _, err := s.DeleteReaction(ctx, r); return err },
		"CountReactions": func() error { _, err := s.CountReactions(ctx, "c"); return err },
		"ReadStats":      func() error { _, err := s.ReadStats(ctx, []string{"c"}); return err },
		"WriteStats":     func() error { return s.WriteStats(ctx, []engagement.Stats{{ContentID: "c", Scope: "global"}}) },
		"PutTrending":    func() error { return s.PutTrending(ctx, engagement.Trending{TrendingKey: tk}) },
		"GetTrending":    func() error { _, _, err := s.GetTrending(ctx, tk); return err },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("%s after Close = %v; want store.ErrUnavailable", name, err)
		}
	}
}

// TestInvalidKeys checks that ids that could make a key ambiguous are
// refused.
func TestInvalidKeys(t *testing.T) {
	s := openTemp(t)
	ctx := t.Context()
	bad := "a\x00b"
	long := strings.Repeat("x", maxKeyPart+1)
	r := engagement.Reaction{UserID: "u", ContentID: bad, Action: engagement.ActionLike, Version: 1}
	calls := map[string]func() error{
		"GetReaction":     func() error { _, _, err := s.GetReaction(ctx, bad, "c"); return err },
		"GetReaction/len": func() error { _, _, err := s.GetReaction(ctx, "u", long); return err },
		"GetReactions":    func() error { _, err := s.GetReactions(ctx, "u", []string{"c", bad}); return err },
		"InsertReaction":  func() error { _, err := s.InsertReaction(ctx, r); return err },
		"DeleteReaction":  func() error { _, err := s.DeleteReaction(ctx, r); return err },
		"CountReactions":  func() error { _, err := s.CountReactions(ctx, ""); return err },
		"ReadStats":       func() error { _, err := s.ReadStats(ctx, []string{bad}); return err },
		"WriteStats":      func() error { return s.WriteStats(ctx, []engagement.Stats{{ContentID: "c", Scope: bad}}) },
		"PutTrending": func() error {
			return s.PutTrending(ctx, engagement.Trending{TrendingKey: engagement.TrendingKey{Scope: "global", Counter: bad, Window: "5m"}})
		},
		"GetTrending": func() error {
			_, _, err := s.GetTrending(ctx, engagement.TrendingKey{Scope: "global", Counter: "like"})
			return err
		},
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s = %v; want ErrInvalid", name, err)
		}
	}
	// Nothing was written: the only stats row would have been ("c", bad).
	if rows, err := s.ReadStats(ctx, []string{"c"}); err != nil || len(rows) != 0 {
		t.Fatalf("ReadStats(c) = %+v, %v; want nothing", rows, err)
	}
}

// TestCorruptValue checks that values this version cannot read are reported
// as ErrCorrupt, not misread and not reported as unavailable.
func TestCorruptValue(t *testing.T) {
	s := openTemp(t)
	ctx := t.Context()
	put := func(bucket []byte, k string, v []byte) {
		t.Helper()
		if err := s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucket).Put([]byte(k), v) }); err != nil {
			t.Fatalf("cannot plant a value: %v", err)
		}
	}
	put(bucketLikes, "u\x00c", []byte{2, 1, 2}) // unknown format
	put(bucketByContent, "c\x00u", []byte{1, 9})
	put(bucketStats, "c\x00global", []byte{1, 0x80})
	put(bucketTrending, "global\x00like\x005m", []byte{1, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f})
	r := engagement.Reaction{UserID: "u", ContentID: "c", Action: engagement.ActionLike, Version: 1}
	next := r
	next.Version++
	calls := map[string]func() error{
		"GetReaction":    func() error { _, _, err := s.GetReaction(ctx, "u", "c"); return err },
		"GetReactions":   func() error { _, err := s.GetReactions(ctx, "u", []string{"c"}); return err },
		"UpdateReaction": func() error { _, err := s.UpdateReaction(ctx, r, next); return err },
		"DeleteReaction": func() error { _, err := s.DeleteReaction(ctx, r); return err },
		"CountReactions": func() error { _, err := s.CountReactions(ctx, "c"); return err },
		"ReadStats":      func() error { _, err := s.ReadStats(ctx, []string{"c"}); return err },
		"GetTrending": func() error {
			_, _, err := s.GetTrending(ctx, engagement.TrendingKey{Scope: "global", Counter: "like", Window: "5m"})
			return err
		},
	}
	for name, call := range calls {
		err := call()
		if !errors.Is(err, ErrCorrupt) || errors.Is(err, store.ErrUnavailable) {
			t.Errorf("%s = %v; want ErrCorrupt only", name, err)
		}
	}
}

func TestUnknownSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "edgecount.db")
	s, err := Open(Config{Path: path})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if err := s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(keySchema, []byte{2}) }); err != nil {
		t.Fatalf("cannot plant a schema version: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	s, err = Open(Config{Path: path})
	if err == nil {
		s.Close()
		t.Fatal("Open of a file with layout version 2 = nil error; want ErrCorrupt")
	}
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open of a file with layout version 2 = %v; want ErrCorrupt", err)
	}
}
