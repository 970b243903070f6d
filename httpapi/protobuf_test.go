package httpapi

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/edgecount/edgecount/engagement"
	edgecountv1 "github.com/edgecount/edgecount/proto/edgecount/v1"
	"github.com/edgecount/edgecount/region"
)

func marshal(t testing.TB, m proto.Message) string {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func pbInc(id, counter string, delta int64) *edgecountv1.Increment {
	return &edgecountv1.Increment{ContentId: id, Counter: counter, Delta: delta}
}

// raw builds a message field by field, for what proto.Marshal cannot send
// (repeats, unknown fields, wrong wire types).
type raw []byte

func (b raw) str(num protowire.Number, s string) raw {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

func (b raw) varint(num protowire.Number, v uint64) raw {
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

func (b raw) msg(num protowire.Number, m raw) raw {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, m)
}

// TestProtobufIncrements: a protobuf body is applied as its JSON twin is,
// and answered in protobuf.
func TestProtobufIncrements(t *testing.T) {
	ta := newTestAPI(t, testConfig())
	body := marshal(t, &edgecountv1.IncrementsRequest{Increments: []*edgecountv1.Increment{
		pbInc("c1", "view", 1), pbInc("c~2", "share_2", MaxDelta), pbInc(strings.Repeat("x", 128), "view", 7),
	}})
	rec := ta.do(t, "POST", "/v1/increments", "application/x-protobuf", body)
	var resp edgecountv1.IncrementsResponse
	if err := proto.Unmarshal(rec.Body.Bytes(), &resp); err != nil || rec.Code != 202 || resp.Accepted != 3 ||
		rec.Header().Get("Content-Type") != "application/x-protobuf" {
		t.Fatalf("answer %d %q (%s), %v; want 202 accepted 3 in protobuf", rec.Code, rec.Body, rec.Header().Get("Content-Type"), err)
	}
	want := []region.Increment{{ContentID: "c1", Counter: "view", Delta: 1}, {ContentID: "c~2", Counter: "share_2", Delta: MaxDelta},
		{ContentID: strings.Repeat("x", 128), Counter: "view", Delta: 7}}
	if len(ta.fake.increments) != 1 || !slices.Equal(ta.fake.increments[0], want) {
		t.Errorf("increments = %v, want %v", ta.fake.increments, want)
	}
}

// TestProtobufIncrementsRejected: every rule of the JSON body holds for the
// protobuf one, with a 400 naming the field and no service call.
func TestProtobufIncrementsRejected(t *testing.T) {
	cfg := testConfig()
	cfg.MaxIncrements = 3
	ta := newTestAPI(t, cfg)
	good := raw(nil).str(1, "c1").str(2, "view").varint(3, 1)
	neg := int64(-1)
	for _, c := range []struct {
		name      string
		body      raw
		wantField string
	}{
		{"empty body", raw{}, "increments"},
		{"no increments, only an unknown field", raw(nil).varint(2, 1), "#2"},
		{"bad content id", raw(nil).msg(1, good).msg(1, raw(nil).str(1, "a b").str(2, "view").varint(3, 1)), "increments[1].content_id"},
		{"counter like", raw(nil).msg(1, raw(nil).str(1, "c").str(2, "like").varint(3, 1)), "increments[0].counter"},
		{"bad counter", raw(nil).msg(1, raw(nil).str(1, "c").str(2, "View").varint(3, 1)), "increments[0].counter"},
		{"delta 0", raw(nil).msg(1, raw(nil).str(1, "c").str(2, "view").varint(3, 0)), "increments[0].delta"},
		{"delta negative", raw(nil).msg(1, raw(nil).str(1, "c").str(2, "view").varint(3, uint64(neg))), "increments[0].delta"},
		{"delta over max", raw(nil).msg(1, raw(nil).str(1, "c").str(2, "view").varint(3, MaxDelta+1)), "increments[0].delta"},
		{"delta as a string", raw(nil).msg(1, raw(nil).str(1, "c").str(2, "view").str(3, "1")), "increments[0].delta"},
		{"content id as a varint", raw(nil).msg(1, raw(nil).varint(1, 5).str(2, "view").varint(3, 1)), "increments[0].content_id"},
		{"missing content id", raw(nil).msg(1, raw(nil).str(2, "view").varint(3, 1)), "increments[0].content_id"},
		{"missing counter", raw(nil).msg(1, raw(nil).str(1, "c").varint(3, 1)), "increments[0].counter"},
		{"missing delta", raw(nil).msg(1, raw(nil).str(1, "c").str(2, "view")), "increments[0].delta"},
		{"content id twice", raw(nil).msg(1, good.str(1, "c2")), "increments[0].content_id"},
		{"unknown field in an increment", raw(nil).msg(1, good.varint(9, 1)), "increments[0].#9"},
		{"too many", raw(nil).msg(1, good).msg(1, good).msg(1, good).msg(1, good), "increments"},
		{"truncated", raw(nil).msg(1, good)[:5], "body"},
		{"length past the end", raw{0x0a, 0x7f, 0x01}, "body"},
		{"field number 0", raw{0x02, 0x00}, "body"},
		{"group", raw{0x0b, 0x0c}, "body"},
		{"field error then malformed: malformed wins", raw(nil).msg(1, raw(nil).str(1, "a b")).append(0x0a, 0x05), "body"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ta.fake.reset()
			rec := ta.do(t, "POST", "/v1/increments", "application/x-protobuf", string(c.body))
			var eb errorBody
			if err := json.Unmarshal(rec.Body.Bytes(), &eb); err != nil || rec.Code != 400 || eb.Field != c.wantField ||
				rec.Header().Get("Content-Type") != "application/json" {
				t.Errorf("answer %d %s, want 400 naming %q in JSON", rec.Code, rec.Body, c.wantField)
			}
			if calls := ta.fake.Calls(); len(calls) != 0 {
				t.Errorf("service calls = %q, want none", calls)
			}
		})
	}
	for _, ct := range []string{"application/protobuf", "application/x-protobuf-x", "application/x-protobuf; charset", "application/x-protobuf, application/json"} {
		rec := ta.do(t, "POST", "/v1/increments", ct, string(raw(nil).msg(1, good)))
		if rec.Code != 415 || !strings.Contains(rec.Body.String(), `"field":"Content-Type"`) {
			t.Errorf("%s: answer %d %s, want 415 naming Content-Type", ct, rec.Code, rec.Body)
		}
	}
	// The media type in any case, with any parameters (Spring's converter
	// sends charset=UTF-8).
	for _, ct := range []string{"application/x-protobuf;charset=UTF-8", "Application/X-Protobuf", "application/x-protobuf; messageType=edgecount.v1.IncrementsRequest"} {
		ta.fake.reset()
		rec := ta.do(t, "POST", "/v1/increments", ct, string(raw(nil).msg(1, good)))
		if rec.Code != 202 || rec.Header().Get("Content-Type") != "application/x-protobuf" || len(ta.fake.Calls()) != 1 {
			t.Errorf("%s: answer %d %q (%s), %d service calls; want 202 in protobuf, one call", ct, rec.Code, rec.Body, rec.Header().Get("Content-Type"), len(ta.fake.Calls()))
		}
	}
}

func (b raw) append(bs ...byte) raw { return append(b, bs...) }

// TestProtobufCounts: POST /v1/counts answers what GET /v1/counts answers,
// in protobuf, in the order asked.
func TestProtobufCounts(t *testing.T) {
	ta := newTestAPI(t, testConfig())
	seed(ta.fake)
	body := marshal(t, &edgecountv1.CountsRequest{ContentIds: []string{"c1", "c9", "c1", "c2"}, Region: "eu"})
	rec := ta.do(t, "POST", "/v1/counts", "application/x-protobuf", body)
	var resp edgecountv1.CountsResponse
	if err := proto.Unmarshal(rec.Body.Bytes(), &resp); err != nil || rec.Code != 200 || rec.Header().Get("Content-Type") != "application/x-protobuf" {
		t.Fatalf("answer %d %q, %v; want 200 in protobuf", rec.Code, rec.Body, err)
	}
	asOf, stale := fakeStored.UnixNano(), proto.Int64(fakeNow.Sub(fakeStored).Milliseconds())
	c1 := &edgecountv1.Count{ContentId: "c1", Region: "eu", Likes: 7, Dislikes: 2, Counters: map[string]int64{"view": 60}, UpdatedAtUnixNano: t0.UnixNano(), AsOfUnixNano: asOf, StalenessMs: stale}
	want := []*edgecountv1.Count{c1, {ContentId: "c9", Region: "eu", AsOfUnixNano: asOf, StalenessMs: stale}, c1, {ContentId: "c2", Region: "eu", AsOfUnixNano: asOf, StalenessMs: stale}}
	if len(resp.Counts) != len(want) {
		t.Fatalf("counts = %v, want %v", resp.Counts, want)
	}
	for i := range want {
		if !proto.Equal(resp.Counts[i], want[i]) {
			t.Errorf("counts[%d] = %v, want %v", i, resp.Counts[i], want[i])
		}
	}
	if calls := ta.fake.Calls(); !slices.Equal(calls, []string{"Counts [c1 c9 c1 c2]"}) {
		t.Errorf("calls = %q", calls)
	}
	// Global by default; many counters come sorted, one map entry each.
	ta.fake.stats["c3"] = []engagement.Stats{{ContentID: "c3", Scope: "global", Counters: map[string]int64{"z": 1, "a": 300, "m": 1 << 40}}}
	rec = ta.do(t, "POST", "/v1/counts", "application/x-protobuf", marshal(t, &edgecountv1.CountsRequest{ContentIds: []string{"c3"}}))
	resp.Reset()
	if err := proto.Unmarshal(rec.Body.Bytes(), &resp); err != nil || len(resp.Counts) != 1 ||
		!proto.Equal(resp.Counts[0], &edgecountv1.Count{ContentId: "c3", Region: "global", Counters: map[string]int64{"z": 1, "a": 300, "m": 1 << 40}, AsOfUnixNano: asOf, StalenessMs: stale}) {
		t.Errorf("global answer %v, %v", resp.Counts, err)
	}
	// Fresh: as of the answer, marked, with the peers that did not answer.
	ta.fake.reset()
	ta.fake.missingPeers = []string{"agent-b"}
	rec = ta.do(t, "POST", "/v1/counts", "application/x-protobuf", marshal(t, &edgecountv1.CountsRequest{ContentIds: []string{"c3"}, Consistency: "fresh"}))
	resp.Reset()
	if err := proto.Unmarshal(rec.Body.Bytes(), &resp); err != nil || len(resp.Counts) != 1 ||
		!proto.Equal(resp.Counts[0], &edgecountv1.Count{ContentId: "c3", Region: "global", Counters: map[string]int64{"z": 1, "a": 300, "m": 1 << 40},
			AsOfUnixNano: fakeNow.UnixNano(), StalenessMs: stale, Consistency: "fresh", MissingPeers: []string{"agent-b"}}) {
		t.Errorf("fresh answer %v, %v", resp.Counts, err)
	}
	if calls := ta.fake.Calls(); !slices.Equal(calls, []string{"Counts fresh [c3]"}) {
		t.Errorf("calls = %q", calls)
	}
}

// TestProtobufCountsRejected: the batch read's rules, in protobuf.
func TestProtobufCountsRejected(t *testing.T) {
	ta := newTestAPI(t, testConfig())
	ids := func(n int) raw {
		var b raw
		for i := range n {
			b = b.str(1, "id"+strings.Repeat("x", i%5))
		}
		return b
	}
	for _, c := range []struct {
		name, target, ctype string
		body                raw
		wantStatus          int
		wantField           string
	}{
		{"no ids", "/v1/counts", "application/x-protobuf", raw(nil).str(2, "eu"), 400, "content_ids"},
		{"101 ids", "/v1/counts", "application/x-protobuf", ids(101), 400, "content_ids"},
		{"bad id", "/v1/counts", "application/x-protobuf", ids(3).str(1, "a/b"), 400, "content_ids[3]"},
		{"bad region", "/v1/counts", "application/x-protobuf", ids(1).str(2, "mars"), 400, "region"},
		{"region twice", "/v1/counts", "application/x-protobuf", ids(1).str(2, "eu").str(2, "us"), 400, "region"},
		{"region as varint", "/v1/counts", "application/x-protobuf", ids(1).varint(2, 1), 400, "region"},
		{"unknown field", "/v1/counts", "application/x-protobuf", ids(1).varint(4, 1), 400, "#4"},
		{"bad consistency", "/v1/counts", "application/x-protobuf", ids(1).str(3, "strong"), 400, "consistency"},
		{"consistency twice", "/v1/counts", "application/x-protobuf", ids(1).str(3, "fresh").str(3, "fresh"), 400, "consistency"},
		{"consistency as varint", "/v1/counts", "application/x-protobuf", ids(1).varint(3, 1), 400, "consistency"},
		{"malformed", "/v1/counts", "application/x-protobuf", raw{0x0a, 0x09, 'a'}, 400, "body"},
		{"query parameter", "/v1/counts?region=eu", "application/x-protobuf", ids(1), 400, "region"},
		{"JSON", "/v1/counts", "application/json", raw(`{"content_ids":["a"]}`), 415, "Content-Type"},
		{"no Content-Type", "/v1/counts", "", ids(1), 415, "Content-Type"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ta.fake.reset()
			rec := ta.do(t, "POST", c.target, c.ctype, string(c.body))
			var eb errorBody
			if err := json.Unmarshal(rec.Body.Bytes(), &eb); err != nil || rec.Code != c.wantStatus || eb.Field != c.wantField {
				t.Errorf("answer %d %s, want %d naming %q", rec.Code, rec.Body, c.wantStatus, c.wantField)
			}
			if calls := ta.fake.Calls(); len(calls) != 0 {
				t.Errorf("service calls = %q, want none", calls)
			}
		})
	}
}

