package storetest

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgecount/edgecount/engagement"
)

func equalStats(a, b engagement.Stats) bool {
	return a.ContentID == b.ContentID && a.Scope == b.Scope && a.Likes == b.Likes &&
		a.Dislikes == b.Dislikes && maps.Equal(a.Counters, b.Counters) &&
		a.UpdatedAt.Equal(b.UpdatedAt) && a.LastSeq == b.LastSeq
}

// checkStats fails unless got holds exactly want, in order.
func checkStats(t *testing.T, what string, got, want []engagement.Stats) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s = %+v; want %+v", what, got, want)
	}
	for i := range got {
		if !equalStats(got[i], want[i]) {
			t.Fatalf("%s[%d] = %+v; want %+v", what, i, got[i], want[i])
		}
	}
}

func readStats(t *testing.T, s Store, ids ...string) map[string][]engagement.Stats {
	t.Helper()
	got, err := s.ReadStats(t.Context(), ids)
	if err != nil {
		t.Fatalf("ReadStats(%v): %v", ids, err)
	}
	return got
}

func testStatsRoundTrip(t *testing.T, s Store) {
	tests := []struct {
		name string
		row  engagement.Stats
	}{
		{"plain", engagement.Stats{Likes: 3, Dislikes: 1, UpdatedAt: now(), LastSeq: 7}},
		{"counters", engagement.Stats{Likes: 1, Counters: map[string]int64{"view": 10, "share": 2, "z9_x": 0}, UpdatedAt: now(), LastSeq: 1}},
		{"empty counters", engagement.Stats{Counters: map[string]int64{}, UpdatedAt: now()}},
		{"zero row", engagement.Stats{}},
		{"extremes", engagement.Stats{
			Likes: math.MaxInt64, Dislikes: math.MinInt64,
			Counters:  map[string]int64{"view": math.MaxInt64, "share": -1},
			UpdatedAt: time.Date(2262, 4, 11, 0, 0, 0, 1000, time.UTC), LastSeq: math.MaxUint64,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			row := tt.row
			row.ContentID, row.Scope = uniq("c"), engagement.GlobalScope
			if err := s.WriteStats(t.Context(), []engagement.Stats{row}); err != nil {
				t.Fatalf("WriteStats: %v", err)
			}
			got := readStats(t, s, row.ContentID)
			checkStats(t, "ReadStats", got[row.ContentID], []engagement.Stats{row})
		})
	}
	t.Run("scopes", func(t *testing.T) {
		id := uniq("c")
		ts := now()
		// Written out of order; read back sorted by scope.
		rows := []engagement.Stats{
			{ContentID: id, Scope: "us-east", Likes: 1, UpdatedAt: ts, LastSeq: 3},
			{ContentID: id, Scope: engagement.GlobalScope, Likes: 3, Dislikes: 1, Counters: map[string]int64{"view": 9}, UpdatedAt: ts, LastSeq: 9},
			{ContentID: id, Scope: "ap-south", Dislikes: 1, Counters: map[string]int64{"view": 4}, UpdatedAt: ts, LastSeq: 5},
			{ContentID: id, Scope: "eu-west", Likes: 2, Counters: map[string]int64{"view": 5}, UpdatedAt: ts, LastSeq: 4},
		}
		if err := s.WriteStats(t.Context(), rows); err != nil {
			t.Fatalf("WriteStats: %v", err)
		}
		want := slices.Clone(rows)
		slices.SortFunc(want, func(a, b engagement.Stats) int { return strings.Compare(a.Scope, b.Scope) })
		got := readStats(t, s, id)
		checkStats(t, "ReadStats", got[id], want)
	})
	t.Run("cancelled context", func(t *testing.T) {
		id := uniq("c")
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if err := s.WriteStats(ctx, []engagement.Stats{{ContentID: id, Scope: engagement.GlobalScope, Likes: 1}}); err == nil {
			t.Fatal("WriteStats with a cancelled context = nil; want an error")
		}
		if _, err := s.ReadStats(ctx, []string{id}); err == nil {
			t.Fatal("ReadStats with a cancelled context = nil; want an error")
		}
		if got := readStats(t, s, id); len(got) != 0 {
			t.Fatalf("ReadStats after a cancelled write = %+v; want nothing", got)
		}
	})
}

