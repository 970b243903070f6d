package httpapi

import (
	"math/bits"

	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/region"
)

// The fast path of the increments decoder. Nearly every increment a client
// sends is plain: an object with the three members once each, in any order,
// strings without escapes, a delta of digits, white space anywhere JSON
// allows it. fastIncrement reads such an object in one pass with its cursor
// in a register, checking the rules as it scans (an id's bytes eight at a
// time). On anything else, valid or not, it gives up and the general
// decoder (decoder.increment) reads the object again from its start: it
// alone decides what is an error and what the error says. So the fast path
// may only accept what the general decoder accepts, with the same result,
// and FuzzFastIncrement checks exactly that.

// counterByte marks the bytes a counter name may hold: [a-z0-9_] (the
// first is checked apart, by engagement.ValidCounter).
var counterByte = func() (t [256]bool) {
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	t['_'] = true
	return t
}()

// isSpace reports JSON white space.
func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// skipSpace returns the index of the first non-space byte at or after i.
func skipSpace(s string, i int) int {
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	return i
}

// load64 returns s[i:i+8] as a little-endian word; the caller has checked
// i+8 <= len(s).
func load64(s string, i int) uint64 {
	b := s[i : i+8]
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}

// idStop flags, in the high bit of its lane, each byte of w that cannot
// stand in an unescaped id string: below 0x21, above 0x7e, '/', '"' or
// '\\'. A lane above a flagged one may be flagged too (borrows and carries
// cross lanes), but the lowest flagged lane is always a true one.
func idStop(w uint64) uint64 {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	q := w ^ ('"' * lo)
	bs := w ^ ('\\' * lo)
	sl := w ^ ('/' * lo)
	return ((w-0x21*lo)&^w | (w + lo | w) | (q-lo)&^q | (bs-lo)&^bs | (sl-lo)&^sl) & hi
}

// fastID reads a string at s[i] (a '"') that is a valid content id without
// escapes and returns it and the index after its closing quote.
func fastID(s string, i int) (string, int, bool) {
	start := i + 1
	j := start
	for j+8 <= len(s) {
		if m := idStop(load64(s, j)); m != 0 {
			j += bits.TrailingZeros64(m) >> 3
			goto stop
		}
		j += 8
		if j-start > engagement.MaxIDLen {
			return "", 0, false
		}
	}
	for j < len(s) {
		if c := s[j]; c <= ' ' || c > '~' || c == '/' || c == '"' || c == '\\' {
			goto stop
		}
		j++
	}
	return "", 0, false
stop:
	if s[j] != '"' || j == start || j-start > engagement.MaxIDLen {
		return "", 0, false
	}
	return s[start:j], j + 1, true
}

// fastCounter reads a string at s[i] (a '"') that names a counter an
// increment may change and returns it and the index after its closing
// quote.
func fastCounter(s string, i int) (string, int, bool) {
	start := i + 1
	j := start
	for j < len(s) && counterByte[s[j]] {
		j++
	}
	if j >= len(s) || s[j] != '"' || !incrementCounter(s[start:j]) {
		return "", 0, false
	}
	return s[start:j], j + 1, true
}

// incrementCounter reports whether an increment may change counter c: a
// valid counter name other than the two that only reactions change.
func incrementCounter(c string) bool {
	return engagement.ValidCounter(c) && c != engagement.CounterLike && c != engagement.CounterDislike
}

// fastDelta reads a delta at s[i]: 1 to 7 digits without a leading zero,
// not followed by a fraction or exponent, from 1 to MaxDelta.
func fastDelta(s string, i int) (int64, int, bool) {
	if i >= len(s) || s[i] < '1' || s[i] > '9' {
		return 0, 0, false
	}
	var v int64
	j := i
	for ; j < len(s) && isDigit(s[j]); j++ {
		if j-i == 7 {
			return 0, 0, false
		}
		v = v*10 + int64(s[j]-'0')
	}
	if v > MaxDelta || j < len(s) && (s[j] == '.' || s[j] == 'e' || s[j] == 'E') {
		return 0, 0, false
	}
	return v, j, true
}

// fastIncrement reads the plain increment object at s[i] (see above) into
// *inc and returns the index after its '}', or 0 when the object is not
// plain, whatever else it is (*inc is then undefined).
func fastIncrement(s string, i int, inc *region.Increment) int {
	if i >= len(s) || s[i] != '{' {
		return 0
	}
	i++
	var have uint8
	var ok bool
	for {
		i = skipSpace(s, i)
		if i >= len(s) || s[i] != '"' {
			return 0
		}
		i++
		var bit uint8
		switch k := s[i:]; {
		case len(k) >= 11 && k[:11] == `content_id"`:
			bit, i = hasContent, i+11
		case len(k) >= 8 && k[:8] == `counter"`:
			bit, i = hasCounter, i+8
		case len(k) >= 6 && k[:6] == `delta"`:
			bit, i = hasDelta, i+6
		default:
			return 0
		}
		if have&bit != 0 {
			return 0
		}
		have |= bit
		i = skipSpace(s, i)
		if i >= len(s) || s[i] != ':' {
			return 0
		}
		i = skipSpace(s, i+1)
		switch bit {
		case hasContent:
			if i >= len(s) || s[i] != '"' {
				return 0
			}
			inc.ContentID, i, ok = fastID(s, i)
		case hasCounter:
			if i >= len(s) || s[i] != '"' {
				return 0
			}
			inc.Counter, i, ok = fastCounter(s, i)
		default:
			inc.Delta, i, ok = fastDelta(s, i)
		}
		if !ok {
			return 0
		}
		i = skipSpace(s, i)
		switch {
		case i >= len(s):
			return 0
		case s[i] == ',':
			i++
		case s[i] == '}' && have == hasContent|hasCounter|hasDelta:
			return i + 1
		default:
			return 0
		}
	}
}