// TestProtobufBodyLimit: a protobuf body over MaxBodyBytes is the JSON 413.
func TestProtobufBodyLimit(t *testing.T) {
	cfg := testConfig()
	cfg.MaxBodyBytes = 1000
	ta := newTestAPI(t, cfg)
	var body raw
	for len(body) <= 1000 {
		body = body.msg(1, raw(nil).str(1, "c1").str(2, "view").varint(3, 1))
	}
	rec := ta.do(t, "POST", "/v1/increments", "application/x-protobuf", string(body))
	if rec.Code != http.StatusRequestEntityTooLarge || rec.Body.String() != `{"error":"body is larger than 1000 bytes","field":"body"}` {
		t.Errorf("answer %d %s, want the 413", rec.Code, rec.Body)
	}
}

// FuzzIncrementsProto checks the hand decoder against the generated code:
// what it accepts, proto.Unmarshal reads the same way; what it calls
// malformed, proto.Unmarshal refuses too (groups aside); and over HTTP a
// rejected body reaches no service.
func FuzzIncrementsProto(f *testing.F) {
	ta := newTestAPI(f, testConfig())
	f.Fuzz(func(t *testing.T, body []byte) {
		incs, e := decodeIncrementsProto(string(body), DefaultMaxIncrements, nil)
		var std edgecountv1.IncrementsRequest
		stdErr := proto.Unmarshal(body, &std)
		switch {
		case e == nil:
			if stdErr != nil || len(std.Increments) != len(incs) {
				t.Fatalf("accepted %v; proto.Unmarshal: %v, %v", incs, std.Increments, stdErr)
			}
			for i, inc := range incs {
				s := std.Increments[i]
				if s.ContentId != inc.ContentID || s.Counter != inc.Counter || s.Delta != inc.Delta {
					t.Fatalf("increments[%d] = %+v, proto.Unmarshal reads %v", i, inc, s)
				}
			}
		case e.status != http.StatusBadRequest || e.field == "" || e.msg == "":
			t.Fatalf("error %+v lacks status 400, field or message", e)
		case e.field == "body" && stdErr == nil && !strings.Contains(e.msg, "groups"):
			t.Fatalf("body %x called malformed (%s), but proto.Unmarshal reads it", body, e.msg)
		}
		ta.fake.reset()
		rec := ta.do(t, http.MethodPost, "/v1/increments", "application/x-protobuf", string(body))
		calls := ta.fake.Calls()
		switch {
		case e == nil && (rec.Code != http.StatusAccepted || len(calls) != 1):
			t.Fatalf("answer %d %s, calls %q; want 202 and one call", rec.Code, rec.Body, calls)
		case e != nil && (rec.Code != e.status || rec.Body.String() != string(appendError(nil, e)) || len(calls) != 0):
			t.Fatalf("answer %d %s, calls %q; want %d %s and none", rec.Code, rec.Body, calls, e.status, appendError(nil, e))
		}
	})
}

