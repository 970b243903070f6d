package httpapi

import (
	"fmt"
	"net/http"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/region"
)

// The request decoders are hand-written so that every error can name its
// field precisely (with list indexes) and so that the increments path does
// not allocate per increment: strings without escapes are substrings of the
// body, which is converted to a string once per request.

// maxDepth bounds the nesting of skipped JSON values (unknown fields).
const maxDepth = 512

// MaxDelta is the largest delta one increment may carry.
const MaxDelta = 1_000_000

// Messages shared by decoders and query parsing.
const (
	msgID       = "must be 1 to 128 bytes of printable ASCII without spaces or '/'"
	msgCounter  = "must match [a-z][a-z0-9_]{0,31}"
	msgReaction = `must not be "like" or "dislike", which change only through POST /v1/reactions`
	msgDelta    = "must be an integer from 1 to 1000000 (no fraction, exponent or quotes)"
	msgAction   = `must be "like", "dislike" or "none"`
	msgString   = "must be a string"
	msgRequired = "is required"
	msgUnknown  = "is not a known field"
	msgDup      = "is given more than once"
)

// decoder reads one JSON text from s. It stops at the first syntax error
// (syn) and records only the first field error (sem), carrying on after it to
// find syntax errors, which take precedence.
type decoder struct {
	s   string
	i   int
	syn *apiError
	sem *apiError
}

