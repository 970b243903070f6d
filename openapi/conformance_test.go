package openapi_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"
	verrors "github.com/pb33f/libopenapi-validator/errors"
	"github.com/pb33f/libopenapi-validator/schema_validation"
	v3 "github.com/pb33f/libopenapi/datamodel/high/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/edgecount/edgecount/httpapi"
	"github.com/edgecount/edgecount/internal/testenv"
	"github.com/edgecount/edgecount/openapi"
	"github.com/edgecount/edgecount/rollup"
)

// spec is the document, built into libopenapi's v3 model, and a validator
// of requests and answers against it.
type spec struct {
	model *v3.Document
	v     validator.Validator
}

// loadSpec builds the document's model (no errors allowed) and a validator
// of it, and checks the document itself against the OpenAPI 3.1 schema.
func loadSpec(t *testing.T) *spec {
	t.Helper()
	doc, err := libopenapi.NewDocument(openapi.JSON)
	if err != nil {
		t.Fatalf("openapi.json is not an OpenAPI document: %v", err)
	}
	if v := doc.GetVersion(); !strings.HasPrefix(v, "3.1") {
		t.Fatalf("openapi.json is OpenAPI %q, want 3.1", v)
	}
	m, err := doc.BuildV3Model()
	if err != nil {
		t.Fatalf("openapi.json does not build a v3 model: %v", err)
	}
	// Strict mode: undeclared query parameters (and JSON properties) are
	// errors, as they are to the server. Strict mode does not honour a
	// schema'd additionalProperties (the counters map), which the schema
	// check covers.
	v, errs := validator.NewValidator(doc, config.WithStrictMode(),
		config.WithStrictIgnorePaths("$.body.counters.*", "$.body.counts[*].counters.*",
			// GET /v1/openapi.json answers this document: its parts are
			// free-form objects to the schema of that answer.
			"$.body.info.*", "$.body.paths.*", "$.body.paths['/v1/openapi.json']", "$.body.components.*"))
	if len(errs) > 0 {
		t.Fatalf("cannot build a validator of openapi.json: %v", errs)
	}
	if ok, verrs := v.ValidateDocument(); !ok {
		t.Fatalf("openapi.json breaks the OpenAPI 3.1 schema:\n%s", describe(verrs))
	}
	return &spec{model: &m.Model, v: v}
}

