package natsjs

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

func TestAssignIsBalancedAndDeterministic(t *testing.T) {
	tests := []struct {
		name       string
		members    []string
		partitions int
	}{
		{"none", nil, 4},
		{"one", []string{"a"}, 16},
		{"two", []string{"rollup-1", "rollup-2"}, 16},
		{"three", []string{"a", "b", "c"}, 16},
		{"three rollups", []string{"m0", "m1", "m2"}, 16},
		{"more members than partitions", []string{"a", "b", "c", "d", "e"}, 3},
		{"odd", []string{"x", "y", "z", "w"}, 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := assign(tt.members, tt.partitions)
			if len(got) != tt.partitions {
				t.Fatalf("assign gave %d owners, want %d", len(got), tt.partitions)
			}
			load := make(map[string]int)
			for p, m := range got {
				if len(tt.members) == 0 {
					if m != "" {
						t.Errorf("partition %d owned by %q with no members, want none", p, m)
					}
					continue
				}
				if !slices.Contains(tt.members, m) {
					t.Errorf("partition %d owned by %q, want one of %v", p, m, tt.members)
				}
				load[m]++
			}
			if n := len(tt.members); n > 0 {
				lo, hi := tt.partitions/n, (tt.partitions+n-1)/n
				for _, m := range tt.members {
					if load[m] < lo || load[m] > hi {
						t.Errorf("member %s owns %d partitions, want %d..%d (%v)", m, load[m], lo, hi, got)
					}
				}
			}
			rev := slices.Clone(tt.members)
			slices.Reverse(rev)
			if again := assign(rev, tt.partitions); !slices.Equal(again, got) {
				t.Errorf("assign depends on member order: %v then %v", got, again)
			}
		})
	}
}

// TestAssignMovesFewPartitions checks, over many member sets, that a join
// or a leave moves few partitions beyond the ones that must move. The
// member names are fixed, so the numbers are too; the bounds are what the
// algorithm gives with room to spare (5.7 and 0.4 at the time of writing).
func TestAssignMovesFewPartitions(t *testing.T) {
	const trials, partitions = 200, 16
	joinMoves, leaveExtra := 0, 0
	for tr := range trials {
		members := []string{fmt.Sprintf("r%d-a", tr), fmt.Sprintf("r%d-b", tr), fmt.Sprintf("r%d-c", tr)}
		two, three := assign(members[:2], partitions), assign(members, partitions)
		for p := range two {
			if two[p] != three[p] {
				joinMoves++
			}
		}
		// members[1] leaves the three: its partitions must move, others should not.
		left := assign([]string{members[0], members[2]}, partitions)
		for p := range three {
			if three[p] != members[1] && left[p] != three[p] {
				leaveExtra++
			}
		}
	}
	if got, limit := float64(joinMoves)/trials, 6.5; got > limit {
		t.Errorf("a third member joining moved %.2f of %d partitions on average, want at most %.1f (ideal %.2f)",
			got, partitions, limit, float64(partitions)/3)
	}
	if got, limit := float64(leaveExtra)/trials, 1.0; got > limit {
		t.Errorf("a member leaving moved %.2f partitions between survivors on average, want at most %.1f", got, limit)
	}
}

// TestMembershipCountsRejoinAfterTimedOutCreate: a member whose create of
// the lost membership stream failed (it may have created it anyway) and
// whose next ensure finds the stream counts one rejoin when it renews into
// it, and only one. (A successful ensure used to clear the mark first, and
// the rejoin went uncounted: TestGroupFailoverAfterBrokerRestart failed on
// it once in CI.)
func TestMembershipCountsRejoinAfterTimedOutCreate(t *testing.T) {
	s := startServer(t, t.TempDir(), 0)
	_, js := connect(t, s)
	m := &membership{
		js: js, stream: "TEST_MEMBERS", subjects: "test-members.>", prefix: "test-members.g", id: "m0",
		ttl: 2 * time.Second, replicas: 1, partitions: 4, log: testLogger(t), cur: &view{changed: make(chan struct{})},
	}
	ctx := t.Context()
	if err := m.join(ctx); err != nil {
		t.Fatal(err)
	}
	if n := m.rejoins.Load(); n != 0 {
		t.Fatalf("rejoins after the first join = %d, want 0", n)
	}
	m.lost.Store(true) // what a create that timed out leaves
	if created, err := m.ensure(ctx); err != nil || created {
		t.Fatalf("ensure of the existing stream = %v, %v; want false, nil", created, err)
	}
	for range 2 {
		if err := m.round(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := m.rejoins.Load(); n != 1 {
		t.Fatalf("rejoins after renewing into the stream found again = %d, want 1", n)
	}
}
