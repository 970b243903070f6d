package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgecount/edgecount/auth"
	"github.com/edgecount/edgecount/httpserver"
	"github.com/edgecount/edgecount/httpserver/httpservertest"
	edgecountv1 "github.com/edgecount/edgecount/proto/edgecount/v1"
	"github.com/edgecount/edgecount/region"
	"github.com/edgecount/edgecount/store/embedded"
	"github.com/edgecount/edgecount/store/embedded/embeddedtest"
)

// dropPublisher takes every partial-sum message; these tests count what
// the agent accepted, not what reaches a rollup.
type dropPublisher struct{}

func (dropPublisher) Publish(context.Context, uint32, string, []byte) error { return nil }

// keyedServer runs a real agent (in memory, embedded store) behind the API
// on a real Server, wrapped by wrap when not nil.
type keyedServer struct {
	agent *region.Agent
	reg   *prometheus.Registry
	base  string
}

func newKeyedServer(t *testing.T, wrap func(http.Handler) http.Handler) *keyedServer {
	t.Helper()
	st := embeddedtest.Open(t, embedded.Config{Timeout: time.Second})
	cfg := region.DefaultConfig("us", "a1")
	a, err := region.New(cfg, region.Deps{Reactions: st, Stats: st, Publisher: dropPublisher{}})
	if err != nil {
		t.Fatal(err)
	}
	a.Start()
	t.Cleanup(func() { a.Stop(context.Background()) })
	ks := &keyedServer{agent: a, reg: prometheus.NewRegistry()}
	h, err := New(a, Config{Region: "us", Regions: []string{"us"}}, http.NotFoundHandler(), ks.reg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if wrap != nil {
		h = wrap(h)
	}
	ks.base = "http://" + httpservertest.Start(t, h, httpserver.Config{})
	return ks
}

type keyedAnswer struct {
	status   int
	body     string
	replayed bool
}

// post sends body to path with the headers given (name, value pairs; a
// name may repeat).
func post(t *testing.T, base, path, ctype, body string, headers ...string) keyedAnswer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", ctype)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header[headers[i]] = append(req.Header[headers[i]], headers[i+1])
	}
	// Written by hand: net/http's client refuses to send some of the
	// malformed headers the server must refuse.
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var raw bytes.Buffer
	raw.WriteString("POST " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n")
	for k, vs := range req.Header {
		for _, v := range vs {
			raw.WriteString(k + ": " + v + "\r\n")
		}
	}
	raw.WriteString("\r\n" + body)
	if _, err := conn.Write(raw.Bytes()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return keyedAnswer{resp.StatusCode, string(b), resp.Header.Get(headerReplayed) == "true"}
}

const keyedIncBody = `{"increments":[{"content_id":"v1","counter":"view","delta":3},{"content_id":"v2","counter":"share","delta":1}]}`

// TestIdempotencyKeyRejected: a malformed key is a 400 naming the header,
// and nothing is written.
func TestIdempotencyKeyRejected(t *testing.T) {
	ks := newKeyedServer(t, nil)
	for _, c := range []struct {
		name    string
		headers []string
		msg     string
	}{
		{"129 bytes", []string{headerIdempotencyKey, strings.Repeat("k", 129)}, "must be 1 to 128 bytes, got 129"},
		{"empty", []string{headerIdempotencyKey, ""}, "must be 1 to 128 bytes, got 0"},
		{"not ASCII", []string{headerIdempotencyKey, "clé"}, "must be printable ASCII"},
		{"tab", []string{headerIdempotencyKey, "a\tb"}, "must be printable ASCII"},
		// The server's HTTP parser refuses this one before the handler.
		{"control byte", []string{headerIdempotencyKey, "a\x01b"}, "invalid header value"},
		{"given twice", []string{headerIdempotencyKey, "a", headerIdempotencyKey, "b"}, "must be given once"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, r := range []struct{ path, body string }{
				{"/v1/increments", keyedIncBody},
				{"/v1/reactions", `{"user_id":"u","content_id":"c","action":"like"}`},
			} {
				got := post(t, ks.base, r.path, "application/json", r.body, c.headers...)
				var eb errorBody
				wantField := headerIdempotencyKey
				if c.name == "control byte" {
					wantField = "request"
				}
				if err := json.Unmarshal([]byte(got.body), &eb); err != nil || got.status != 400 || eb.Field != wantField || !strings.Contains(eb.Error, c.msg) {
					t.Errorf("%s: answer %d %s; want 400 naming %s: %q", r.path, got.status, got.body, headerIdempotencyKey, c.msg)
				}
			}
		})
	}
	if n := ks.agent.Stats().IncrementsAccepted.Load() + ks.agent.Stats().ReactionsChanged.Load(); n != 0 {
		t.Errorf("rejected requests wrote %d changes", n)
	}
	if _, found, _ := ks.agent.GetReaction(context.Background(), "u", "c"); found {
		t.Error("a rejected reaction was written")
	}
}