func describe(errs []*verrors.ValidationError) string {
	var b strings.Builder
	for _, e := range errs {
		fmt.Fprintf(&b, "  - %s: %s", e.ValidationType, e.Message)
		if e.Reason != "" {
			fmt.Fprintf(&b, " (%s)", e.Reason)
		}
		for _, f := range e.SchemaValidationErrors {
			fmt.Fprintf(&b, "\n      %s: %s", f.FieldPath, f.Reason)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// short returns an answer's body for a message, cut at 300 bytes.
func short(b []byte) string {
	b = bytes.TrimSpace(b)
	if len(b) > 300 {
		return string(b[:300]) + "…"
	}
	return string(b)
}

// reqRule is what the document must say of a case's request.
type reqRule int

const (
	// reqValid: the request obeys the document.
	reqValid reqRule = iota
	// reqInvalid: the server rejects the request, and so must the document.
	reqInvalid
	// reqBeyondSchema: the server rejects the request for a rule that
	// OpenAPI cannot state (the document's prose states it); the request
	// is not checked against the document, the answer is.
	reqBeyondSchema
)

// exchange is one request sent to a running server and what is expected of
// its answer.
type exchange struct {
	name   string
	method string
	target string // path and query
	ctype  string // request Content-Type; "" sends none
	key    string // Idempotency-Key; "" sends none
	body   []byte
	status int // the answer's status
	req    reqRule
	// op is the documented operation the request exercises, "METHOD
	// /template" plus " MEDIA" for a request body's media type; empty for
	// a request no operation owns (unknown path, wrong method).
	op string
	// component names the components.responses entry the answer must obey
	// when no operation owns the request (404, 405).
	component string
	// pendingUnless: on a server without the route (answering one of
	// these statuses), the case is logged as pending rather than failed.
	pendingUnless []int
}

// result is an exchange as sent and answered.
type result struct {
	req  *http.Request
	resp *http.Response
	body []byte
}

// fresh returns a copy of the request with its body rewound.
func (r result) freshReq(body []byte) *http.Request {
	q := r.req.Clone(context.Background())
	q.Body = io.NopCloser(bytes.NewReader(body))
	q.ContentLength = int64(len(body))
	return q
}

func (r result) freshResp() *http.Response {
	resp := *r.resp
	resp.Body = io.NopCloser(bytes.NewReader(r.body))
	return &resp
}

func send(t *testing.T, c *http.Client, base string, x exchange) result {
	t.Helper()
	req, err := http.NewRequest(x.method, base+x.target, bytes.NewReader(x.body))
	if err != nil {
		t.Fatalf("%s: %v", x.name, err)
	}
	if x.ctype != "" {
		req.Header.Set("Content-Type", x.ctype)
	}
	if x.key != "" {
		req.Header.Set("Idempotency-Key", x.key)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s: %s %s: %v", x.name, x.method, x.target, err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("%s: reading the answer: %v", x.name, err)
	}
	return result{req: req, resp: resp, body: body}
}

// check validates one exchange's request and answer against the document
// and returns whether the route answered (false: pending).
func (s *spec) check(t *testing.T, x exchange, r result) bool {
	t.Helper()
	if slices.Contains(x.pendingUnless, r.resp.StatusCode) {
		t.Logf("PENDING %s (%s): the agent answers %d %s; the route is documented but not served by this build",
			x.op, x.name, r.resp.StatusCode, short(r.body))
		s.checkAnswer(t, x, r, true)
		return false
	}
	if r.resp.StatusCode != x.status {
		t.Errorf("%s: %s %s answered %d %s; want %d", x.name, x.method, x.target, r.resp.StatusCode, short(r.body), x.status)
		return true
	}
	ok, errs := s.v.ValidateHttpRequestSync(r.freshReq(x.body))
	if ok {
		ok, errs = s.checkQueryArrays(x, r.req)
	}
	switch {
	case x.req == reqValid && !ok:
		t.Errorf("%s: the document rejects a request the server accepts:\n%s", x.name, describe(errs))
	case x.req == reqInvalid && ok:
		t.Errorf("%s: the document accepts a request the server rejects with %d %s", x.name, r.resp.StatusCode, short(r.body))
	}
	s.checkAnswer(t, x, r, false)
	return true
}

// checkQueryArrays validates the values of each repeated (exploded
// array) query parameter of the case's operation as one array against its
// schema: libopenapi-validator v0.16 checks only the items' types there,
// not their patterns, lengths or the array's bounds.
func (s *spec) checkQueryArrays(x exchange, req *http.Request) (bool, []*verrors.ValidationError) {
	method, rest, _ := strings.Cut(x.op, " ")
	path, _, _ := strings.Cut(rest, " ")
	item, ok := s.model.Paths.PathItems.Get(path)
	if x.op == "" || !ok {
		return true, nil
	}
	op, ok := item.GetOperations().Get(strings.ToLower(method))
	if !ok {
		return true, nil
	}
	q := req.URL.Query()
	for _, p := range op.Parameters {
		if p.In != "query" || p.Schema == nil {
			continue
		}
		sch := p.Schema.Schema()
		if !slices.Contains(sch.Type, "array") {
			continue
		}
		vals, given := q[p.Name]
		if !given {
			continue // a missing required parameter is the library's
		}
		arr := make([]any, len(vals))
		for i, v := range vals {
			arr[i] = v
		}
		if ok, errs := schema_validation.NewSchemaValidator().ValidateSchemaObject(sch, arr); !ok {
			return false, errs
		}
	}
	return true, nil
}

// checkAnswer validates the answer: against its operation or, for a
// request no operation owns (and for a pending route's answer), against
// the named component response.
func (s *spec) checkAnswer(t *testing.T, x exchange, r result, pending bool) {
	t.Helper()
	if x.component == "" && !pending {
		if ok, errs := s.v.ValidateHttpResponse(r.freshReq(x.body), r.freshResp()); !ok {
			t.Errorf("%s: the answer %d %s breaks the document:\n%s", x.name, r.resp.StatusCode, short(r.body), describe(errs))
		}
		return
	}
	name := x.component
	if pending {
		switch r.resp.StatusCode {
		case http.StatusNotFound:
			name = "NotFound"
		case http.StatusMethodNotAllowed:
			name = "MethodNotAllowed"
		case http.StatusUnsupportedMediaType:
			name = "UnsupportedMediaType"
		default:
			t.Errorf("%s: pending route answered %d, which has no component response", x.name, r.resp.StatusCode)
			return
		}
	}
	if err := s.checkComponent(name, r); err != nil {
		t.Errorf("%s: the answer %d %s breaks components.responses.%s: %v", x.name, r.resp.StatusCode, short(r.body), name, err)
	}
}

// checkComponent validates an answer against components.responses[name]:
// its required headers, its media type and its body's schema.
func (s *spec) checkComponent(name string, r result) error {
	cr, ok := s.model.Components.Responses.Get(name)
	if !ok {
		return fmt.Errorf("the document has no components.responses.%s", name)
	}
	for h, hdr := range cr.Headers.FromOldest() {
		if hdr.Required && r.resp.Header.Get(h) == "" {
			return fmt.Errorf("required header %s is missing", h)
		}
	}
	mt, _, err := mime.ParseMediaType(r.resp.Header.Get("Content-Type"))
	if err != nil {
		return fmt.Errorf("Content-Type %q: %v", r.resp.Header.Get("Content-Type"), err)
	}
	media, ok := cr.Content.Get(mt)
	if !ok {
		return fmt.Errorf("media type %s is not documented", mt)
	}
	if ok, errs := schema_validation.NewSchemaValidator().ValidateSchemaBytes(media.Schema.Schema(), r.body); !ok {
		return errors.New(describe(errs))
	}
	return nil
}

// documentedOps lists every operation of the document with each of its
// request bodies' media types: "METHOD /path" or "METHOD /path MEDIA".
func (s *spec) documentedOps() []string {
	var ops []string
	for path, item := range s.model.Paths.PathItems.FromOldest() {
		for method, op := range item.GetOperations().FromOldest() {
			key := strings.ToUpper(method) + " " + path
			if op.RequestBody == nil || op.RequestBody.Content.Len() == 0 {
				ops = append(ops, key)
				continue
			}
			for media := range op.RequestBody.Content.KeysFromOldest() {
				ops = append(ops, key+" "+media)
			}
		}
	}
	slices.Sort(ops)
	return ops
}

// startAgent builds cmd/edge-agent and runs it standalone (embedded store
// and broker, in-process rollup; no services needed), returning its base
// URL.
func startAgent(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "edge-agent")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/edge-agent").CombinedOutput(); err != nil {
		t.Fatalf("go build ../cmd/edge-agent: %v\n%s", err, out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	stderr := &testenv.Buffer{}
	cmd := exec.Command(bin, "--data", t.TempDir(), "--http", addr, "--log-level", "warn")
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("agent stderr:\n%s", stderr.String())
		}
	})
	base := "http://" + addr
	testenv.Eventually(t, 60*time.Second, "agent ready", func() (string, bool) {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return err.Error(), false
		}
		resp.Body.Close()
		return resp.Status, resp.StatusCode == http.StatusOK
	})
	return base
}