// FuzzCountsProto is FuzzIncrementsProto for CountsRequest.
func FuzzCountsProto(f *testing.F) {
	ta := newTestAPI(f, testConfig())
	a := ta.h.(*api)
	f.Fuzz(func(t *testing.T, body []byte) {
		q, e := a.decodeCountsProto(string(body), nil)
		var std edgecountv1.CountsRequest
		stdErr := proto.Unmarshal(body, &std)
		switch {
		case e == nil:
			scope := std.Region
			if scope == "" {
				scope = "global"
			}
			if stdErr != nil || !slices.Equal(std.ContentIds, q.ids) || scope != q.scope || !a.scopes[q.scope] {
				t.Fatalf("accepted %v in %q; proto.Unmarshal: %v, %v", q.ids, q.scope, &std, stdErr)
			}
		case e.status != http.StatusBadRequest || e.field == "" || e.msg == "":
			t.Fatalf("error %+v lacks status 400, field or message", e)
		case e.field == "body" && stdErr == nil && !strings.Contains(e.msg, "groups"):
			t.Fatalf("body %x called malformed (%s), but proto.Unmarshal reads it", body, e.msg)
		}
		ta.fake.reset()
		rec := ta.do(t, http.MethodPost, "/v1/counts", "application/x-protobuf", string(body))
		calls := ta.fake.Calls()
		switch {
		case e == nil && (rec.Code != http.StatusOK || len(calls) != 1):
			t.Fatalf("answer %d, calls %q; want 200 and one call", rec.Code, calls)
		case e != nil && (rec.Code != e.status || len(calls) != 0):
			t.Fatalf("answer %d %s, calls %q; want %d and none", rec.Code, rec.Body, calls, e.status)
		}
	})
}

