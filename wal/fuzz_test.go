package wal

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// validSegmentBody is the records of a healthy segment, after its header.
func validSegmentBody(first uint64, payloads ...string) []byte {
	var b []byte
	for i, p := range payloads {
		b = appendRecord(b, first+uint64(i), 1_700_000_000_000_000_000+int64(i), []byte(p))
	}
	return b
}

// FuzzRecordReader feeds any bytes to the record decoder: it must not panic,
// and what it returns must be exactly records re-encodable to the prefix it
// consumed, with consecutive indexes from first.
func FuzzRecordReader(f *testing.F) {
	body := validSegmentBody(7, "a", "", "hello, world", string(bytes.Repeat([]byte("z"), 300)))
	f.Add(body, uint64(7))
	f.Add(body[:len(body)-3], uint64(7))
	f.Add(body, uint64(8))
	flipped := bytes.Clone(body)
	flipped[30] ^= 1
	f.Add(flipped, uint64(7))
	f.Add(make([]byte, 64), uint64(0))
	f.Add([]byte{}, uint64(1))
	f.Fuzz(func(t *testing.T, data []byte, first uint64) {
		const maxPayload = 1 << 10
		rr := newRecordReader(bytes.NewReader(data), first, maxPayload, headerSize)
		var re []byte
		want := first
		for {
			rec, err := rr.read()
			if err == io.EOF {
				if rr.off != headerSize+int64(len(data)) {
					t.Fatalf("clean end at %d of %d bytes", rr.off-headerSize, len(data))
				}
				break
			}
			if err != nil {
				if !errors.Is(err, errTorn) && !errors.Is(err, errCorrupt) {
					t.Fatalf("error %v is neither torn nor corrupt", err)
				}
				break
			}
			if rec.index != want || len(rec.payload) > maxPayload {
				t.Fatalf("record index %d with %d bytes, want index %d with at most %d", rec.index, len(rec.payload), want, maxPayload)
			}
			want++
			re = appendRecord(re, rec.index, rec.unixNano, rec.payload)
		}
		if !bytes.Equal(re, data[:rr.off-headerSize]) {
			t.Fatalf("the records read do not re-encode to the %d bytes consumed", rr.off-headerSize)
		}
	})
}

// FuzzOpen opens a log whose directory holds a valid meta file and one
// segment file of any bytes: Open must not panic or fail, replay must give a
// prefix of what a healthy segment would, and the log must take appends.
func FuzzOpen(f *testing.F) {
	id := logID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	good := appendHeader(nil, segMagic, header{id: id, n: 1})
	good = append(good, validSegmentBody(1, "one", "two", "three")...)
	f.Add(good)
	f.Add(good[:len(good)-1])
	f.Add(good[:20])
	other := appendHeader(nil, segMagic, header{id: logID{9}, n: 1})
	f.Add(append(other, good[headerSize:]...))
	f.Add(append(bytes.Clone(good), 0, 0, 0, 0))
	f.Fuzz(func(t *testing.T, seg []byte) {
		dir := t.TempDir()
		if err := createMeta(dir, header{id: id, n: 1}); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, segName(1)), seg, 0o640); err != nil {
			t.Fatal(err)
		}
		cfg := testConfig(dir)
		cfg.Durability = Interval
		l, rec, err := Open(cfg)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		defer l.Close()
		var got [][]byte
		if err := l.Replay(0, func(_ uint64, p []byte) error {
			got = append(got, bytes.Clone(p))
			return nil
		}); err != nil {
			t.Fatalf("Replay: %v", err)
		}
		if int64(len(got)) != rec.Records {
			t.Fatalf("replayed %d records, Open counted %d", len(got), rec.Records)
		}
		idx, err := l.Append(context.Background(), []byte("after"))
		if err != nil {
			t.Fatalf("Append: %v", err)
		}
		if idx != rec.Next {
			t.Fatalf("Append got index %d, Open said %d", idx, rec.Next)
		}
	})
}
