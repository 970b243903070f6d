package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/region"
)

// Seed corpora live in testdata/fuzz/<FuzzName>/. Run a fuzzer with e.g.
//
//	go test ./httpapi -run '^$' -fuzz '^FuzzIncrements$' -fuzztime 30s

// isSyntaxError reports whether e says the body is not JSON at all.
func isSyntaxError(e *apiError) bool {
	return e != nil && e.field == "body" &&
		(strings.HasPrefix(e.msg, "malformed JSON") || strings.HasPrefix(e.msg, "body is empty"))
}

// checkSyntaxAgreement checks the decoder against encoding/json: a body is
// reported malformed exactly when encoding/json finds it invalid (except
// for nesting deeper than this package allows).
func checkSyntaxAgreement(t *testing.T, body []byte, e *apiError) {
	t.Helper()
	valid := json.Valid(body)
	if valid && isSyntaxError(e) && !strings.Contains(e.msg, "max nesting depth") {
		t.Fatalf("body %q is valid JSON, but rejected as malformed: %s", body, e.msg)
	}
	if !valid && !isSyntaxError(e) {
		t.Fatalf("body %q is not valid JSON, but answered %+v", body, e)
	}
	if e != nil && (e.status != http.StatusBadRequest || e.field == "" || e.msg == "") {
		t.Fatalf("body %q: error %+v lacks status 400, field or message", body, e)
	}
}

// stdIncrements is how encoding/json reads an increments body.
type stdIncrements struct {
	Increments []struct {
		ContentID *string `json:"content_id"`
		Counter   *string `json:"counter"`
		Delta     *int64  `json:"delta"`
	} `json:"increments"`
}

func FuzzIncrements(f *testing.F) {
	ta := newTestAPI(f, testConfig())
	f.Fuzz(func(t *testing.T, body []byte) {
		incs, e := decodeIncrements(string(body), DefaultMaxIncrements, nil)
		checkSyntaxAgreement(t, body, e)
		if e == nil {
			if len(incs) < 1 || len(incs) > DefaultMaxIncrements {
				t.Fatalf("accepted %d increments", len(incs))
			}
			for i, inc := range incs {
				if !engagement.ValidID(inc.ContentID) || !engagement.ValidCounter(inc.Counter) ||
					inc.Counter == engagement.CounterLike || inc.Counter == engagement.CounterDislike ||
					inc.Delta < 1 || inc.Delta > MaxDelta {
					t.Fatalf("accepted increments[%d] = %+v, which breaks a rule", i, inc)
				}
			}
			// encoding/json must read the same increments.
			var std stdIncrements
			dec := json.NewDecoder(bytes.NewReader(body))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&std); err != nil {
				t.Fatalf("accepted body %q, but encoding/json: %v", body, err)
			}
			if len(std.Increments) != len(incs) {
				t.Fatalf("accepted %d increments, encoding/json reads %d", len(incs), len(std.Increments))
			}
			for i, s := range std.Increments {
				if s.ContentID == nil || s.Counter == nil || s.Delta == nil ||
					(region.Increment{ContentID: *s.ContentID, Counter: *s.Counter, Delta: *s.Delta}) != incs[i] {
					t.Fatalf("increments[%d] = %+v, encoding/json reads %+v", i, incs[i], s)
				}
			}
		}

		// Through the handler: a rejected body reaches no service.
		ta.fake.reset()
		rec := ta.do(t, http.MethodPost, "/v1/increments", "", string(body))
		switch {
		case len(body) > DefaultMaxBodyBytes:
			if rec.Code != http.StatusRequestEntityTooLarge {
				t.Fatalf("status = %d, want 413", rec.Code)
			}
		case e == nil:
			if rec.Code != http.StatusAccepted || len(ta.fake.increments) != 1 || !slices.Equal(ta.fake.increments[0], incs) {
				t.Fatalf("answer %d %s, service got %+v, want 202 and %+v", rec.Code, rec.Body, ta.fake.increments, incs)
			}
		default:
			if rec.Code != e.status || rec.Body.String() != string(appendError(nil, e)) {
				t.Fatalf("answer %d %s, want %d %s", rec.Code, rec.Body, e.status, appendError(nil, e))
			}
		}
		if rec.Code != http.StatusAccepted && len(ta.fake.Calls()) != 0 {
			t.Fatalf("rejected body %q reached the service: %q", body, ta.fake.Calls())
		}
	})
}

// stdReaction is how encoding/json reads a reaction body.
type stdReaction struct {
	UserID    *string `json:"user_id"`
	ContentID *string `json:"content_id"`
	Action    *string `json:"action"`
}