// Protobuf bodies of proto/edgecount/v1/edgecount.proto, encoded by hand
// (protowire) so that the test needs no generated code.

func pbIncrements(incs ...[3]any) []byte {
	var b []byte
	for _, in := range incs {
		var m []byte
		m = protowire.AppendTag(m, 1, protowire.BytesType)
		m = protowire.AppendString(m, in[0].(string))
		m = protowire.AppendTag(m, 2, protowire.BytesType)
		m = protowire.AppendString(m, in[1].(string))
		m = protowire.AppendTag(m, 3, protowire.VarintType)
		m = protowire.AppendVarint(m, uint64(in[2].(int)))
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendBytes(b, m)
	}
	return b
}

func pbCounts(region string, ids ...string) []byte {
	var b []byte
	for _, id := range ids {
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendString(b, id)
	}
	if region != "" {
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendString(b, region)
	}
	return b
}

const (
	ctJSON  = "application/json"
	ctProto = "application/x-protobuf"
)

func manyIDs(param string, n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte('&')
		}
		fmt.Fprintf(&b, "%s=v%d", param, i)
	}
	return b.String()
}

// TestAgentConformsToTheDocument sends every documented route, with its
// error cases, to a real standalone agent and validates each request and
// answer against openapi.json; every documented operation must be
// exercised (or be pending on a build without it).
func TestAgentConformsToTheDocument(t *testing.T) {
	s := loadSpec(t)
	base := startAgent(t)
	c := &http.Client{Timeout: 30 * time.Second}

	big := []byte(`{"increments":[` + strings.Repeat(`{"content_id":"v1","counter":"view","delta":1},`, 1<<20/46) + `{"content_id":"v1","counter":"view","delta":1}]}`)
	tooMany := []byte(`{"increments":[` + strings.Repeat(`{"content_id":"v","counter":"c","delta":1},`, 10_000) + `{"content_id":"v","counter":"c","delta":1}]}`)
	bigAdmin := []byte(`{"ids":["` + strings.Repeat("x", 70<<10) + `"]}`)
	notProto := []int{http.StatusUnsupportedMediaType}
	notRoute := []int{http.StatusNotFound, http.StatusMethodNotAllowed}

	writes := []exchange{
		// POST /v1/increments, JSON
		{name: "increments", method: "POST", target: "/v1/increments", ctype: ctJSON,
			body:   []byte(`{"increments":[{"content_id":"v1","counter":"view","delta":3},{"content_id":"v2","counter":"share","delta":1}]}`),
			status: 202, op: "POST /v1/increments " + ctJSON},
		{name: "increments without Content-Type", method: "POST", target: "/v1/increments",
			body: []byte(`{"increments":[{"content_id":"v1","counter":"view","delta":1}]}`), status: 202, req: reqBeyondSchema,
			op: "POST /v1/increments " + ctJSON},
		{name: "increments bad id", method: "POST", target: "/v1/increments", ctype: ctJSON,
			body: []byte(`{"increments":[{"content_id":"a b","counter":"view","delta":1}]}`), status: 400, req: reqInvalid,
			op: "POST /v1/increments " + ctJSON},
		{name: "increments id of 129 bytes", method: "POST", target: "/v1/increments", ctype: ctJSON,
			body: []byte(`{"increments":[{"content_id":"` + strings.Repeat("a", 129) + `","counter":"view","delta":1}]}`), status: 400, req: reqInvalid,
			op: "POST /v1/increments " + ctJSON},
		{name: "increments bad counter", method: "POST", target: "/v1/increments", ctype: ctJSON,
			body: []byte(`{"increments":[{"content_id":"v1","counter":"View","delta":1}]}`), status: 400, req: reqInvalid,
			op: "POST /v1/increments " + ctJSON},
		{name: "increments counter like", method: "POST", target: "/v1/increments", ctype: ctJSON,
			body: []byte(`{"increments":[{"content_id":"v1","counter":"like","delta":1}]}`), status: 400, req: reqInvalid,
			op: "POST /v1/increments " + ctJSON},
		{name: "increments delta 0", method: "POST", target: "/v1/increments", ctype: ctJSON,
			body: []byte(`{"increments":[{"content_id":"v1","counter":"view","delta":0}]}`), status: 400, req: reqInvalid,
			op: "POST /v1/increments " + ctJSON},
		{name: "increments delta 1.5", method: "POST", target: "/v1/increments", ctype: ctJSON,
			body: []byte(`{"increments":[{"content_id":"v1","counter":"view","delta":1.5}]}`), status: 400, req: reqInvalid,
			op: "POST /v1/increments " + ctJSON},
		{name: "increments delta 1000001", method: "POST", target: "/v1/increments", ctype: ctJSON,
			body: []byte(`{"increments":[{"content_id":"v1","counter":"view","delta":1000001}]}`), status: 400, req: reqInvalid,
			op: "POST /v1/increments " + ctJSON},
		{name: "increments delta 1.0 (whole, but a fraction literal)", method: "POST", target: "/v1/increments", ctype: ctJSON,
			body: []byte(`{"increments":[{"content_id":"v1","counter":"view","delta":1.0}]}`), status: 400, req: reqBeyondSchema,
			op: "POST /v1/increments " + ctJSON},
		{name: "increments delta as a string", method: "POST", target: "/v1/increments", ctype: ctJSON,
			body: []byte(`{"increments":[{"content_id":"v1","counter":"view","delta":"5"}]}`), status: 400, req: reqInvalid,
			op: "POST /v1/increments " + ctJSON},
		{name: "increments empty list", method: "POST", target: "/v1/increments", ctype: ctJSON,
			body: []byte(`{"increments":[]}`), status: 400, req: reqInvalid, op: "POST /v1/increments " + ctJSON},
		{name: "increments 10001 (too many)", method: "POST", target: "/v1/increments", ctype: ctJSON,
			body: tooMany, status: 400, req: reqInvalid, op: "POST /v1/increments " + ctJSON},
		{name: "increments unknown field", method: "POST", target: "/v1/increments", ctype: ctJSON,
			body: []byte(`{"increments":[{"content_id":"v1","counter":"view","delta":1,"x":1}]}`), status: 400, req: reqInvalid,
			op: "POST /v1/increments " + ctJSON},
		{name: "increments missing delta", method: "POST", target: "/v1/increments", ctype: ctJSON,
			body: []byte(`{"increments":[{"content_id":"v1","counter":"view"}]}`), status: 400, req: reqInvalid,
			op: "POST /v1/increments " + ctJSON},
		{name: "increments duplicate JSON field", method: "POST", target: "/v1/increments", ctype: ctJSON,
			body: []byte(`{"increments":[{"content_id":"v1","counter":"view","delta":1,"delta":2}]}`), status: 400, req: reqBeyondSchema,
			op: "POST /v1/increments " + ctJSON},
		{name: "increments malformed JSON", method: "POST", target: "/v1/increments", ctype: ctJSON,
			body: []byte(`{"increments":[`), status: 400, req: reqInvalid, op: "POST /v1/increments " + ctJSON},
		{name: "increments unknown query parameter", method: "POST", target: "/v1/increments?x=1", ctype: ctJSON,
			body: []byte(`{"increments":[{"content_id":"v1","counter":"view","delta":1}]}`), status: 400, req: reqInvalid,
			op: "POST /v1/increments " + ctJSON},
		{name: "increments text/plain", method: "POST", target: "/v1/increments", ctype: "text/plain",
			body: []byte(`{"increments":[{"content_id":"v1","counter":"view","delta":1}]}`), status: 415, req: reqInvalid,
			op: "POST /v1/increments " + ctJSON},
		{name: "increments oversized body", method: "POST", target: "/v1/increments", ctype: ctJSON,
			body: big, status: 413, req: reqBeyondSchema, op: "POST /v1/increments " + ctJSON},
		// POST /v1/increments, protobuf (served after the server-path branch)
		{name: "increments protobuf", method: "POST", target: "/v1/increments", ctype: ctProto,
			body: pbIncrements([3]any{"v1", "view", 2}), status: 202, op: "POST /v1/increments " + ctProto, pendingUnless: notProto},
		{name: "increments protobuf delta 0", method: "POST", target: "/v1/increments", ctype: ctProto,
			body: pbIncrements([3]any{"v1", "view", 0}), status: 400, req: reqBeyondSchema,
			op: "POST /v1/increments " + ctProto, pendingUnless: notProto},
		// Idempotency-Key on both writes.
		{name: "increments keyed", method: "POST", target: "/v1/increments", ctype: ctJSON, key: "conformance-1",
			body: []byte(`{"increments":[{"content_id":"v7","counter":"view","delta":2}]}`), status: 202, op: "POST /v1/increments " + ctJSON},
		{name: "increments keyed, retried (the first answer)", method: "POST", target: "/v1/increments", ctype: ctJSON, key: "conformance-1",
			body: []byte(`{"increments":[{"content_id":"v7","counter":"view","delta":2}]}`), status: 202, op: "POST /v1/increments " + ctJSON},
		{name: "increments keyed, another body", method: "POST", target: "/v1/increments", ctype: ctJSON, key: "conformance-1",
			body: []byte(`{"increments":[{"content_id":"v7","counter":"view","delta":3}]}`), status: 422, op: "POST /v1/increments " + ctJSON},
		{name: "increments key of 129 bytes", method: "POST", target: "/v1/increments", ctype: ctJSON, key: strings.Repeat("k", 129),
			body: []byte(`{"increments":[{"content_id":"v7","counter":"view","delta":2}]}`), status: 400, req: reqInvalid, op: "POST /v1/increments " + ctJSON},
		{name: "increments key not ASCII", method: "POST", target: "/v1/increments", ctype: ctJSON, key: "clé",
			body: []byte(`{"increments":[{"content_id":"v7","counter":"view","delta":2}]}`), status: 400, req: reqInvalid, op: "POST /v1/increments " + ctJSON},
		{name: "reaction keyed", method: "POST", target: "/v1/reactions", ctype: ctJSON, key: "conformance-2",
			body: []byte(`{"user_id":"u1","content_id":"v7","action":"like"}`), status: 200, op: "POST /v1/reactions " + ctJSON},
		{name: "reaction keyed, retried (the first answer)", method: "POST", target: "/v1/reactions", ctype: ctJSON, key: "conformance-2",
			body: []byte(`{"user_id":"u1","content_id":"v7","action":"like"}`), status: 200, op: "POST /v1/reactions " + ctJSON},
		{name: "reaction keyed, another body", method: "POST", target: "/v1/reactions", ctype: ctJSON, key: "conformance-2",
			body: []byte(`{"user_id":"u1","content_id":"v7","action":"dislike"}`), status: 422, op: "POST /v1/reactions " + ctJSON},
		// POST /v1/reactions
		{name: "reaction like", method: "POST", target: "/v1/reactions", ctype: ctJSON,
			body: []byte(`{"user_id":"u1","content_id":"v1","action":"like"}`), status: 200, op: "POST /v1/reactions " + ctJSON},
		{name: "reaction like again (unchanged)", method: "POST", target: "/v1/reactions", ctype: "application/json; charset=utf-8",
			body: []byte(`{"user_id":"u1","content_id":"v1","action":"like"}`), status: 200, op: "POST /v1/reactions " + ctJSON},
		{name: "reaction bad action", method: "POST", target: "/v1/reactions", ctype: ctJSON,
			body: []byte(`{"user_id":"u1","content_id":"v1","action":"love"}`), status: 400, req: reqInvalid, op: "POST /v1/reactions " + ctJSON},
		{name: "reaction bad user id", method: "POST", target: "/v1/reactions", ctype: ctJSON,
			body: []byte(`{"user_id":"u/1","content_id":"v1","action":"like"}`), status: 400, req: reqInvalid, op: "POST /v1/reactions " + ctJSON},
		{name: "reaction missing field", method: "POST", target: "/v1/reactions", ctype: ctJSON,
			body: []byte(`{"user_id":"u1","action":"like"}`), status: 400, req: reqInvalid, op: "POST /v1/reactions " + ctJSON},
		{name: "reaction duplicate field", method: "POST", target: "/v1/reactions", ctype: ctJSON,
			body: []byte(`{"user_id":"u1","content_id":"v1","action":"like","action":"none"}`), status: 400, req: reqBeyondSchema, op: "POST /v1/reactions " + ctJSON},
		{name: "reaction empty body", method: "POST", target: "/v1/reactions", ctype: ctJSON,
			body: nil, status: 400, req: reqInvalid, op: "POST /v1/reactions " + ctJSON},
		{name: "reaction text/xml", method: "POST", target: "/v1/reactions", ctype: "text/xml",
			body: []byte(`<r/>`), status: 415, req: reqInvalid, op: "POST /v1/reactions " + ctJSON},
		{name: "reaction oversized body", method: "POST", target: "/v1/reactions", ctype: ctJSON,
			body: big, status: 413, req: reqBeyondSchema, op: "POST /v1/reactions " + ctJSON},
	}
	reads := []exchange{
		{name: "reaction read", method: "GET", target: "/v1/reactions/u1/v1", status: 200, op: "GET /v1/reactions/{user_id}/{content_id}"},
		{name: "reaction read, no row", method: "GET", target: "/v1/reactions/u1/v9", status: 200, op: "GET /v1/reactions/{user_id}/{content_id}"},
		{name: "reaction read bad id", method: "GET", target: "/v1/reactions/u1/" + strings.Repeat("a", 129), status: 400, req: reqInvalid,
			op: "GET /v1/reactions/{user_id}/{content_id}"},
		{name: "reaction read unknown parameter", method: "GET", target: "/v1/reactions/u1/v1?region=global", status: 400, req: reqInvalid,
			op: "GET /v1/reactions/{user_id}/{content_id}"},
		{name: "reactions batch", method: "GET", target: "/v1/reactions/u1?content_id=v1&content_id=v2&content_id=v1", status: 200,
			op: "GET /v1/reactions/{user_id}"},
		{name: "reactions batch without ids", method: "GET", target: "/v1/reactions/u1", status: 400, req: reqInvalid,
			op: "GET /v1/reactions/{user_id}"},
		{name: "reactions batch 101 ids", method: "GET", target: "/v1/reactions/u1?" + manyIDs("content_id", 101), status: 400, req: reqInvalid,
			op: "GET /v1/reactions/{user_id}"},
		{name: "reactions batch bad id", method: "GET", target: "/v1/reactions/u1?content_id=a%20b", status: 400, req: reqInvalid,
			op: "GET /v1/reactions/{user_id}"},
		{name: "count", method: "GET", target: "/v1/counts/v1", status: 200, op: "GET /v1/counts/{content_id}"},
		{name: "count, global", method: "GET", target: "/v1/counts/v1?region=global", status: 200, op: "GET /v1/counts/{content_id}"},
		{name: "count, no row", method: "GET", target: "/v1/counts/v9", status: 200, op: "GET /v1/counts/{content_id}"},
		{name: "count bad region", method: "GET", target: "/v1/counts/v1?region=Mars", status: 400, req: reqInvalid, op: "GET /v1/counts/{content_id}"},
		{name: "count unknown region", method: "GET", target: "/v1/counts/v1?region=mars", status: 400, req: reqBeyondSchema, op: "GET /v1/counts/{content_id}"},
		{name: "count region twice", method: "GET", target: "/v1/counts/v1?region=global&region=global", status: 400, req: reqBeyondSchema,
			op: "GET /v1/counts/{content_id}"},
		{name: "count unknown parameter", method: "GET", target: "/v1/counts/v1?regoin=global", status: 400, req: reqInvalid,
			op: "GET /v1/counts/{content_id}"},
		{name: "count bad id", method: "GET", target: "/v1/counts/" + strings.Repeat("a", 129), status: 400, req: reqInvalid,
			op: "GET /v1/counts/{content_id}"},
		{name: "count fresh", method: "GET", target: "/v1/counts/v1?consistency=fresh", status: 200, op: "GET /v1/counts/{content_id}"},
		{name: "count eventual", method: "GET", target: "/v1/counts/v1?consistency=eventual&region=global", status: 200, op: "GET /v1/counts/{content_id}"},
		{name: "count bad consistency", method: "GET", target: "/v1/counts/v1?consistency=strong", status: 400, req: reqInvalid, op: "GET /v1/counts/{content_id}"},
		{name: "count consistency twice", method: "GET", target: "/v1/counts/v1?consistency=fresh&consistency=fresh", status: 400, req: reqBeyondSchema,
			op: "GET /v1/counts/{content_id}"},
		{name: "counts batch fresh", method: "GET", target: "/v1/counts?content_id=v1&content_id=v2&consistency=fresh", status: 200, op: "GET /v1/counts"},
		{name: "counts batch bad consistency", method: "GET", target: "/v1/counts?content_id=v1&consistency=Fresh", status: 400, req: reqInvalid, op: "GET /v1/counts"},
		{name: "counts batch", method: "GET", target: "/v1/counts?content_id=v1&content_id=v2&content_id=v1", status: 200, op: "GET /v1/counts"},
		{name: "counts batch 100 ids", method: "GET", target: "/v1/counts?" + manyIDs("content_id", 100), status: 200, op: "GET /v1/counts"},
		{name: "counts batch 101 ids", method: "GET", target: "/v1/counts?" + manyIDs("content_id", 101), status: 400, req: reqInvalid, op: "GET /v1/counts"},
		{name: "counts batch without ids", method: "GET", target: "/v1/counts", status: 400, req: reqInvalid, op: "GET /v1/counts"},
		{name: "counts batch bad id", method: "GET", target: "/v1/counts?content_id=v1&content_id=" + strings.Repeat("a", 129), status: 400, req: reqInvalid,
			op: "GET /v1/counts"},
		// POST /v1/counts (protobuf only; served after the server-path branch)
		{name: "counts protobuf", method: "POST", target: "/v1/counts", ctype: ctProto, body: pbCounts("", "v1", "v2", "v1"), status: 200,
			op: "POST /v1/counts " + ctProto, pendingUnless: notRoute},
		{name: "counts protobuf as JSON", method: "POST", target: "/v1/counts", ctype: ctJSON, body: []byte(`{"content_ids":["v1"]}`),
			status: 415, req: reqInvalid, op: "POST /v1/counts " + ctProto, pendingUnless: notRoute},
		{name: "counts protobuf without ids", method: "POST", target: "/v1/counts", ctype: ctProto, body: pbCounts("global"),
			status: 400, req: reqBeyondSchema, op: "POST /v1/counts " + ctProto, pendingUnless: notRoute},
		{name: "trending defaults", method: "GET", target: "/v1/trending", status: 200, op: "GET /v1/trending"},
		{name: "trending view 1h k=5", method: "GET", target: "/v1/trending?counter=view&window=1h&k=5&region=global", status: 200, op: "GET /v1/trending"},
		{name: "trending k=0", method: "GET", target: "/v1/trending?k=0", status: 400, req: reqInvalid, op: "GET /v1/trending"},
		{name: "trending k=1001", method: "GET", target: "/v1/trending?k=1001", status: 400, req: reqInvalid, op: "GET /v1/trending"},
		{name: "trending window 2h", method: "GET", target: "/v1/trending?window=2h", status: 400, req: reqInvalid, op: "GET /v1/trending"},
		{name: "trending bad counter", method: "GET", target: "/v1/trending?counter=Like", status: 400, req: reqInvalid, op: "GET /v1/trending"},
		{name: "trending k twice", method: "GET", target: "/v1/trending?k=1&k=2", status: 400, req: reqBeyondSchema, op: "GET /v1/trending"},
		{name: "trending unknown parameter", method: "GET", target: "/v1/trending?limit=5", status: 400, req: reqInvalid, op: "GET /v1/trending"},
		{name: "cluster without gossip", method: "GET", target: "/v1/cluster", status: 404, op: "GET /v1/cluster"},
		{name: "healthz", method: "GET", target: "/healthz", status: 200, op: "GET /healthz"},
		{name: "dashboard", method: "GET", target: "/", status: 200, op: "GET /"},
		{name: "openapi", method: "GET", target: "/v1/openapi.json", status: 200, op: "GET /v1/openapi.json"},
		{name: "readyz", method: "GET", target: "/readyz", status: 200, op: "GET /readyz"},
		{name: "metrics", method: "GET", target: "/metrics", status: 200, op: "GET /metrics"},
		// The in-process rollup's admin route.
		{name: "recount, ids in the body", method: "POST", target: "/admin/recount", ctype: ctJSON, body: []byte(`{"ids":["v1","v9"],"allow_lower":false}`),
			status: 200, op: "POST /admin/recount " + ctJSON},
		{name: "recount, ids as parameters", method: "POST", target: "/admin/recount?id=v1&allow_lower=false", status: 200,
			op: "POST /admin/recount " + ctJSON},
		{name: "recount without ids", method: "POST", target: "/admin/recount", ctype: ctJSON, body: []byte(`{"ids":[]}`), status: 400, req: reqInvalid,
			op: "POST /admin/recount " + ctJSON},
		{name: "recount bad id", method: "POST", target: "/admin/recount?id=a%20b", status: 400, req: reqInvalid, op: "POST /admin/recount " + ctJSON},
		{name: "recount 101 ids", method: "POST", target: "/admin/recount?" + manyIDs("id", 101), status: 400, req: reqInvalid, op: "POST /admin/recount " + ctJSON},
		{name: "recount unknown field", method: "POST", target: "/admin/recount", ctype: ctJSON, body: []byte(`{"ids":["v1"],"force":true}`),
			status: 400, req: reqInvalid, op: "POST /admin/recount " + ctJSON},
		{name: "recount bad allow_lower", method: "POST", target: "/admin/recount?id=v1&allow_lower=maybe", status: 400, req: reqInvalid,
			op: "POST /admin/recount " + ctJSON},
		{name: "recount text/plain", method: "POST", target: "/admin/recount", ctype: "text/plain", body: []byte(`{"ids":["v1"]}`),
			status: 415, req: reqInvalid, op: "POST /admin/recount " + ctJSON},
		{name: "recount oversized body", method: "POST", target: "/admin/recount", ctype: ctJSON, body: bigAdmin,
			status: 413, req: reqBeyondSchema, op: "POST /admin/recount " + ctJSON},
		{name: "recount by GET", method: "GET", target: "/admin/recount?id=v1", status: 405, req: reqInvalid, component: "MethodNotAllowed"},
		// Requests no operation owns.
		{name: "unknown path", method: "GET", target: "/v1/nope", status: 404, req: reqInvalid, component: "NotFound"},
		{name: "unknown admin path", method: "POST", target: "/admin/nope", status: 404, req: reqInvalid, component: "NotFound"},
		{name: "wrong method on /v1/reactions", method: "DELETE", target: "/v1/reactions", status: 405, req: reqInvalid, component: "MethodNotAllowed"},
		{name: "wrong method on /v1/increments", method: "PUT", target: "/v1/increments", ctype: ctJSON, body: []byte(`{}`), status: 405, req: reqInvalid,
			component: "MethodNotAllowed"},
		{name: "wrong method on /v1/trending", method: "POST", target: "/v1/trending", status: 405, req: reqInvalid, component: "MethodNotAllowed"},
		{name: "wrong method on /v1/cluster", method: "POST", target: "/v1/cluster", status: 405, req: reqInvalid, component: "MethodNotAllowed"},
		{name: "non-canonical path", method: "GET", target: "/v1/counts/a/../b", status: 400, req: reqInvalid, component: "BadRequest"},
	}

	exercised := map[string]bool{}
	pending := map[string]bool{}
	var incAnswer, reactAnswer result
	run := func(xs []exchange) {
		for _, x := range xs {
			r := send(t, c, base, x)
			served := s.check(t, x, r)
			if x.op == "" {
				continue
			}
			if served {
				exercised[x.op] = true
			} else {
				pending[x.op] = true
			}
			switch x.name {
			case "increments":
				incAnswer = r
			case "reaction bad action":
				reactAnswer = r
			}
		}
	}
	run(writes)
	// Wait for the writes to reach the totals, so that the reads answer
	// rows with named counters, and trending lists with items.
	testenv.Eventually(t, 60*time.Second, "v1's totals flushed", func() (string, bool) {
		resp, err := c.Get(base + "/v1/counts/v1")
		if err != nil {
			return err.Error(), false
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return string(b), bytes.Contains(b, []byte(`"likes":1`)) && bytes.Contains(b, []byte(`"view":`))
	})
	testenv.Eventually(t, 60*time.Second, "v1 trending by view", func() (string, bool) {
		resp, err := c.Get(base + "/v1/trending?counter=view")
		if err != nil {
			return err.Error(), false
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return string(b), bytes.Contains(b, []byte(`"content_id":"v1"`))
	})
	run(reads)

	// Every documented operation was exercised, or is pending on this build.
	for _, op := range s.documentedOps() {
		switch {
		case exercised[op]:
		case pending[op]:
			t.Logf("PENDING %s: documented, not served by this build; its cases run once it is", op)
		default:
			t.Errorf("the document lists %s, which no case exercises: add a case or drop the operation", op)
		}
	}
	for op := range exercised {
		if !slices.Contains(s.documentedOps(), op) {
			t.Errorf("a case exercises %s, which the document does not list", op)
		}
	}

	// An undocumented status fails validation: the 202 of POST
	// /v1/increments as if POST /v1/reactions had answered it (it answers
	// 200), and a real 400 relabelled 418.
	if incAnswer.resp == nil || reactAnswer.resp == nil {
		t.Fatal("the cases that give the undocumented-status checks did not run")
	}
	asReaction := result{req: reactAnswer.req, resp: incAnswer.resp, body: incAnswer.body}
	if ok, _ := s.v.ValidateHttpResponse(asReaction.freshReq(nil), asReaction.freshResp()); ok {
		t.Error("the document accepts a 202 answer to POST /v1/reactions, which documents no 202")
	}
	teapot := reactAnswer.freshResp()
	teapot.StatusCode, teapot.Status = http.StatusTeapot, "418 I'm a teapot"
	if ok, _ := s.v.ValidateHttpResponse(reactAnswer.freshReq(nil), teapot); ok {
		t.Error("the document accepts a 418 answer, which it documents nowhere")
	}
}

// unusedRecounter satisfies httpapi.NewRollup's required Recounter for the
// test of the rollup-only /healthz and /readyz answers; the admin route is
// exercised against the real recounter of the standalone agent.
type unusedRecounter struct{}

func (unusedRecounter) Recount(context.Context, []string, rollup.RecountOptions) ([]rollup.ItemResult, error) {
	return nil, errors.New("not used by this test")
}

// TestRollupHealthConformsToTheDocument checks the rollup process's own
// /healthz and /readyz answers (their shapes differ from the agent's: a
// 503 is "unavailable") against the document.
func TestRollupHealthConformsToTheDocument(t *testing.T) {
	s := loadSpec(t)
	var readyErr error
	h, err := httpapi.NewRollup(func(context.Context) error { return readyErr },
		promhttp.HandlerFor(prometheus.NewRegistry(), promhttp.HandlerOpts{}), unusedRecounter{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	c := srv.Client()
	for _, x := range []exchange{
		{name: "rollup healthz", method: "GET", target: "/healthz", status: 200},
		{name: "rollup readyz", method: "GET", target: "/readyz", status: 200},
		{name: "rollup metrics", method: "GET", target: "/metrics", status: 200},
	} {
		s.check(t, x, send(t, c, srv.URL, x))
	}
	readyErr = errors.New("store: cassandra 127.0.0.1:9042 unreachable")
	x := exchange{name: "rollup readyz unavailable", method: "GET", target: "/readyz", status: 503}
	r := send(t, c, srv.URL, x)
	s.check(t, x, r)
	if !bytes.Contains(r.body, []byte(`"unavailable"`)) {
		t.Errorf("rollup readyz 503 = %s; want status unavailable", r.body)
	}
}
