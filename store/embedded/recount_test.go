package embedded

import (
	"slices"
	"testing"
	"time"

	"github.com/edgecount/edgecount/engagement"
)

// TestDeletesCounted checks that Counters().Deletes counts the undos that
// applied, once each, and not the refused ones.
func TestDeletesCounted(t *testing.T) {
	s := openTemp(t)
	r := engagement.Reaction{UserID: "u", ContentID: "c", Action: engagement.ActionLike, Region: "us", Version: 1, Incarnation: 3, UpdatedAt: time.Now()}
	if ok, err := s.InsertReaction(t.Context(), r); err != nil || !ok {
		t.Fatalf("InsertReaction = %v, %v", ok, err)
	}
	for i, wantApplied := range []bool{true, false} {
		ok, err := s.DeleteReaction(t.Context(), r)
		if err != nil || ok != wantApplied {
			t.Fatalf("DeleteReaction #%d = %v, %v; want %v", i+1, ok, err, wantApplied)
		}
		if got := s.Counters().Deletes.Load(); got != 1 {
			t.Fatalf("after delete #%d Deletes = %d; want 1", i+1, got)
		}
	}
}

// FuzzRecountCursor checks that no input crashes the cursor decoder and
// that whatever it accepts encodes back to a cursor that decodes the same.
func FuzzRecountCursor(f *testing.F) {
	f.Add(encodeRecountCursor("item", "user-7", []engagement.RegionTally{{Region: "us", Likes: 2, Dislikes: 1}}))
	f.Add(encodeRecountCursor("item", "u", nil))
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		user, tallies, ok := decodeRecountCursor(s, "item")
		if !ok {
			return
		}
		u2, t2, ok := decodeRecountCursor(encodeRecountCursor("item", user, tallies), "item")
		if !ok || u2 != user || !slices.Equal(t2, tallies) {
			t.Fatalf("re-encoded cursor decodes to %q %+v %v; want %q %+v", u2, t2, ok, user, tallies)
		}
	})
}