func FuzzReaction(f *testing.F) {
	ta := newTestAPI(f, testConfig())
	f.Fuzz(func(t *testing.T, body []byte) {
		req, e := decodeReaction(string(body))
		checkSyntaxAgreement(t, body, e)
		if e == nil {
			if !engagement.ValidID(req.UserID) || !engagement.ValidID(req.ContentID) {
				t.Fatalf("accepted %+v, which breaks the id rule", req)
			}
			var std stdReaction
			dec := json.NewDecoder(bytes.NewReader(body))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&std); err != nil {
				t.Fatalf("accepted body %q, but encoding/json: %v", body, err)
			}
			if std.UserID == nil || std.ContentID == nil || std.Action == nil ||
				*std.UserID != req.UserID || *std.ContentID != req.ContentID || *std.Action != req.Action.String() {
				t.Fatalf("decoded %+v, encoding/json reads %+v", req, std)
			}
		}

		ta.fake.reset()
		rec := ta.do(t, http.MethodPost, "/v1/reactions", "application/json", string(body))
		switch {
		case len(body) > DefaultMaxBodyBytes:
			if rec.Code != http.StatusRequestEntityTooLarge {
				t.Fatalf("status = %d, want 413", rec.Code)
			}
		case e == nil:
			want := []string{"React " + req.UserID + " " + req.ContentID + " " + req.Action.String()}
			if rec.Code != http.StatusOK || !slices.Equal(ta.fake.Calls(), want) {
				t.Fatalf("answer %d %s, service calls %q, want 200 and %q", rec.Code, rec.Body, ta.fake.Calls(), want)
			}
		default:
			if rec.Code != e.status || rec.Body.String() != string(appendError(nil, e)) {
				t.Fatalf("answer %d %s, want %d %s", rec.Code, rec.Body, e.status, appendError(nil, e))
			}
			if calls := ta.fake.Calls(); len(calls) != 0 {
				t.Fatalf("rejected body %q reached the service: %q", body, calls)
			}
		}
	})
}

// getQuery serves GET path?rawQuery with a fresh call log and returns the
// answer and the service's calls.
func (ta *testAPI) getQuery(path, rawQuery string) (*httptest.ResponseRecorder, []string) {
	ta.fake.reset()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	req.URL.RawQuery = rawQuery
	rec := httptest.NewRecorder()
	ta.srv.ServeHTTP(rec, req)
	return rec, ta.fake.Calls()
}

// checkRejected checks an answer other than 200 to a fuzzed query: a 400
// naming a field, without a service call.
func checkRejected(t *testing.T, rec *httptest.ResponseRecorder, rawQuery string, calls []string) {
	t.Helper()
	if rec.Code != http.StatusBadRequest {
		t.Fatalf("status = %d, want 200 or 400", rec.Code)
	}
	var eb errorBody
	if err := json.Unmarshal(rec.Body.Bytes(), &eb); err != nil || eb.Field == "" || eb.Error == "" {
		t.Fatalf("400 answer %s is not a JSON error with a field (%v)", rec.Body, err)
	}
	if len(calls) != 0 {
		t.Fatalf("rejected query %q reached the service: %q", rawQuery, calls)
	}
}

