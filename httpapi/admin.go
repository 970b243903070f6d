package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/rollup"
	"github.com/edgecount/edgecount/store"
)

// Recounter is what the admin API needs of the recount job
// (*rollup.Recounter).
type Recounter interface {
	Recount(ctx context.Context, ids []string, opts rollup.RecountOptions) ([]rollup.ItemResult, error)
}

// maxAdminBody bounds an admin request body: 100 ids of 128 bytes, escaped,
// fit well within it.
const maxAdminBody = 64 << 10

// AdminRecountPath is the route of the on-demand recount.
const AdminRecountPath = "/admin/recount"

// NewAdmin returns the rollup's admin handler. It serves one route:
//
//	POST /admin/recount  {"ids":["a","b"],"allow_lower":false}
//	POST /admin/recount?id=a&id=b&allow_lower=false
//
// The ids come either in the JSON body or as repeated id parameters (ids
// may contain commas, so there is no comma-separated form). Every id is
// checked first: a malformed, missing or surplus id (1..100 ids) answers
// 400 naming the field ("ids[2]", "id[0]", "ids") and nothing is read or
// written. Otherwise the answer is 200 with one result per distinct id, in
// the order given:
//
//	{"results":[{"content_id":"a","status":"repaired","partition":3,
//	  "checked":true,"repaired":true,"drift":2,"reason":"",
//	  "rows":[{"scope":"global","exists":true,"before":{"likes":5,"dislikes":0},
//	           "counted":{"likes":3,"dislikes":0},"after":{"likes":3,"dislikes":0}}]}]}
//
// status is clean, repaired, deferred (the item changed while counted or
// the pipeline is behind; try again), unrepaired (the totals are above a
// count the store cannot prove complete: allow_lower lowers them), unknown
// (no totals and no reactions for this id: nothing to recount, nothing
// written), not_owned (another rollup instance applies its partition) or
// error (reason says why). An item with drift takes the recount's quiet
// period to answer. A store that cannot be read answers 503 with
// Retry-After. Errors are {"error":"…","field":"…"} as in the agent's API.
func NewAdmin(rc Recounter, logger *slog.Logger) http.Handler {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	a := &admin{rc: rc, log: logger.With("component", "admin")}
	mux := http.NewServeMux()
	mux.HandleFunc(AdminRecountPath, a.recount)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		adminError(w, http.StatusNotFound, "path", "no such admin route: "+r.URL.Path)
	})
	return mux
}

type admin struct {
	rc  Recounter
	log *slog.Logger
}

// recountRequest is the JSON body of POST /admin/recount.
type recountRequest struct {
	IDs        *[]string `json:"ids"`
	AllowLower *bool     `json:"allow_lower"`
}

type tallyJSON struct {
	Likes    int64 `json:"likes"`
	Dislikes int64 `json:"dislikes"`
}

type rowJSON struct {
	Scope   string    `json:"scope"`
	Exists  bool      `json:"exists"`
	Before  tallyJSON `json:"before"`
	Counted tallyJSON `json:"counted"`
	After   tallyJSON `json:"after"`
}

type resultJSON struct {
	ContentID string    `json:"content_id"`
	Status    string    `json:"status"`
	Partition uint32    `json:"partition"`
	Checked   bool      `json:"checked"`
	Repaired  bool      `json:"repaired"`
	Drift     int64     `json:"drift"`
	Reason    string    `json:"reason,omitempty"`
	Rows      []rowJSON `json:"rows"`
}

func (a *admin) recount(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		adminError(w, http.StatusMethodNotAllowed, "method", "method "+r.Method+" not allowed; use POST")
		return
	}
	ids, opts, field, status, msg := parseRecount(w, r)
	if status != 0 {
		adminError(w, status, field, msg)
		return
	}
	results, err := a.rc.Recount(r.Context(), ids, opts)
	var idErr *rollup.IDError
	switch {
	case err == nil:
	case errors.As(err, &idErr):
		adminError(w, http.StatusBadRequest, "ids["+strconv.Itoa(idErr.Index)+"]", idErr.Error())
		return
	case r.Context().Err() != nil:
		adminError(w, StatusClientClosedRequest, "", "client closed request")
		return
	case errors.Is(err, store.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		w.Header().Set("Retry-After", "1")
		adminError(w, http.StatusServiceUnavailable, "", "store unavailable; retry later")
		return
	default:
		a.log.Error("recount failed", "ids", len(ids), "err", err)
		adminError(w, http.StatusInternalServerError, "", "internal error")
		return
	}
	out := struct {
		Results []resultJSON `json:"results"`
	}{Results: make([]resultJSON, len(results))}
	for i, res := range results {
		o := resultJSON{
			ContentID: res.ContentID,
			Status:    string(res.Status),
			Partition: res.Partition,
			Checked:   len(res.Rows) > 0,
			Repaired:  res.Status == rollup.ItemRepaired,
			Drift:     res.Drift,
			Reason:    res.Reason,
			Rows:      make([]rowJSON, len(res.Rows)),
		}
		for j, row := range res.Rows {
			o.Rows[j] = rowJSON{Scope: row.Scope, Exists: row.Exists,
				Before:  tallyJSON{row.Before.Likes, row.Before.Dislikes},
				Counted: tallyJSON{row.Counted.Likes, row.Counted.Dislikes},
				After:   tallyJSON{row.After.Likes, row.After.Dislikes}}
		}
		out.Results[i] = o
	}
	body, err := json.Marshal(out)
	if err != nil {
		a.log.Error("cannot encode recount results", "err", err)
		adminError(w, http.StatusInternalServerError, "", "internal error")
		return
	}
	writeJSON(w, http.StatusOK, append(body, '\n'))
}