// FuzzFastIncrementProto checks fastIncrementProto against the general
// decoder on any bytes: it may only accept an increments field that
// decodeIncrementProto accepts, as it reads it.
func FuzzFastIncrementProto(f *testing.F) {
	f.Add(string(raw(nil).msg(1, raw(nil).str(1, "video-00000001").str(2, "view").varint(3, 1))))
	f.Add(string(raw(nil).msg(1, raw(nil).str(1, "c1").str(2, "watch_time_s").varint(3, MaxDelta))))
	f.Add(string(raw(nil).msg(1, raw(nil).str(2, "view").str(1, "c1").varint(3, 1))))
	f.Add(string(raw(nil).msg(1, raw(nil).str(1, "c1").str(2, "like").varint(3, 1))))
	f.Add(string(raw(nil).msg(1, raw(nil).str(1, "c/1").str(2, "view").varint(3, 1))))
	f.Fuzz(func(t *testing.T, s string) {
		var fast region.Increment
		next := fastIncrementProto(s, 0, &fast)
		if next == 0 {
			return
		}
		p := pbReader{s: s}
		num, typ, e := p.tag()
		if e != nil || num != 1 || typ != protowire.BytesType {
			t.Fatalf("fast path accepted %x as %+v; its tag: %d %d %v", s, fast, num, typ, e)
		}
		msg, off, e := p.bytes()
		if e != nil {
			t.Fatalf("fast path accepted %x as %+v; its length: %v", s, fast, e)
		}
		var sem pbField
		slow, e := decodeIncrementProto(msg, off, 0, &sem)
		if e != nil || sem.e != nil || slow != fast || p.i != next {
			t.Fatalf("%x: fast path read %+v up to %d; the decoder %+v up to %d (%v, %v)", s, fast, next, slow, p.i, e, sem.e)
		}
	})
}

