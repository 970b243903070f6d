package httpapi

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/internal/apijson"
	"github.com/edgecount/edgecount/region"
)

// Answers are appended to pooled buffers by hand: the shapes are fixed and
// small, and the read paths are measured against Redis GET (G5, G6).

// apiError is an answer other than success: a status, the offending field
// (4xx only) and a message.
type apiError struct {
	status int
	field  string
	msg    string
}

// badField returns a 400 naming field; the message is "<field> <msg>".
func badField(field, msg string) *apiError {
	return &apiError{status: http.StatusBadRequest, field: field, msg: field + " " + msg}
}

// appendError appends the API's error body for e (apijson.AppendError).
func appendError(dst []byte, e *apiError) []byte {
	return apijson.AppendError(dst, e.msg, e.field)
}

// appendList appends open (which ends in '['), one element per item
// appended by elem, comma-separated, and "]}".
func appendList(dst []byte, open string, items []string, elem func(dst []byte, item string) []byte) []byte {
	dst = append(dst, open...)
	for i, it := range items {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = elem(dst, it)
	}
	return append(dst, "]}"...)
}

// appendTime appends t as an RFC 3339 UTC string, or null when t is zero.
func appendTime(dst []byte, t time.Time) []byte {
	if t.IsZero() {
		return append(dst, "null"...)
	}
	dst = append(dst, '"')
	dst = t.UTC().AppendFormat(dst, time.RFC3339Nano)
	return append(dst, '"')
}

// appendReactResult appends the answer of POST /v1/reactions.
func appendReactResult(dst []byte, userID, contentID string, res region.ReactResult) []byte {
	dst = appendReactionHead(dst, userID, contentID, res.Action)
	dst = append(dst, `,"previous":"`...)
	dst = append(dst, res.Previous.String()...)
	dst = append(dst, `","version":`...)
	dst = strconv.AppendInt(dst, res.Version, 10)
	dst = append(dst, `,"changed":`...)
	dst = strconv.AppendBool(dst, res.Changed)
	return append(dst, '}')
}

// appendReactionHead appends the members both reaction answers start with,
// {"user_id":…,"content_id":…,"action":"…" (the object left open).
func appendReactionHead(dst []byte, userID, contentID string, action engagement.Action) []byte {
	dst = append(dst, `{"user_id":`...)
	dst = apijson.AppendString(dst, userID)
	dst = append(dst, `,"content_id":`...)
	dst = apijson.AppendString(dst, contentID)
	dst = append(dst, `,"action":"`...)
	dst = append(dst, action.String()...)
	return append(dst, '"')
}

// appendReaction appends one reaction as GET /v1/reactions answers it; a
// missing row (found false) is action "none", version 0, updated_at null.
func appendReaction(dst []byte, userID, contentID string, rx engagement.Reaction, found bool) []byte {
	if !found {
		rx = engagement.Reaction{}
	}
	dst = appendReactionHead(dst, userID, contentID, rx.Action)
	dst = append(dst, `,"version":`...)
	dst = strconv.AppendInt(dst, rx.Version, 10)
	dst = append(dst, `,"updated_at":`...)
	dst = appendTime(dst, rx.UpdatedAt)
	return append(dst, '}')
}

// appendCountRead appends one item's answer in the scope and mode of q:
// its totals (appendCounts), as_of, staleness_ms and, for a fresh read,
// "consistency":"fresh" and the peers that did not answer.
func appendCountRead(dst []byte, contentID string, q queryParams, rd *region.CountRead, info *region.ReadInfo) []byte {
	dst = appendCountHead(dst, contentID, q.scope, rd)
	if !rd.Stored.IsZero() {
		dst = strconv.AppendInt(dst, staleness(rd, info), 10)
	}
	if q.mode == region.Fresh {
		dst = append(dst, `,"consistency":"fresh"`...)
		if len(info.Missing) > 0 {
			dst = append(dst, `,"missing_peers":[`...)
			for i, p := range info.Missing {
				if i > 0 {
					dst = append(dst, ',')
				}
				dst = apijson.AppendString(dst, p)
			}
			dst = append(dst, ']')
		}
	}
	return append(dst, '}')
}

