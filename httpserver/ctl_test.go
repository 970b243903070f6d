package httpserver

import (
	"strings"
	"testing"
)

// TestHasCTL holds the word-at-a-time check to the byte loop it replaces,
// for every byte value at every position of strings around a word's
// length, and for the lanes next to a borrow.
func TestHasCTL(t *testing.T) {
	slow := func(s string) bool {
		for i := 0; i < len(s); i++ {
			if c := s[i]; c < 0x20 || c == 0x7f {
				return true
			}
		}
		return false
	}
	for n := 0; n <= 19; n++ {
		for pos := 0; pos < n; pos++ {
			for c := 0; c < 256; c++ {
				b := []byte(strings.Repeat("a", n))
				b[pos] = byte(c)
				if pos > 0 {
					b[pos-1] = 0x20 // a lane of ' ' before: no borrow into it
				}
				if s := string(b); hasCTL(s) != slow(s) {
					t.Fatalf("hasCTL(%q) = %v", s, hasCTL(s))
				}
			}
		}
	}
	for _, s := range []string{"", "content_id=a&content_id=b", "\x80\xff\x7e\x20\x21", "\x00", strings.Repeat("\x7f", 9), strings.Repeat("\x80", 16) + "\x1f"} {
		if hasCTL(s) != slow(s) {
			t.Errorf("hasCTL(%q) = %v", s, hasCTL(s))
		}
	}
}
