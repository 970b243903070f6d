package httpapi

import (
	"fmt"
	"mime"
	"net/http"
	"strconv"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/internal/pbwire"
	"github.com/edgecount/edgecount/region"
)

// The binary bodies (proto/edgecount/v1/edgecount.proto) are decoded by
// hand, like the JSON ones: the strings of a decoded request are substrings
// of the body, nothing is allocated per item, and every error names its
// field as the JSON errors do. Unknown fields and a scalar field given twice
// are rejected (JSON's rules), not skipped or merged as protobuf's default
// would.

const contentTypeProtobuf = "application/x-protobuf"

var contentTypeProtobufs = []string{contentTypeProtobuf}

// isProtobuf reports whether r's body is labelled protobuf: the media type
// application/x-protobuf in any case, with any parameters, which say
// nothing the route does not (Spring's converter sends charset=UTF-8,
// other clients messageType= or proto= with the message's name).
func isProtobuf(r *http.Request) bool {
	ct := r.Header["Content-Type"]
	if len(ct) != 1 {
		return false
	}
	if ct[0] == contentTypeProtobuf {
		return true
	}
	mt, _, err := mime.ParseMediaType(ct[0])
	return err == nil && mt == contentTypeProtobuf
}

// pbReader reads protobuf wire format from a string.
type pbReader struct {
	s   string
	i   int
	off int // offset of s in the body, for messages
}

// malformed is the error of a body that is not protobuf wire format.
func (p *pbReader) malformed(msg string) *apiError {
	return badField("body", "is not a valid protobuf message at offset "+strconv.Itoa(p.off+p.i)+": "+msg)
}

func (p *pbReader) done() bool { return p.i >= len(p.s) }

// varint reads a base-128 varint.
func (p *pbReader) varint() (uint64, *apiError) {
	var v uint64
	for shift := uint(0); shift < 64; shift += 7 {
		if p.i >= len(p.s) {
			return 0, p.malformed("truncated varint")
		}
		b := p.s[p.i]
		p.i++
		if shift == 63 && b > 1 {
			return 0, p.malformed("varint overflows 64 bits")
		}
		v |= uint64(b&0x7f) << shift
		if b < 0x80 {
			return v, nil
		}
	}
	return 0, p.malformed("varint overflows 64 bits")
}

// tag reads a field number and wire type.
func (p *pbReader) tag() (protowire.Number, protowire.Type, *apiError) {
	v, e := p.varint()
	if e != nil {
		return 0, 0, e
	}
	num, typ := protowire.DecodeTag(v)
	if num < protowire.MinValidNumber || num > protowire.MaxValidNumber {
		return 0, 0, p.malformed("invalid field number " + strconv.FormatUint(v>>3, 10))
	}
	return num, typ, nil
}

// bytes reads a length-delimited value and returns it with its offset.
func (p *pbReader) bytes() (string, int, *apiError) {
	n, e := p.varint()
	if e != nil {
		return "", 0, e
	}
	if n > uint64(len(p.s)-p.i) {
		return "", 0, p.malformed("length " + strconv.FormatUint(n, 10) + " runs past the end")
	}
	start := p.i
	p.i += int(n)
	return p.s[start:p.i], p.off + start, nil
}

// skip reads and discards a value of wire type typ.
func (p *pbReader) skip(typ protowire.Type) *apiError {
	switch typ {
	case protowire.VarintType:
		_, e := p.varint()
		return e
	case protowire.Fixed64Type:
		if len(p.s)-p.i < 8 {
			return p.malformed("truncated fixed64")
		}
		p.i += 8
	case protowire.Fixed32Type:
		if len(p.s)-p.i < 4 {
			return p.malformed("truncated fixed32")
		}
		p.i += 4
	case protowire.BytesType:
		_, _, e := p.bytes()
		return e
	default:
		return p.malformed("wire type " + strconv.Itoa(int(typ)) + " (groups) is not supported")
	}
	return nil
}

// unknownField is the error of a field number the schema does not have.
func unknownField(path string, num protowire.Number) *apiError {
	return badField(path+"#"+strconv.Itoa(int(num)), msgUnknown)
}

// wrongType is the error of a known field sent with another wire type.
func wrongType(field string, want string) *apiError {
	return badField(field, "must be "+want)
}

// pbField is a field error found while reading, kept until the whole body
// has been checked for malformed wire format, which takes precedence (as
// syntax errors do in JSON).
type pbField struct{ e *apiError }