// appendCountHead appends the part of an item's answer that depends on
// the item's state alone (appendCounts, as_of and, when rd.Stored is
// known, `,"staleness_ms":`), the object left open.
func appendCountHead(dst []byte, contentID, scope string, rd *region.CountRead) []byte {
	dst = appendCounts(dst, contentID, scope, scopeRow(rd.Rows, scope))
	dst = dst[:len(dst)-1] // reopen the object
	dst = append(dst, `,"as_of":`...)
	dst = appendTimeMillis(dst, rd.AsOf)
	if !rd.Stored.IsZero() {
		dst = append(dst, `,"staleness_ms":`...)
	}
	return dst
}

// staleness returns the staleness_ms of rd's answer: info.Now -
// rd.Stored in whole milliseconds (truncated, as Duration.Milliseconds
// does), 0 if negative or either time is unknown (callers write it only
// when Stored is known; a service may leave Now zero). Wall-clock
// nanoseconds: the agent's Stored carries no monotonic reading on any path
// (region's statsCache.put), so Time.Sub took the wall clock too, through
// checks that cost a 16-id read ~5 % of its CPU in process.
func staleness(rd *region.CountRead, info *region.ReadInfo) int64 {
	if info.Now.IsZero() || rd.Stored.IsZero() {
		return 0
	}
	return max((info.Now.UnixNano()-rd.Stored.UnixNano())/1e6, 0)
}

// A warm count read appends its item's answer as encoded by the first
// read of the item's cached state (region.Memo; a push or store read that
// changes the item makes a new state, with an empty memo) plus its
// staleness: no map, no sort, no time formatting, no allocation. Slot
// memoJSON keeps the JSON object up to its staleness_ms value
// (appendCountHead), slot memoProtobuf the protobuf Count's fields before
// field 8 (appendCountFields), each under the tag of the handler and the
// scope it was encoded for (memoTag).
const (
	memoJSON = iota
	memoProtobuf
)

// apiIDs numbers the handlers of the process, for memo tags: two handlers
// of one agent may number their scopes differently.
var apiIDs atomic.Uint32

// memoTag returns the tag of rd's answer in q's scope, and false when
// rd's answer cannot be kept (no memo, a fresh read, no store time).
func (a *api) memoTag(rd *region.CountRead, q *queryParams) (uint64, bool) {
	if rd.Memo == nil || q.mode != region.Eventual || rd.Stored.IsZero() || !rd.AsOf.Equal(rd.Stored) {
		return 0, false
	}
	si := 0
	if q.scope != engagement.GlobalScope {
		var ok bool
		if si, ok = a.scopeIndex[q.scope]; !ok {
			return 0, false
		}
	}
	return uint64(a.id)<<32 | uint64(si), true
}

// appendCountJSON is appendCountRead through rd's memo when it has one.
func (a *api) appendCountJSON(dst []byte, contentID string, q *queryParams, rd *region.CountRead, info *region.ReadInfo) []byte {
	tag, ok := a.memoTag(rd, q)
	if !ok {
		return appendCountRead(dst, contentID, *q, rd, info)
	}
	if head, ok := rd.Memo.Load(memoJSON, tag); ok {
		dst = append(dst, head...)
	} else {
		start := len(dst)
		dst = appendCountHead(dst, contentID, q.scope, rd)
		rd.Memo.Store(memoJSON, tag, dst[start:])
	}
	dst = strconv.AppendInt(dst, staleness(rd, info), 10)
	return append(dst, '}')
}

// memoBatch is the most reads loadMemos takes in one pass.
const memoBatch = 16

