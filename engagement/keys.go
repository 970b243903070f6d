package engagement

// MaxIDLen is the longest user or content id, in bytes.
const MaxIDLen = 128

// MaxCounterLen is the longest counter name, in bytes.
const MaxCounterLen = 32

// ValidID reports whether s is a valid user, content or region id: 1–128
// bytes of printable ASCII without spaces or '/'.
func ValidID(s string) bool {
	if len(s) == 0 || len(s) > MaxIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c > '~' || c == '/' {
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
