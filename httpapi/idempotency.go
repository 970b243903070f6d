package httpapi

import (
	"context"
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/region"
)

// headerIdempotencyKey is the request header of a keyed write, and
// headerReplayed the answer header that marks an answer given from a key
// (the first answer again; nothing was applied).
const (
	headerIdempotencyKey = "Idempotency-Key"
	headerReplayed       = "Idempotent-Replayed"
)

// Idempotent is implemented by a Service that keeps idempotency keys
// (region.Agent): POST /v1/increments and POST /v1/reactions with an
// Idempotency-Key call it instead of Increment and React. replayed
// reports an answer given from the key; region.ErrKeyConflict (another
// body with the key) is answered 422. Without it a keyed write is a 501.
type Idempotent interface {
	IncrementOnce(ctx context.Context, k region.IdempotencyKey, incs []region.Increment) (accepted int, replayed bool, err error)
	ReactOnce(ctx context.Context, k region.IdempotencyKey, userID, contentID string, action engagement.Action) (res region.ReactResult, replayed bool, err error)
	IdempotencyStats() *region.IdempotencyStats
	IdempotencyKeysLogBytes() int64
}

var (
	errKeyConflict = &apiError{status: http.StatusUnprocessableEntity, field: headerIdempotencyKey,
		msg: "Idempotency-Key was already used, within its window, for a request with a different body; nothing was applied (use a new key for a new request)"}
	errKeyUnsupported = &apiError{status: http.StatusNotImplemented, field: headerIdempotencyKey,
		msg: "this server keeps no idempotency keys; nothing was applied"}
)

// parseIdempotencyKey returns r's Idempotency-Key, "" when it has none, or
// the 400 of a malformed one: given twice, empty, longer than 128 bytes,
// or with a byte outside printable ASCII (0x20..0x7e).
func parseIdempotencyKey(h http.Header) (string, *apiError) {
	vs := h[headerIdempotencyKey]
	switch {
	case len(vs) == 0:
		return "", nil
	case len(vs) > 1:
		return "", badField(headerIdempotencyKey, "must be given once")
	}
	k := vs[0]
	if len(k) == 0 || len(k) > region.MaxIdempotencyKeyBytes {
		return "", badField(headerIdempotencyKey, "must be 1 to "+strconv.Itoa(region.MaxIdempotencyKeyBytes)+" bytes, got "+strconv.Itoa(len(k)))
	}
	if !region.ValidIdempotencyKey(k) {
		return "", badField(headerIdempotencyKey, "must be printable ASCII (0x20 to 0x7e)")
	}
	return k, nil
}

// idempotencyKeyOf returns r's Idempotency-Key ("" without one), or the
// error to answer: a malformed key (400), or a key to a Service that keeps
// none (501).
func (a *api) idempotencyKeyOf(r *http.Request) (string, *apiError) {
	k, e := parseIdempotencyKey(r.Header)
	if e == nil && k != "" && a.idem == nil {
		return "", errKeyUnsupported
	}
	return k, e
}

// callerKey is the request context key of the caller's token name.
type callerKey struct{}

// withCaller records the name of r's token for the idempotency key scope.
// Only a keyed request needs it, so only a keyed request pays for the
// context.
func withCaller(r *http.Request, name string) *http.Request {
	if name == "" || len(r.Header[headerIdempotencyKey]) == 0 {
		return r
	}
	return r.WithContext(context.WithValue(r.Context(), callerKey{}, name))
}

// idempotencyKey is the key of a keyed request: scoped by its token's
// name when tokens are checked, so that two tenants never share a key.
func idempotencyKey(r *http.Request, key string) region.IdempotencyKey {
	name, _ := r.Context().Value(callerKey{}).(string)
	return region.IdempotencyKey{Scope: name, Key: key}
}

// markReplayed sets the answer header of an answer given from a key.
func markReplayed(w http.ResponseWriter) {
	w.Header()[headerReplayed] = replayedTrue
}

var replayedTrue = []string{"true"}

// registerIdempotency exports the key table's figures on reg.
func registerIdempotency(reg prometheus.Registerer, svc Idempotent) error {
	st := svc.IdempotencyStats()
	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "edgecount", Subsystem: "idempotency", Name: name, Help: help}, f)
	}
	counter := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "edgecount", Subsystem: "idempotency", Name: name, Help: help}, f)
	}
	evicted := func(reason string, f func() float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "edgecount", Subsystem: "idempotency", Name: "evicted_total",
			Help:        "Idempotency keys dropped: at the end of their window (reason window), or early because max_keys was reached (reason max_keys; a retry with such a key is applied again).",
			ConstLabels: prometheus.Labels{"reason": reason}}, f)
	}
	for _, c := range []prometheus.Collector{
		gauge("keys", "Idempotency keys held (answered keyed writes within the window).", func() float64 { return float64(st.Keys.Load()) }),
		gauge("bytes", "Estimated memory the idempotency keys take.", func() float64 { return float64(st.Bytes.Load()) }),
		gauge("log_bytes", "Bytes on disk of the idempotency keys log (keys that outlived their intake records).", func() float64 { return float64(svc.IdempotencyKeysLogBytes()) }),
		counter("hits_total", "Retries answered with the first answer of their Idempotency-Key (nothing applied).", func() float64 { return float64(st.Hits.Load()) }),
		counter("conflicts_total", "Requests refused 422: their Idempotency-Key was used for a different body.", func() float64 { return float64(st.Conflicts.Load()) }),
		counter("waits_total", "Requests that waited for an in-flight request with the same Idempotency-Key.", func() float64 { return float64(st.Waits.Load()) }),
		counter("log_errors_total", "Keys-log writes that failed (those keys are kept in memory only; a restart forgets them).", func() float64 { return float64(st.LogErrors.Load()) }),
		evicted("window", func() float64 { return float64(st.Expired.Load()) }),
		evicted("max_keys", func() float64 { return float64(st.Evicted.Load()) }),
	} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}
