package httpapi

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestDecodeString checks string decoding, escapes included, against
// encoding/json.
func TestDecodeString(t *testing.T) {
	for _, lit := range []string{
		`""`, `"plain"`, `"a\"b"`, `"\\\/\b\f\n\r\t"`, `"\u00e9\u00E9"`, `"\ud83d\ude00"`,
		`"\ud800"`, `"\udc00x"`, `"\ud800\u0041"`, `"\ud800\ud800"`, `"\ud800\\"`, `"\ud800\u00"`,
		`"é\u0000"`, `"prefix \" suffix"`,
	} {
		d := decoder{s: lit}
		got, ok := d.str()
		var want string
		if err := json.Unmarshal([]byte(lit), &want); err != nil {
			if ok {
				t.Errorf("str(%s) = %q, want an error like encoding/json's %v", lit, got, err)
			}
			continue
		}
		if !ok || got != want || d.i != len(lit) {
			t.Errorf("str(%s) = %q, %v at %d, want %q at %d", lit, got, ok, d.i, want, len(lit))
		}
	}
	// Unlike encoding/json, invalid UTF-8 is kept as it is rather than
	// replaced: no field accepts non-ASCII, so it is rejected by the rules
	// with the field named, instead of being silently altered.
	raw := decoder{s: "\"a\xffb\""}
	if got, ok := raw.str(); !ok || got != "a\xffb" {
		t.Errorf("str of invalid UTF-8 = %q, %v, want the bytes as they are", got, ok)
	}
	for _, lit := range []string{`"abc`, `"\`, `"\u12"`, `"\u12g4"`, `"\x"`, "\"a\nb\"", "\"a\\u0041\x01\""} {
		d := decoder{s: lit}
		if got, ok := d.str(); ok {
			t.Errorf("str(%q) = %q, want a syntax error", lit, got)
		} else if !strings.HasPrefix(d.syn.msg, "malformed JSON at offset") {
			t.Errorf("str(%q) error = %q, want a malformed JSON error", lit, d.syn.msg)
		}
	}
}

// TestDecodeDeltaLiterals checks the delta rule on every kind of number.
func TestDecodeDeltaLiterals(t *testing.T) {
	for _, c := range []struct {
		lit  string
		want int64 // 0: rejected
	}{
		{"1", 1}, {"9", 9}, {"10", 10}, {"999999", 999999}, {"1000000", 1000000},
		{"0", 0}, {"-1", 0}, {"-0", 0}, {"1000001", 0}, {"9999999", 0}, {"10000000", 0},
		{"1.0", 0}, {"1.5", 0}, {"1e3", 0}, {"1E3", 0}, {"1e+3", 0}, {"10e-1", 0},
	} {
		incs, e := decodeIncrements(incBody(item(`"c"`, `"view"`, c.lit)), 10, nil)
		switch {
		case c.want == 0 && (e == nil || e.field != "increments[0].delta"):
			t.Errorf("delta %s: got %v, %+v, want rejected naming increments[0].delta", c.lit, incs, e)
		case c.want != 0 && (e != nil || len(incs) != 1 || incs[0].Delta != c.want):
			t.Errorf("delta %s: got %v, %+v, want %d", c.lit, incs, e, c.want)
		}
	}
}
