package engagement

// MaxIDLen is the longest user or content id, in bytes.
const MaxIDLen = 128

// MaxCounterLen is the longest counter name, in bytes.
const MaxCounterLen = 32

// ValidID reports whether s is a valid user, content or region id: 1–128
// bytes of printable ASCII without spaces or '/'.
//
// It checks eight bytes at a time: a 16-id count read checks every id, and
// a byte loop was ~5 % of the read's CPU in process.
func ValidID(s string) bool {
	if len(s) == 0 || len(s) > MaxIDLen {
		return false
	}
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	for len(s) >= 8 {
		w := uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
			uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
		// Some lane below 0x21 (w - 0x21 borrows into the high bit of the
		// lowest such lane, which it did not have); some lane above 0x7e
		// (adding 1 carries into its high bit, or the lane had it); some
		// lane equal to '/' (zero after the xor, the same test as below
		// 0x01).
		slash := w ^ ('/' * lo)
		if ((w-0x21*lo)&^w|(w+lo|w)|(slash-lo)&^slash)&hi != 0 {
			return false
		}
		s = s[8:]
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c > '~' || c == '/' {
			return false
		}
	}
	return true
}

// ValidCounter reports whether s is a valid counter name:
// [a-z][a-z0-9_]{0,31}.
func ValidCounter(s string) bool {
	if len(s) == 0 || len(s) > MaxCounterLen {
		return false
	}
	if s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// ValidRegion reports whether s can name a region: a valid counter-style
// name (lower case, digits, '_' and '-') that is not GlobalScope.
func ValidRegion(s string) bool {
	if len(s) == 0 || len(s) > 64 || s == GlobalScope {
		return false
	}
	if s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
