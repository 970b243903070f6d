package cassandra

import (
	"errors"
	"testing"
	"time"

	"github.com/edgecount/edgecount/engagement"
)

// TestClockSkew reads the node's clock: this host's and the node's agree
// (the node runs here), and a store whose clock is shifted by
// Config.ClockOffset sees the shift, which CheckClock refuses beyond its
// limit and accepts within it.
func TestClockSkew(t *testing.T) {
	cfg, s := testKeyspace(t)
	ctx := t.Context()
	skew, bound, err := s.ClockSkew(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if max(skew, -skew) > bound+50*time.Millisecond {
		t.Errorf("skew with a node on this host = %v ± %v; want about 0", skew, bound)
	}
	cfg.ClockOffset = -30 * time.Second
	behind := openStore(t, cfg)
	skew, bound, err = behind.ClockSkew(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := skew + 30*time.Second; max(d, -d) > bound+50*time.Millisecond {
		t.Errorf("skew of a store 30 s behind = %v ± %v; want about -30s", skew, bound)
	}
	if _, err := behind.CheckClock(ctx, 10*time.Second); !errors.Is(err, ErrClockSkew) {
		t.Errorf("CheckClock(10s) of a store 30 s behind = %v; want ErrClockSkew", err)
	}
	if _, err := behind.CheckClock(ctx, time.Minute); err != nil {
		t.Errorf("CheckClock(1m) of a store 30 s behind = %v; want nil", err)
	}
	// Its write timestamps follow its clock: 30 s behind this host's.
	if ts := behind.writeTimestamp(); time.Since(time.UnixMicro(ts)) < 29*time.Second {
		t.Errorf("write timestamp %v of a store 30 s behind; want 30 s ago", time.UnixMicro(ts))
	}
}

// TestWritesFollowTheRowsTheyRead: a store whose clock is 30 s behind the
// one that wrote a row last writes it above that write, once it has read
// it, as a rollup that took a partition over does (it reads the rows and
// the marks before it writes them); before it read the row, its write
// loses, which is what observing the timestamps is for.
func TestWritesFollowTheRowsTheyRead(t *testing.T) {
	cfg, s := testKeyspace(t)
	ctx := t.Context()
	cfg.ClockOffset = -30 * time.Second
	behind := openStore(t, cfg)
	row := func(likes int64) []engagement.Stats {
		return []engagement.Stats{{ContentID: "c", Scope: engagement.GlobalScope, Likes: likes, LastSeq: uint64(likes)}}
	}
	read := func() int64 {
		rows, err := s.ReadStats(ctx, []string{"c"})
		if err != nil || len(rows["c"]) != 1 {
			t.Fatalf("ReadStats = %v, %v", rows, err)
		}
		return rows["c"][0].Likes
	}
	if err := s.WriteStats(ctx, row(1)); err != nil {
		t.Fatal(err)
	}
	if err := behind.WriteStats(ctx, row(2)); err != nil {
		t.Fatal(err)
	}
	if got := read(); got != 1 {
		t.Fatalf("likes = %d after a write 30 s behind that read nothing; want 1 (it loses: the test shows the hazard)", got)
	}
	if _, err := behind.ReadStats(ctx, []string{"c"}); err != nil {
		t.Fatal(err)
	}
	if err := behind.WriteStats(ctx, row(3)); err != nil {
		t.Fatal(err)
	}
	if got := read(); got != 3 {
		t.Fatalf("likes = %d after a write 30 s behind that read the row first; want 3", got)
	}
}
