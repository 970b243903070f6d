package engagement

import (
	"strings"
	"testing"
)

// validIDBytes is ValidID one byte at a time, as it was written first.
func validIDBytes(s string) bool {
	if len(s) == 0 || len(s) > MaxIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c > '~' || c == '/' {
			return false
		}
	}
	return true
}

// TestValidIDEveryByte puts every byte value at every position of ids of
// 1 to 24 bytes (a word, a word and a tail, three words) among valid
// neighbours of every kind, and compares ValidID with the byte loop.
func TestValidIDEveryByte(t *testing.T) {
	for _, fill := range []byte{'a', '!', '~', '.', '0', '/' + 1, '/' - 1} {
		for n := 1; n <= 24; n++ {
			b := []byte(strings.Repeat(string(fill), n))
			for i := 0; i < n; i++ {
				for c := 0; c < 256; c++ {
					b[i] = byte(c)
					if got, want := ValidID(string(b)), validIDBytes(string(b)); got != want {
						t.Fatalf("ValidID(%q) = %v, want %v", b, got, want)
					}
				}
				b[i] = fill
			}
		}
	}
	for _, c := range []struct {
		s    string
		want bool
	}{
		{"", false}, {"video-1", true}, {strings.Repeat("x", MaxIDLen), true},
		{strings.Repeat("x", MaxIDLen+1), false}, {"a b", false}, {"a/b", false}, {"é", false},
	} {
		if got := ValidID(c.s); got != c.want {
			t.Errorf("ValidID(%q) = %v, want %v", c.s, got, c.want)
		}
	}
}

// FuzzValidID compares ValidID with the byte loop on any string.
func FuzzValidID(f *testing.F) {
	for _, s := range []string{"video-1", "a/b", "abcdefgh/", "abcdefghi\x7f", "~~~~~~~~ ", "\x80\x80\x80\x80\x80\x80\x80\x80"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := ValidID(s), validIDBytes(s); got != want {
			t.Fatalf("ValidID(%q) = %v, want %v", s, got, want)
		}
	})
}

// BenchmarkValidID checks three ids with ValidID ("words") and with the
// byte loop it replaced ("bytes").
func BenchmarkValidID(b *testing.B) {
	ids := []string{"video-00042", "item-9999", "a-much-longer-content-id-of-41-bytes-here"}
	for _, v := range []struct {
		name  string
		valid func(string) bool
	}{{"words", ValidID}, {"bytes", validIDBytes}} {
		b.Run(v.name, func(b *testing.B) {
			for b.Loop() {
				for _, s := range ids {
					if !v.valid(s) {
						b.Fatal(s)
					}
				}
			}
		})
	}
}
