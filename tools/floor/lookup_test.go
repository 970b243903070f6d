package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"google.golang.org/protobuf/proto"

	edgecountv1 "github.com/edgecount/edgecount/proto/edgecount/v1"
)

// The least read answers each id's row, in order, a zero row for an
// unknown id, and one row for a single read.
func TestLookupHandler(t *testing.T) {
	h := lookupHandler()
	type count struct {
		ContentID string `json:"content_id"`
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/counts?content_id=item-7&content_id=nope&content_id=item-9999", nil))
	var many struct{ Counts []count }
	if err := json.Unmarshal(rec.Body.Bytes(), &many); err != nil {
		t.Fatalf("%v: %s", err, rec.Body)
	}
	want := []string{"item-7", "item-42", "item-9999"} // the zero row is item-42's template
	if len(many.Counts) != len(want) {
		t.Fatalf("%d counts, want %d: %s", len(many.Counts), len(want), rec.Body)
	}
	for i, w := range want {
		if many.Counts[i].ContentID != w {
			t.Errorf("counts[%d] = %q, want %q", i, many.Counts[i].ContentID, w)
		}
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/counts/item-3", nil))
	var one count
	if err := json.Unmarshal(rec.Body.Bytes(), &one); err != nil || one.ContentID != "item-3" {
		t.Fatalf("single read = %s (%v), want item-3's row", rec.Body, err)
	}
}

// A POST's protobuf CountsRequest is answered with a CountsResponse of the
// ids' Counts, in order.
func TestLookupHandlerProtobuf(t *testing.T) {
	in, err := proto.Marshal(&edgecountv1.CountsRequest{ContentIds: []string{"item-5", "nope", "item-6"}})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/v1/counts", bytes.NewReader(in))
	req.Header.Set("Content-Type", "application/x-protobuf")
	lookupHandler().ServeHTTP(rec, req)
	var out edgecountv1.CountsResponse
	if err := proto.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatalf("%v: %x", err, rec.Body)
	}
	want := []string{"item-5", "item-42", "item-6"}
	if len(out.Counts) != len(want) || rec.Header().Get("Content-Type") != "application/x-protobuf" {
		t.Fatalf("%d counts (%s), want %d", len(out.Counts), rec.Header().Get("Content-Type"), len(want))
	}
	for i, w := range want {
		if c := out.Counts[i]; c.ContentId != w || c.Counters["view"] != 17 || c.Region != "global" {
			t.Errorf("counts[%d] = %v, want %s's", i, c, w)
		}
	}
}

// The bare loop answers the least read's answers, pipelined requests in
// order, to a real client connection.
func TestBareLookup(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	l := newLookup()
	go func() { done <- serveConns(ctx, ln, func(c net.Conn) { serveBareLookup(c, l) }) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serveConns = %v", err)
		}
	})
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pb, err := proto.Marshal(&edgecountv1.CountsRequest{ContentIds: []string{"item-1", "item-2"}})
	if err != nil {
		t.Fatal(err)
	}
	reqs := "GET /v1/counts/item-8 HTTP/1.1\r\nHost: x\r\n\r\n" +
		"POST /v1/counts HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\nContent-Length: " + strconv.Itoa(len(pb)) + "\r\n\r\n" + string(pb) +
		"GET /v1/counts?content_id=item-3&content_id=item-4 HTTP/1.1\r\nHost: x\r\n\r\n"
	if _, err := io.WriteString(c, reqs); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	read := func() []byte {
		t.Helper()
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d, %v", resp.StatusCode, err)
		}
		return b
	}
	var one struct {
		ContentID string `json:"content_id"`
	}
	if b := read(); json.Unmarshal(b, &one) != nil || one.ContentID != "item-8" {
		t.Fatalf("single read = %s", b)
	}
	var out edgecountv1.CountsResponse
	if b := read(); proto.Unmarshal(b, &out) != nil || len(out.Counts) != 2 || out.Counts[1].ContentId != "item-2" {
		t.Fatalf("protobuf read = %x", b)
	}
	var many struct {
		Counts []struct {
			ContentID string `json:"content_id"`
		}
	}
	if b := read(); json.Unmarshal(b, &many) != nil || len(many.Counts) != 2 || many.Counts[0].ContentID != "item-3" {
		t.Fatalf("16-id read = %s", b)
	}
}
