package wal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(crashChildEnv) != "" {
		os.Exit(crashChild())
	}
	goleak.VerifyTestMain(m)
}

// testConfig is a small log: 4 KiB segments, so that a few dozen records
// rotate.
func testConfig(dir string) Config {
	cfg := DefaultConfig()
	cfg.Dir = dir
	cfg.SegmentBytes = 4 << 10
	cfg.MaxBytes = 1 << 20
	cfg.MaxRecordBytes = 1 << 10
	return cfg
}

func openLog(t *testing.T, cfg Config) (*Log, Recovery) {
	t.Helper()
	l, rec, err := Open(cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l, rec
}

func closeLog(t *testing.T, l *Log) {
	t.Helper()
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

type entry struct {
	index   uint64
	payload string
}

func replayAll(t *testing.T, l *Log, from uint64) []entry {
	t.Helper()
	var got []entry
	err := l.Replay(from, func(index uint64, payload []byte) error {
		got = append(got, entry{index, string(payload)})
		return nil
	})
	if err != nil {
		t.Fatalf("Replay: %v", err)
	}
	return got
}

// payloadOf is record i's payload; lengths vary from 0 to 299 bytes.
func payloadOf(i int) []byte {
	return []byte(fmt.Sprintf("record-%d-%s", i, strings.Repeat("x", (i*37)%290)))
}

// appendN appends payloadOf(from) … payloadOf(from+n-1) and returns the
// entries.
func appendN(t *testing.T, l *Log, from, n int) []entry {
	t.Helper()
	var out []entry
	for i := from; i < from+n; i++ {
		p := payloadOf(i)
		idx, err := l.Append(context.Background(), p)
		if err != nil {
			t.Fatalf("Append %d: %v", i, err)
		}
		out = append(out, entry{idx, string(p)})
	}
	return out
}

func checkEntries(t *testing.T, got, want []entry) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("replayed %d records, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("record %d: got index %d %.20q…, want index %d %.20q…", i, got[i].index, got[i].payload, want[i].index, want[i].payload)
		}
	}
}

func segFiles(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*"+segSuffix))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(m)
	return m
}

// fileBytes is the size of dir's segment files together.
func fileBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	for _, f := range segFiles(t, dir) {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		n += fi.Size()
	}
	return n
}

func TestRoundTrip(t *testing.T) {
	for _, d := range []Durability{Fsync, Interval} {
		t.Run(string(d), func(t *testing.T) {
			cfg := testConfig(t.TempDir())
			cfg.Durability = d
			l, rec := openLog(t, cfg)
			if rec.First != 1 || rec.Next != 1 || rec.Records != 0 || len(rec.Problems) != 0 {
				t.Fatalf("fresh log: got %+v, want First 1, Next 1, no records, no problems", rec)
			}
			want := appendN(t, l, 0, 100)
			for i, e := range want {
				if e.index != uint64(i+1) {
					t.Fatalf("append %d got index %d, want %d", i, e.index, i+1)
				}
			}
			checkEntries(t, replayAll(t, l, 0), want)
			checkEntries(t, replayAll(t, l, 60), want[59:])
			st := l.Stats()
			if st.Segments < 3 || st.Appended != 100 || st.NextIndex != 101 || st.Unacknowledged != 100 {
				t.Fatalf("stats: got %+v, want ≥ 3 segments, 100 appended, next 101, 100 unacknowledged", st)
			}
			var onDisk int64
			for _, f := range segFiles(t, cfg.Dir) {
				fi, err := os.Stat(f)
				if err != nil {
					t.Fatal(err)
				}
				if fi.Size() > cfg.SegmentBytes {
					t.Errorf("%s has %d bytes, over the segment size %d", f, fi.Size(), cfg.SegmentBytes)
				}
				onDisk += fi.Size()
			}
			if onDisk != st.Bytes {
				t.Errorf("Stats.Bytes = %d, files hold %d", st.Bytes, onDisk)
			}
		})
	}
}

func TestAppendBatch(t *testing.T) {
	l, _ := openLog(t, testConfig(t.TempDir()))
	ctx := context.Background()
	first, err := l.AppendBatch(ctx, [][]byte{[]byte("a"), {}, []byte("c")})
	if err != nil || first != 1 {
		t.Fatalf("AppendBatch: got %d, %v, want 1, nil", first, err)
	}
	if next, err := l.AppendBatch(ctx, nil); err != nil || next != 4 {
		t.Fatalf("empty AppendBatch: got %d, %v, want 4, nil", next, err)
	}
	if _, err := l.AppendBatch(ctx, [][]byte{[]byte("ok"), make([]byte, 2<<10)}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("AppendBatch with a large payload: got %v, want ErrTooLarge", err)
	}
	checkEntries(t, replayAll(t, l, 0), []entry{{1, "a"}, {2, ""}, {3, "c"}})
}

