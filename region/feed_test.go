package region_test

import (
	"context"
	"testing"
	"time"

	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/region"
	"github.com/edgecount/edgecount/store/embedded"
	"github.com/edgecount/edgecount/store/embedded/embeddedtest"
)

// newFeedAgent is an agent of two partitions whose warm items are served
// for ttl, or for an hour while the push feed is whole.
func newFeedAgent(t *testing.T, ttl, staleAfter time.Duration) (*region.Agent, *countingStore) {
	t.Helper()
	st := &countingStore{Store: embeddedtest.Open(t, embedded.Config{Timeout: time.Second})}
	cfg := region.DefaultConfig("us", "us-a1")
	cfg.Partitions = 2
	cfg.CacheTTL, cfg.CachePushedTTL, cfg.PushStaleAfter = ttl, time.Hour, staleAfter
	a, err := region.New(cfg, region.Deps{Reactions: st, Stats: st, Publisher: newRecorder(t)})
	if err != nil {
		t.Fatal(err)
	}
	a.Start()
	t.Cleanup(func() { a.Stop(context.Background()) })
	return a, st
}

// beat sends heartbeats of both partitions from sender, numbered seq.
func beat(a *region.Agent, sender, seq uint64) {
	for p := range uint32(2) {
		a.ApplyPush(p, sender, seq, time.Now(), nil)
	}
}

// TestWholeFeedServesLongerAndAGapEndsIt: while every partition's pushes
// arrive in sequence, a warm item is served past the short TTL without a
// store read; a gap in one partition's sequence (a lost push) sends every
// warm item older than the short TTL back to the store, which shows the
// write whose push was lost.
func TestWholeFeedServesLongerAndAGapEndsIt(t *testing.T) {
	const ttl = 20 * time.Millisecond
	a, st := newFeedAgent(t, ttl, time.Hour)
	ctx := context.Background()
	row := engagement.Stats{ContentID: "v", Scope: engagement.GlobalScope, Likes: 1, LastSeq: 1, UpdatedAt: time.Now()}
	if err := st.WriteStats(ctx, []engagement.Stats{row}); err != nil {
		t.Fatal(err)
	}
	if a.ReadCacheStats().FeedWhole {
		t.Fatal("feed whole before any push")
	}
	beat(a, 7, 1)
	if s := a.ReadCacheStats(); !s.FeedWhole || s.PushGaps != 2 {
		t.Fatalf("after the first heartbeat of each partition: %+v, want whole, 2 gaps (the first push of each)", s)
	}
	likes(t, a, "v", engagement.GlobalScope)
	row.Likes, row.LastSeq = 5, 2
	if err := st.WriteStats(ctx, []engagement.Stats{row}); err != nil { // its push (0's number 2) is lost
		t.Fatal(err)
	}
	reads := st.reads.Load()
	time.Sleep(3 * ttl)
	a.ApplyPush(1, 7, 2, time.Now(), nil) // partition 1 in sequence
	if got := likes(t, a, "v", engagement.GlobalScope); got != 1 {
		t.Fatalf("likes = %d, want the warm 1 while the feed shows no gap", got)
	}
	if got := st.reads.Load(); got != reads {
		t.Fatalf("store reads = %d, want %d: a warm item of a whole feed reads no store", got, reads)
	}
	a.ApplyPush(0, 7, 3, time.Now(), nil) // number 2 is missing
	if got := likes(t, a, "v", engagement.GlobalScope); got != 5 {
		t.Fatalf("likes after the gap = %d, want 5 from the store", got)
	}
	if s := a.ReadCacheStats(); !s.FeedWhole || s.PushGaps != 3 {
		t.Fatalf("after the gap: %+v, want whole again, 3 gaps", s)
	}
	// A new sender (a handover) is a gap too.
	row.Likes, row.LastSeq = 9, 3
	if err := st.WriteStats(ctx, []engagement.Stats{row}); err != nil {
		t.Fatal(err)
	}
	a.ApplyPush(0, 8, 1, time.Now(), nil)
	time.Sleep(2 * ttl) // a value read before a gap keeps the short term
	if got := likes(t, a, "v", engagement.GlobalScope); got != 9 {
		t.Fatalf("likes after a new sender = %d, want 9 from the store", got)
	}
}

// TestSilentFeedFallsBackToTheShortTTL: a partition that has sent nothing
// for PushStaleAfter breaks the feed, and warm items are read again once
// older than the short TTL; an unsequenced push breaks it at once.
func TestSilentFeedFallsBackToTheShortTTL(t *testing.T) {
	const ttl, stale = 20 * time.Millisecond, 200 * time.Millisecond
	a, st := newFeedAgent(t, ttl, stale)
	ctx := context.Background()
	row := engagement.Stats{ContentID: "v", Scope: engagement.GlobalScope, Likes: 1, LastSeq: 1, UpdatedAt: time.Now()}
	if err := st.WriteStats(ctx, []engagement.Stats{row}); err != nil {
		t.Fatal(err)
	}
	beat(a, 7, 1)
	likes(t, a, "v", engagement.GlobalScope)
	row.Likes, row.LastSeq = 5, 2
	if err := st.WriteStats(ctx, []engagement.Stats{row}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for likes(t, a, "v", engagement.GlobalScope) != 5 {
		if time.Now().After(deadline) {
			t.Fatal("a silent feed kept serving the warm item")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if a.ReadCacheStats().FeedWhole {
		t.Fatal("feed whole after the partitions went silent")
	}

	beat(a, 7, 2)
	if !a.ReadCacheStats().FeedWhole {
		t.Fatal("feed not whole after both partitions spoke again")
	}
	a.ApplyRows(time.Now(), nil) // an unsequenced push
	if a.ReadCacheStats().FeedWhole {
		t.Fatal("feed whole after an unsequenced push")
	}
}