func (f *pbField) set(e *apiError) {
	if f.e == nil {
		f.e = e
	}
}

// decodeIncrementsProto decodes and validates an IncrementsRequest,
// appending to dst, with the rules of decodeIncrements.
func decodeIncrementsProto(body string, max int, dst []region.Increment) ([]region.Increment, *apiError) {
	p := pbReader{s: body}
	var sem pbField
	n := 0
	for !p.done() {
		if sem.e == nil && n < max {
			dst = append(dst, region.Increment{})
			if next := fastIncrementProto(body, p.i, &dst[len(dst)-1]); next > 0 {
				p.i = next
				n++
				continue
			}
			dst[len(dst)-1] = region.Increment{}
			dst = dst[:len(dst)-1]
		}
		num, typ, e := p.tag()
		if e != nil {
			return dst, e
		}
		if num != 1 {
			sem.set(unknownField("", num))
			if e := p.skip(typ); e != nil {
				return dst, e
			}
			continue
		}
		if typ != protowire.BytesType {
			sem.set(wrongType("increments", "a repeated message Increment"))
			if e := p.skip(typ); e != nil {
				return dst, e
			}
			continue
		}
		msg, off, e := p.bytes()
		if e != nil {
			return dst, e
		}
		if n == max {
			sem.set(badField("increments", fmt.Sprintf("must hold 1 to %d increments", max)))
		}
		inc, e := decodeIncrementProto(msg, off, n, &sem)
		if e != nil {
			return dst, e
		}
		if sem.e == nil {
			dst = append(dst, inc)
		}
		n++
	}
	if sem.e != nil {
		return dst, sem.e
	}
	if len(dst) == 0 {
		return dst, badField("increments", fmt.Sprintf("must hold 1 to %d increments", max))
	}
	return dst, nil
}

// decodeIncrementProto reads increments[idx]. It returns an error only for
// malformed wire format; field errors go to sem.
func decodeIncrementProto(msg string, off, idx int, sem *pbField) (region.Increment, *apiError) {
	var inc region.Increment
	p := pbReader{s: msg, off: off}
	item := func(sub string) string { return "increments[" + strconv.Itoa(idx) + "]." + sub }
	var have uint8
	for !p.done() {
		num, typ, e := p.tag()
		if e != nil {
			return inc, e
		}
		var name string
		var bit uint8
		switch num {
		case 1:
			name, bit = "content_id", hasContent
		case 2:
			name, bit = "counter", hasCounter
		case 3:
			name, bit = "delta", hasDelta
		default:
			sem.set(unknownField("increments["+strconv.Itoa(idx)+"].", num))
			if e := p.skip(typ); e != nil {
				return inc, e
			}
			continue
		}
		want := protowire.BytesType
		if bit == hasDelta {
			want = protowire.VarintType
		}
		if typ != want {
			if bit == hasDelta {
				sem.set(badField(item(name), msgDelta))
			} else {
				sem.set(wrongType(item(name), "a string"))
			}
			if e := p.skip(typ); e != nil {
				return inc, e
			}
			continue
		}
		if have&bit != 0 {
			sem.set(badField(item(name), msgDup))
		}
		have |= bit
		if bit == hasDelta {
			v, e := p.varint()
			if e != nil {
				return inc, e
			}
			// int64 on the wire: a negative delta is a 10-byte varint.
			if d := int64(v); d < 1 || d > MaxDelta {
				sem.set(badField(item(name), msgDelta))
			} else {
				inc.Delta = d
			}
			continue
		}
		s, _, e := p.bytes()
		if e != nil {
			return inc, e
		}
		if bit == hasContent {
			inc.ContentID = s
			if !engagement.ValidID(s) {
				sem.set(badField(item(name), msgID))
			}
			continue
		}
		inc.Counter = s
		switch {
		case !engagement.ValidCounter(s):
			sem.set(badField(item(name), msgCounter))
		case s == engagement.CounterLike || s == engagement.CounterDislike:
			sem.set(badField(item(name), msgReaction))
		}
	}
	switch {
	case have&hasContent == 0:
		sem.set(badField(item("content_id"), msgRequired))
	case have&hasCounter == 0:
		sem.set(badField(item("counter"), msgRequired))
	case have&hasDelta == 0:
		sem.set(badField(item("delta"), msgRequired))
	}
	return inc, nil
}

