package httpapi

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/httpserver/httpservertest"
	"github.com/edgecount/edgecount/rollup"
	"github.com/edgecount/edgecount/store/embedded"
	"github.com/edgecount/edgecount/store/embedded/embeddedtest"
)

// adminFixture is the admin handler over a real recount job on a real
// embedded store holding one drifted item, "drifted": one like in us, but
// totals of 4.
type adminFixture struct {
	st *embedded.Store
	rc *rollup.Recounter
	h  http.Handler
}

func newAdminFixture(t *testing.T) *adminFixture {
	t.Helper()
	st := embeddedtest.Open(t, embedded.Config{NoSync: true})
	cfg := rollup.DefaultRecountConfig()
	cfg.Quiet = time.Millisecond
	rc, err := rollup.NewRecounter(rollup.New(st, nil, nil), st, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := engagement.Reaction{UserID: "u1", ContentID: "drifted", Action: engagement.ActionLike, Region: "us", Version: 1, Incarnation: 5, UpdatedAt: time.Now()}
	if ok, err := st.InsertReaction(t.Context(), r); err != nil || !ok {
		t.Fatalf("InsertReaction = %v, %v", ok, err)
	}
	if err := st.WriteStats(t.Context(), []engagement.Stats{
		{ContentID: "drifted", Scope: engagement.GlobalScope, Likes: 4, LastSeq: 3},
		{ContentID: "drifted", Scope: "us", Likes: 4, LastSeq: 3},
	}); err != nil {
		t.Fatal(err)
	}
	return &adminFixture{st: st, rc: rc, h: httpservertest.Via(t, NewAdmin(rc, nil))}
}

func (f *adminFixture) do(t *testing.T, method, target, contentType, body string) (int, http.Header, string) {
	t.Helper()
	req := httptest.NewRequest(method, target, strings.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	w := httptest.NewRecorder()
	f.h.ServeHTTP(w, req)
	b, _ := io.ReadAll(w.Result().Body)
	return w.Code, w.Header(), string(b)
}

// TestAdminRecountBadInput checks that every malformed request answers
// the right status naming the field, and reads and writes nothing.
func TestAdminRecountBadInput(t *testing.T) {
	f := newAdminFixture(t)
	tooMany := `{"ids":["a"` + strings.Repeat(`,"a"`, rollup.MaxRecountIDs) + `]}`
	tests := []struct {
		name, method, target, ctype, body string
		status                            int
		field                             string
	}{
		{"GET", http.MethodGet, "/admin/recount?id=drifted", "", "", 405, "method"},
		{"unknown route", http.MethodPost, "/admin/other", "", "", 404, "path"},
		{"no ids", http.MethodPost, "/admin/recount", "", "", 400, "id"},
		{"empty list", http.MethodPost, "/admin/recount", "application/json", `{"ids":[]}`, 400, "ids"},
		{"null list", http.MethodPost, "/admin/recount", "application/json", `{"ids":null}`, 400, "ids"},
		{"too many", http.MethodPost, "/admin/recount", "application/json", tooMany, 400, "ids"},
		{"malformed id", http.MethodPost, "/admin/recount", "application/json", `{"ids":["drifted","bad id"]}`, 400, "ids[1]"},
		{"slash in id", http.MethodPost, "/admin/recount", "application/json", `{"ids":["a/b"]}`, 400, "ids[0]"},
		{"empty id", http.MethodPost, "/admin/recount?id=drifted&id=", "", "", 400, "id[1]"},
		{"long id", http.MethodPost, "/admin/recount?id=" + strings.Repeat("x", engagement.MaxIDLen+1), "", "", 400, "id[0]"},
		{"ids not a list", http.MethodPost, "/admin/recount", "application/json", `{"ids":"drifted"}`, 400, "ids"},
		{"id not a string", http.MethodPost, "/admin/recount", "application/json", `{"ids":["drifted",7]}`, 400, "ids"},
		{"unknown key", http.MethodPost, "/admin/recount", "application/json", `{"ids":["drifted"],"force":true}`, 400, "force"},
		{"syntax", http.MethodPost, "/admin/recount", "application/json", `{"ids":["drifted"]`, 400, "body"},
		{"trailing data", http.MethodPost, "/admin/recount", "application/json", `{"ids":["drifted"]} {}`, 400, "body"},
		{"not an object", http.MethodPost, "/admin/recount", "application/json", `["drifted"]`, 400, "body"},
		{"both body and query", http.MethodPost, "/admin/recount?id=drifted", "application/json", `{"ids":["drifted"]}`, 400, "ids"},
		{"allow_lower not bool", http.MethodPost, "/admin/recount?id=drifted&allow_lower=maybe", "", "", 400, "allow_lower"},
		{"allow_lower not bool in body", http.MethodPost, "/admin/recount", "application/json", `{"ids":["drifted"],"allow_lower":"yes"}`, 400, "allow_lower"},
		{"allow_lower twice", http.MethodPost, "/admin/recount?allow_lower=true", "application/json", `{"ids":["drifted"],"allow_lower":true}`, 400, "allow_lower"},
		{"unknown parameter", http.MethodPost, "/admin/recount?ids=drifted", "", "", 400, "ids"},
		{"content type", http.MethodPost, "/admin/recount", "text/plain", `{"ids":["drifted"]}`, 415, "Content-Type"},
		{"json with a foreign charset", http.MethodPost, "/admin/recount", "application/json; charset=latin1", `{"ids":["drifted"]}`, 415, "Content-Type"},
		{"oversized", http.MethodPost, "/admin/recount", "application/json", `{"ids":["` + strings.Repeat("x", maxAdminBody) + `"]}`, 413, "body"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, h, body := f.do(t, tt.method, tt.target, tt.ctype, tt.body)
			var e struct{ Error, Field string }
			if err := json.Unmarshal([]byte(body), &e); err != nil {
				t.Fatalf("body %q is not JSON: %v", body, err)
			}
			if status != tt.status || e.Field != tt.field || e.Error == "" {
				t.Fatalf("got %d %q (%s); want %d naming %q", status, e.Field, body, tt.status, tt.field)
			}
			if ct := h.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Fatalf("Content-Type = %q", ct)
			}
		})
	}
	if n := f.rc.Stats().ItemsChecked.Load(); n != 0 {
		t.Fatalf("bad requests checked %d items", n)
	}
	rows, err := f.st.ReadStats(t.Context(), []string{"drifted"})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows["drifted"] {
		if r.Likes != 4 {
			t.Fatalf("a bad request changed %s to %d likes", r.Scope, r.Likes)
		}
	}
}

