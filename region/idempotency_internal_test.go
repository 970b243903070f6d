package region

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"
)

// TestKeyTableMemory measures the memory of a key beside its id (the
// constant keyEntryBytes behind edgecount_idempotency_bytes) and its size
// in the keys log, with 36-byte keys (a UUID); it fails when the constant
// is more than 50% off the measurement.
func TestKeyTableMemory(t *testing.T) {
	const n = 100_000
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("tenant\x00%08x-4b7d-4c2a-8e1f-6a5b3c2d1e0f", i)
	}
	ctx := context.Background()
	now := time.Now()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	tab := newKeyTable(IdempotencyConfig{Window: time.Hour, MaxKeys: n}, func() time.Time { return now })
	for i, id := range ids {
		e, _, err := tab.claim(ctx, id, digest{byte(i)})
		if err != nil {
			t.Fatal(err)
		}
		tab.settle(e, answer{kind: ansIncrements, accepted: 100}, now.UnixNano(), 0)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	idBytes := int64(len(ids[0]))
	perKey := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / n
	if got := tab.st.Keys.Load(); got != n {
		t.Fatalf("keys %d, want %d", got, n)
	}
	var recs []keyRecord
	for _, e := range tab.m {
		recs = append(recs, keyRecord{id: e.id, digest: e.digest, at: e.at, ans: e.ans})
	}
	disk := len(appendKeys(nil, recs)) / n
	t.Logf("%d keys of %d-byte ids: %d bytes of memory each (%d beside the id; estimate %d), %d bytes each in the keys log",
		n, idBytes, perKey, perKey-idBytes, keyEntryBytes, disk)
	if est := float64(keyEntryBytes); float64(perKey-idBytes) < est/1.5 || float64(perKey-idBytes) > est*1.5 {
		t.Errorf("measured %d bytes a key beside its id, the estimate keyEntryBytes is %d: update it", perKey-idBytes, keyEntryBytes)
	}
	runtime.KeepAlive(tab)
}
