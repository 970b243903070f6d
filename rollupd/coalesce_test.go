package rollupd

import (
	"sync"
	"testing"
	"time"

	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/internal/testenv"
	"github.com/edgecount/edgecount/natsjs"
)

// TestBacklogIsCoalescedAndPushed: a backlog of one partition is applied
// in batches, each row written once per batch, every like counted once; the
// rows written reach a subscriber of the row pushes with the final totals.
func TestBacklogIsCoalescedAndPushed(t *testing.T) {
	r := newRig(t)
	var mu sync.Mutex
	pushed := map[string]engagement.Stats{}
	sub, err := r.bus.SubscribeRows("", func(push natsjs.RowsPush) {
		rows := push.Rows
		mu.Lock()
		defer mu.Unlock()
		for _, row := range rows {
			if row.Scope == engagement.GlobalScope && row.LastSeq >= pushed[row.ContentID].LastSeq {
				pushed[row.ContentID] = row
			}
		}
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	const n = 40
	for seq := uint64(1); seq <= n; seq++ {
		r.publish(t, seq, "v1", nil) // v1's partition, one agent run
	}
	p, err := New(r.bus, r.st, r.config([]uint32{0, 1}))
	if err != nil {
		t.Fatal(err)
	}
	run(t, p)
	if err := p.WaitApplied(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := likes(t, r.st, "v1"); got != n {
		t.Fatalf("likes of v1 = %d, want %d", got, n)
	}
	s := p.Rollup().Stats()
	if got := s.RowWrites.Load(); got >= n/2 {
		t.Errorf("row writes = %d for %d messages, want batches (under %d)", got, n, n/2)
	}
	if got, want := s.RowsWritten.Load(), 2*s.RowWrites.Load(); got != want {
		t.Errorf("rows written = %d, want 2 per write (global and us): %d", got, want)
	}
	testenv.Eventually(t, 10*time.Second, "the final total pushed", testenv.Until(func() bool {
		mu.Lock()
		defer mu.Unlock()
		return pushed["v1"].Likes == n
	}))
	if got := p.consumer.Stats().Batches; got != s.RowWrites.Load() {
		t.Errorf("consumer batches = %d, want one per row write (%d)", got, s.RowWrites.Load())
	}
}

// TestHeartbeatsOfOwnedPartitions: a running process sends, for each
// partition it writes, heartbeats that continue the numbers of its pushes,
// so an agent sees a lost push as a gap (docs/read-cache.md).
func TestHeartbeatsOfOwnedPartitions(t *testing.T) {
	r := newRig(t)
	var mu sync.Mutex
	seqs := map[uint32][]uint64{}
	sub, err := r.bus.SubscribeRows("", func(push natsjs.RowsPush) {
		mu.Lock()
		defer mu.Unlock()
		seqs[push.Partition] = append(seqs[push.Partition], push.Seq)
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	r.publish(t, 1, "v1", nil)
	p, err := New(r.bus, r.st, r.config([]uint32{0, 1}))
	if err != nil {
		t.Fatal(err)
	}
	run(t, p)
	testenv.Eventually(t, 10*time.Second, "two heartbeats of each owned partition", testenv.Until(func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seqs[0]) >= 2 && len(seqs[1]) >= 2
	}))
	mu.Lock()
	defer mu.Unlock()
	for part, got := range seqs {
		if part > 1 {
			t.Errorf("pushes of partition %d, which the process does not own", part)
		}
		for i, seq := range got {
			if seq != uint64(i+1) {
				t.Errorf("partition %d: numbers %v, want 1, 2, …", part, got)
				break
			}
		}
	}
}