func TestFastIncrementProto(t *testing.T) {
	inc := func(id, counter string, delta uint64) raw {
		return raw(nil).msg(1, raw(nil).str(1, id).str(2, counter).varint(3, delta))
	}
	id80 := strings.Repeat("x", 80) // the message just under 128 bytes
	for _, tc := range []struct {
		body raw
		want bool
	}{
		{inc("video-00000001", "view", 1), true},
		{inc(id80, "a23456789012345678901234567890_z", MaxDelta), true},
		{inc(strings.Repeat("x", 124), "view", 1), false}, // a message of 128 bytes or more
		{inc(strings.Repeat("x", 128), "view", 1), false}, // a two-byte length
		{inc("c1", "like", 1), false},
		{inc("c1", "dislike", 1), false},
		{inc("c/1", "view", 1), false},
		{inc("", "view", 1), false},
		{inc("c1", "View", 1), false},
		{inc("c1", "view", 0), false},
		{inc("c1", "view", MaxDelta+1), false},
		{raw(nil).msg(1, raw(nil).str(2, "view").str(1, "c1").varint(3, 1)), false}, // field order
		{raw(nil).msg(1, raw(nil).str(1, "c1").str(2, "view").varint(3, 1).varint(3, 1)), false},
		{raw(nil).msg(1, raw(nil).str(1, "c1").str(2, "view").varint(3, 1).varint(4, 1)), false},
		{raw(nil).msg(1, raw(nil).str(1, "c1").str(2, "view")), false},
		{raw(nil).msg(2, raw(nil).str(1, "c1").str(2, "view").varint(3, 1)), false},
	} {
		var got region.Increment
		next := fastIncrementProto(string(tc.body), 0, &got)
		if (next == len(tc.body)) != tc.want || (!tc.want && next != 0) {
			t.Errorf("fastIncrementProto(%x) = %d, want accepted %v", tc.body, next, tc.want)
		}
	}
	// Fast and general items mixed in one body, and a bad one after them
	// named by its index.
	body := append(append(inc("a", "view", 1), raw(nil).msg(1, raw(nil).str(2, "share").str(1, "b").varint(3, 2))...), inc("c", "view", 3)...)
	incs, e := decodeIncrementsProto(string(body), DefaultMaxIncrements, nil)
	want := []region.Increment{{ContentID: "a", Counter: "view", Delta: 1}, {ContentID: "b", Counter: "share", Delta: 2}, {ContentID: "c", Counter: "view", Delta: 3}}
	if e != nil || !slices.Equal(incs, want) {
		t.Fatalf("decodeIncrementsProto = %+v, %v; want %+v", incs, e, want)
	}
	bad := append(inc("a", "view", 1), inc("b", "like", 1)...)
	if _, e := decodeIncrementsProto(string(bad), DefaultMaxIncrements, nil); e == nil || e.field != "increments[1].counter" {
		t.Fatalf("decodeIncrementsProto = %+v, want an error on increments[1].counter", e)
	}
}
