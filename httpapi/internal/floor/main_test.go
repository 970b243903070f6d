package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
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