func (d *decoder) ws() {
	for d.i < len(d.s) {
		switch d.s[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// peek returns the byte at the cursor, or 0 at the end.
func (d *decoder) peek() byte {
	if d.i < len(d.s) {
		return d.s[d.i]
	}
	return 0
}

// syntax records a syntax error at the cursor and returns false.
func (d *decoder) syntax(msg string) bool {
	if d.syn == nil {
		d.syn = &apiError{
			status: http.StatusBadRequest,
			field:  "body",
			msg:    fmt.Sprintf("malformed JSON at offset %d: %s", d.i, msg),
		}
	}
	return false
}

// unexpected records a syntax error about the byte at the cursor.
func (d *decoder) unexpected(context string) bool {
	if d.i >= len(d.s) {
		return d.syntax("unexpected end of input")
	}
	return d.syntax(fmt.Sprintf("invalid character %s %s", quoteByte(d.s[d.i]), context))
}

func quoteByte(c byte) string {
	if c >= 0x20 && c < 0x7f {
		return strconv.QuoteRune(rune(c))
	}
	return fmt.Sprintf("0x%02x", c)
}

// fail records a field error unless one is recorded already.
func (d *decoder) fail(field, msg string) {
	if d.sem == nil {
		d.sem = badField(field, msg)
	}
}

// failItem records a field error of member sub of increments[idx].
func (d *decoder) failItem(idx int, sub, msg string) {
	if d.sem == nil {
		d.fail("increments["+strconv.Itoa(idx)+"]."+fieldName(sub), msg)
	}
}

// fieldName returns a JSON key or query parameter name fit to name a field
// in an error: `""` for the empty name, at most 64 bytes (invalid UTF-8 is
// replaced when the error is encoded).
func fieldName(key string) string {
	if key == "" {
		return `""`
	}
	if len(key) > 64 {
		return key[:64] + "…"
	}
	return key
}

// str reads a JSON string at the cursor.
func (d *decoder) str() (string, bool) {
	if d.peek() != '"' {
		return "", d.unexpected("looking for beginning of string")
	}
	start := d.i + 1
	for j := start; j < len(d.s); j++ {
		switch c := d.s[j]; {
		case c == '"':
			d.i = j + 1
			return d.s[start:j], true
		case c == '\\':
			return d.strEscaped(start, j)
		case c < 0x20:
			d.i = j
			return "", d.syntax(fmt.Sprintf("control character %s in string", quoteByte(c)))
		}
	}
	d.i = len(d.s)
	return "", d.syntax("unexpected end of input in string")
}

// strEscaped finishes a string that starts at start and has its first
// backslash at j. It decodes escapes as encoding/json does (a lone
// surrogate becomes U+FFFD).
func (d *decoder) strEscaped(start, j int) (string, bool) {
	buf := make([]byte, 0, j-start+16)
	buf = append(buf, d.s[start:j]...)
	for j < len(d.s) {
		c := d.s[j]
		switch {
		case c == '"':
			d.i = j + 1
			return string(buf), true
		case c < 0x20:
			d.i = j
			return "", d.syntax(fmt.Sprintf("control character %s in string", quoteByte(c)))
		case c != '\\':
			buf = append(buf, c)
			j++
			continue
		}
		// A backslash.
		if j+1 >= len(d.s) {
			d.i = len(d.s)
			return "", d.syntax("unexpected end of input in string escape")
		}
		switch e := d.s[j+1]; e {
		case '"', '\\', '/':
			buf = append(buf, e)
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			r, ok := hex4(d.s, j+2)
			if !ok {
				d.i = j
				return "", d.syntax(`invalid \u escape in string`)
			}
			j += 6
			if utf16.IsSurrogate(r) {
				r2, ok2 := rune(-1), false
				if j+1 < len(d.s) && d.s[j] == '\\' && d.s[j+1] == 'u' {
					r2, ok2 = hex4(d.s, j+2)
				}
				if dec := utf16.DecodeRune(r, r2); ok2 && dec != utf8.RuneError {
					r = dec
					j += 6
				} else {
					r = utf8.RuneError
				}
			}
			buf = utf8.AppendRune(buf, r)
			continue
		default:
			d.i = j
			return "", d.syntax(fmt.Sprintf("invalid escape %s in string", quoteByte(e)))
		}
		j += 2
	}
	d.i = len(d.s)
	return "", d.syntax("unexpected end of input in string")
}

// hex4 parses four hex digits at s[i:].
func hex4(s string, i int) (rune, bool) {
	if i+4 > len(s) {
		return 0, false
	}
	var r rune
	for _, c := range []byte(s[i : i+4]) {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// number reads a JSON number at the cursor and returns its literal.
func (d *decoder) number() (string, bool) {
	s, j := d.s, d.i
	if j < len(s) && s[j] == '-' {
		j++
	}
	switch {
	case j < len(s) && s[j] == '0':
		j++
	case j < len(s) && s[j] >= '1' && s[j] <= '9':
		for j++; j < len(s) && isDigit(s[j]); j++ {
		}
	default:
		d.i = j
		return "", d.unexpected("in numeric literal")
	}
	if j < len(s) && s[j] == '.' {
		j++
		if j >= len(s) || !isDigit(s[j]) {
			d.i = j
			return "", d.unexpected("after decimal point in numeric literal")
		}
		for ; j < len(s) && isDigit(s[j]); j++ {
		}
	}
	if j < len(s) && (s[j] == 'e' || s[j] == 'E') {
		j++
		if j < len(s) && (s[j] == '+' || s[j] == '-') {
			j++
		}
		if j >= len(s) || !isDigit(s[j]) {
			d.i = j
			return "", d.unexpected("in exponent of numeric literal")
		}
		for ; j < len(s) && isDigit(s[j]); j++ {
		}
	}
	lit := s[d.i:j]
	d.i = j
	return lit, true
}

// literal reads true, false or null.
func (d *decoder) literal(word string) bool {
	for k := 0; k < len(word); k++ {
		if d.i >= len(d.s) || d.s[d.i] != word[k] {
			return d.unexpected("in literal " + word)
		}
		d.i++
	}
	return true
}

// skip reads and discards any JSON value at the cursor, checking its syntax.
func (d *decoder) skip(depth int) bool {
	if depth > maxDepth {
		return d.syntax("exceeded max nesting depth")
	}
	switch c := d.peek(); {
	case c == '{' || c == '[':
		d.i++
		for first := true; ; first = false {
			var done, ok bool
			if c == '{' {
				_, done, ok = d.nextKey(first) // the cursor is on the member's value
			} else {
				done, ok = d.nextElem(first)
			}
			if !ok {
				return false
			}
			if done {
				return true
			}
			if !d.skip(depth + 1) {
				return false
			}
		}
	case c == '"':
		_, ok := d.str()
		return ok
	case c == 't':
		return d.literal("true")
	case c == 'f':
		return d.literal("false")
	case c == 'n':
		return d.literal("null")
	case c == '-' || isDigit(c):
		_, ok := d.number()
		return ok
	}
	return d.unexpected("looking for beginning of value")
}

// nextKey is called just after '{' (first) or after a member's value. It
// consumes the separator and returns the next key with the cursor on its
// value, or done at '}'.
func (d *decoder) nextKey(first bool) (key string, done, ok bool) {
	d.ws()
	switch c := d.peek(); {
	case c == '}':
		d.i++
		return "", true, true
	case first:
	case c == ',':
		d.i++
		d.ws()
	default:
		return "", false, d.unexpected("after object key:value pair")
	}
	if d.peek() != '"' {
		return "", false, d.unexpected("looking for beginning of object key string")
	}
	key, ok = d.str()
	if !ok {
		return "", false, false
	}
	d.ws()
	if d.peek() != ':' {
		return "", false, d.unexpected("after object key")
	}
	d.i++
	d.ws()
	return key, false, true
}

// nextElem is called just after '[' (first) or after an element. It
// consumes the separator and leaves the cursor on the next element, or
// returns done at ']'.
func (d *decoder) nextElem(first bool) (done, ok bool) {
	d.ws()
	switch c := d.peek(); {
	case c == ']':
		d.i++
		return true, true
	case first:
		return false, true
	case c == ',':
		d.i++
		d.ws()
		return false, true
	}
	return false, d.unexpected("after array element")
}

// top positions the cursor inside the top-level object. When the body is
// empty or not an object it returns the error to answer.
func (d *decoder) top() *apiError {
	d.ws()
	if d.i == len(d.s) {
		return badField("body", "is empty; want a JSON object")
	}
	if d.peek() == '{' {
		d.i++
		return nil
	}
	if d.skip(1) {
		d.end()
	}
	if d.syn != nil {
		return d.syn
	}
	return badField("body", "must be a JSON object")
}

// end checks that only white space follows the top-level value.
func (d *decoder) end() {
	d.ws()
	if d.i != len(d.s) {
		d.syntax("unexpected data after the top-level JSON value")
	}
}

// result returns the error to answer, if any: syntax first.
func (d *decoder) result() *apiError {
	if d.syn != nil {
		return d.syn
	}
	return d.sem
}

// decodeIncrements decodes and validates a POST /v1/increments body,
// appending the increments to dst. It accepts the body only if every
// increment obeys the rules; then the strings of the increments are
// substrings of body.
func decodeIncrements(body string, max int, dst []region.Increment) ([]region.Increment, *apiError) {
	d := decoder{s: body}
	if e := d.top(); e != nil {
		return dst, e
	}
	seen := false
	for first := true; ; first = false {
		key, done, ok := d.nextKey(first)
		if !ok {
			return dst, d.syn
		}
		if done {
			break
		}
		switch {
		case key == "increments" && !seen:
			seen = true
			dst = d.increments(dst, max)
		case key == "increments":
			d.fail("increments", msgDup)
			d.skip(2)
		default:
			d.fail(fieldName(key), msgUnknown)
			d.skip(2)
		}
		if d.syn != nil {
			return dst, d.syn
		}
	}
	d.end()
	if !seen {
		d.fail("increments", msgRequired)
	}
	if e := d.result(); e != nil {
		return dst, e
	}
	if len(dst) == 0 {
		return dst, badField("increments", fmt.Sprintf("must hold 1 to %d increments", max))
	}
	return dst, nil
}

// increments reads the array of increments at the cursor.
func (d *decoder) increments(dst []region.Increment, max int) []region.Increment {
	if d.peek() != '[' {
		d.fail("increments", "must be an array of increments")
		d.skip(2)
		return dst
	}
	d.i++
	for n, first := 0, true; ; n, first = n+1, false {
		done, ok := d.nextElem(first)
		if !ok || done {
			return dst
		}
		if n == max {
			d.fail("increments", fmt.Sprintf("must hold 1 to %d increments", max))
		}
		if d.sem != nil {
			// Nothing will be applied; only the syntax still matters.
			if !d.skip(3) {
				return dst
			}
			continue
		}
		// Into dst's next element directly: returning the increment
		// costs more than the read. The same in decodeIncrementsProto.
		dst = append(dst, region.Increment{})
		if next := fastIncrement(d.s, d.i, &dst[len(dst)-1]); next > 0 {
			d.i = next
			continue
		}
		dst[len(dst)-1] = region.Increment{} // pin no part of the body
		dst = dst[:len(dst)-1]
		inc, ok := d.increment(n)
		if !ok {
			return dst
		}
		if d.sem == nil {
			dst = append(dst, inc)
		}
	}
}

// Members of an increment, as bits of a seen-set.
const (
	hasContent = 1 << iota
	hasCounter
	hasDelta
)

// increment reads increments[idx] at the cursor. It returns false on a
// syntax error; field errors are recorded in d.sem.
func (d *decoder) increment(idx int) (region.Increment, bool) {
	var inc region.Increment
	if d.peek() != '{' {
		d.fail("increments["+strconv.Itoa(idx)+"]", "must be an object")
		return inc, d.skip(3)
	}
	d.i++
	var have uint8
	for first := true; ; first = false {
		key, done, ok := d.nextKey(first)
		if !ok {
			return inc, false
		}
		if done {
			break
		}
		var bit uint8
		switch key {
		case "content_id":
			bit = hasContent
		case "counter":
			bit = hasCounter
		case "delta":
			bit = hasDelta
		default:
			d.failItem(idx, key, msgUnknown)
			if !d.skip(4) {
				return inc, false
			}
			continue
		}
		if have&bit != 0 {
			d.failItem(idx, key, msgDup)
			if !d.skip(4) {
				return inc, false
			}
			continue
		}
		have |= bit
		switch bit {
		case hasContent, hasCounter:
			if d.peek() != '"' {
				d.failItem(idx, key, msgString)
				if !d.skip(4) {
					return inc, false
				}
				continue
			}
			s, ok := d.str()
			if !ok {
				return inc, false
			}
			if bit == hasContent {
				inc.ContentID = s
				if !engagement.ValidID(s) {
					d.failItem(idx, key, msgID)
				}
				continue
			}
			inc.Counter = s
			switch {
			case !engagement.ValidCounter(s):
				d.failItem(idx, key, msgCounter)
			case s == engagement.CounterLike || s == engagement.CounterDislike:
				d.failItem(idx, key, msgReaction)
			}
		case hasDelta:
			if c := d.peek(); c != '-' && !isDigit(c) {
				d.failItem(idx, key, msgDelta)
				if !d.skip(4) {
					return inc, false
				}
				continue
			}
			lit, ok := d.number()
			if !ok {
				return inc, false
			}
			v, ok := parseDelta(lit)
			if !ok {
				d.failItem(idx, key, msgDelta)
			}
			inc.Delta = v
		}
	}
	switch {
	case have&hasContent == 0:
		d.failItem(idx, "content_id", msgRequired)
	case have&hasCounter == 0:
		d.failItem(idx, "counter", msgRequired)
	case have&hasDelta == 0:
		d.failItem(idx, "delta", msgRequired)
	}
	return inc, true
}

// parseDelta parses a JSON number literal as a delta: an integer literal
// (digits only) from 1 to MaxDelta.
func parseDelta(lit string) (int64, bool) {
	if len(lit) == 0 || len(lit) > 7 {
		return 0, false
	}
	var v int64
	for i := 0; i < len(lit); i++ {
		c := lit[i]
		if !isDigit(c) {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	return v, v >= 1 && v <= MaxDelta
}

// reactionRequest is a decoded POST /v1/reactions body.
type reactionRequest struct {
	UserID    string
	ContentID string
	Action    engagement.Action
}

// decodeReaction decodes and validates a POST /v1/reactions body.
func decodeReaction(body string) (reactionRequest, *apiError) {
	var req reactionRequest
	d := decoder{s: body}
	if e := d.top(); e != nil {
		return req, e
	}
	const (
		hasUser = 1 << iota
		hasContentID
		hasAction
	)
	var have uint8
	for first := true; ; first = false {
		key, done, ok := d.nextKey(first)
		if !ok {
			return req, d.syn
		}
		if done {
			break
		}
		var bit uint8
		switch key {
		case "user_id":
			bit = hasUser
		case "content_id":
			bit = hasContentID
		case "action":
			bit = hasAction
		default:
			d.fail(fieldName(key), msgUnknown)
			if !d.skip(2) {
				return req, d.syn
			}
			continue
		}
		if have&bit != 0 {
			d.fail(key, msgDup)
			if !d.skip(2) {
				return req, d.syn
			}
			continue
		}
		have |= bit
		if d.peek() != '"' {
			msg := msgString
			if bit == hasAction {
				msg = msgAction
			}
			d.fail(key, msg)
			if !d.skip(2) {
				return req, d.syn
			}
			continue
		}
		s, ok := d.str()
		if !ok {
			return req, d.syn
		}
		switch bit {
		case hasUser:
			req.UserID = s
			if !engagement.ValidID(s) {
				d.fail(key, msgID)
			}
		case hasContentID:
			req.ContentID = s
			if !engagement.ValidID(s) {
				d.fail(key, msgID)
			}
		case hasAction:
			a, ok := engagement.ParseAction(s)
			if !ok {
				d.fail(key, msgAction)
			}
			req.Action = a
		}
	}
	d.end()
	switch {
	case have&hasUser == 0:
		d.fail("user_id", msgRequired)
	case have&hasContentID == 0:
		d.fail("content_id", msgRequired)
	case have&hasAction == 0:
		d.fail("action", msgRequired)
	}
	return req, d.result()
}
