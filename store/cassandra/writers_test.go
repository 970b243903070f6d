package cassandra

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/edgecount/edgecount/engagement"
)

// TestWritersColumnAddedToOldTable checks the online schema change of
// writer tokens: a user_likes table created before them gets the column
// at Open, its rows read as having no writers, and the next write starts
// their history.
func TestWritersColumnAddedToOldTable(t *testing.T) {
	cfg, s := testKeyspace(t)
	ctx := t.Context()
	// Recreate user_likes as it was before writer tokens, with one row.
	for _, stmt := range []string{
		`DROP TABLE ` + cfg.Keyspace + `.user_likes`,
		`CREATE TABLE ` + cfg.Keyspace + `.user_likes (user_id text, content_id text, action text, region text,
			version bigint, incarnation bigint, updated_at bigint, PRIMARY KEY ((user_id), content_id))`,
		`INSERT INTO ` + cfg.Keyspace + `.user_likes (user_id, content_id, action, region, version, incarnation, updated_at)
			VALUES ('u-old', 'c-old', 'like', 'eu', 1, 5, 1000)`,
	} {
		if err := s.execSchema(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", firstLine(stmt), err)
		}
	}
	s = openStore(t, cfg) // a second store: its Open adds the column

	old, found, err := s.GetReaction(ctx, "u-old", "c-old")
	if err != nil || !found || old.Version != 1 || old.Incarnation != 5 || len(old.Writers) != 0 {
		t.Fatalf("old row = %+v, %v, %v; want version 1, incarnation 5, no writers", old, found, err)
	}
	next := old
	next.Action, next.Version, next.UpdatedAt, next.Token = engagement.ActionDislike, 2, time.Now(), 77
	if ok, err := s.UpdateReaction(ctx, old, next); err != nil || !ok {
		t.Fatalf("UpdateReaction = %v, %v", ok, err)
	}
	got, _, err := s.GetReaction(ctx, "u-old", "c-old")
	if err != nil || !slices.Equal(got.Writers, []uint64{77}) {
		t.Fatalf("writers after the first write = %v, %v; want [77]", got.Writers, err)
	}
}

// TestSettleFindsTokenAfterUndo checks the case writer tokens exist for: an
// insert whose answer was lost, undone by another writer before the first
// one settles. Without tokens the settle sees no row and cannot tell; with
// them the insert's token is in the undone row's writers.
func TestSettleFindsTokenAfterUndo(t *testing.T) {
	_, s := testKeyspace(t)
	ctx := t.Context()
	// Tokens made now: a settle tells "not applied" only of a token young
	// enough that no write can have dropped it (engagement.NotWrittenBy).
	r := engagement.Reaction{UserID: "u", ContentID: "c", Action: engagement.ActionLike, Region: "eu", Version: 1,
		Incarnation: 3, UpdatedAt: time.Now(), Token: engagement.NewToken(time.Now())}
	if ok, err := s.InsertReaction(ctx, r); err != nil || !ok {
		t.Fatalf("InsertReaction = %v, %v", ok, err)
	}
	cur, _, err := s.GetReaction(ctx, "u", "c")
	if err != nil {
		t.Fatal(err)
	}
	cur.Token = engagement.NewToken(time.Now()) // another writer's undo
	if ok, err := s.DeleteReaction(ctx, cur); err != nil || !ok {
		t.Fatalf("DeleteReaction = %v, %v", ok, err)
	}
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	res, err := s.settle(lctx, "u", "c", context.DeadlineExceeded, func(c engagement.Reaction, f bool) outcome {
		return decideInsert(r, r.Token, nil, c, f)
	})
	if err != nil || !res.applied {
		t.Fatalf("settle of the undone insert = %+v, %v; want applied", res, err)
	}
	res, err = s.settle(lctx, "u", "c", context.DeadlineExceeded, func(c engagement.Reaction, f bool) outcome {
		return decideDelete(cur, 1, engagement.NewToken(time.Now()), c, f) // an undo of the same row by a third writer
	})
	if err != nil || res.applied || !res.settled {
		t.Fatalf("settle of a competing undo = %+v, %v; want settled, not applied", res, err)
	}
}