// TestIdempotentIncrements: a retry gets the first answer byte for byte,
// marked replayed, and is not counted again, also when it comes as
// protobuf; another body with the key is a 422.
func TestIdempotentIncrements(t *testing.T) {
	ks := newKeyedServer(t, nil)
	first := post(t, ks.base, "/v1/increments", "application/json", keyedIncBody, headerIdempotencyKey, "key-1")
	if first.status != 202 || first.body != `{"accepted":2}` || first.replayed {
		t.Fatalf("first answer %+v; want 202 {\"accepted\":2}, not replayed", first)
	}
	again := post(t, ks.base, "/v1/increments", "application/json", keyedIncBody, headerIdempotencyKey, "key-1")
	if again.status != first.status || again.body != first.body || !again.replayed {
		t.Fatalf("retry answer %+v; want the first (%+v), replayed", again, first)
	}
	pb := marshal(t, &edgecountv1.IncrementsRequest{Increments: []*edgecountv1.Increment{pbInc("v1", "view", 3), pbInc("v2", "share", 1)}})
	pbAgain := post(t, ks.base, "/v1/increments", contentTypeProtobuf, pb, headerIdempotencyKey, "key-1")
	if pbAgain.status != 202 || !pbAgain.replayed || pbAgain.body != string(appendIntField(nil, 1, 2)) {
		t.Fatalf("protobuf retry answer %+v; want 202 accepted 2 in protobuf, replayed", pbAgain)
	}
	other := post(t, ks.base, "/v1/increments", "application/json", strings.Replace(keyedIncBody, `"delta":3`, `"delta":4`, 1), headerIdempotencyKey, "key-1")
	var eb errorBody
	if err := json.Unmarshal([]byte(other.body), &eb); err != nil || other.status != 422 || eb.Field != headerIdempotencyKey {
		t.Fatalf("other body with the key: %+v; want 422 naming %s", other, headerIdempotencyKey)
	}
	if n := ks.agent.Stats().IncrementsAccepted.Load(); n != 2 {
		t.Errorf("increments accepted %d, want 2 (once)", n)
	}
	if got := metricValue(t, ks.reg, "edgecount_idempotency_hits_total"); got != 2 {
		t.Errorf("edgecount_idempotency_hits_total = %v, want 2", got)
	}
	if got := metricValue(t, ks.reg, "edgecount_idempotency_conflicts_total"); got != 1 {
		t.Errorf("edgecount_idempotency_conflicts_total = %v, want 1", got)
	}
	if got := metricValue(t, ks.reg, "edgecount_idempotency_keys"); got != 1 {
		t.Errorf("edgecount_idempotency_keys = %v, want 1", got)
	}
}

// metricValue returns the value of the registered metric named name
// (summed over its series).
func metricValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		var v float64
		for _, m := range mf.GetMetric() {
			v += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
		return v
	}
	t.Fatalf("metric %s is not registered", name)
	return 0
}

