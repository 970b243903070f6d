package region

import (
	"testing"

	"github.com/edgecount/edgecount/engagement"
)

// TestTransitionTable is docs/design.md "Reaction transitions", row by row.
func TestTransitionTable(t *testing.T) {
	const (
		none    = engagement.ActionNone
		like    = engagement.ActionLike
		dislike = engagement.ActionDislike
	)
	tests := []struct {
		prev, next      engagement.Action
		likes, dislikes int64
	}{
		{none, like, +1, 0},
		{none, dislike, 0, +1},
		{like, dislike, -1, +1},
		{dislike, like, +1, -1},
		{like, none, -1, 0},
		{dislike, none, 0, -1},
		{like, like, 0, 0},
		{dislike, dislike, 0, 0},
		{none, none, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.prev.String()+"->"+tt.next.String(), func(t *testing.T) {
			var buf [2]Delta
			var likes, dislikes int64
			for _, d := range Transition(tt.prev, "eu", tt.next, "us", &buf) {
				// A removed reaction is taken from the region that
				// recorded it; an added one goes to the recording region.
				wantRegion := "us"
				if d.Delta < 0 {
					wantRegion = "eu"
				}
				if d.Region != wantRegion {
					t.Errorf("delta %+v attributed to %q, want %q", d, d.Region, wantRegion)
				}
				switch d.Counter {
				case engagement.CounterLike:
					likes += d.Delta
				case engagement.CounterDislike:
					dislikes += d.Delta
				default:
					t.Errorf("unexpected counter %q", d.Counter)
				}
			}
			if likes != tt.likes || dislikes != tt.dislikes {
				t.Fatalf("likes, dislikes = %+d, %+d; want %+d, %+d", likes, dislikes, tt.likes, tt.dislikes)
			}
		})
	}
}

func TestTransitionDoesNotAllocate(t *testing.T) {
	var buf [2]Delta
	allocs := testing.AllocsPerRun(100, func() {
		Transition(engagement.ActionLike, "eu", engagement.ActionDislike, "us", &buf)
	})
	if allocs != 0 {
		t.Fatalf("Transition allocates %v times, want 0", allocs)
	}
}