// TestReviveKeepsWriters: a revive that loses to a competitor's change of
// the marker tries the new marker, and extends that marker's writers, not
// a list started afresh (a failed revive reports only its condition's
// columns): the tokens of the writes before stay, so their settles still
// find them.
func TestReviveKeepsWriters(t *testing.T) {
	_, s := testKeyspace(t)
	ctx := t.Context()
	r := engagement.Reaction{UserID: "u", ContentID: "c", Action: engagement.ActionLike, Region: "eu", Version: 1,
		Incarnation: 3, UpdatedAt: time.Now(), Token: 1001}
	if ok, err := s.InsertReaction(ctx, r); err != nil || !ok {
		t.Fatalf("InsertReaction = %v, %v", ok, err)
	}
	cur, _, err := s.GetReaction(ctx, "u", "c")
	if err != nil {
		t.Fatal(err)
	}
	cur.Token = 1002
	if ok, err := s.DeleteReaction(ctx, cur); err != nil || !ok {
		t.Fatalf("DeleteReaction = %v, %v", ok, err)
	}
	s.beforeRevive = func(attempt int) {
		if attempt != 0 {
			return
		}
		// A competitor changes the marker between the insert's first try
		// and its revive: a fence, which keeps the writers.
		cur, found, err := s.readReaction(ctx, s.serialCons, "u", "c")
		if err != nil || !found {
			t.Errorf("marker = %+v, %v, %v", cur, found, err)
			return
		}
		if fenced, _, _, err := s.fence(ctx, "u", "c", cur, found); err != nil || !fenced {
			t.Errorf("fence = %v, %v", fenced, err)
		}
	}
	next := engagement.Reaction{UserID: "u", ContentID: "c", Action: engagement.ActionDislike, Region: "eu", Version: 1,
		Incarnation: 4, UpdatedAt: time.Now(), Token: 1003}
	if ok, err := s.InsertReaction(ctx, next); err != nil || !ok {
		t.Fatalf("InsertReaction over the fenced marker = %v, %v", ok, err)
	}
	got, found, err := s.GetReaction(ctx, "u", "c")
	if err != nil || !found || got.Incarnation != 4 || !slices.Equal(got.Writers, []uint64{1001, 1002, 1003}) {
		t.Fatalf("row = %+v (found %v, %v); want writers [1001 1002 1003]", got, found, err)
	}
}

// TestRepeatedInsertNotRevived: an insert sent again with the token of a
// write that applied and was undone since (an agent's redo after a lost
// answer, from a row read before the undo) reports applied and changes
// nothing: reviving the undone reaction would count it twice.
func TestRepeatedInsertNotRevived(t *testing.T) {
	_, s := testKeyspace(t)
	ctx := t.Context()
	r := engagement.Reaction{UserID: "u", ContentID: "c", Action: engagement.ActionLike, Region: "eu", Version: 1,
		Incarnation: 3, UpdatedAt: time.Now(), Token: 2001}
	if ok, err := s.InsertReaction(ctx, r); err != nil || !ok {
		t.Fatalf("InsertReaction = %v, %v", ok, err)
	}
	cur, _, err := s.GetReaction(ctx, "u", "c")
	if err != nil {
		t.Fatal(err)
	}
	cur.Token = 2002
	if ok, err := s.DeleteReaction(ctx, cur); err != nil || !ok {
		t.Fatalf("DeleteReaction = %v, %v", ok, err)
	}
	if ok, err := s.InsertReaction(ctx, r); err != nil || !ok {
		t.Fatalf("the repeated insert = %v, %v; want true (it applied before)", ok, err)
	}
	got, found, err := s.GetReaction(ctx, "u", "c")
	if err != nil || found {
		t.Fatalf("row = %+v (found %v, %v); want the undo's marker", got, found, err)
	}
	// A new write over the marker still applies.
	r.Token, r.Incarnation = 2003, 4
	if ok, err := s.InsertReaction(ctx, r); err != nil || !ok {
		t.Fatalf("a new insert over the marker = %v, %v", ok, err)
	}
}
