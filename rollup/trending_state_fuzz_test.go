package rollup

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/edgecount/edgecount/partial"
)

// sampleState returns a partition state with every part encode writes:
// regions, runs, stored rows, a gap, lists of every window and exact
// counts in minute and hour buckets.
func sampleState(partitions int) *trendPart {
	tp := newTrendPart(0, 0)
	tp.lastSeq, tp.nowMs, tp.gapFrom, tp.gapTo = 41, 1_772_359_230_000, 29_539_300, 29_539_301
	tp.regionAt["us"], tp.regionAt["eu"] = tp.nowMs, tp.nowMs-1000
	tp.runs[agentRun{"us-1", 7}] = runPos{seq: 12, atMs: tp.nowMs}
	tp.rows[rowID{"global", "view", 2}] = true
	var ids []string
	for i := 0; len(ids) < 3; i++ {
		if id := string(rune('a'+i%26)) + string(rune('0'+i/26)); partial.PartitionOf(id, partitions) == 0 {
			ids = append(ids, id)
		}
	}
	g := tp.group(groupKey{"us", "view"})
	for wi := range numWindows {
		g.lists[wi][agentRun{"us-1", 7}] = &agentList{minute: 29_539_320, floor: 3,
			items: map[string]partial.TopItem{ids[0]: {ContentID: ids[0], Count: 90, Error: 4}, ids[1]: {ContentID: ids[1], Count: 5}}}
	}
	r := &ring{since: 29_539_290}
	r.add(29_539_299, 17)
	r.add(29_539_320, 3)
	g.exact[ids[0]] = r
	g.exact[ids[2]] = &ring{since: 29_539_321}
	return tp
}

// TestTrendingStateRoundTrip: a decoded state encodes to the same bytes,
// and a truncated or extended one is refused.
func TestTrendingStateRoundTrip(t *testing.T) {
	const partitions = 4
	saved := time.UnixMilli(1_772_359_231_000)
	data := sampleState(partitions).encode(nil, saved)
	tp, savedMs, err := decodeState(data, 0, partitions)
	if err != nil {
		t.Fatalf("decodeState: %v", err)
	}
	if savedMs != saved.UnixMilli() || tp.cands != 2 {
		t.Errorf("saved %d, candidates %d; want %d, 2", savedMs, tp.cands, saved.UnixMilli())
	}
	if again := tp.encode(nil, saved); !bytes.Equal(again, data) {
		t.Fatalf("re-encoded state differs:\n%x\n%x", again, data)
	}
	for _, bad := range [][]byte{data[:len(data)-1], append(bytes.Clone(data), 0), {}, {2}} {
		if _, _, err := decodeState(bad, 0, partitions); err == nil {
			t.Errorf("decodeState(%x…) = nil error, want one", bad[:min(len(bad), 8)])
		}
	}
	if _, _, err := decodeState(data, 1, partitions); err == nil {
		t.Error("decodeState of partition 0's state as partition 1's: nil error, want items of another partition")
	}
	if os.Getenv("EDGECOUNT_WRITE_SEED") != "" { // regenerates the fuzz seed
		dir := filepath.Join("testdata", "fuzz", "FuzzDecodeTrendingState")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		seed := []byte("go test fuzz v1\n[]byte(" + quote(data) + ")\n")
		if err := os.WriteFile(filepath.Join(dir, "sample"), seed, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func quote(b []byte) string {
	var buf bytes.Buffer
	buf.WriteByte('"')
	for _, c := range b {
		buf.WriteString(`\x`)
		buf.WriteByte("0123456789abcdef"[c>>4])
		buf.WriteByte("0123456789abcdef"[c&15])
	}
	buf.WriteByte('"')
	return buf.String()
}

// FuzzDecodeTrendingState: no input crashes the decoder, and whatever it
// accepts encodes back to a state that decodes to the same encoding.
func FuzzDecodeTrendingState(f *testing.F) {
	const partitions = 4
	f.Add(sampleState(partitions).encode(nil, time.UnixMilli(1)))
	f.Fuzz(func(t *testing.T, data []byte) {
		tp, savedMs, err := decodeState(data, 0, partitions)
		if err != nil {
			return
		}
		enc := tp.encode(nil, time.UnixMilli(savedMs))
		tp2, _, err := decodeState(enc, 0, partitions)
		if err != nil {
			t.Fatalf("re-encoded state does not decode: %v", err)
		}
		if again := tp2.encode(nil, time.UnixMilli(savedMs)); !bytes.Equal(again, enc) {
			t.Fatalf("encoding not stable")
		}
	})
}
