package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
)

// NewRollup returns the HTTP handler of the rollup process:
//
//	GET /healthz  200 {"status":"ok"}
//	GET /readyz   200 {"status":"ready"}, or 503 {"status":"unavailable","error":"…"}
//	              when ready(ctx) fails
//	GET /metrics  metrics
//	/admin/…      NewAdmin(rc)
//
// Its bodies end in a newline; another path or method gets http.ServeMux's
// plain 404 or 405. ready is called with the request's context, from many
// requests at once. ready, metrics and rc are required; a nil logger
// discards.
func NewRollup(ready func(ctx context.Context) error, metrics http.Handler, rc Recounter, logger *slog.Logger) (http.Handler, error) {
	var errs []error
	if ready == nil {
		errs = append(errs, errors.New("nil readiness check"))
	}
	if metrics == nil {
		errs = append(errs, errors.New("nil metrics handler"))
	}
	if rc == nil {
		errs = append(errs, errors.New("nil recounter"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("cannot build rollup http handler: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc(routeHealthz, func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, []byte(`{"status":"ok"}`+"\n"))
	})
	mux.HandleFunc(routeReadyz, func(w http.ResponseWriter, r *http.Request) {
		if err := ready(r.Context()); err != nil {
			writeJSON(w, http.StatusServiceUnavailable, unavailableBody(err))
			return
		}
		writeJSON(w, http.StatusOK, []byte(`{"status":"ready"}`+"\n"))
	})
	mux.Handle(routePrometheus, metrics)
	mux.Handle(adminPrefix, NewAdmin(rc, logger))
	return mux, nil
}

// unavailableBody is the rollup's 503 answer to /readyz. encoding/json
// writes the error text as a valid JSON string whatever it holds (control
// characters, invalid UTF-8), which Go's %q does not.
func unavailableBody(err error) []byte {
	body, _ := json.Marshal(struct { // two strings cannot fail to encode
		Status string `json:"status"`
		Error  string `json:"error"`
	}{"unavailable", err.Error()})
	return append(body, '\n')
}
