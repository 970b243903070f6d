package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
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
