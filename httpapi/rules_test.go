package httpapi

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/edgecount/edgecount/httpserver"
	"github.com/edgecount/edgecount/httpserver/httpservertest"
)

// errorBody is the JSON of every error answer.
type errorBody struct {
	Error string `json:"error"`
	Field string `json:"field"`
}

// decodeError strictly decodes an error answer.
func decodeError(t *testing.T, rec *httptest.ResponseRecorder) errorBody {
	t.Helper()
	if got := rec.Header().Get("Content-Type"); got != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", got)
	}
	dec := json.NewDecoder(strings.NewReader(rec.Body.String()))
	dec.DisallowUnknownFields()
	var eb errorBody
	if err := dec.Decode(&eb); err != nil {
		t.Fatalf("error answer %q is not {error, field}: %v", rec.Body.String(), err)
	}
	if dec.More() {
		t.Errorf("error answer %q has data after the object", rec.Body.String())
	}
	if eb.Error == "" {
		t.Errorf("error answer %q has an empty error", rec.Body.String())
	}
	return eb
}

// item returns one increment object; an argument "-" leaves its member out.
func item(contentID, counter, delta string) string {
	var parts []string
	if contentID != "-" {
		parts = append(parts, `"content_id":`+contentID)
	}
	if counter != "-" {
		parts = append(parts, `"counter":`+counter)
	}
	if delta != "-" {
		parts = append(parts, `"delta":`+delta)
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// incBody returns an increments body of the given items.
func incBody(items ...string) string {
	return `{"increments":[` + strings.Join(items, ",") + `]}`
}

// nItems returns n valid increment objects.
func nItems(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = item(fmt.Sprintf(`"c%d"`, i), `"view"`, "1")
	}
	return out
}

// reactBody returns a reaction body; an argument "-" leaves its member out.
func reactBody(userID, contentID, action string) string {
	var parts []string
	if userID != "-" {
		parts = append(parts, `"user_id":`+userID)
	}
	if contentID != "-" {
		parts = append(parts, `"content_id":`+contentID)
	}
	if action != "-" {
		parts = append(parts, `"action":`+action)
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// q quotes s as a JSON string.
func q(s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// badIDs are ids that break the id rule, by reason.
var badIDs = []struct{ name, id string }{
	{"empty", ""},
	{"129 bytes", strings.Repeat("a", 129)},
	{"space", "a b"},
	{"slash", "a/b"},
	{"non-ASCII", "vidéo"},
	{"control char", "a\x01b"},
	{"tab", "a\tb"},
	{"DEL", "a\x7fb"},
}

// idsQuery returns content_id=… for each id.
func idsQuery(ids ...string) string {
	v := make([]string, len(ids))
	for i, id := range ids {
		v[i] = "content_id=" + url.QueryEscape(id)
	}
	return strings.Join(v, "&")
}

func manyIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("c%d", i)
	}
	return ids
}

type ruleCase struct {
	name              string
	method, target    string
	ctype, body       string
	wantStatus        int
	wantField         string
	wantErrorContains string
}

// ruleCases lists every input rule of docs/design.md and this package, each
// broken once.
func ruleCases() []ruleCase {
	const (
		post = http.MethodPost
		get  = http.MethodGet
		ct   = "application/json"
	)
	okItem := item(`"c1"`, `"view"`, "1")
	var cases []ruleCase
	add := func(c ruleCase) { cases = append(cases, c) }

	// Ids, everywhere an id goes.
	for _, b := range badIDs {
		add(ruleCase{name: "reaction user_id " + b.name, method: post, target: "/v1/reactions", ctype: ct,
			body: reactBody(q(b.id), `"c1"`, `"like"`), wantStatus: 400, wantField: "user_id"})
		add(ruleCase{name: "reaction content_id " + b.name, method: post, target: "/v1/reactions", ctype: ct,
			body: reactBody(`"u1"`, q(b.id), `"like"`), wantStatus: 400, wantField: "content_id"})
		add(ruleCase{name: "increment content_id " + b.name, method: post, target: "/v1/increments", ctype: ct,
			body: incBody(okItem, okItem, item(q(b.id), `"view"`, "1")), wantStatus: 400, wantField: "increments[2].content_id"})
		add(ruleCase{name: "batch reactions content_id " + b.name, method: get,
			target: "/v1/reactions/u1?" + idsQuery("c0", b.id), wantStatus: 400, wantField: "content_id[1]"})
		add(ruleCase{name: "batch counts content_id " + b.name, method: get,
			target: "/v1/counts?" + idsQuery("c0", "c1", b.id), wantStatus: 400, wantField: "content_id[2]"})
		if b.id == "" {
			continue // an empty path segment is a different route
		}
		add(ruleCase{name: "get reaction path user_id " + b.name, method: get,
			target: "/v1/reactions/" + url.PathEscape(b.id) + "/c1", wantStatus: 400, wantField: "user_id"})
		add(ruleCase{name: "get reaction path content_id " + b.name, method: get,
			target: "/v1/reactions/u1/" + url.PathEscape(b.id), wantStatus: 400, wantField: "content_id"})
		add(ruleCase{name: "batch reactions path user_id " + b.name, method: get,
			target: "/v1/reactions/" + url.PathEscape(b.id) + "?content_id=c1", wantStatus: 400, wantField: "user_id"})
		add(ruleCase{name: "get count path content_id " + b.name, method: get,
			target: "/v1/counts/" + url.PathEscape(b.id), wantStatus: 400, wantField: "content_id"})
	}
	add(ruleCase{name: "reaction user_id number", method: post, target: "/v1/reactions", ctype: ct,
		body: reactBody("7", `"c1"`, `"like"`), wantStatus: 400, wantField: "user_id"})
	add(ruleCase{name: "reaction content_id null", method: post, target: "/v1/reactions", ctype: ct,
		body: reactBody(`"u1"`, "null", `"like"`), wantStatus: 400, wantField: "content_id"})
	add(ruleCase{name: "increment content_id number", method: post, target: "/v1/increments", ctype: ct,
		body: incBody(item("12", `"view"`, "1")), wantStatus: 400, wantField: "increments[0].content_id"})

	// Counter names.
	for _, c := range []struct{ name, counter string }{
		{"uppercase", "View"},
		{"leading digit", "1view"},
		{"leading underscore", "_view"},
		{"33 chars", "v" + strings.Repeat("a", 32)},
		{"dash", "vi-ew"},
		{"empty", ""},
		{"like", "like"},
		{"dislike", "dislike"},
	} {
		add(ruleCase{name: "counter " + c.name, method: post, target: "/v1/increments", ctype: ct,
			body: incBody(okItem, item(`"c1"`, q(c.counter), "1")), wantStatus: 400, wantField: "increments[1].counter"})
	}
	add(ruleCase{name: "counter like message", method: post, target: "/v1/increments", ctype: ct,
		body: incBody(item(`"c1"`, `"like"`, "1")), wantStatus: 400, wantField: "increments[0].counter",
		wantErrorContains: "only through POST /v1/reactions"})
	add(ruleCase{name: "counter number", method: post, target: "/v1/increments", ctype: ct,
		body: incBody(item(`"c1"`, "5", "1")), wantStatus: 400, wantField: "increments[0].counter"})

	// Deltas.
	for _, c := range []struct{ name, delta string }{
		{"zero", "0"},
		{"negative", "-1"},
		{"1000001", "1000001"},
		{"huge", "100000000000000000000000000"},
		{"fraction", "1.5"},
		{"whole fraction", "1.0"},
		{"exponent", "1e3"},
		{"negative zero", "-0"},
		{"string", `"5"`},
		{"null", "null"},
		{"bool", "true"},
		{"array", "[1]"},
		{"object", `{"v":1}`},
	} {
		add(ruleCase{name: "delta " + c.name, method: post, target: "/v1/increments", ctype: ct,
			body: incBody(okItem, okItem, okItem, item(`"c1"`, `"view"`, c.delta)), wantStatus: 400, wantField: "increments[3].delta"})
	}

	// Missing, unknown and duplicate members; increment counts.
	add(ruleCase{name: "increment without content_id", method: post, target: "/v1/increments", ctype: ct,
		body: incBody(item("-", `"view"`, "1")), wantStatus: 400, wantField: "increments[0].content_id"})
	add(ruleCase{name: "increment without counter", method: post, target: "/v1/increments", ctype: ct,
		body: incBody(item(`"c1"`, "-", "1")), wantStatus: 400, wantField: "increments[0].counter"})
	add(ruleCase{name: "increment without delta", method: post, target: "/v1/increments", ctype: ct,
		body: incBody(okItem, item(`"c1"`, `"view"`, "-")), wantStatus: 400, wantField: "increments[1].delta"})
	add(ruleCase{name: "increment unknown field", method: post, target: "/v1/increments", ctype: ct,
		body: incBody(okItem, `{"content_id":"c1","counter":"view","delta":1,"weight":2}`), wantStatus: 400, wantField: "increments[1].weight"})
	add(ruleCase{name: "increment empty key", method: post, target: "/v1/increments", ctype: ct,
		body: incBody(`{"":1}`), wantStatus: 400, wantField: `increments[0].""`})
	add(ruleCase{name: "increments empty key", method: post, target: "/v1/increments", ctype: ct,
		body: `{"":[]}`, wantStatus: 400, wantField: `""`})
	add(ruleCase{name: "reaction empty key", method: post, target: "/v1/reactions", ctype: ct,
		body: `{"":""}`, wantStatus: 400, wantField: `""`})
	add(ruleCase{name: "query empty key", method: get, target: "/v1/counts?=0",
		wantStatus: 400, wantField: `""`})
	add(ruleCase{name: "increment key case differs", method: post, target: "/v1/increments", ctype: ct,
		body: incBody(`{"content_id":"c1","counter":"view","Delta":1}`), wantStatus: 400, wantField: "increments[0].Delta"})
	add(ruleCase{name: "increment duplicate delta", method: post, target: "/v1/increments", ctype: ct,
		body: incBody(`{"content_id":"c1","counter":"view","delta":1,"delta":2}`), wantStatus: 400, wantField: "increments[0].delta"})
	add(ruleCase{name: "increment not an object", method: post, target: "/v1/increments", ctype: ct,
		body: incBody(okItem, "5"), wantStatus: 400, wantField: "increments[1]"})
	add(ruleCase{name: "increments top-level unknown field", method: post, target: "/v1/increments", ctype: ct,
		body: `{"increments":[` + okItem + `],"dry_run":true}`, wantStatus: 400, wantField: "dry_run"})
	add(ruleCase{name: "increments duplicate", method: post, target: "/v1/increments", ctype: ct,
		body: `{"increments":[` + okItem + `],"increments":[` + okItem + `]}`, wantStatus: 400, wantField: "increments"})
	add(ruleCase{name: "increments missing", method: post, target: "/v1/increments", ctype: ct,
		body: `{}`, wantStatus: 400, wantField: "increments"})
	add(ruleCase{name: "increments null", method: post, target: "/v1/increments", ctype: ct,
		body: `{"increments":null}`, wantStatus: 400, wantField: "increments"})
	add(ruleCase{name: "increments object", method: post, target: "/v1/increments", ctype: ct,
		body: `{"increments":` + okItem + `}`, wantStatus: 400, wantField: "increments"})
	add(ruleCase{name: "0 increments", method: post, target: "/v1/increments", ctype: ct,
		body: incBody(), wantStatus: 400, wantField: "increments"})
	add(ruleCase{name: "10001 increments", method: post, target: "/v1/increments", ctype: ct,
		body: incBody(nItems(10001)...), wantStatus: 400, wantField: "increments"})
	add(ruleCase{name: "first error in document order", method: post, target: "/v1/increments", ctype: ct,
		body: incBody(okItem, item(`"c1"`, `"view"`, "0"), item(`"a b"`, `"view"`, "1")), wantStatus: 400, wantField: "increments[1].delta"})

	// Reactions.
	for _, a := range []string{`"LIKE"`, `""`, `"love"`, `"Like "`, "1", "null", "true"} {
		add(ruleCase{name: "action " + a, method: post, target: "/v1/reactions", ctype: ct,
			body: reactBody(`"u1"`, `"c1"`, a), wantStatus: 400, wantField: "action"})
	}
	add(ruleCase{name: "reaction without user_id", method: post, target: "/v1/reactions", ctype: ct,
		body: reactBody("-", `"c1"`, `"like"`), wantStatus: 400, wantField: "user_id"})
	add(ruleCase{name: "reaction without content_id", method: post, target: "/v1/reactions", ctype: ct,
		body: reactBody(`"u1"`, "-", `"like"`), wantStatus: 400, wantField: "content_id"})
	add(ruleCase{name: "reaction without action", method: post, target: "/v1/reactions", ctype: ct,
		body: reactBody(`"u1"`, `"c1"`, "-"), wantStatus: 400, wantField: "action"})
	add(ruleCase{name: "reaction unknown field", method: post, target: "/v1/reactions", ctype: ct,
		body: `{"user_id":"u1","content_id":"c1","action":"like","region":"eu"}`, wantStatus: 400, wantField: "region"})
	add(ruleCase{name: "reaction duplicate action", method: post, target: "/v1/reactions", ctype: ct,
		body: `{"user_id":"u1","content_id":"c1","action":"like","action":"none"}`, wantStatus: 400, wantField: "action"})

	// Bodies: syntax, emptiness, trailing data, shape, type, size, query.
	for _, ep := range []struct{ target, valid string }{
		{"/v1/reactions", reactBody(`"u1"`, `"c1"`, `"like"`)},
		{"/v1/increments", incBody(okItem)},
	} {
		for _, c := range []struct {
			name, body, field string
		}{
			{"empty body", "", "body"},
			{"white space body", " \n\t ", "body"},
			{"truncated", ep.valid[:len(ep.valid)-1], "body"},
			{"single quotes", `{'user_id':'u1'}`, "body"},
			{"trailing comma", strings.TrimSuffix(ep.valid, "}") + ",}", "body"},
			{"trailing data", ep.valid + " {}", "body"},
			{"trailing garbage", ep.valid + "x", "body"},
			{"two objects", ep.valid + ep.valid, "body"},
			{"array", "[" + ep.valid + "]", "body"},
			{"null", "null", "body"},
			{"string", `"x"`, "body"},
			{"control char in string", strings.Replace(ep.valid, `"c1"`, "\"c\x011\"", 1), "body"},
			{"bad escape", strings.Replace(ep.valid, `"c1"`, `"c\x"`, 1), "body"},
			{"leading zero number", `{"n":01}`, "body"},
			{"syntax error after field error", strings.Replace(ep.valid, `"c1"`, `"a b"`, 1) + "x", "body"},
			{"too deep", `{"x":` + strings.Repeat("[", 1000) + strings.Repeat("]", 1000) + `}`, "body"},
		} {
			add(ruleCase{name: ep.target + " " + c.name, method: post, target: ep.target, ctype: ct,
				body: c.body, wantStatus: 400, wantField: c.field})
		}
		for _, c := range []string{"text/plain", "multipart/form-data; boundary=x", "application/json; charset=latin1", "application/jsonx", "bogus/;"} {
			add(ruleCase{name: ep.target + " Content-Type " + c, method: post, target: ep.target, ctype: c,
				body: ep.valid, wantStatus: 415, wantField: "Content-Type"})
		}
		add(ruleCase{name: ep.target + " query parameter", method: post, target: ep.target + "?dry_run=1", ctype: ct,
			body: ep.valid, wantStatus: 400, wantField: "dry_run"})
		add(ruleCase{name: ep.target + " 1 MiB + 1 body", method: post, target: ep.target, ctype: ct,
			body: ep.valid + strings.Repeat(" ", 1<<20+1-len(ep.valid)), wantStatus: 413, wantField: "body"})
	}

	// Queries.
	add(ruleCase{name: "batch reactions 0 ids", method: get, target: "/v1/reactions/u1", wantStatus: 400, wantField: "content_id"})
	add(ruleCase{name: "batch reactions 101 ids", method: get, target: "/v1/reactions/u1?" + idsQuery(manyIDs(101)...),
		wantStatus: 400, wantField: "content_id"})
	add(ruleCase{name: "batch counts 0 ids", method: get, target: "/v1/counts?region=eu", wantStatus: 400, wantField: "content_id"})
	add(ruleCase{name: "batch counts 101 ids", method: get, target: "/v1/counts?" + idsQuery(manyIDs(101)...),
		wantStatus: 400, wantField: "content_id"})
	add(ruleCase{name: "batch reactions region not allowed", method: get, target: "/v1/reactions/u1?content_id=c1&region=eu",
		wantStatus: 400, wantField: "region"})
	add(ruleCase{name: "get reaction query parameter", method: get, target: "/v1/reactions/u1/c1?content_id=c2",
		wantStatus: 400, wantField: "content_id"})
	add(ruleCase{name: "get count unknown parameter", method: get, target: "/v1/counts/c1?regoin=eu",
		wantStatus: 400, wantField: "regoin"})
	add(ruleCase{name: "malformed query escape", method: get, target: "/v1/counts?content_id=%zz",
		wantStatus: 400, wantField: "query"})
	add(ruleCase{name: "semicolon in query", method: get, target: "/v1/counts?content_id=c1;region=eu",
		wantStatus: 400, wantField: "query"})
	for _, r := range []string{"mars", "", "GLOBAL", "Eu", "eu/1"} {
		add(ruleCase{name: "get count region " + q(r), method: get, target: "/v1/counts/c1?region=" + url.QueryEscape(r),
			wantStatus: 400, wantField: "region"})
		add(ruleCase{name: "batch counts region " + q(r), method: get, target: "/v1/counts?content_id=c1&region=" + url.QueryEscape(r),
			wantStatus: 400, wantField: "region"})
	}
	add(ruleCase{name: "region twice", method: get, target: "/v1/counts/c1?region=eu&region=eu",
		wantStatus: 400, wantField: "region"})
	for _, v := range []string{"strong", "", "Fresh", "EVENTUAL", "fresh ", "fresh,eventual"} {
		add(ruleCase{name: "get count consistency " + q(v), method: get, target: "/v1/counts/c1?consistency=" + url.QueryEscape(v),
			wantStatus: 400, wantField: "consistency", wantErrorContains: "eventual or fresh"})
		add(ruleCase{name: "batch counts consistency " + q(v), method: get, target: "/v1/counts?content_id=c1&consistency=" + url.QueryEscape(v),
			wantStatus: 400, wantField: "consistency", wantErrorContains: "eventual or fresh"})
	}
	add(ruleCase{name: "consistency twice", method: get, target: "/v1/counts/c1?consistency=fresh&consistency=fresh",
		wantStatus: 400, wantField: "consistency"})
	add(ruleCase{name: "consistency on reactions", method: get, target: "/v1/reactions/u1/c1?consistency=fresh",
		wantStatus: 400, wantField: "consistency"})
	add(ruleCase{name: "consistency on trending", method: get, target: "/v1/trending?consistency=fresh",
		wantStatus: 400, wantField: "consistency"})

	// Trending.
	for _, c := range []struct{ name, query, field, contains string }{
		{"k zero", "k=0", "k", "1 to 1000"},
		{"k over", "k=1001", "k", "1 to 1000"},
		{"k negative", "k=-1", "k", "1 to 1000"},
		{"k plus", "k=%2B5", "k", "1 to 1000"},
		{"k fraction", "k=1.5", "k", "1 to 1000"},
		{"k exponent", "k=1e2", "k", "1 to 1000"},
		{"k empty", "k=", "k", "1 to 1000"},
		{"k long", "k=00010", "k", "1 to 1000"},
		{"k twice", "k=1&k=2", "k", "more than once"},
		{"window unknown", "window=10m", "window", "5m, 1h, 24h"},
		{"window upper", "window=5M", "window", "5m"},
		{"window empty", "window=", "window", "5m"},
		{"window twice", "window=5m&window=1h", "window", "more than once"},
		{"counter bad name", "counter=View", "counter", "[a-z]"},
		{"counter empty", "counter=", "counter", "[a-z]"},
		{"counter untracked", "counter=share", "counter", "kept for: like, view"},
		{"counter dislike untracked", "counter=dislike", "counter", "kept for"},
		{"counter twice", "counter=like&counter=view", "counter", "more than once"},
		{"region unknown", "region=mars", "region", "global, eu, us, ap"},
		{"region upper", "region=GLOBAL", "region", "must be one of"},
		{"region twice", "region=eu&region=us", "region", "more than once"},
		{"unknown parameter", "limit=10", "limit", "not a known"},
		{"content_id parameter", "content_id=c1", "content_id", "not a known"},
		{"semicolon", "k=1;window=5m", "query", "'&'"},
		{"bad escape", "k=%zz", "query", "malformed"},
	} {
		add(ruleCase{name: "trending " + c.name, method: get, target: "/v1/trending?" + c.query,
			wantStatus: 400, wantField: c.field, wantErrorContains: c.contains})
	}
	add(ruleCase{name: "POST trending", method: post, target: "/v1/trending", ctype: ct, body: "{}", wantStatus: 405, wantField: "method"})

	// Routing.
	add(ruleCase{name: "unknown path", method: get, target: "/v1/nothing", wantStatus: 404, wantField: "path"})
	add(ruleCase{name: "trailing slash", method: get, target: "/v1/counts/c1/", wantStatus: 404, wantField: "path"})
	add(ruleCase{name: "empty path segment", method: get, target: "/v1/reactions//c1", wantStatus: 400, wantField: "path"})
	add(ruleCase{name: "dot-dot segment", method: get, target: "/v1/counts/a/../b", wantStatus: 400, wantField: "path"})
	add(ruleCase{name: "DELETE reactions", method: http.MethodDelete, target: "/v1/reactions", wantStatus: 405, wantField: "method"})
	add(ruleCase{name: "GET increments", method: get, target: "/v1/increments", wantStatus: 405, wantField: "method"})
	add(ruleCase{name: "PUT counts", method: http.MethodPut, target: "/v1/counts/c1", ctype: ct, body: "{}", wantStatus: 405, wantField: "method"})
	add(ruleCase{name: "POST healthz", method: post, target: "/healthz", wantStatus: 405, wantField: "method"})
	return cases
}

// TestInputRules breaks every input rule once and checks the status, the
// field the error names, and that the service saw nothing at all.
func TestInputRules(t *testing.T) {
	ta := newTestAPI(t, testConfig())
	for _, c := range ruleCases() {
		t.Run(c.name, func(t *testing.T) {
			ta.fake.reset()
			rec := ta.do(t, c.method, c.target, c.ctype, c.body)
			t.Logf("answer: %d %s", rec.Code, rec.Body)
			if rec.Code != c.wantStatus {
				t.Errorf("status = %d, want %d (body %s)", rec.Code, c.wantStatus, rec.Body)
			}
			eb := decodeError(t, rec)
			if eb.Field != c.wantField {
				t.Errorf("field = %q, want %q (error %q)", eb.Field, c.wantField, eb.Error)
			}
			if !strings.Contains(eb.Error, c.wantErrorContains) {
				t.Errorf("error = %q, want it to contain %q", eb.Error, c.wantErrorContains)
			}
			if calls := ta.fake.Calls(); len(calls) != 0 {
				t.Errorf("service calls = %q, want none", calls)
			}
		})
	}
}

// TestOversizedBodyRealServer sends bodies over a real connection, with and
// without Content-Length, one byte under, at and over the limit.
func TestOversizedBodyRealServer(t *testing.T) {
	ta := newTestAPI(t, testConfig())
	base := "http://" + httpservertest.Start(t, ta.h, httpserver.Config{})
	client := &http.Client{}
	t.Cleanup(client.CloseIdleConnections)
	valid := incBody(item(`"c1"`, `"view"`, "1"))
	for _, c := range []struct {
		name       string
		size       int
		chunked    bool
		wantStatus int
	}{
		{"at limit", 1 << 20, false, 202},
		{"at limit chunked", 1 << 20, true, 202},
		{"over limit", 1<<20 + 1, false, 413},
		{"over limit chunked", 1<<20 + 1, true, 413},
		{"far over limit chunked", 4 << 20, true, 413},
	} {
		t.Run(c.name, func(t *testing.T) {
			ta.fake.reset()
			body := valid + strings.Repeat(" ", c.size-len(valid))
			var rd io.Reader = strings.NewReader(body)
			if c.chunked {
				rd = io.MultiReader(rd) // hides the length
			}
			req, err := http.NewRequest(http.MethodPost, base+"/v1/increments", rd)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			if err != nil {
				t.Fatalf("POST: %v", err)
			}
			defer resp.Body.Close()
			got, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != c.wantStatus {
				t.Fatalf("status = %d, want %d (body %s)", resp.StatusCode, c.wantStatus, got)
			}
			wantCalls := 1
			if c.wantStatus == 413 {
				wantCalls = 0
				if want := `{"error":"body is larger than 1048576 bytes","field":"body"}`; string(got) != want {
					t.Errorf("body = %s, want %s", got, want)
				}
			}
			if calls := ta.fake.Calls(); len(calls) != wantCalls {
				t.Errorf("service calls = %q, want %d", calls, wantCalls)
			}
		})
	}
}

// TestOversizedBodyClientWritesAllFirst: a client that writes its whole
// body before it reads the answer (Python's urllib, many SDKs) still gets
// the 413, also when its body takes longer to arrive than a short drain
// would wait; nothing reaches the service.
func TestOversizedBodyClientWritesAllFirst(t *testing.T) {
	ta := newTestAPI(t, testConfig())
	addr := httpservertest.Start(t, ta.h, httpserver.Config{})
	for _, c := range []struct {
		name  string
		pause time.Duration // between 64 KiB chunks
	}{
		{"at once", 0},
		{"slowly, over ~2.5 s", 90 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			ta.fake.reset()
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			const size = 1_800_000
			head := fmt.Sprintf("POST /v1/increments HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", addr, size)
			if _, err := conn.Write([]byte(head)); err != nil {
				t.Fatal(err)
			}
			chunk := bytes.Repeat([]byte(" "), 64<<10)
			for sent := 0; sent < size; sent += len(chunk) {
				if _, err := conn.Write(chunk[:min(len(chunk), size-sent)]); err != nil {
					t.Fatalf("writing the body after %d bytes: %v (the server reset the connection)", sent, err)
				}
				time.Sleep(c.pause)
			}
			conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("reading the answer: %v", err)
			}
			got, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 413 || !strings.Contains(string(got), `"field":"body"`) {
				t.Fatalf("answer %d %s; want the 413 naming body", resp.StatusCode, got)
			}
			if calls := ta.fake.Calls(); len(calls) != 0 {
				t.Errorf("service calls = %q, want none", calls)
			}
		})
	}
}