// TestIdempotentReaction: the retry of a reaction gets the first answer
// (changed), where a plain repeat says unchanged; another action with the
// key is a 422.
func TestIdempotentReaction(t *testing.T) {
	ks := newKeyedServer(t, nil)
	like := `{"user_id":"u","content_id":"c","action":"like"}`
	first := post(t, ks.base, "/v1/reactions", "application/json", like, headerIdempotencyKey, "r-1")
	want := `{"user_id":"u","content_id":"c","action":"like","previous":"none","version":1,"changed":true}`
	if first.status != 200 || first.body != want {
		t.Fatalf("first answer %+v; want 200 %s", first, want)
	}
	plain := post(t, ks.base, "/v1/reactions", "application/json", like)
	if !strings.Contains(plain.body, `"changed":false`) {
		t.Fatalf("a repeat without a key: %+v; want changed false", plain)
	}
	again := post(t, ks.base, "/v1/reactions", "application/json", like, headerIdempotencyKey, "r-1")
	if again.status != 200 || again.body != want || !again.replayed {
		t.Fatalf("retry answer %+v; want the first (%s), replayed", again, want)
	}
	other := post(t, ks.base, "/v1/reactions", "application/json", strings.Replace(like, "like", "dislike", 1), headerIdempotencyKey, "r-1")
	if other.status != 422 || !strings.Contains(other.body, `"field":"Idempotency-Key"`) {
		t.Fatalf("other action with the key: %+v; want 422", other)
	}
	if n := ks.agent.Stats().ReactionsChanged.Load(); n != 1 {
		t.Errorf("reactions changed %d, want 1", n)
	}
}

// TestIdempotencyKeysScopedByToken: with tokens, two callers using the
// same key do not share it.
func TestIdempotencyKeysScopedByToken(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tokens")
	tokA, tokB := "token-of-tenant-a-0123456789", "token-of-tenant-b-0123456789"
	if err := os.WriteFile(file, []byte(tokA+" write tenant-a\n"+tokB+" write tenant-b\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	keeper, err := auth.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	ks := newKeyedServer(t, func(h http.Handler) http.Handler {
		w, err := Authenticate(h, auth.Policy{Keeper: keeper}, prometheus.NewRegistry())
		if err != nil {
			t.Fatal(err)
		}
		return w
	})
	for _, c := range []struct {
		tok      string
		replayed bool
	}{{tokA, false}, {tokB, false}, {tokA, true}, {tokB, true}} {
		got := post(t, ks.base, "/v1/increments", "application/json", keyedIncBody, headerIdempotencyKey, "shared", "Authorization", "Bearer "+c.tok)
		if got.status != 202 || got.replayed != c.replayed {
			t.Fatalf("answer %+v; want 202, replayed %v", got, c.replayed)
		}
	}
	if n := ks.agent.Stats().IncrementsAccepted.Load(); n != 4 {
		t.Errorf("increments accepted %d, want 4 (each tenant once)", n)
	}
}

// TestKeyWithoutIdempotentService: a Service that keeps no keys answers a
// keyed write 501 and applies nothing; unkeyed writes go on.
func TestKeyWithoutIdempotentService(t *testing.T) {
	ta := newTestAPI(t, testConfig())
	req, _ := http.NewRequest(http.MethodPost, "/v1/increments", bytes.NewReader([]byte(keyedIncBody)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(headerIdempotencyKey, "k")
	rec := newRecorder()
	ta.srv.ServeHTTP(rec, req)
	if rec.Code != http.StatusNotImplemented || !strings.Contains(rec.Body.String(), `"field":"Idempotency-Key"`) {
		t.Fatalf("answer %d %s; want 501 naming Idempotency-Key", rec.Code, rec.Body)
	}
	if calls := ta.fake.Calls(); len(calls) != 0 {
		t.Fatalf("service calls %q, want none", calls)
	}
}
