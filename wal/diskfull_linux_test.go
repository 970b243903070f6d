package wal

import (
	"bytes"
	"context"
	"errors"
	"os"
	"syscall"
	"testing"
)

// TestDiskFull fills a 1 MiB tmpfs: Append returns ErrFull (the write is
// undone, nothing half-written stays), and after TruncateBefore frees space
// the log takes appends again and replays exactly what it acknowledged.
// Mounting needs root; without it the test skips, except under CI=true,
// where it fails so that the skip cannot pass unnoticed.
func TestDiskFull(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("cannot mount a 1 MiB tmpfs on %s (%v): the full-disk test needs root (CAP_SYS_ADMIN)", dir, err)
		}
		t.Skipf("cannot mount a 1 MiB tmpfs on %s (%v): run as root to test a full disk", dir, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("cannot unmount the tmpfs: %v", err)
		}
	})
	cfg := DefaultConfig()
	cfg.Dir = dir
	cfg.SegmentBytes = 64 << 10
	cfg.MaxBytes = 64 << 20 // far over the disk: the disk fills first
	cfg.MaxRecordBytes = 8 << 10
	l, _ := openLog(t, cfg)
	ctx := context.Background()
	p := bytes.Repeat([]byte("d"), 3000) // does not divide the segment size
	var acked []entry
	fill := func() error {
		for {
			idx, err := l.Append(ctx, p)
			if err != nil {
				return err
			}
			acked = append(acked, entry{idx, string(p)})
		}
	}
	if err := fill(); !errors.Is(err, ErrFull) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Append on a full disk: got %v, want ErrFull wrapping ENOSPC", err)
	}
	n := len(acked)
	if n < 100 {
		t.Fatalf("only %d records fit on 1 MiB", n)
	}
	if st := l.Stats(); st.Failed != nil || st.NextIndex != acked[n-1].index+1 {
		t.Fatalf("stats after ENOSPC: got %+v, want not failed, next index %d", st, acked[n-1].index+1)
	}
	if err := fill(); !errors.Is(err, ErrFull) {
		t.Fatalf("second Append on a full disk: got %v, want ErrFull", err)
	}
	keep := acked[n-10:]
	if err := l.TruncateBefore(keep[0].index); err != nil {
		t.Fatalf("TruncateBefore on a full disk: %v", err)
	}
	acked = keep
	if err := fill(); !errors.Is(err, ErrFull) {
		t.Fatalf("Append until full again: got %v, want ErrFull", err)
	}
	if len(acked) < 100 {
		t.Fatalf("only %d records appended after TruncateBefore", len(acked)-10)
	}
	closeLog(t, l)
	l, rec := openLog(t, cfg)
	if len(rec.Problems) != 0 {
		t.Fatalf("problems after a full disk: %v", rec.Problems)
	}
	checkEntries(t, replayAll(t, l, 0), acked)
}