func TestReopenReplays(t *testing.T) {
	cfg := testConfig(t.TempDir())
	l, _ := openLog(t, cfg)
	want := appendN(t, l, 0, 40)
	closeLog(t, l)

	l, rec := openLog(t, cfg)
	if rec.First != 1 || rec.Next != 41 || rec.Records != 40 || len(rec.Problems) != 0 {
		t.Fatalf("reopen: got %+v, want First 1, Next 41, 40 records, no problems", rec)
	}
	checkEntries(t, replayAll(t, l, 0), want)
	want = append(want, appendN(t, l, 40, 5)...)
	if want[40].index != 41 {
		t.Fatalf("first append after reopen got index %d, want 41", want[40].index)
	}
	closeLog(t, l)

	l, rec = openLog(t, cfg)
	checkEntries(t, replayAll(t, l, 0), want)
	if st := l.Stats(); st.Recovered != 45 || st.Replayed != 45 {
		t.Fatalf("stats: got Recovered %d, Replayed %d, want 45, 45", st.Recovered, st.Replayed)
	}
	if _, _, err := Open(cfg); !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open of one directory: got %v, want ErrLocked", err)
	}
}

func TestTruncateAcrossRestarts(t *testing.T) {
	cfg := testConfig(t.TempDir())
	l, _ := openLog(t, cfg)
	all := appendN(t, l, 0, 60)
	files := segFiles(t, cfg.Dir)
	if len(files) < 3 {
		t.Fatalf("%d segments, want ≥ 3", len(files))
	}
	second, _ := parseSegName(filepath.Base(files[1]))
	// ack is inside the second segment, which also holds acknowledged
	// records; the first segment holds only acknowledged ones.
	ack := second + 3
	if err := l.TruncateBefore(ack); err != nil {
		t.Fatalf("TruncateBefore: %v", err)
	}
	if err := l.TruncateBefore(ack - 1); err != nil {
		t.Fatalf("TruncateBefore below the truncation point: %v", err)
	}
	if err := l.TruncateBefore(62); err == nil {
		t.Fatal("TruncateBefore past the next index: got nil, want an error")
	}
	checkEntries(t, replayAll(t, l, 0), all[ack-1:])
	if got := segFiles(t, cfg.Dir); !slices.Equal(got, files[1:]) {
		t.Fatalf("segment files after TruncateBefore(%d): got %v, want %v", ack, got, files[1:])
	}
	closeLog(t, l)

	l, rec := openLog(t, cfg)
	if rec.First != ack || rec.Next != 61 || rec.Records != int64(61-ack) {
		t.Fatalf("reopen: got %+v, want First %d, Next 61, %d records", rec, ack, 61-ack)
	}
	checkEntries(t, replayAll(t, l, 0), all[ack-1:])
	checkEntries(t, replayAll(t, l, ack+5), all[ack+4:])
	if err := l.TruncateBefore(61); err != nil {
		t.Fatal(err)
	}
	if st := l.Stats(); st.Unacknowledged != 0 || !st.OldestAppended.IsZero() {
		t.Fatalf("all acknowledged: got %d unacknowledged, oldest %v, want 0, zero", st.Unacknowledged, st.OldestAppended)
	}
	closeLog(t, l)

	l, rec = openLog(t, cfg)
	if rec.First != 61 || rec.Next != 61 || rec.Records != 0 {
		t.Fatalf("reopen after truncating all: got %+v, want First 61, Next 61, no records", rec)
	}
	if n := len(segFiles(t, cfg.Dir)); n != 0 {
		t.Fatalf("%d segment files, want none before the first append", n)
	}
	if got := appendN(t, l, 60, 1); got[0].index != 61 {
		t.Fatalf("append after truncating all got index %d, want 61", got[0].index)
	}
}

