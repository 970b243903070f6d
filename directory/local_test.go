package directory_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/edgecount/edgecount/directory"
	"github.com/edgecount/edgecount/region"
)

// Local must satisfy the interface the agent consumes.
var _ region.Directory = (*directory.Local)(nil)

// The hot-counter rule writes through it in standalone mode.
var _ region.ShardWriter = (*directory.Local)(nil)

func TestLocalDefault(t *testing.T) {
	tests := []struct {
		name      string
		def, want int
	}{
		{"cold", 1, 1},
		{"wider default", 4, 4},
		{"zero becomes one", 0, 1},
		{"negative becomes one", -7, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := directory.NewLocal(tt.def)
			if got := d.Shards("v1", "like"); got != tt.want {
				t.Errorf("Shards on an empty directory = %d, want %d", got, tt.want)
			}
			if got := d.Default(); got != tt.want {
				t.Errorf("Default() = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestLocalSetDelete(t *testing.T) {
	type op struct {
		kind             string // "set" or "delete"
		content, counter string
		shards           int
	}
	type probe struct {
		content, counter string
		want             int
	}
	tests := []struct {
		name    string
		ops     []op
		probes  []probe
		wantLen int
	}{
		{
			name:    "set one counter of one item",
			ops:     []op{{"set", "v1", "like", 16}},
			probes:  []probe{{"v1", "like", 16}, {"v1", "view", 1}, {"v2", "like", 1}},
			wantLen: 1,
		},
		{
			name:    "set twice keeps the last",
			ops:     []op{{"set", "v1", "view", 16}, {"set", "v1", "view", 4}},
			probes:  []probe{{"v1", "view", 4}},
			wantLen: 1,
		},
		{
			name:    "below one is stored as one",
			ops:     []op{{"set", "v1", "view", 0}, {"set", "v2", "view", -3}},
			probes:  []probe{{"v1", "view", 1}, {"v2", "view", 1}},
			wantLen: 2,
		},
		{
			name:    "delete restores the default",
			ops:     []op{{"set", "v1", "view", 8}, {"set", "v1", "like", 8}, {"delete", "v1", "view", 0}},
			probes:  []probe{{"v1", "view", 1}, {"v1", "like", 8}},
			wantLen: 1,
		},
		{
			name:    "delete of an absent entry is a no-op",
			ops:     []op{{"delete", "v9", "view", 0}},
			probes:  []probe{{"v9", "view", 1}},
			wantLen: 0,
		},
		{
			name:    "ids are not confused by concatenation",
			ops:     []op{{"set", "ab", "c", 8}},
			probes:  []probe{{"a", "bc", 1}, {"ab", "c", 8}},
			wantLen: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := directory.NewLocal(1)
			for _, o := range tt.ops {
				switch o.kind {
				case "set":
					d.Set(o.content, o.counter, o.shards)
				case "delete":
					d.Delete(o.content, o.counter)
				default:
					t.Fatalf("bad op %q", o.kind)
				}
			}
			for _, p := range tt.probes {
				if got := d.Shards(p.content, p.counter); got != p.want {
					t.Errorf("Shards(%q, %q) = %d, want %d", p.content, p.counter, got, p.want)
				}
			}
			if got := d.Len(); got != tt.wantLen {
				t.Errorf("Len() = %d, want %d", got, tt.wantLen)
			}
		})
	}
}

// TestLocalConcurrent runs readers against writers; under -race it proves
// the locking, and the final state proves no write was lost.
func TestLocalConcurrent(t *testing.T) {
	d := directory.NewLocal(1)
	const writers, items = 4, 200
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range items {
				id := fmt.Sprintf("v%d-%d", w, i)
				d.Set(id, "view", i+2)
				if i%2 == 1 {
					d.Delete(id, "view")
				}
			}
		})
		wg.Go(func() {
			for i := range items {
				if got := d.Shards(fmt.Sprintf("v%d-%d", w, i), "view"); got < 1 {
					t.Errorf("Shards = %d, want at least 1", got)
				}
			}
		})
	}
	wg.Wait()
	if got, want := d.Len(), writers*items/2; got != want {
		t.Fatalf("Len() = %d, want %d", got, want)
	}
	for w := range writers {
		for i := range items {
			want := i + 2
			if i%2 == 1 {
				want = 1
			}
			if got := d.Shards(fmt.Sprintf("v%d-%d", w, i), "view"); got != want {
				t.Fatalf("Shards(v%d-%d) = %d, want %d", w, i, got, want)
			}
		}
	}
}

func TestLocalSetShards(t *testing.T) {
	d := directory.NewLocal(1)
	ctx := t.Context()
	for _, st := range []struct{ shards, want, wantLen int }{
		{16, 16, 1}, {4, 4, 1}, {1, 1, 0}, {8, 8, 1}, {0, 1, 0}, {-3, 1, 0},
	} {
		if err := d.SetShards(ctx, "v1", "like", st.shards); err != nil {
			t.Fatalf("SetShards(%d) = %v", st.shards, err)
		}
		if got := d.Shards("v1", "like"); got != st.want || d.Len() != st.wantLen {
			t.Fatalf("after SetShards(%d): Shards = %d, Len = %d; want %d, %d", st.shards, got, d.Len(), st.want, st.wantLen)
		}
	}
}
