package httpapi

import (
	"errors"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgecount/edgecount/auth"
)

// Authenticate wraps next (New's or NewRollup's handler) with the bearer
// token check of policy: each request needs the scope of its route
// (auth.RouteScope) and gets a 401 (no or unknown credentials, with
// WWW-Authenticate) or a 403 (a token without the scope) in the API's error
// shape, field "Authorization"; nothing behind it runs. An open policy
// returns next unchanged. Failures are counted by reason in
// edgecount_http_auth_failures_total, exported (at 0) by an open listener
// too, so that the alert on it sees one series per reason from the start.
// No token is ever logged or answered.
func Authenticate(next http.Handler, policy auth.Policy, reg prometheus.Registerer) (http.Handler, error) {
	failures := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "edgecount", Subsystem: "http", Name: "auth_failures_total",
		Help: "Requests refused by the bearer token check, by reason (unauthenticated: 401, forbidden: 403).",
	}, []string{"reason"})
	if err := reg.Register(failures); err != nil {
		return nil, err
	}
	unauth, forbidden := failures.WithLabelValues("unauthenticated"), failures.WithLabelValues("forbidden")
	if policy.Open() {
		return next, nil
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		need, required := auth.RouteScope(r.Method, r.URL.Path, policy.OpenMetrics)
		if !required {
			next.ServeHTTP(w, r)
			return
		}
		_, err := policy.Keeper.Tokens().Check(r.Header.Get("Authorization"), need)
		if err == nil {
			next.ServeHTTP(w, r)
			return
		}
		var ce *auth.CheckError
		if !errors.As(err, &ce) {
			ce = &auth.CheckError{Err: auth.ErrUnauthenticated, Reason: "credentials refused"}
		}
		if ce.Status() == http.StatusUnauthorized {
			unauth.Inc()
			w.Header().Set("WWW-Authenticate", `Bearer realm="edgecount"`)
		} else {
			forbidden.Inc()
		}
		e := &apiError{status: ce.Status(), field: "Authorization", msg: ce.Error()}
		writeJSON(w, e.status, append(appendError(nil, e), '\n'))
	}), nil
}
