package storetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/store"
)

// Store is the behaviour every store implementation shares.
type Store interface {
	Ping(ctx context.Context) error

	// UserLikes.
	GetReaction(ctx context.Context, userID, contentID string) (engagement.Reaction, bool, error)
	GetReactions(ctx context.Context, userID string, contentIDs []string) (map[string]engagement.Reaction, error)
	InsertReaction(ctx context.Context, r engagement.Reaction) (applied bool, err error)
	UpdateReaction(ctx context.Context, prev, next engagement.Reaction) (applied bool, err error)
	DeleteReaction(ctx context.Context, prev engagement.Reaction) (applied bool, err error)
	CountReactions(ctx context.Context, contentID string) ([]engagement.RegionTally, error)

	// ContentStats.
	ReadStats(ctx context.Context, contentIDs []string) (map[string][]engagement.Stats, error)
	WriteStats(ctx context.Context, rows []engagement.Stats) error

	// The rollup's high-water marks.
	ReadMarks(ctx context.Context, partition uint32) ([]store.Mark, error)
	WriteStatsMark(ctx context.Context, rows []engagement.Stats, m store.Mark) error
	DeleteMarks(ctx context.Context, partition uint32, keys []store.MarkKey) error

	// Trending.
	PutTrending(ctx context.Context, t engagement.Trending) error
	GetTrending(ctx context.Context, k engagement.TrendingKey) (engagement.Trending, bool, error)
	ReadTrending(ctx context.Context, scope, counter, window string) ([]engagement.Trending, error)
	PutTrendingState(ctx context.Context, st engagement.TrendingState) error
	GetTrendingState(ctx context.Context, partition uint32) (engagement.TrendingState, bool, error)
	ReadTrendingCoverage(ctx context.Context) ([]engagement.TrendingState, error)
}

// Run runs the conformance suite against stores made by open.
func Run(t *testing.T, open func(t *testing.T) Store) {
	runParallel(t, open, []suiteTest[Store]{
		{"Ping", testPing},
		{"Reaction/GetMissing", testGetMissing},
		{"Reaction/InsertGet", testInsertGet},
		{"Reaction/InsertTwiceRefused", testInsertTwice},
		{"Reaction/Update", testUpdate},
		{"Reaction/Delete", testDelete},
		{"Reaction/ABA", testABA},
		{"Reaction/KeysUnambiguous", testReactionKeys},
		{"Reaction/GetReactions", testGetReactions},
		{"Reaction/Misuse", testMisuse},
		{"Reaction/ConcurrentInsert", testConcurrentInsert},
		{"Reaction/ConcurrentCAS", testConcurrentCAS},
		{"Reaction/ConcurrentDelete", testConcurrentDelete},
		{"Reaction/ConcurrentInsertAfterUndo", testConcurrentInsertAfterUndo},
		{"Reaction/ConcurrentDistinctRows", testConcurrentDistinct},
		{"Reaction/Writers", testWriters},
		{"Count/FollowsChanges", testCountFollows},
		{"Stats/RoundTrip", testStatsRoundTrip},
		{"Stats/Batch", testStatsBatch},
		{"Stats/Overwrite", testStatsOverwrite},
		{"Stats/IdempotentApply", testStatsIdempotent},
		{"Marks/RoundTrip", testMarksRoundTrip},
		{"Marks/Delete", testMarksDelete},
		{"Marks/Misuse", testMarksMisuse},
		{"Marks/IdempotentApply", testMarksIdempotentApply},
		{"Trending", testTrending},
		{"Trending/Partitions", testTrendingPartitions},
		{"Trending/State", testTrendingState},
	})
}

// suiteTest is one subtest of a suite run against stores of type S.
type suiteTest[S any] struct {
	name string
	fn   func(t *testing.T, s S)
}

// runParallel runs every test as a parallel subtest on its own store.
func runParallel[S any](t *testing.T, open func(t *testing.T) S, tests []suiteTest[S]) {
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.fn(t, open(t))
		})
	}
}

// uniq returns name with a random suffix, so subtests sharing a database do
// not see each other's rows. The result is a valid id and, for a lower-case
// name, a valid region.
func uniq(name string) string {
	return fmt.Sprintf("%s-%016x", name, rand.Uint64())
}

// now returns the current time truncated to the precision the suite
// requires.
func now() time.Time {
	return time.Now().Truncate(time.Microsecond)
}

func testPing(t *testing.T, s Store) {
	if err := s.Ping(t.Context()); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := s.Ping(ctx); err == nil {
		t.Fatal("Ping with a cancelled context = nil; want an error")
	}
}
