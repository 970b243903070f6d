package store

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/edgecount/edgecount/engagement"
)

func TestCheckCall(t *testing.T) {
	valid := func(id string) bool { return id != "" && !strings.Contains(id, "/") }
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		ids  []string
		want error
	}{
		{"valid ids", t.Context(), []string{"u", "c"}, nil},
		{"no ids", t.Context(), nil, nil},
		{"an invalid id", t.Context(), []string{"u", "a/b"}, ErrInvalid},
		{"a done context", cancelled, []string{"u"}, context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckCall(tt.ctx, "get reaction", valid, tt.ids...)
			if !errors.Is(err, tt.want) || (err == nil) != (tt.want == nil) {
				t.Fatalf("CheckCall = %v, want %v", err, tt.want)
			}
			if err != nil && !strings.HasPrefix(err.Error(), "cannot get reaction: ") {
				t.Fatalf("CheckCall error %q does not say what it cannot do", err)
			}
		})
	}
	r := engagement.Reaction{UserID: "u", ContentID: "c", Action: engagement.ActionNone}
	if err := CheckRow(t.Context(), "insert reaction", valid, &r); !errors.Is(err, ErrInvalid) {
		t.Fatalf("CheckRow of a row without an action = %v, want ErrInvalid", err)
	}
}

func TestCheckScan(t *testing.T) {
	for _, limit := range []int{0, -1, MaxScanLimit + 1} {
		if err := CheckScan(t.Context(), "scan stats", limit); !errors.Is(err, ErrInvalid) {
			t.Errorf("CheckScan(limit %d) = %v, want ErrInvalid", limit, err)
		}
	}
	for _, limit := range []int{1, MaxScanLimit} {
		if err := CheckScan(t.Context(), "scan stats", limit); err != nil {
			t.Errorf("CheckScan(limit %d) = %v, want nil", limit, err)
		}
	}
}

func TestAddTally(t *testing.T) {
	var got []engagement.RegionTally
	got = AddTally(got, "us-east", engagement.ActionLike)
	got = AddTally(got, []byte("eu-west"), engagement.ActionDislike)
	got = AddTally(got, []byte("us-east"), engagement.ActionLike)
	got = AddTally(got, "eu-west", engagement.ActionLike)
	SortTallies(got)
	want := []engagement.RegionTally{{Region: "eu-west", Likes: 1, Dislikes: 1}, {Region: "us-east", Likes: 2}}
	if !slices.Equal(got, want) {
		t.Fatalf("tallies = %+v, want %+v", got, want)
	}
}