// parseRecount reads and checks a recount request. A non-zero status is
// the error to answer, with the field at fault.
func parseRecount(w http.ResponseWriter, r *http.Request) (ids []string, opts rollup.RecountOptions, field string, status int, msg string) {
	q := r.URL.Query()
	for k := range q {
		if k != "id" && k != "allow_lower" {
			return nil, opts, k, http.StatusBadRequest, fmt.Sprintf("%s is not a parameter of %s (want id, allow_lower)", k, AdminRecountPath)
		}
	}
	if v, ok := q["allow_lower"]; ok {
		if len(v) != 1 {
			return nil, opts, "allow_lower", http.StatusBadRequest, "allow_lower must be given once"
		}
		b, err := strconv.ParseBool(v[0])
		if err != nil {
			return nil, opts, "allow_lower", http.StatusBadRequest, fmt.Sprintf("allow_lower %q is not true or false", v[0])
		}
		opts.AllowLower = b
	}
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxAdminBody))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return nil, opts, "body", http.StatusRequestEntityTooLarge, fmt.Sprintf("body is larger than %d bytes", maxAdminBody)
	case err != nil:
		return nil, opts, "body", http.StatusBadRequest, "body cannot be read"
	}
	listField := "id"
	ids = q["id"]
	if len(bytes.TrimSpace(raw)) > 0 {
		if len(ids) == 0 {
			listField = "ids"
		}
		// The API's rule: JSON, or curl -d's form label on a JSON body.
		if e := checkContentType(r); e != nil {
			return nil, opts, e.field, e.status, e.msg
		}
		var req recountRequest
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			return nil, opts, jsonField(err), http.StatusBadRequest, "body is not a valid request: " + err.Error()
		}
		if dec.More() {
			return nil, opts, "body", http.StatusBadRequest, "body holds data after the request object"
		}
		if req.IDs != nil {
			if len(ids) > 0 {
				return nil, opts, "ids", http.StatusBadRequest, "give the ids in the body or as id parameters, not both"
			}
			ids, listField = *req.IDs, "ids"
		}
		if req.AllowLower != nil {
			if _, ok := q["allow_lower"]; ok {
				return nil, opts, "allow_lower", http.StatusBadRequest, "give allow_lower in the body or as a parameter, not both"
			}
			opts.AllowLower = *req.AllowLower
		}
	}
	if len(ids) == 0 || len(ids) > rollup.MaxRecountIDs {
		return nil, opts, listField, http.StatusBadRequest, fmt.Sprintf("%s must list 1..%d content ids (got %d)", listField, rollup.MaxRecountIDs, len(ids))
	}
	for i, id := range ids {
		if !engagement.ValidID(id) {
			f := listField + "[" + strconv.Itoa(i) + "]"
			return nil, opts, f, http.StatusBadRequest, fmt.Sprintf("%s %q is not a content id: want 1-%d bytes of printable ASCII without spaces or '/'", f, id, engagement.MaxIDLen)
		}
	}
	return ids, opts, "", 0, ""
}

// jsonField names the field a JSON decoding error is about.
func jsonField(err error) string {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) && typeErr.Field != "" {
		return typeErr.Field
	}
	const unknown = "json: unknown field "
	if s := err.Error(); len(s) > len(unknown) && s[:len(unknown)] == unknown {
		if f, err := strconv.Unquote(s[len(unknown):]); err == nil {
			return f
		}
	}
	return "body"
}

// adminError answers {"error": msg, "field": field} (appendError, the API's
// shape) and a newline, like every admin answer; field is left out when
// empty.
func adminError(w http.ResponseWriter, status int, field, msg string) {
	writeJSON(w, status, append(appendError(nil, &apiError{status: status, field: field, msg: msg}), '\n'))
}
