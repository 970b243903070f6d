package httpapi

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgecount/edgecount/httpserver"
	"github.com/edgecount/edgecount/httpserver/httpservertest"
	"github.com/edgecount/edgecount/region"
	"github.com/edgecount/edgecount/store/embedded"
	"github.com/edgecount/edgecount/store/embedded/embeddedtest"
)

// TestIncrementKeysOutliveTheirBody: POST /v1/increments decodes from
// fasthttp's request buffer without a copy (readBodyTransient), and that
// buffer is overwritten by the next request on the connection. A real
// agent must still hold every key as sent: many requests, JSON and
// protobuf, with ids of one length (so each body overwrites the last at
// the same offsets), pipelined on one keep-alive connection, then every
// id's held delta read back by its own string.
func TestIncrementKeysOutliveTheirBody(t *testing.T) {
	cfg := region.DefaultConfig("eu", "eu-a1")
	cfg.FlushInterval = time.Hour // nothing leaves the counters during the test
	a, h := agentAPI(t, embeddedtest.Open(t, embedded.Config{Timeout: time.Second}), cfg, []string{"eu", "us"})
	addr := httpservertest.Start(t, h, httpserver.Config{})
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second)) //nolint:errcheck // a missed deadline fails the reads below

	const requests, perReq = 200, 20
	want := map[string]int64{}
	var ids []string
	w := bufio.NewWriter(conn)
	for r := range requests {
		var body []byte
		ct := "application/json"
		if r%2 == 1 {
			ct = contentTypeProtobuf
		} else {
			body = append(body, `{"increments":[`...)
		}
		for i := range perReq {
			id := fmt.Sprintf("v-%03d-%03d", r, i)
			delta := int64(1 + (r+i)%5)
			want[id] += delta
			ids = append(ids, id)
			if r%2 == 1 {
				body = raw(body).msg(1, raw(nil).str(1, id).str(2, "view").varint(3, uint64(delta)))
				continue
			}
			if i > 0 {
				body = append(body, ',')
			}
			body = fmt.Appendf(body, `{"content_id":%q,"counter":"view","delta":%d}`, id, delta)
		}
		if r%2 == 0 {
			body = append(body, "]}"...)
		}
		fmt.Fprintf(w, "POST /v1/increments HTTP/1.1\r\nHost: x\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n%s", ct, len(body), body)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	for r := range requests {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("answer %d: %v", r, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("answer %d: %d %s", r, resp.StatusCode, b)
		}
	}
	if n := a.LiveCounters(); n != len(want) {
		t.Errorf("LiveCounters = %d, want %d (a key changed after its body was reused)", n, len(want))
	}
	held := a.HeldDeltas(ids)
	for _, id := range ids {
		var got int64
		for _, hd := range held[id] {
			if hd.Counter != "view" || hd.Region != "eu" {
				t.Errorf("%s holds %+v", id, hd)
			}
			got += hd.Delta
		}
		if got != want[id] {
			t.Errorf("%s: held %d, want %d", id, got, want[id])
		}
	}
}

// agentAPI starts a real agent of cfg on st (recovered first when cfg has
// a log), stopped when the test ends, and returns it with the API
// serving it.
func agentAPI(tb testing.TB, st *embedded.Store, cfg region.Config, regions []string) (*region.Agent, http.Handler) {
	tb.Helper()
	a, err := region.New(cfg, region.Deps{Reactions: st, Stats: st, Publisher: dropPublisher{}})
	if err != nil {
		tb.Fatal(err)
	}
	if cfg.Log.Dir != "" {
		if err := a.Recover(context.Background()); err != nil {
			tb.Fatal(err)
		}
	}
	a.Start()
	tb.Cleanup(func() { a.Stop(context.Background()) }) //nolint:errcheck // the test is over
	h, err := New(a, Config{Region: cfg.Region, Regions: regions}, http.NotFoundHandler(), prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	if err != nil {
		tb.Fatal(err)
	}
	return a, h
}
