package engagement_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/edgecount/edgecount/engagement"
)

func TestNewTokenCarriesItsSecond(t *testing.T) {
	now := time.Unix(1_800_000_123, 456_000_000)
	seen := make(map[uint64]bool)
	for range 100_000 {
		tok := engagement.NewToken(now)
		if tok == 0 || seen[tok] {
			t.Fatalf("token %x is zero or repeated", tok)
		}
		seen[tok] = true
		if got := engagement.TokenTime(tok); !got.Equal(time.Unix(1_800_000_123, 0)) {
			t.Fatalf("TokenTime = %v, want the second of %v", got, now)
		}
	}
}

// history returns n tokens made at the given ages before now, oldest first.
func history(now time.Time, ages ...time.Duration) []uint64 {
	out := make([]uint64, len(ages))
	for i, a := range ages {
		out[i] = engagement.NewToken(now.Add(-a))
	}
	return out
}

func TestNextWritersKeepsYoungTokens(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	var w []uint64
	for i := range 100 {
		w = engagement.NextWriters(w, engagement.NewToken(now.Add(time.Duration(i)*time.Second)), now.Add(time.Duration(i)*time.Second))
	}
	if len(w) != 100 {
		t.Fatalf("100 writes within %v kept %d tokens, want all 100", engagement.WriterHistory, len(w))
	}
	// Ten minutes and more later, the old ones go, down to MaxWriters.
	later := now.Add(engagement.WriterHistory + 200*time.Second)
	w = engagement.NextWriters(w, engagement.NewToken(later), later)
	if len(w) != engagement.MaxWriters {
		t.Fatalf("after the window: %d tokens, want MaxWriters = %d", len(w), engagement.MaxWriters)
	}
}

func TestNextWritersDropsRandomTokensOfOlderVersions(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	// Random tokens of an older version read as far past or far future.
	w := []uint64{1, 2, 3, 0xffff_ffff_0000_0001, 5, 6, 7, 0xfff0_0000_0000_0000}
	w = engagement.NextWriters(w, engagement.NewToken(now), now)
	if len(w) != engagement.MaxWriters || w[0] != 2 {
		t.Fatalf("writers = %x; want the oldest dropped, %d kept", w, engagement.MaxWriters)
	}
}

func TestNextWritersCapsAtMaxWritersKept(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	w := history(now, make([]time.Duration, engagement.MaxWritersKept)...)
	w = engagement.NextWriters(w, engagement.NewToken(now), now)
	if len(w) != engagement.MaxWritersKept {
		t.Fatalf("len = %d, want the safety cap %d", len(w), engagement.MaxWritersKept)
	}
}

func TestWritersFull(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	young := history(now, make([]time.Duration, engagement.MaxWritersKept-2)...)
	if full, _ := engagement.WritersFull(young, now); full {
		t.Fatalf("%d young tokens: full, want room for one more", len(young))
	}
	young = append(young, engagement.NewToken(now))
	full, wait := engagement.WritersFull(young, now)
	if !full || wait <= 0 || wait > engagement.WriterHistory+time.Second {
		t.Fatalf("%d young tokens: full %v wait %v; want full, wait within the window", len(young), full, wait)
	}
	// The same count of expired tokens leaves room.
	old := history(now, make([]time.Duration, engagement.MaxWritersKept-1)...)
	for i := range old {
		old[i] = engagement.NewToken(now.Add(-engagement.WriterHistory - time.Minute))
	}
	if full, _ := engagement.WritersFull(old, now); full {
		t.Fatal("expired tokens: full, want room")
	}
}

func TestNotWrittenBy(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	mine := engagement.NewToken(now.Add(-time.Minute))
	others := history(now, 50*time.Second, 40*time.Second, 30*time.Second, 20*time.Second, 10*time.Second,
		9*time.Second, 8*time.Second, 7*time.Second, 6*time.Second, 5*time.Second)
	for _, c := range []struct {
		name    string
		writers []uint64
		token   uint64
		at      time.Time
		want    bool
	}{
		{"absent, young, many later writes", others, mine, now, true},
		{"absent, no row", nil, mine, now, true},
		{"present", append(append([]uint64{}, others...), mine), mine, now, false},
		{"absent, old enough to be dropped", others, mine, now.Add(engagement.WriterHistory - engagement.WriterSkew), false},
		{"absent, made in the reader's future", others, engagement.NewToken(now.Add(2 * engagement.WriterSkew)), now, false},
		{"absent, history full", history(now, make([]time.Duration, engagement.MaxWritersKept)...), mine, now, false},
		{"zero token", others, 0, now, false},
	} {
		r := engagement.Reaction{Writers: c.writers}
		if got := r.NotWrittenBy(c.token, c.at); got != c.want {
			t.Errorf("%s: NotWrittenBy = %v, want %v", c.name, got, c.want)
		}
	}
}

// BenchmarkWriterHistory measures what the writer history costs a reaction
// write in the agent, besides its 8 bytes per token kept in the row: the
// check that the row can take a write (WritersFull), the next history
// (NextWriters) and the settle's question (NotWrittenBy), at the history
// a row holds at a human pace (1 token), at MaxWriters, and at the cap.
// The peer is the copy of the history alone, which any row update pays.
func BenchmarkWriterHistory(b *testing.B) {
	now := time.Unix(1_800_000_000, 0)
	for _, n := range []int{1, engagement.MaxWriters, engagement.MaxWritersKept - 2} {
		ages := make([]time.Duration, n)
		for i := range ages {
			ages[i] = time.Duration(n-i) * time.Second
		}
		writers := history(now, ages...)
		r := engagement.Reaction{Writers: writers}
		b.Run(fmt.Sprintf("tokens=%d/history", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				tok := engagement.NewToken(now)
				if full, _ := engagement.WritersFull(writers, now); full {
					b.Fatal("full")
				}
				next := engagement.NextWriters(writers, tok, now)
				if r.NotWrittenBy(tok, now) == false && len(next) == 0 {
					b.Fatal("unreachable")
				}
			}
		})
		b.Run(fmt.Sprintf("tokens=%d/copy", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				out := make([]uint64, len(writers), len(writers)+1)
				copy(out, writers)
				if len(out) != n {
					b.Fatal("copy")
				}
			}
		})
	}
}