// TestAdminRecount checks the answer of a good request: the drifted item
// repaired with its rows before and after, an unknown id reported as such.
func TestAdminRecount(t *testing.T) {
	f := newAdminFixture(t)
	status, _, body := f.do(t, http.MethodPost, "/admin/recount", "application/json", `{"ids":["drifted","nobody-knows"]}`)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	var got struct {
		Results []struct {
			ContentID string `json:"content_id"`
			Status    string
			Checked   bool
			Repaired  bool
			Drift     int64
			Reason    string
			Rows      []struct {
				Scope                  string
				Exists                 bool
				Before, Counted, After struct{ Likes, Dislikes int64 }
			}
		}
	}
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatalf("cannot decode %s: %v", body, err)
	}
	if len(got.Results) != 2 {
		t.Fatalf("results = %s; want 2", body)
	}
	d := got.Results[0]
	if d.ContentID != "drifted" || d.Status != "repaired" || !d.Checked || !d.Repaired || d.Drift != 6 || len(d.Rows) != 2 {
		t.Fatalf("drifted = %+v; want repaired with drift 6 over 2 rows", d)
	}
	for _, r := range d.Rows {
		if !r.Exists || r.Before.Likes != 4 || r.Counted.Likes != 1 || r.After.Likes != 1 {
			t.Errorf("row %+v; want 4 likes before, 1 counted and after", r)
		}
	}
	u := got.Results[1]
	if u.ContentID != "nobody-knows" || u.Status != "unknown" || u.Checked || u.Repaired || u.Reason == "" {
		t.Fatalf("unknown id = %+v; want status unknown with a reason", u)
	}
	// The query form, again: nothing left to repair.
	status, _, body = f.do(t, http.MethodPost, "/admin/recount?id=drifted&allow_lower=false", "", "")
	if status != http.StatusOK || !strings.Contains(body, `"status":"clean"`) {
		t.Fatalf("second recount = %d %s; want 200 and clean", status, body)
	}
	// What curl -d sends (the README's example): a JSON body labelled as a form.
	status, _, body = f.do(t, http.MethodPost, "/admin/recount", "application/x-www-form-urlencoded", `{"ids":["drifted"]}`)
	if status != http.StatusOK || !strings.Contains(body, `"status":"clean"`) {
		t.Fatalf("recount with curl's content type = %d %s; want 200 and clean", status, body)
	}
}