func testStatsBatch(t *testing.T, s Store) {
	a, b, missing := uniq("c"), uniq("c"), uniq("c")
	prefixOfB := b[:len(b)-1] // an id that is a prefix of another, with no rows
	ts := now()
	rowsA := []engagement.Stats{
		{ContentID: a, Scope: "eu-west", Likes: 1, UpdatedAt: ts, LastSeq: 1},
		{ContentID: a, Scope: engagement.GlobalScope, Likes: 1, UpdatedAt: ts, LastSeq: 1},
	}
	rowsB := []engagement.Stats{
		{ContentID: b, Scope: engagement.GlobalScope, Dislikes: 2, Counters: map[string]int64{"view": 1}, UpdatedAt: ts, LastSeq: 2},
		{ContentID: b + "x", Scope: engagement.GlobalScope, Likes: 99, UpdatedAt: ts, LastSeq: 2},
	}
	if err := s.WriteStats(t.Context(), append(slices.Clone(rowsA), rowsB...)); err != nil {
		t.Fatalf("WriteStats: %v", err)
	}
	if err := s.WriteStats(t.Context(), nil); err != nil {
		t.Fatalf("WriteStats(nil): %v", err)
	}
	tests := []struct {
		name string
		ids  []string
		want map[string][]engagement.Stats
	}{
		{"found and missing", []string{missing, a, b}, map[string][]engagement.Stats{a: rowsA, b: rowsB[:1]}},
		{"only missing", []string{missing}, nil},
		{"prefix of an id", []string{prefixOfB}, nil},
		{"none asked", nil, nil},
		{"repeated id", []string{b, b}, map[string][]engagement.Stats{b: rowsB[:1]}},
	}
	// rowsA sorted by scope: eu-west < global.
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := readStats(t, s, tt.ids...)
			if len(got) != len(tt.want) {
				t.Fatalf("ReadStats(%v) = %+v; want %+v", tt.ids, got, tt.want)
			}
			for id, want := range tt.want {
				checkStats(t, fmt.Sprintf("ReadStats(%v)[%q]", tt.ids, id), got[id], want)
			}
		})
	}
}

func testStatsOverwrite(t *testing.T, s Store) {
	id := uniq("c")
	first := []engagement.Stats{
		{ContentID: id, Scope: engagement.GlobalScope, Likes: 5, Dislikes: 2, Counters: map[string]int64{"view": 100, "share": 3}, UpdatedAt: now(), LastSeq: 10},
		{ContentID: id, Scope: "eu-west", Likes: 5, Dislikes: 2, Counters: map[string]int64{"view": 100, "share": 3}, UpdatedAt: now(), LastSeq: 10},
	}
	if err := s.WriteStats(t.Context(), first); err != nil {
		t.Fatalf("WriteStats: %v", err)
	}
	// A row is replaced, not merged: fewer counters, lower values.
	second := engagement.Stats{ContentID: id, Scope: engagement.GlobalScope, Likes: 4, Counters: map[string]int64{"view": 101}, UpdatedAt: now().Add(time.Second), LastSeq: 11}
	if err := s.WriteStats(t.Context(), []engagement.Stats{second}); err != nil {
		t.Fatalf("WriteStats: %v", err)
	}
	got := readStats(t, s, id)
	checkStats(t, "ReadStats", got[id], []engagement.Stats{first[1], second})
}

// testStatsIdempotent applies partial sums the way the rollup does — skip a
// message whose sequence is not above the row's LastSeq — and checks that a
// redelivered message changes nothing.
func testStatsIdempotent(t *testing.T, s Store) {
	id := uniq("c")
	apply := func(seq uint64, likes int64) {
		t.Helper()
		got := readStats(t, s, id)
		var row engagement.Stats
		if rows := got[id]; len(rows) == 1 {
			row = rows[0]
		} else {
			row = engagement.Stats{ContentID: id, Scope: engagement.GlobalScope}
		}
		if seq <= row.LastSeq {
			return
		}
		row.Likes += likes
		row.LastSeq = seq
		row.UpdatedAt = now()
		if err := s.WriteStats(t.Context(), []engagement.Stats{row}); err != nil {
			t.Fatalf("WriteStats: %v", err)
		}
	}
	for _, m := range []struct {
		seq   uint64
		likes int64
	}{{1, 2}, {2, 3}, {2, 3}, {1, 2}, {5, 1}, {5, 1}, {4, 100}} {
		apply(m.seq, m.likes)
	}
	rows := readStats(t, s, id)[id]
	if len(rows) != 1 || rows[0].Likes != 6 || rows[0].LastSeq != 5 {
		t.Fatalf("after redelivered messages: %+v; want one row with 6 likes at sequence 5", rows)
	}
}