// decodeCountsProto decodes and validates a CountsRequest: the ids are
// appended to ids[:0] and the scope is checked against scopes.
func (a *api) decodeCountsProto(body string, ids []string) (queryParams, *apiError) {
	q := queryParams{ids: ids[:0], scope: engagement.GlobalScope}
	p := pbReader{s: body}
	var sem pbField
	seenRegion, seenMode := false, false
	for !p.done() {
		// The usual field first: a content_id (field 1, wire type 2, tag
		// 0x0a) of fewer than 128 bytes, its length one varint byte that
		// fits the body. Anything else, and a length that runs past the
		// end, takes the general path below, which also reports it.
		if i := p.i; i+1 < len(p.s) && p.s[i] == 0x0a && p.s[i+1] < 0x80 && int(p.s[i+1]) <= len(p.s)-i-2 {
			p.i = i + 2 + int(p.s[i+1])
			q.ids = a.addProtoID(q.ids, p.s[i+2:p.i], &sem)
			continue
		}
		num, typ, e := p.tag()
		if e != nil {
			return q, e
		}
		if (num != 1 && num != 2 && num != 3) || typ != protowire.BytesType {
			switch num {
			case 1:
				sem.set(wrongType("content_ids", "repeated strings"))
			case 2:
				sem.set(wrongType("region", "a string"))
			case 3:
				sem.set(wrongType("consistency", "a string"))
			default:
				sem.set(unknownField("", num))
			}
			if e := p.skip(typ); e != nil {
				return q, e
			}
			continue
		}
		s, _, e := p.bytes()
		if e != nil {
			return q, e
		}
		if num == 3 {
			mode, ok := region.ParseConsistency(s)
			switch {
			case seenMode:
				sem.set(badField("consistency", msgDup))
			case s == "":
			case !ok:
				sem.set(badField("consistency", msgConsistency))
			default:
				q.mode = mode
			}
			seenMode = true
			continue
		}
		if num == 2 {
			switch {
			case seenRegion:
				sem.set(badField("region", msgDup))
			case s == "":
			case !a.scopes[s]:
				sem.set(badField("region", "must be one of "+a.scopeList))
			default:
				q.scope = s
			}
			seenRegion = true
			continue
		}
		q.ids = a.addProtoID(q.ids, s, &sem)
	}
	if sem.e != nil {
		return q, sem.e
	}
	if len(q.ids) == 0 {
		return q, badField("content_ids", fmt.Sprintf("must hold 1 to %d ids", a.cfg.MaxBatchIDs))
	}
	return q, nil
}

// addProtoID appends content_ids value s to ids, or sets sem's error when
// ids are full or s is not a valid id (ids is left as it is after an
// error).
func (a *api) addProtoID(ids []string, s string, sem *pbField) []string {
	if sem.e == nil && len(ids) < a.cfg.MaxBatchIDs && engagement.ValidID(s) {
		return append(ids, s)
	}
	return a.refuseProtoID(ids, s, sem)
}

// refuseProtoID is addProtoID's slow path: an error is kept already, ids
// are full or s is invalid, so s is not appended.
func (a *api) refuseProtoID(ids []string, s string, sem *pbField) []string {
	switch {
	case len(ids) == a.cfg.MaxBatchIDs:
		sem.set(badField("content_ids", fmt.Sprintf("must hold 1 to %d ids", a.cfg.MaxBatchIDs)))
	case !engagement.ValidID(s):
		sem.set(badField("content_ids["+strconv.Itoa(len(ids))+"]", msgID))
	}
	return ids
}

// appendCountProto appends one Count (field 1 of CountsResponse) for
// contentID in q's scope and mode.
func appendCountProto(dst []byte, contentID string, q queryParams, rd *region.CountRead, info *region.ReadInfo) []byte {
	// The message is small: its length is at most two varint bytes for
	// 16 KiB, so it is written in place and its length shifted in after.
	dst = protowire.AppendTag(dst, 1, protowire.BytesType)
	lenAt := len(dst)
	dst = append(dst, 0)
	start := len(dst)
	dst = appendCountFields(dst, contentID, q.scope, rd)
	if !rd.Stored.IsZero() { // optional: present when known, even if 0
		dst = protowire.AppendTag(dst, 8, protowire.VarintType)
		dst = protowire.AppendVarint(dst, uint64(staleness(rd, info)))
	}
	if q.mode == region.Fresh {
		dst = appendStringField(dst, 9, "fresh")
		for _, p := range info.Missing {
			dst = protowire.AppendTag(dst, 10, protowire.BytesType)
			dst = protowire.AppendString(dst, p)
		}
	}
	return insertLength(dst, lenAt, start)
}