// TestTruncateCrashBeforeRemove: the meta file moved on but the old segments
// are still there (a crash inside TruncateBefore). Open replays from the
// truncation point and removes them.
func TestTruncateCrashBeforeRemove(t *testing.T) {
	cfg := testConfig(t.TempDir())
	l, _ := openLog(t, cfg)
	all := appendN(t, l, 0, 60)
	closeLog(t, l)
	m, err := openMeta(cfg.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.write(header{id: m.cur.id, n: 40}); err != nil {
		t.Fatal(err)
	}
	if err := m.close(); err != nil {
		t.Fatal(err)
	}
	l, rec := openLog(t, cfg)
	if rec.First != 40 || rec.Records != 21 {
		t.Fatalf("got %+v, want First 40, 21 records", rec)
	}
	checkEntries(t, replayAll(t, l, 0), all[39:])
	for _, f := range segFiles(t, cfg.Dir) {
		first, _ := parseSegName(filepath.Base(f))
		if next := nextSegFirst(t, cfg.Dir, f); first < 40 && next <= 40 {
			t.Errorf("%s holds only acknowledged records and is still there", f)
		}
	}
}

func nextSegFirst(t *testing.T, dir, f string) uint64 {
	t.Helper()
	files := segFiles(t, dir)
	i := slices.Index(files, f)
	if i+1 == len(files) {
		return ^uint64(0)
	}
	n, _ := parseSegName(filepath.Base(files[i+1]))
	return n
}

// onlySegment returns the one segment file of a log closed after its first
// session, and its bytes.
func onlySegment(t *testing.T, dir string) (string, []byte) {
	t.Helper()
	files := segFiles(t, dir)
	if len(files) != 1 {
		t.Fatalf("%d segment files, want 1", len(files))
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	return files[0], b
}

// copyDir copies the regular files of src to a new directory.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o640); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

func TestTornTailAtEveryOffset(t *testing.T) {
	src := t.TempDir()
	cfg := testConfig(src)
	l, _ := openLog(t, cfg)
	want := appendN(t, l, 0, 3)
	closeLog(t, l)
	seg, data := onlySegment(t, src)
	lastStart := int64(len(data)) - recordSize(len(want[2].payload))

	for cut := lastStart; cut < int64(len(data)); cut++ {
		dir := copyDir(t, src)
		path := filepath.Join(dir, filepath.Base(seg))
		if err := os.Truncate(path, cut); err != nil {
			t.Fatal(err)
		}
		cfg := testConfig(dir)
		cfg.Durability = Interval // nothing here needs the fsyncs
		l, rec, err := Open(cfg)
		if err != nil {
			t.Fatalf("cut at %d: Open: %v", cut, err)
		}
		got := replayAll(t, l, 0)
		checkEntries(t, got, want[:2])
		wantProblems := 1
		if cut == lastStart {
			wantProblems = 0 // a clean end after record 2
		}
		if len(rec.Problems) != wantProblems || (wantProblems == 1 && rec.Problems[0].Kind != TornTail) {
			t.Fatalf("cut at %d: got problems %v, want %d torn tail", cut, rec.Problems, wantProblems)
		}
		if wantProblems == 1 && (rec.Problems[0].Offset != lastStart || rec.Problems[0].After != 2) {
			t.Fatalf("cut at %d: got %v, want offset %d after index 2", cut, rec.Problems[0], lastStart)
		}
		if st := l.Stats(); st.TornTails != wantProblems || rec.Next != 3 {
			t.Fatalf("cut at %d: got %d torn tails, next %d, want %d, 3", cut, st.TornTails, rec.Next, wantProblems)
		}
		if wantProblems == 1 {
			kept, err := os.ReadFile(path + tornSuffix)
			if err != nil || !bytes.Equal(kept, data[lastStart:cut]) {
				t.Fatalf("cut at %d: the torn bytes were not kept in %s (%v)", cut, path+tornSuffix, err)
			}
		}
		// The tail is cut off the file: appending and reopening report nothing.
		if _, err := l.Append(context.Background(), []byte("after")); err != nil {
			t.Fatal(err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		l, rec, err = Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if len(rec.Problems) != 0 {
			t.Fatalf("cut at %d, second open: got problems %v, want none", cut, rec.Problems)
		}
		checkEntries(t, replayAll(t, l, 0), append(want[:2:2], entry{3, "after"}))
		// Acknowledging everything removes the segment and its torn bytes.
		if err := l.TruncateBefore(4); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(path + tornSuffix); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("cut at %d: %s is still there after TruncateBefore (%v)", cut, path+tornSuffix, err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestZeroTail: a crash can leave the file longer with zeros at the end.
func TestZeroTail(t *testing.T) {
	cfg := testConfig(t.TempDir())
	l, _ := openLog(t, cfg)
	want := appendN(t, l, 0, 3)
	closeLog(t, l)
	seg, data := onlySegment(t, cfg.Dir)
	if err := os.WriteFile(seg, append(data, make([]byte, 300)...), 0o640); err != nil {
		t.Fatal(err)
	}
	l, rec := openLog(t, cfg)
	if len(rec.Problems) != 1 || rec.Problems[0].Kind != TornTail || rec.Problems[0].Bytes != 300 {
		t.Fatalf("got problems %v, want one torn tail of 300 bytes", rec.Problems)
	}
	checkEntries(t, replayAll(t, l, 0), want)
}

// isPrefix reports whether got is want[:len(got)].
func isPrefix(got, want []entry) bool {
	return len(got) <= len(want) && slices.Equal(got, want[:len(got)])
}

// TestFlippedBytes flips every byte of every record of a segment, one at a
// time: the damage is reported, the records before it are replayed and
// nothing else.
func TestFlippedBytes(t *testing.T) {
	src := t.TempDir()
	cfg := testConfig(src)
	l, _ := openLog(t, cfg)
	var want []entry
	for i := range 4 {
		p := fmt.Sprintf("record %d, twenty-six bytes", i)
		idx, err := l.Append(context.Background(), []byte(p))
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, entry{idx, p})
	}
	closeLog(t, l)
	seg, data := onlySegment(t, src)
	// starts[i] is where record i begins.
	starts := []int64{headerSize}
	for _, e := range want {
		starts = append(starts, starts[len(starts)-1]+recordSize(len(e.payload)))
	}

	dir := t.TempDir()
	cfg = testConfig(dir)
	cfg.Durability = Interval
	for off := int64(headerSize); off < int64(len(data)); off++ {
		rec := 0 // the record the flipped byte is in
		for starts[rec+1] <= off {
			rec++
		}
		b := bytes.Clone(data)
		b[off] ^= 0x5a
		writeFresh(t, src, dir, filepath.Base(seg), b)
		l, r, err := Open(cfg)
		if err != nil {
			t.Fatalf("flip at %d: Open: %v", off, err)
		}
		if st, files := l.Stats(), fileBytes(t, dir); st.Bytes != files {
			t.Fatalf("flip at %d: Stats.Bytes = %d, the segment files hold %d", off, st.Bytes, files)
		}
		got := replayAll(t, l, 0)
		if !isPrefix(got, want) || len(got) != rec {
			t.Fatalf("flip at %d (record %d): replayed %d records %v, want the first %d", off, rec, len(got), got, rec)
		}
		if len(r.Problems) != 1 || r.Problems[0].Offset != starts[rec] {
			t.Fatalf("flip at %d (record %d): got problems %v, want one at offset %d", off, rec, r.Problems, starts[rec])
		}
		// Damage in the last record is indistinguishable from a torn write.
		// A changed length field can point past the end of the file (torn)
		// or short of it (corrupt), whatever the record.
		wantKind := CorruptRecord
		if rec == len(want)-1 {
			wantKind = TornTail
		}
		inLength := off >= starts[rec]+4 && off < starts[rec]+8
		if k := r.Problems[0].Kind; k != wantKind && !inLength {
			t.Fatalf("flip at %d (record %d): got %v, want %v", off, rec, r.Problems[0], wantKind)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// writeFresh empties dir, copies src's meta file into it and writes one
// segment file.
func writeFresh(t *testing.T, src, dir, name string, seg []byte) {
	t.Helper()
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	meta, err := os.ReadFile(filepath.Join(src, metaName))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, metaName), meta, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), seg, 0o640); err != nil {
		t.Fatal(err)
	}
}

// TestCorruptMiddleSegment: damage in an older segment loses the rest of that
// segment only; later segments replay.
func TestCorruptMiddleSegment(t *testing.T) {
	cfg := testConfig(t.TempDir())
	l, _ := openLog(t, cfg)
	all := appendN(t, l, 0, 60)
	closeLog(t, l)
	files := segFiles(t, cfg.Dir)
	if len(files) < 3 {
		t.Fatalf("%d segments, want ≥ 3", len(files))
	}
	victim := files[1]
	b, err := os.ReadFile(victim)
	if err != nil {
		t.Fatal(err)
	}
	b[headerSize+recHeaderSize+2] ^= 1 // the first record's payload
	if err := os.WriteFile(victim, b, 0o640); err != nil {
		t.Fatal(err)
	}
	first, _ := parseSegName(filepath.Base(victim))
	next, _ := parseSegName(filepath.Base(files[2]))

	l, rec := openLog(t, cfg)
	if len(rec.Problems) != 1 || rec.Problems[0].Kind != CorruptRecord {
		t.Fatalf("got problems %v, want one corrupt record", rec.Problems)
	}
	var want []entry
	for _, e := range all {
		if e.index < first || e.index >= next {
			want = append(want, e)
		}
	}
	checkEntries(t, replayAll(t, l, 0), want)
	if st := l.Stats(); st.CorruptRecords != 1 || st.DroppedBytes != int64(len(b)-headerSize) {
		t.Fatalf("stats: got %d corrupt, %d bytes dropped, want 1, %d", st.CorruptRecords, st.DroppedBytes, len(b)-headerSize)
	}
	if rec.Next != 61 {
		t.Fatalf("next index %d, want 61", rec.Next)
	}
}

func TestForeignSegment(t *testing.T) {
	cfgA, cfgB := testConfig(t.TempDir()), testConfig(t.TempDir())
	a, _ := openLog(t, cfgA)
	want := appendN(t, a, 0, 3)
	closeLog(t, a)
	b, _ := openLog(t, cfgB)
	appendN(t, b, 100, 10)
	closeLog(t, b)

	// B's segment, named to sort after A's: it would replay as indexes 4….
	_, data := onlySegment(t, cfgB.Dir)
	binaryPutFirst(data, 4)
	name := segName(4)
	if err := os.WriteFile(filepath.Join(cfgA.Dir, name), data, 0o640); err != nil {
		t.Fatal(err)
	}
	a, rec := openLog(t, cfgA)
	if len(rec.Problems) != 1 || rec.Problems[0].Kind != ForeignSegment || rec.Problems[0].File != name {
		t.Fatalf("got problems %v, want a foreign segment %s", rec.Problems, name)
	}
	checkEntries(t, replayAll(t, a, 0), want)
	if _, err := os.Stat(filepath.Join(cfgA.Dir, name+".foreign")); err != nil {
		t.Fatalf("the foreign segment was not set aside: %v", err)
	}
	if st := a.Stats(); st.ForeignSegments != 1 {
		t.Fatalf("got %d foreign segments in Stats, want 1", st.ForeignSegments)
	}
}

// binaryPutFirst rewrites a segment header's first index (and its checksum)
// so that only the log id tells it apart.
func binaryPutFirst(seg []byte, first uint64) {
	h, err := decodeHeader(seg, segMagic)
	if err != nil {
		panic(err)
	}
	h.n = first
	copy(seg, appendHeader(nil, segMagic, h))
}

func TestBadSegmentHeader(t *testing.T) {
	cfg := testConfig(t.TempDir())
	l, _ := openLog(t, cfg)
	appendN(t, l, 0, 3)
	closeLog(t, l)
	seg, data := onlySegment(t, cfg.Dir)
	data[20] ^= 0xff // inside the log id
	if err := os.WriteFile(seg, data, 0o640); err != nil {
		t.Fatal(err)
	}
	l, rec := openLog(t, cfg)
	if len(rec.Problems) != 1 || rec.Problems[0].Kind != BadSegment {
		t.Fatalf("got problems %v, want a bad segment header", rec.Problems)
	}
	if got := replayAll(t, l, 0); len(got) != 0 {
		t.Fatalf("replayed %v, want nothing", got)
	}
	if rec.Next <= 1 {
		t.Fatalf("next index %d: the unreadable segment's first index 1 is handed out again", rec.Next)
	}
}

// TestMetaFile: a torn update of the meta file spoils one slot, and the
// other still holds a truncation point; with both slots or the file gone,
// Open refuses rather than replay acknowledged records.
func TestMetaFile(t *testing.T) {
	cfg := testConfig(t.TempDir())
	l, _ := openLog(t, cfg)
	all := appendN(t, l, 0, 10)
	for _, i := range []uint64{3, 5, 8} {
		if err := l.TruncateBefore(i); err != nil {
			t.Fatal(err)
		}
	}
	closeLog(t, l)
	meta := filepath.Join(cfg.Dir, metaName)
	good, err := os.ReadFile(meta)
	if err != nil {
		t.Fatal(err)
	}
	// Slot 1 holds 8 (3, 5, 8 went to slots 1, 0, 1); spoiling it leaves 5.
	tests := []struct {
		name      string
		spoil     []int // byte offsets to flip
		wantFirst uint64
	}{
		{"intact", nil, 8},
		{"current slot torn", []int{headerSize + 30}, 5},
		{"other slot torn", []int{30}, 8},
		{"both slots", []int{30, headerSize + 30}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := bytes.Clone(good)
			for _, off := range tt.spoil {
				b[off] ^= 1
			}
			if err := os.WriteFile(meta, b, 0o640); err != nil {
				t.Fatal(err)
			}
			l, rec, err := Open(cfg)
			if tt.wantFirst == 0 {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("got %v, want ErrCorrupt", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			if rec.First != tt.wantFirst {
				t.Fatalf("truncation point %d, want %d", rec.First, tt.wantFirst)
			}
			checkEntries(t, replayAll(t, l, 0), all[tt.wantFirst-1:])
		})
	}
	if err := os.Remove(meta); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Open(cfg); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("no meta file: got %v, want ErrCorrupt", err)
	}
}

func TestBudget(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.MaxBytes = 2 * cfg.SegmentBytes
	l, _ := openLog(t, cfg)
	ctx := context.Background()
	p := bytes.Repeat([]byte("b"), 200)
	var acked []entry
	full := func() int {
		for i := 0; ; i++ {
			idx, err := l.Append(ctx, p)
			if errors.Is(err, ErrFull) {
				return i
			}
			if err != nil {
				t.Fatal(err)
			}
			acked = append(acked, entry{idx, string(p)})
		}
	}
	n := full()
	if n == 0 {
		t.Fatal("the log was full at once")
	}
	var onDisk int64
	for _, f := range segFiles(t, cfg.Dir) {
		fi, _ := os.Stat(f)
		onDisk += fi.Size()
	}
	if onDisk > cfg.MaxBytes {
		t.Fatalf("%d bytes on disk, over the budget %d", onDisk, cfg.MaxBytes)
	}
	if st := l.Stats(); st.Full != 1 || st.Bytes != onDisk {
		t.Fatalf("stats: got Full %d, Bytes %d, want 1, %d", st.Full, st.Bytes, onDisk)
	}
	// Acknowledge all but the last 3; the log makes room.
	ack := acked[len(acked)-3].index
	if err := l.TruncateBefore(ack); err != nil {
		t.Fatal(err)
	}
	acked = acked[len(acked)-3:]
	if m := full(); m == 0 {
		t.Fatal("still full after TruncateBefore")
	}
	// Acknowledge everything, twice over: the active segment is rotated
	// out too, so the whole budget is free again.
	for range 2 {
		if err := l.TruncateBefore(l.Stats().NextIndex); err != nil {
			t.Fatal(err)
		}
		acked = nil
		full()
	}
	closeLog(t, l)
	l, rec := openLog(t, cfg)
	if int(rec.Records) != len(acked) {
		t.Fatalf("reopen: %d records, want %d", rec.Records, len(acked))
	}
	checkEntries(t, replayAll(t, l, 0), acked)
}

func TestConcurrentAppends(t *testing.T) {
	for _, d := range []Durability{Fsync, Interval} {
		t.Run(string(d), func(t *testing.T) {
			cfg := testConfig(t.TempDir())
			cfg.Durability = d
			cfg.SyncInterval = time.Millisecond
			l, _ := openLog(t, cfg)
			const workers, each = 16, 150
			var mu sync.Mutex
			acked := map[uint64]string{}
			var wg sync.WaitGroup
			for w := range workers {
				wg.Go(func() {
					for i := range each {
						p := fmt.Sprintf("w%d-%d", w, i)
						idx, err := l.Append(context.Background(), []byte(p))
						if err != nil {
							t.Errorf("Append: %v", err)
							return
						}
						mu.Lock()
						if old, dup := acked[idx]; dup {
							t.Errorf("index %d given to %q and %q", idx, old, p)
						}
						acked[idx] = p
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			st := l.Stats()
			closeLog(t, l)
			if d == Fsync && st.Fsyncs >= workers*each {
				t.Logf("no group commit: %d fsyncs for %d appends", st.Fsyncs, workers*each)
			}
			l, _ = openLog(t, cfg)
			seen := map[string]bool{}
			for _, e := range replayAll(t, l, 0) {
				if seen[e.payload] {
					t.Fatalf("%q replayed twice", e.payload)
				}
				seen[e.payload] = true
				if acked[e.index] != e.payload {
					t.Fatalf("index %d replayed %q, was acknowledged as %q", e.index, e.payload, acked[e.index])
				}
			}
			if len(seen) != len(acked) {
				t.Fatalf("replayed %d records, %d were acknowledged", len(seen), len(acked))
			}
		})
	}
}

// TestGroupCommit: appends that arrive during an fsync share the next one.
func TestGroupCommit(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.MaxBytes = 64 << 20
	cfg.SegmentBytes = 16 << 20
	l, _ := openLog(t, cfg)
	const workers, each = 16, 50
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				if _, err := l.Append(context.Background(), []byte("g")); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	st := l.Stats()
	// One fsync for the active segment's creation, then at most one per
	// group; with 16 writers the groups must be larger than one on average.
	if st.Fsyncs > workers*each/2 {
		t.Fatalf("%d fsyncs for %d appends from %d goroutines: the appends do not share fsyncs", st.Fsyncs, workers*each, workers)
	}
	t.Logf("%d appends, %d fsyncs", workers*each, st.Fsyncs)
}

// TestGroupGathersOneP: with one P (a process pinned to one core), a group
// takes every appender that can run before its commit, not only those the
// scheduler ran during the previous fsync (about half of them).
func TestGroupGathersOneP(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	cfg := testConfig(t.TempDir())
	cfg.MaxBytes = 64 << 20
	cfg.SegmentBytes = 16 << 20
	l, _ := openLog(t, cfg)
	const workers, each = 32, 40
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				if _, err := l.Append(context.Background(), []byte("g")); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	st := l.Stats()
	perFsync := float64(st.Appended) / float64(st.Fsyncs)
	t.Logf("%d appends, %d fsyncs: %.1f records per fsync", st.Appended, st.Fsyncs, perFsync)
	if perFsync < 0.75*workers {
		t.Fatalf("%.1f records per fsync from %d closed-loop writers on one P: the groups do not gather the runnable appenders", perFsync, workers)
	}
}

func TestContext(t *testing.T) {
	l, _ := openLog(t, testConfig(t.TempDir()))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.Append(ctx, []byte("x")); !errors.Is(err, context.Canceled) {
		t.Fatalf("Append with a cancelled context: got %v, want context.Canceled", err)
	}
	if got := replayAll(t, l, 0); len(got) != 0 {
		t.Fatalf("replayed %v, want nothing", got)
	}
}

func TestClosed(t *testing.T) {
	cfg := testConfig(t.TempDir())
	l, _ := openLog(t, cfg)
	closeLog(t, l)
	closeLog(t, l) // idempotent
	if _, err := l.Append(context.Background(), []byte("x")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close: got %v, want ErrClosed", err)
	}
	if err := l.TruncateBefore(1); !errors.Is(err, ErrClosed) {
		t.Fatalf("TruncateBefore after Close: got %v, want ErrClosed", err)
	}
}

func TestDurabilityNone(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Durability = None
	l, rec := openLog(t, cfg)
	if rec.Next != 1 {
		t.Fatalf("got %+v, want Next 1", rec)
	}
	ctx := context.Background()
	for i := uint64(1); i <= 3; i++ {
		if idx, err := l.Append(ctx, []byte("x")); err != nil || idx != i {
			t.Fatalf("Append: got %d, %v, want %d, nil", idx, err, i)
		}
	}
	if got := replayAll(t, l, 0); len(got) != 0 {
		t.Fatalf("replayed %v, want nothing", got)
	}
	if st := l.Stats(); st.Unacknowledged != 3 || st.OldestAppended.IsZero() {
		t.Fatalf("stats: got %+v, want 3 unacknowledged with an age", st)
	}
	if err := l.TruncateBefore(4); err != nil {
		t.Fatal(err)
	}
	if st := l.Stats(); st.Unacknowledged != 0 || st.Fsyncs != 0 {
		t.Fatalf("stats: got %+v, want 0 unacknowledged, no fsync", st)
	}
}

func TestOldestUnacknowledged(t *testing.T) {
	l, _ := openLog(t, testConfig(t.TempDir()))
	t0 := time.Now()
	appendN(t, l, 0, 3)
	time.Sleep(time.Duration(3 * ageResolution / 2))
	t1 := time.Now()
	appendN(t, l, 3, 3)
	st := l.Stats()
	if st.FirstIndex != 1 || st.OldestAppended.Before(t0.Add(-time.Millisecond)) || st.OldestAppended.After(t1) {
		t.Fatalf("got first %d appended %v, want 1 appended in [%v, %v]", st.FirstIndex, st.OldestAppended, t0, t1)
	}
	if err := l.TruncateBefore(5); err != nil {
		t.Fatal(err)
	}
	st = l.Stats()
	if st.FirstIndex != 5 || st.Unacknowledged != 2 || st.OldestAppended.Before(t1.Add(-time.Duration(ageResolution))) {
		t.Fatalf("got first %d, %d unacknowledged, appended %v, want 5, 2, at most 10 ms before %v", st.FirstIndex, st.Unacknowledged, st.OldestAppended, t1)
	}
}

func TestConfigValidate(t *testing.T) {
	ok := DefaultConfig()
	ok.Dir = "x"
	if err := ok.Validate(); err != nil {
		t.Fatalf("DefaultConfig with a Dir: %v", err)
	}
	tests := []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"durability", func(c *Config) { c.Durability = "sometimes" }, "durability"},
		{"dir", func(c *Config) { c.Dir = "" }, "dir"},
		{"interval", func(c *Config) { c.Durability, c.SyncInterval = Interval, 0 }, "sync interval"},
		{"segment", func(c *Config) { c.SegmentBytes = 100 }, "segment bytes"},
		{"budget", func(c *Config) { c.MaxBytes = c.SegmentBytes }, "max bytes"},
		{"record", func(c *Config) { c.MaxRecordBytes = int(c.SegmentBytes) }, "max record bytes"},
		{"record zero", func(c *Config) { c.MaxRecordBytes = 0 }, "max record bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ok
			tt.edit(&c)
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error about %s", err, tt.want)
			}
			if _, _, oerr := Open(c); oerr == nil {
				t.Fatal("Open accepted it")
			}
		})
	}
	none := Config{Durability: None}
	if err := none.Validate(); err != nil {
		t.Fatalf("None needs nothing else: %v", err)
	}
	for _, s := range []string{"fsync", "interval", "none"} {
		if d, err := ParseDurability(s); err != nil || string(d) != s {
			t.Fatalf("ParseDurability(%q) = %q, %v", s, d, err)
		}
	}
}

// TestCheckpoint: what Checkpoint's fn sees applied is exactly the records
// below the index it is given, while AppendApply runs from many goroutines.
func TestCheckpoint(t *testing.T) {
	for _, d := range []Durability{Fsync, None} {
		t.Run(string(d), func(t *testing.T) {
			cfg := testConfig(t.TempDir())
			cfg.Durability = d
			l, _ := openLog(t, cfg)
			var mu sync.Mutex
			applied := map[uint64]bool{}
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for range 8 {
				wg.Go(func() {
					for {
						select {
						case <-stop:
							return
						default:
						}
						_, err := l.AppendApply(context.Background(), []byte("c"), func(i uint64) {
							mu.Lock()
							applied[i] = true
							mu.Unlock()
						})
						if err != nil {
							t.Error(err)
							return
						}
					}
				})
			}
			var last uint64
			for range 50 {
				l.Checkpoint(func(next uint64) {
					mu.Lock()
					defer mu.Unlock()
					if len(applied) != int(next-1) {
						t.Errorf("checkpoint at %d: %d records applied, want %d", next, len(applied), next-1)
					}
					for i := last; i < next; i++ {
						if i > 0 && !applied[i] {
							t.Errorf("checkpoint at %d: record %d not applied", next, i)
						}
					}
					last = next
				})
				if err := l.TruncateBefore(last); err != nil {
					t.Fatal(err)
				}
				time.Sleep(time.Millisecond)
			}
			close(stop)
			wg.Wait()
			if last < 10 {
				t.Fatalf("only %d records in 50 checkpoints", last)
			}
		})
	}
}

// TestIntervalSyncs: in Interval mode the background fsync runs after a write.
func TestIntervalSyncs(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.Durability = Interval
	cfg.SyncInterval = 5 * time.Millisecond
	l, _ := openLog(t, cfg)
	appendN(t, l, 0, 1)
	before := l.Stats().Fsyncs // the new segment's
	appendN(t, l, 1, 1)
	// A background fsync that began before the second append's write
	// leaves it dirty (the first append had marked it): wait for one that
	// clears the mark, as the next tick's does. Nothing else syncs in
	// Interval mode, so an fsync counted and the mark cleared is the loop's.
	deadline := time.Now().Add(5 * time.Second)
	for l.Stats().Fsyncs == before || l.dirty.Load() {
		if time.Now().After(deadline) {
			t.Fatalf("within 5 s (SyncInterval %v): %d background fsyncs, log still marked dirty: %v",
				cfg.SyncInterval, l.Stats().Fsyncs-before, l.dirty.Load())
		}
		time.Sleep(time.Millisecond)
	}
}