// loadMemos sets heads[j] to the bytes batch[j]'s memo keeps in slot for
// q (nil where there are none) in passes over the whole batch, one memory
// step each (the kept bytes' header, then their first and last bytes), so
// that the CPU-cache misses of different items overlap before their bytes
// are copied out one after the other; a 16-id read spent ~10% of its time
// in those copies (docs/read-cache.md). first and last are the bytes every
// kept encoding of the slot begins and ends with (0: any): bytes that do
// not are dropped from the memo, and the item is encoded anew.
func (a *api) loadMemos(q *queryParams, batch []region.CountRead, slot int, first, last byte, heads [][]byte) {
	for j := range batch {
		heads[j] = nil
		if tag, ok := a.memoTag(&batch[j], q); ok {
			heads[j], _ = batch[j].Memo.Load(slot, tag)
		}
	}
	for j, h := range heads {
		if h != nil && (len(h) == 0 || (first != 0 && h[0] != first) || (last != 0 && h[len(h)-1] != last)) {
			heads[j] = nil
			batch[j].Memo.Drop(slot)
		}
	}
}

// appendCountsJSON appends the JSON objects of GET /v1/counts's "counts".
func (a *api) appendCountsJSON(dst []byte, q *queryParams, reads []region.CountRead, info *region.ReadInfo) []byte {
	var heads [memoBatch][]byte
	for base := 0; base < len(reads); base += memoBatch {
		batch := reads[base:min(base+memoBatch, len(reads))]
		a.loadMemos(q, batch, memoJSON, '{', ':', heads[:len(batch)])
		for j := range batch {
			if base+j > 0 {
				dst = append(dst, ',')
			}
			rd := &batch[j]
			if heads[j] == nil {
				dst = a.appendCountJSON(dst, q.ids[base+j], q, rd, info)
				continue
			}
			dst = append(dst, heads[j]...)
			dst = strconv.AppendInt(dst, staleness(rd, info), 10)
			dst = append(dst, '}')
		}
	}
	return dst
}

// appendTimeMillis appends t as an RFC 3339 UTC string with milliseconds,
// or null when t is zero.
func appendTimeMillis(dst []byte, t time.Time) []byte {
	if t.IsZero() {
		return append(dst, "null"...)
	}
	dst = append(dst, '"')
	dst = t.UTC().AppendFormat(dst, "2006-01-02T15:04:05.000Z07:00")
	return append(dst, '"')
}

// appendCounts appends one item's totals in one scope as GET /v1/counts
// answers them; st is nil when there is no row (zeros, {} and null).
func appendCounts(dst []byte, contentID, scope string, st *engagement.Stats) []byte {
	var zero engagement.Stats
	if st == nil {
		st = &zero
	}
	dst = append(dst, `{"content_id":`...)
	dst = apijson.AppendString(dst, contentID)
	dst = append(dst, `,"region":`...)
	dst = apijson.AppendString(dst, scope)
	dst = append(dst, `,"likes":`...)
	dst = strconv.AppendInt(dst, st.Likes, 10)
	dst = append(dst, `,"dislikes":`...)
	dst = strconv.AppendInt(dst, st.Dislikes, 10)
	dst = append(dst, `,"counters":{`...)
	var buf [8]namedCount
	for i, c := range sortedCounters(buf[:0], st.Counters) {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = apijson.AppendString(dst, c.name)
		dst = append(dst, ':')
		dst = strconv.AppendInt(dst, c.value, 10)
	}
	dst = append(dst, `},"updated_at":`...)
	dst = appendTime(dst, st.UpdatedAt)
	return append(dst, '}')
}

// namedCount is one named counter of a row.
type namedCount struct {
	name  string
	value int64
}

// sortedCounters returns counters sorted by name, appended to dst (which
// the encoders pass empty, on an array of their stack: a row of up to 8
// counters allocates nothing), in one pass over the map (no second lookup
// per name).
func sortedCounters(dst []namedCount, counters map[string]int64) []namedCount {
	for k, v := range counters {
		dst = append(dst, namedCount{k, v})
	}
	if len(dst) > 1 {
		slices.SortFunc(dst, func(x, y namedCount) int { return strings.Compare(x.name, y.name) })
	}
	return dst
}

// scopeRow returns the row of scope among rows, or nil.
func scopeRow(rows []engagement.Stats, scope string) *engagement.Stats {
	for i := range rows {
		if rows[i].Scope == scope {
			return &rows[i]
		}
	}
	return nil
}