// appendCountFields appends the fields of a Count that depend on the
// item's state alone: 1 to 7.
func appendCountFields(dst []byte, contentID, scope string, rd *region.CountRead) []byte {
	st := scopeRow(rd.Rows, scope)
	var zero engagement.Stats
	if st == nil {
		st = &zero
	}
	dst = appendStringField(dst, 1, contentID)
	dst = appendStringField(dst, 2, scope)
	dst = appendIntField(dst, 3, st.Likes)
	dst = appendIntField(dst, 4, st.Dislikes)
	var buf [8]namedCount
	for _, c := range sortedCounters(buf[:0], st.Counters) {
		dst = protowire.AppendTag(dst, 5, protowire.BytesType)
		dst = protowire.AppendVarint(dst, uint64(protowire.SizeTag(1)+protowire.SizeBytes(len(c.name))+
			protowire.SizeTag(2)+protowire.SizeVarint(uint64(c.value))))
		dst = protowire.AppendTag(dst, 1, protowire.BytesType)
		dst = protowire.AppendString(dst, c.name)
		dst = protowire.AppendTag(dst, 2, protowire.VarintType)
		dst = protowire.AppendVarint(dst, uint64(c.value))
	}
	if !st.UpdatedAt.IsZero() {
		dst = appendIntField(dst, 6, st.UpdatedAt.UnixNano())
	}
	if !rd.AsOf.IsZero() {
		dst = appendIntField(dst, 7, rd.AsOf.UnixNano())
	}
	return dst
}

// appendCountProtoMemo is appendCountProto through rd's memo when it has
// one (memoProtobuf).
func (a *api) appendCountProtoMemo(dst []byte, contentID string, q *queryParams, rd *region.CountRead, info *region.ReadInfo) []byte {
	tag, ok := a.memoTag(rd, q)
	if !ok {
		return appendCountProto(dst, contentID, *q, rd, info)
	}
	fields, ok := rd.Memo.Load(memoProtobuf, tag)
	if !ok {
		start := len(dst)
		fields = rd.Memo.Store(memoProtobuf, tag, appendCountFields(dst, contentID, q.scope, rd)[start:])
	}
	return appendCountMessage(dst, fields, uint64(staleness(rd, info)))
}

// appendCountsProto appends the Counts of a CountsResponse, field 1 each.
func (a *api) appendCountsProto(dst []byte, q *queryParams, reads []region.CountRead, info *region.ReadInfo) []byte {
	var heads [memoBatch][]byte
	for base := 0; base < len(reads); base += memoBatch {
		batch := reads[base:min(base+memoBatch, len(reads))]
		// A kept Count begins with its content_id, field 1 (never empty).
		a.loadMemos(q, batch, memoProtobuf, byte(protowire.EncodeTag(1, protowire.BytesType)), 0, heads[:len(batch)])
		for j := range batch {
			rd := &batch[j]
			if heads[j] == nil {
				dst = a.appendCountProtoMemo(dst, q.ids[base+j], q, rd, info)
				continue
			}
			dst = appendCountMessage(dst, heads[j], uint64(staleness(rd, info)))
		}
	}
	return dst
}

// appendCountMessage appends field 1 of a CountsResponse: a Count of the
// kept fields 1 to 7 and staleness_ms.
func appendCountMessage(dst, fields []byte, stale uint64) []byte {
	dst = protowire.AppendTag(dst, 1, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(len(fields)+protowire.SizeTag(8)+protowire.SizeVarint(stale)))
	dst = append(dst, fields...)
	dst = protowire.AppendTag(dst, 8, protowire.VarintType)
	return protowire.AppendVarint(dst, stale)
}

// insertLength writes the varint length of dst[start:] at dst[lenAt], which
// holds one placeholder byte, moving the message when the varint is longer.
func insertLength(dst []byte, lenAt, start int) []byte {
	n := uint64(len(dst) - start)
	size := protowire.SizeVarint(n)
	if size > 1 {
		dst = append(dst, make([]byte, size-1)...)
		copy(dst[start+size-1:], dst[start:len(dst)-(size-1)])
	}
	protowire.AppendVarint(dst[lenAt:lenAt], n)
	return dst
}