// FuzzQuery feeds arbitrary query strings to the batch count read.
func FuzzQuery(f *testing.F) {
	ta := newTestAPI(f, testConfig())
	f.Fuzz(func(t *testing.T, rawQuery string) {
		rec, calls := ta.getQuery("/v1/counts", rawQuery)
		if rec.Code == http.StatusOK {
			if len(calls) != 1 || !(strings.HasPrefix(calls[0], "Counts [") || strings.HasPrefix(calls[0], "Counts fresh [")) {
				t.Fatalf("200 with service calls %q", calls)
			}
			var out struct {
				Counts []struct {
					ContentID string `json:"content_id"`
					Region    string `json:"region"`
				} `json:"counts"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
				t.Fatalf("answer %s is not JSON: %v", rec.Body, err)
			}
			if len(out.Counts) < 1 || len(out.Counts) > DefaultMaxBatchIDs {
				t.Fatalf("answered %d counts", len(out.Counts))
			}
			for _, c := range out.Counts {
				if !engagement.ValidID(c.ContentID) || !ta.h.(*api).scopes[c.Region] {
					t.Fatalf("answered %+v, which breaks a rule", c)
				}
			}
			return
		}
		checkRejected(t, rec, rawQuery, calls)
	})
}

// FuzzTrendingQuery: any query of GET /v1/trending is either answered 200
// after exactly one service call with parameters inside every rule, or 400
// naming a field without reaching the service.
func FuzzTrendingQuery(f *testing.F) {
	ta := newTestAPI(f, testConfig())
	seed(ta.fake)
	for _, q := range []string{"", "region=us&counter=view&window=24h&k=1000", "k=0", "window=5m&window=5m", "counter=like&k=01"} {
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, rawQuery string) {
		rec, calls := ta.getQuery("/v1/trending", rawQuery)
		if rec.Code == http.StatusOK {
			var scope, counter, window string
			var k int
			if len(calls) != 1 {
				t.Fatalf("200 with service calls %q", calls)
			}
			if _, err := fmt.Sscanf(calls[0], "Trending %s %s %s %d", &scope, &counter, &window, &k); err != nil {
				t.Fatalf("service call %q: %v", calls[0], err)
			}
			_, okWindow := engagement.WindowSpan(window)
			if !ta.h.(*api).scopes[scope] || (counter != "like" && counter != "view") || !okWindow || k < 1 || k > 1000 {
				t.Fatalf("query %q reached the service as %q, which breaks a rule", rawQuery, calls[0])
			}
			var out struct {
				Region string `json:"region"`
				Items  []struct {
					ContentID string `json:"content_id"`
				} `json:"items"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Region != scope || len(out.Items) > k {
				t.Fatalf("answer %s to %q: %v", rec.Body, calls[0], err)
			}
			return
		}
		checkRejected(t, rec, rawQuery, calls)
	})
}

// FuzzIdempotencyKey: the Idempotency-Key parser accepts exactly 1 to 128
// bytes of printable ASCII and refuses anything else with a 400 naming
// the header, before the body is read or the Service called.
func FuzzIdempotencyKey(f *testing.F) {
	ta := newTestAPI(f, testConfig())
	f.Fuzz(func(t *testing.T, key string) {
		valid := len(key) >= 1 && len(key) <= 128
		for i := 0; i < len(key); i++ {
			if key[i] < 0x20 || key[i] > 0x7e {
				valid = false
			}
		}
		got, e := parseIdempotencyKey(http.Header{headerIdempotencyKey: {key}})
		switch {
		case valid && (e != nil || got != key):
			t.Fatalf("key %q: got %q, %+v; want it accepted", key, got, e)
		case !valid && (e == nil || e.status != http.StatusBadRequest || e.field != headerIdempotencyKey || e.msg == ""):
			t.Fatalf("key %q: got %q, %+v; want a 400 naming %s", key, got, e, headerIdempotencyKey)
		}
		// Through the handler (the fake keeps no keys: a valid key is a
		// 501), never reaching the Service.
		ta.fake.reset()
		req := httptest.NewRequest(http.MethodPost, "/v1/increments", strings.NewReader(`{"increments":[{"content_id":"v","counter":"view","delta":1}]}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header[headerIdempotencyKey] = []string{key}
		rec := httptest.NewRecorder()
		ta.h.ServeHTTP(rec, req)
		want := http.StatusBadRequest
		if valid {
			want = http.StatusNotImplemented
		}
		if rec.Code != want || !strings.Contains(rec.Body.String(), `"field":"Idempotency-Key"`) {
			t.Fatalf("key %q: answer %d %s, want %d naming the header", key, rec.Code, rec.Body, want)
		}
		if calls := ta.fake.Calls(); len(calls) != 0 {
			t.Fatalf("key %q reached the service: %q", key, calls)
		}
	})
}

// FuzzEachParam holds eachParam, which unescapes only a query that has a
// '%' or '+', to the plain way (url.QueryUnescape of every key and value,
// the ';' test on every part): the same parameters in the same order, and
// the same error at the same point.
func FuzzEachParam(f *testing.F) {
	for _, s := range []string{"", "content_id=a&content_id=b", "a=%zz", "a;b=c", "x=1&a;b", "a+b=c%20d", "&&=&", "k=v=w", "a=%2", "bad=x&a=%g1", "%3B=%3b", "a=b&c=%"} {
		f.Add(s)
	}
	plain := func(raw string) (params []string, e *apiError) {
		for raw != "" {
			var part string
			part, raw, _ = strings.Cut(raw, "&")
			if part == "" {
				continue
			}
			if strings.Contains(part, ";") {
				return params, badField("query", "must separate parameters with '&', not ';'")
			}
			k, v, _ := strings.Cut(part, "=")
			k, err1 := url.QueryUnescape(k)
			v, err2 := url.QueryUnescape(v)
			if err := errors.Join(err1, err2); err != nil {
				return params, badField("query", "is malformed: "+err.Error())
			}
			if k == "bad" { // a parameter the caller refuses
				return params, badField("bad", "is refused")
			}
			params = append(params, k, v)
		}
		return params, nil
	}
	f.Fuzz(func(t *testing.T, raw string) {
		want, wantErr := plain(raw)
		var got []string
		gotErr := eachParam(raw, func(k, v string) *apiError {
			if k == "bad" {
				return badField("bad", "is refused")
			}
			got = append(got, k, v)
			return nil
		})
		if !slices.Equal(got, want) || fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
			t.Fatalf("eachParam(%q) = %q, %v; want %q, %v", raw, got, gotErr, want, wantErr)
		}
	})
}
