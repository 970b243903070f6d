package main

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// TestMain also serves as the child process of measureAll: the test binary
// is os.Executable there, run with -n.
func TestMain(m *testing.M) {
	if os.Getenv("EDGECOUNT_SCALE_CHILD") == "1" {
		if err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr); err != nil {
			os.Stderr.WriteString("scale child: " + err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// TestMeasure: one small size through a real agent: every counter is live,
// the warm pass hits the cache for every item, and the one flush carries a
// sum for each counter.
func TestMeasure(t *testing.T) {
	r, err := measure(context.Background(), 5000, 1000, "")
	if err != nil {
		t.Fatal(err)
	}
	if r.LiveCounters != 5000 || r.WarmHits != 1000 || r.FlushSums != 5000 {
		t.Errorf("live %d, warm hits %d, sums %d; want 5000, 1000, 5000", r.LiveCounters, r.WarmHits, r.FlushSums)
	}
	if r.Messages < 1 || r.MessageMiB <= 0 || r.FlushMillis <= 0 {
		t.Errorf("flush: %d messages, %.3f MiB, %.3f ms; want some of each", r.Messages, r.MessageMiB, r.FlushMillis)
	}
	// A counter holds at least its key (a ~10-byte id, a counter name
	// and a region) and a shard; anything past 4 KiB is a leak in the
	// measurement.
	if r.BytesPerCtr < 24 || r.BytesPerCtr > 4096 || r.BytesPerWarm < 24 || r.BytesPerWarm > 4096 {
		t.Errorf("%.0f B per live counter, %.0f B per warm count; want 24..4096", r.BytesPerCtr, r.BytesPerWarm)
	}
	if r.PeakRSSMiB < r.RSSLiveMiB || r.RSSLiveMiB <= 0 {
		t.Errorf("peak RSS %.1f MiB below the live RSS %.1f MiB", r.PeakRSSMiB, r.RSSLiveMiB)
	}
}

// TestRunPlots: the parent runs each size in a child process, prints the
// table and writes a PNG that decodes.
func TestRunPlots(t *testing.T) {
	t.Setenv("EDGECOUNT_SCALE_CHILD", "1")
	out := filepath.Join(t.TempDir(), "scale.png")
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"-sizes", "1e3,3000", "-runs", "2", "-warm", "500", "-png", out}, &stdout, &stderr); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	rows := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if len(rows) != 4 || !strings.HasPrefix(rows[2], "| 10^3 | 2 | ") || !strings.HasPrefix(rows[3], "| 3000 | 2 | ") {
		t.Errorf("table:\n%s\nwant a header and rows for 10^3 and 3000", stdout.String())
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("the plot is not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() < 1000 || b.Dy() < 300 {
		t.Errorf("plot is %v, want at least 1000x300", b)
	}
}

func TestFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-n", "-1"}, "n -1"},
		{[]string{"-n", "10000001"}, "n 10000001"},
		{[]string{"-warm", "-5"}, "warm"},
		{[]string{"-sizes", "1e4,abc"}, `"abc"`},
		{[]string{"-sizes", "1e8"}, "1e8"},
		{[]string{"-sizes", "2.5"}, "2.5"},
		{[]string{"-runs", "0"}, "runs 0"},
		{[]string{"-plot-only"}, "needs -jsonl"},
	} {
		err := run(context.Background(), tc.args, &bytes.Buffer{}, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("run %q = %v, want an error naming %s", tc.args, err, tc.want)
		}
	}
}