// appendStringField appends a string field, left out when empty
// (pbwire.AppendString).
func appendStringField(dst []byte, num protowire.Number, s string) []byte {
	return pbwire.AppendString(dst, num, s)
}

// appendIntField appends an int64 field, left out when 0
// (pbwire.AppendUint).
func appendIntField(dst []byte, num protowire.Number, v int64) []byte {
	return pbwire.AppendUint(dst, num, uint64(v))
}

// writeProtobuf answers status with a protobuf body.
func writeProtobuf(w http.ResponseWriter, status int, body []byte) {
	if writeWhole(w, status, contentTypeProtobufs[0], body) {
		return
	}
	h := w.Header()
	h["Content-Type"] = contentTypeProtobufs
	h["Content-Length"] = contentLength(len(body))
	w.WriteHeader(status)
	w.Write(body) //nolint:errcheck // the client may be gone; nothing to do
}

// answerProtobuf is answer for a protobuf body.
func (a *api) answerProtobuf(w http.ResponseWriter, status int, build func(dst []byte) []byte) {
	if buildAnswer(w, status, contentTypeProtobufs[0], build) {
		return
	}
	bp := a.getBuf()
	*bp = build((*bp)[:0])
	writeProtobuf(w, status, *bp)
	a.putBuf(bp)
}

// postCounts answers POST /v1/counts: a CountsRequest, answered with a
// CountsResponse (JSON reads are GET /v1/counts).
func (a *api) postCounts(w http.ResponseWriter, r *http.Request) {
	if !isProtobuf(r) {
		a.writeError(w, &apiError{status: http.StatusUnsupportedMediaType, field: "Content-Type",
			msg: "Content-Type must be " + contentTypeProtobuf + " (JSON reads are GET /v1/counts?content_id=…)"})
		return
	}
	body, e := a.readBodyString(w, r)
	if e != nil {
		a.writeError(w, e)
		return
	}
	ip := a.getIDs()
	defer a.putIDs(ip)
	q, e := a.decodeCountsProto(body, *ip)
	*ip = q.ids
	if e != nil {
		a.writeError(w, e)
		return
	}
	reads, info, err := a.readCounts(r.Context(), q.ids, q.mode)
	if err != nil {
		a.serviceError(w, r, err)
		return
	}
	defer putReads(reads)
	a.answerProtobuf(w, http.StatusOK, func(dst []byte) []byte {
		return a.appendCountsProto(dst, &q, *reads, &info)
	})
}

// fastIncrementProto reads, at s[i], the increments field as nearly every
// encoder writes it: tag 0x0a, a one-byte length, then content_id (tag
// 0x0a), counter (0x12) and delta (0x18) once each, in field order, the
// strings under 128 bytes, every rule kept. It returns the index after the
// field, or 0 for anything else (*inc is then undefined), which the general
// decoder reads again: it alone decides what is an error. So this may only
// accept what decodeIncrementProto accepts, as it reads it
// (FuzzFastIncrementProto).
func fastIncrementProto(s string, i int, inc *region.Increment) int {
	if i+2 > len(s) || s[i] != 0x0a || s[i+1] >= 0x80 {
		return 0
	}
	end := i + 2 + int(s[i+1])
	if end > len(s) {
		return 0
	}
	m := s[i+2 : end]
	// content_id
	if len(m) < 2 || m[0] != 0x0a || m[1] >= 0x80 || 2+int(m[1]) > len(m) {
		return 0
	}
	id := m[2 : 2+int(m[1])]
	if !engagement.ValidID(id) {
		return 0
	}
	m = m[2+len(id):]
	// counter
	if len(m) < 3 || m[0] != 0x12 || m[1] >= 0x80 || 2+int(m[1]) > len(m) {
		return 0
	}
	c := m[2 : 2+int(m[1])]
	if !incrementCounter(c) {
		return 0
	}
	m = m[2+len(c):]
	// delta: a varint of at most three bytes (MaxDelta < 2^21), the last
	// thing in the message.
	if len(m) < 2 || len(m) > 4 || m[0] != 0x18 {
		return 0
	}
	var v int64
	for k := 1; k < len(m); k++ {
		b := m[k]
		v |= int64(b&0x7f) << (7 * (k - 1))
		if (b < 0x80) != (k == len(m)-1) {
			return 0
		}
	}
	if v < 1 || v > MaxDelta {
		return 0
	}
	*inc = region.Increment{ContentID: id, Counter: c, Delta: v}
	return end
}
