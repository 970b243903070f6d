package rollup_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/edgecount/edgecount/partial"
	"github.com/edgecount/edgecount/rollup"
	"github.com/edgecount/edgecount/store/embedded"
)

// BenchmarkApplyEmbedded measures one message applied to the embedded
// store, without fsync so that the CPU cost shows: read the rows of its
// items, add, write them, and (with high-water marks) write the mark in the
// same transaction. Every message carries items distinct items of one
// region (2 rows each) from one agent run, the shape of a flush.
func BenchmarkApplyEmbedded(b *testing.B) {
	for _, items := range []int{1, 100} {
		b.Run(fmt.Sprintf("items=%d", items), func(b *testing.B) {
			st, err := embedded.Open(embedded.Config{Path: filepath.Join(b.TempDir(), "db"), Timeout: time.Second, NoSync: true})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			ru := rollup.New(st, nil, nil)
			bt := &partial.Batch{Agent: "bench", Region: "eu", Epoch: 1, Partition: 3, FlushedAt: time.Now()}
			for i := range items {
				bt.Sums = append(bt.Sums, partial.Sum{ContentID: fmt.Sprintf("item-%d", i), Counter: "view", Region: "eu", Delta: 1})
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				bt.Seq = uint64(i + 1)
				if err := ru.Apply(b.Context(), uint64(i+1), bt); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
