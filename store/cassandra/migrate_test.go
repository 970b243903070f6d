package cassandra

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/store"
)

// TestMigrateIndex builds a keyspace as an older version left it (the
// unbucketed user_likes_by_content), migrates it, and checks that the
// bucketed index counts what the legacy one did, that a newer write or an
// undo made after the upgrade wins over the copy, and that a second run
// changes nothing.
func TestMigrateIndex(t *testing.T) {
	cfg, s := testKeyspace(t)
	ctx := t.Context()
	if rep, err := s.MigrateIndex(ctx, nil); err != nil || rep.Found {
		t.Fatalf("MigrateIndex without a legacy table = %+v, %v; want nothing found", rep, err)
	}
	if err := s.execSchema(ctx, legacySchema(cfg.Keyspace)); err != nil {
		t.Fatal(err)
	}
	legacyPut := `INSERT INTO ` + cfg.Keyspace + `.` + LegacyIndexTable +
		` (content_id, user_id, incarnation, action, region, version) VALUES (?, ?, ?, ?, ?, ?) USING TIMESTAMP ?`
	put := func(content, user string, inc int64, a engagement.Action, region string, version int64) {
		t.Helper()
		if err := s.session.Query(legacyPut, content, user, inc, a.String(), region, version, version).ExecContext(ctx); err != nil {
			t.Fatal(err)
		}
	}
	content, other := fmt.Sprintf("mig-%016x", rand.Uint64()), fmt.Sprintf("mig2-%016x", rand.Uint64())
	regions := []string{"eu-west", "us-east", "ap-south"}
	var want []engagement.RegionTally
	for i := range 300 {
		a := engagement.ActionLike
		if i%4 == 0 {
			a = engagement.ActionDislike
		}
		region := regions[i%3]
		version := int64(1 + i%3)
		put(content, fmt.Sprintf("user-%d", i), int64(i+1), a, region, version)
		want = store.AddTally(want, region, a)
	}
	put(other, "u", 1, engagement.ActionLike, "eu-west", 1)
	// After the upgrade, before the migration ran: one legacy entry was
	// switched (version 2, written to the bucketed table only) and one
	// undone (its bucketed entry deleted at version 2).
	put(content, "switched", 9, engagement.ActionLike, "eu-west", 1)
	switched := engagement.Reaction{UserID: "switched", ContentID: content, Action: engagement.ActionDislike, Region: "us-east",
		Version: 2, Incarnation: 9}
	if err := s.putIndex(ctx, &switched); err != nil {
		t.Fatal(err)
	}
	want = store.AddTally(want, "us-east", engagement.ActionDislike)
	put(content, "undone", 10, engagement.ActionLike, "eu-west", 1)
	undone := engagement.Reaction{UserID: "undone", ContentID: content, Version: 1, Incarnation: 10}
	if err := s.delIndex(ctx, &undone); err != nil {
		t.Fatal(err)
	}
	store.SortTallies(want)

	for run := range 2 {
		var pages int64
		rep, err := s.MigrateIndex(ctx, func(r MigrateReport) { pages = r.Pages })
		if err != nil {
			t.Fatalf("run %d: MigrateIndex: %v", run, err)
		}
		if !rep.Found || rep.Entries != 303 || pages != rep.Pages {
			t.Fatalf("run %d: MigrateIndex = %+v (progress saw %d pages); want 303 entries", run, rep, pages)
		}
		got, err := s.CountReactions(ctx, content)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("run %d: count after migration = %+v; want %+v", run, got, want)
		}
		got, err = s.CountReactions(ctx, other)
		if err != nil || !slices.Equal(got, []engagement.RegionTally{{Region: "eu-west", Likes: 1}}) {
			t.Fatalf("run %d: count of the other item = %+v, %v", run, got, err)
		}
	}
}

// TestIndexBucketsFixed checks that the first Open of a keyspace records
// its bucket count and that a later Open cannot change it.
func TestIndexBucketsFixed(t *testing.T) {
	cfg := nodeConfig(t, fmt.Sprintf("edgecount_test_%016x", rand.Uint64()))
	cfg.IndexBuckets = 8
	s := openStore(t, cfg)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := s.execSchema(ctx, "DROP KEYSPACE IF EXISTS "+cfg.Keyspace); err != nil {
			t.Errorf("cannot drop keyspace %s: %v", cfg.Keyspace, err)
		}
	})
	if s.buckets != 8 {
		t.Fatalf("buckets = %d; want 8", s.buckets)
	}
	cfg.IndexBuckets = 0
	if s2 := openStore(t, cfg); s2.buckets != 8 {
		t.Fatalf("Open with 0 buckets on a keyspace of 8 uses %d", s2.buckets)
	}
	cfg.IndexBuckets = 16
	if s3, err := Open(t.Context(), cfg); err == nil {
		_ = s3.Close()
		t.Fatal("Open with 16 buckets on a keyspace of 8 succeeded")
	}
}

// TestHealth reads the node's views of a keyspace with a written table.
func TestHealth(t *testing.T) {
	_, s := testKeyspace(t)
	content := fmt.Sprintf("h-%016x", rand.Uint64())
	r := engagement.Reaction{UserID: "u", ContentID: content, Action: engagement.ActionLike, Region: "eu", Version: 1, Incarnation: 3, UpdatedAt: time.Now()}
	if ok, err := s.InsertReaction(t.Context(), r); err != nil || !ok {
		t.Fatalf("InsertReaction = %v, %v", ok, err)
	}
	if _, err := s.CountReactions(t.Context(), content); err != nil {
		t.Fatal(err)
	}
	h, err := s.Health(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"user_likes", indexTable} {
		if _, ok := h[table]; !ok {
			t.Errorf("Health has no %s: %+v", table, h)
		}
	}
	c := &HealthCache{Store: s, MaxAge: time.Hour}
	if got := c.Table(indexTable); got != h[indexTable] {
		t.Errorf("HealthCache = %+v; want %+v", got, h[indexTable])
	}
}
