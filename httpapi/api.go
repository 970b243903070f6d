package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/region"
	"github.com/edgecount/edgecount/store"
)

// Service is what the API needs from the agent. Every method is called
// concurrently from many requests, with the request's context, and only with
// validated input.
type Service interface {
	// React sets userID's reaction to contentID.
	React(ctx context.Context, userID, contentID string, action engagement.Action) (region.ReactResult, error)
	// GetReaction returns userID's reaction row on contentID; found is false
	// when there is none.
	GetReaction(ctx context.Context, userID, contentID string) (engagement.Reaction, bool, error)
	// GetReactions returns the rows found among contentIDs, keyed by content
	// id. contentIDs may repeat an id; the slice is reused after the call.
	GetReactions(ctx context.Context, userID string, contentIDs []string) (map[string]engagement.Reaction, error)
	// Increment applies every increment or none. incs and its strings are
	// valid only during the call: the slice is reused afterwards and the
	// strings share memory with the request body, so an implementation that
	// keeps a string (e.g. as a map key) must strings.Clone it.
	Increment(ctx context.Context, incs []region.Increment) error
	// Counts returns every scope row (global and per region) of each of
	// contentIDs; ids without rows are absent. contentIDs may repeat an id;
	// the slice is reused after the call and its strings may share memory
	// with the request, so an implementation that keeps one (e.g. as a
	// cache key) must strings.Clone it.
	Counts(ctx context.Context, contentIDs []string) (map[string][]engagement.Stats, error)
	// Ready returns nil when every dependency is reachable.
	Ready(ctx context.Context) error
	// Trending returns the k items with the largest counts of counter over
	// window in scope (engagement.GlobalScope or a region), ranked, each with
	// its error bound, and the time the list is as of.
	Trending(ctx context.Context, scope, counter, window string, k int) (engagement.Trending, error)
}

// Route patterns.
const (
	routePostReaction = "POST /v1/reactions"
	routeGetReaction  = "GET /v1/reactions/{user_id}/{content_id}"
	routeGetReactions = "GET /v1/reactions/{user_id}"
	routeIncrements   = "POST /v1/increments"
	routeGetCount     = "GET /v1/counts/{content_id}"
	routeGetCounts    = "GET /v1/counts"
	routeTrending     = "GET /v1/trending"
	routeHealthz      = "GET /healthz"
	routeReadyz       = "GET /readyz"
	routePrometheus   = "GET /metrics"
)

// Pooled buffers larger than these are dropped rather than kept.
const (
	maxPooledBuf  = 64 << 10
	maxPooledIncs = 1024
)

// StatusClientClosedRequest is recorded when the client went away before
// its answer (nginx's convention).
const StatusClientClosedRequest = 499

var contentTypeJSON = []string{"application/json"}

type api struct {
	svc        Service
	cfg        Config
	mux        *http.ServeMux
	m          *metrics
	log        *slog.Logger
	scopes     map[string]bool // valid ?region= values
	scopeList  string          // the same, for messages
	trending   map[string]bool // counters with trending lists
	retryAfter string
	tooLarge   *apiError // the 413 of a body over MaxBodyBytes
	bufs       sync.Pool // *[]byte
	incs       sync.Pool // *[]region.Increment
	ids        sync.Pool // *[]string, content_id lists of reads
	writers    sync.Pool // *respWriter
}

// New returns the API's handler. metrics is served at GET /metrics; the
// API's own request metrics are registered on reg. A nil logger discards.
func New(svc Service, cfg Config, metrics http.Handler, reg prometheus.Registerer, logger *slog.Logger) (http.Handler, error) {
	var errs []error
	if svc == nil {
		errs = append(errs, errors.New("nil service"))
	}
	if metrics == nil {
		errs = append(errs, errors.New("nil metrics handler"))
	}
	if reg == nil {
		errs = append(errs, errors.New("nil prometheus registerer"))
	}
	if err := cfg.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("cannot build http api: %w", err)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	cfg = cfg.withDefaults()
	a := &api{
		svc:        svc,
		cfg:        cfg,
		mux:        http.NewServeMux(),
		log:        logger.With("component", "httpapi"),
		scopes:     map[string]bool{engagement.GlobalScope: true},
		scopeList:  engagement.GlobalScope + ", " + strings.Join(cfg.Regions, ", "),
		retryAfter: strconv.FormatInt(int64((cfg.RetryAfter+time.Second-1)/time.Second), 10),
		tooLarge: &apiError{status: http.StatusRequestEntityTooLarge, field: "body",
			msg: "body is larger than " + strconv.FormatInt(cfg.MaxBodyBytes, 10) + " bytes"},
	}
	for _, r := range cfg.Regions {
		a.scopes[r] = true
	}
	a.trending = make(map[string]bool, len(cfg.TrendingCounters))
	for _, c := range cfg.TrendingCounters {
		a.trending[c] = true
	}
	a.bufs.New = func() any { b := make([]byte, 0, 4096); return &b }
	a.incs.New = func() any { s := make([]region.Increment, 0, 128); return &s }
	a.ids.New = func() any { s := make([]string, 0, 16); return &s }
	a.writers.New = func() any { return new(respWriter) }

	routes := []struct {
		pattern string
		h       http.Handler
	}{
		{routePostReaction, http.HandlerFunc(a.postReaction)},
		{routeGetReaction, http.HandlerFunc(a.getReaction)},
		{routeGetReactions, http.HandlerFunc(a.getReactions)},
		{routeIncrements, http.HandlerFunc(a.postIncrements)},
		{routeGetCount, http.HandlerFunc(a.getCount)},
		{routeGetCounts, http.HandlerFunc(a.getCounts)},
		{routeTrending, http.HandlerFunc(a.getTrending)},
		{routeHealthz, http.HandlerFunc(a.healthz)},
		{routeReadyz, http.HandlerFunc(a.readyz)},
		{routePrometheus, metrics},
	}
	patterns := make([]string, 0, len(routes))
	for _, rt := range routes {
		a.mux.Handle(rt.pattern, routed(rt.h))
		patterns = append(patterns, rt.pattern)
	}
	m, err := newMetrics(reg, patterns)
	if err != nil {
		return nil, fmt.Errorf("cannot build http api: %w", err)
	}
	a.m = m
	return a, nil
}

// routed marks the answer as the route's own, so that the wrapper passes it
// through instead of turning it into a JSON error.
func routed(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rw, ok := w.(*respWriter); ok {
			rw.routed = true
		}
		h.ServeHTTP(w, r)
	})
}

// ServeHTTP routes r, turns the mux's own answers into JSON errors, recovers
// panics and records metrics.
func (a *api) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rw := a.writers.Get().(*respWriter)
	*rw = respWriter{w: w, r: r}
	defer func() {
		p := recover()
		abort := p != nil && (p == http.ErrAbortHandler || rw.wrote)
		if p != nil && p != http.ErrAbortHandler {
			a.recovered(rw, r, p)
		}
		pattern := ""
		if rw.routed {
			pattern = r.Pattern
		}
		a.m.route(pattern).observe(rw.code(), time.Since(start).Seconds())
		// A handler may have kept w only if it panicked (the server
		// then drops the connection); otherwise it is done with it.
		if p == nil {
			*rw = respWriter{}
			a.writers.Put(rw)
		}
		if abort {
			// The answer has started: cut the connection so the client
			// cannot take a truncated answer for a whole one.
			panic(http.ErrAbortHandler)
		}
	}()
	a.mux.ServeHTTP(rw, r)
}

// recovered logs a handler panic and answers 500 when nothing was written.
func (a *api) recovered(rw *respWriter, r *http.Request, p any) {
	a.m.panics.Inc()
	a.log.Error("handler panicked", "method", r.Method, "route", r.Pattern,
		"panic", fmt.Sprint(p), "stack", string(debug.Stack()))
	if rw.wrote {
		rw.status = http.StatusInternalServerError
		return
	}
	h := rw.Header()
	for k := range h {
		delete(h, k)
	}
	rw.routed = true
	a.writeError(rw, &apiError{status: http.StatusInternalServerError, msg: "internal error"})
}

// respWriter records the status of an answer and replaces the mux's plain
// text answers (404, 405, redirects) with JSON errors.
type respWriter struct {
	w       http.ResponseWriter
	r       *http.Request
	status  int
	wrote   bool
	routed  bool // a route's handler answers; pass through
	swallow bool // the answer was replaced; drop the original body
}

func (w *respWriter) Header() http.Header { return w.w.Header() }

// Unwrap lets http.ResponseController reach the server's writer.
func (w *respWriter) Unwrap() http.ResponseWriter { return w.w }

func (w *respWriter) code() int {
	if !w.wrote {
		return http.StatusOK
	}
	return w.status
}

func (w *respWriter) WriteHeader(code int) {
	if w.wrote {
		return
	}
	if code >= 100 && code < 200 {
		w.w.WriteHeader(code)
		return
	}
	w.wrote = true
	w.status = code
	if !w.routed {
		w.replace(code)
		return
	}
	w.w.WriteHeader(code)
}

func (w *respWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	if w.swallow {
		return len(b), nil
	}
	return w.w.Write(b)
}

func (w *respWriter) Flush() {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	if f, ok := w.w.(http.Flusher); ok && !w.swallow {
		f.Flush()
	}
}

// replace answers a JSON error instead of the mux's answer code.
func (w *respWriter) replace(code int) {
	h := w.w.Header()
	path := w.r.URL.Path
	if len(path) > 200 {
		path = path[:200] + "…"
	}
	var e *apiError
	switch {
	case code == http.StatusNotFound:
		e = &apiError{status: code, field: "path", msg: "no route for path " + path}
	case code == http.StatusMethodNotAllowed:
		e = &apiError{status: code, field: "method",
			msg: "method " + w.r.Method + " is not allowed on " + path + " (allowed: " + h.Get("Allow") + ")"}
	case code >= 300 && code < 400:
		// The mux redirects to the cleaned path; an API client is better
		// told.
		h.Del("Location")
		e = badField("path", "must be in canonical form: no empty, '.' or '..' segments (percent-encode an id such as '.' as %2E)")
	case code == http.StatusBadRequest:
		e = badField("path", "is malformed")
	default:
		e = &apiError{status: code, msg: http.StatusText(code)}
	}
	w.status = e.status
	w.swallow = true
	body := appendError(nil, e)
	h["Content-Type"] = contentTypeJSON
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.w.WriteHeader(e.status)
	w.w.Write(body) //nolint:errcheck // the client may be gone; nothing to do
}

// writeJSON answers status with body.
func writeJSON(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h["Content-Type"] = contentTypeJSON
	h["Content-Length"] = []string{strconv.Itoa(len(body))}
	w.WriteHeader(status)
	w.Write(body) //nolint:errcheck // the client may be gone; nothing to do
}

// writeError answers e.
func (a *api) writeError(w http.ResponseWriter, e *apiError) {
	switch e.status {
	case http.StatusServiceUnavailable, http.StatusConflict:
		w.Header().Set("Retry-After", a.retryAfter)
	case http.StatusRequestEntityTooLarge:
		w.Header().Set("Connection", "close")
	}
	bp := a.getBuf()
	*bp = appendError((*bp)[:0], e)
	writeJSON(w, e.status, *bp)
	a.putBuf(bp)
}

// serviceError answers an error of the Service, logging it when it is
// unexpected.
func (a *api) serviceError(w http.ResponseWriter, r *http.Request, err error) {
	var e *apiError
	switch {
	case r.Context().Err() != nil:
		e = &apiError{status: StatusClientClosedRequest, msg: "client closed request"}
	case errors.Is(err, region.ErrContended):
		e = &apiError{status: http.StatusConflict, msg: "too many concurrent changes to this reaction; nothing was applied, retry"}
	case errors.Is(err, region.ErrStopping):
		e = &apiError{status: http.StatusServiceUnavailable, msg: "agent is stopping; retry, possibly on another agent"}
	case errors.Is(err, store.ErrUnavailable):
		e = &apiError{status: http.StatusServiceUnavailable, msg: "store unavailable; retry later"}
	case errors.Is(err, context.DeadlineExceeded):
		e = &apiError{status: http.StatusServiceUnavailable, msg: "timed out; retry later"}
	default:
		a.log.Error("request failed", "method", r.Method, "route", r.Pattern, "err", err)
		e = &apiError{status: http.StatusInternalServerError, msg: "internal error"}
	}
	a.writeError(w, e)
}

func (a *api) getBuf() *[]byte { return a.bufs.Get().(*[]byte) }

// getIDs returns a pooled content_id list. The Service does not keep the
// list (only, when it must, clones of its strings).
func (a *api) getIDs() *[]string { return a.ids.Get().(*[]string) }

func (a *api) putIDs(ip *[]string) {
	clear(*ip) // do not pin request URLs from the pool
	*ip = (*ip)[:0]
	a.ids.Put(ip)
}

func (a *api) putBuf(bp *[]byte) {
	if cap(*bp) <= maxPooledBuf {
		*bp = (*bp)[:0]
		a.bufs.Put(bp)
	}
}

// checkContentType accepts a missing Content-Type, application/json with
// at most a charset=utf-8 parameter, and application/x-www-form-urlencoded:
// that is what `curl -d` sends by default, and refusing it would turn every
// hand-typed curl into a 415. The body is parsed as strict JSON whatever
// the label says.
func checkContentType(r *http.Request) *apiError {
	ct := r.Header.Get("Content-Type")
	if ct == "" || ct == "application/json" || ct == "application/x-www-form-urlencoded" {
		return nil
	}
	mt, params, err := mime.ParseMediaType(ct)
	ok := err == nil && mt == "application/json"
	for k, v := range params {
		if k != "charset" || !strings.EqualFold(v, "utf-8") {
			ok = false
		}
	}
	if ok {
		return nil
	}
	return &apiError{status: http.StatusUnsupportedMediaType, field: "Content-Type",
		msg: "Content-Type must be application/json"}
}

// readBody reads the request body into *bp, within Config.MaxBodyBytes.
func (a *api) readBody(w http.ResponseWriter, r *http.Request, bp *[]byte) ([]byte, *apiError) {
	max, tooLarge := a.cfg.MaxBodyBytes, a.tooLarge
	if r.ContentLength > max {
		return nil, tooLarge
	}
	if rw, ok := w.(*respWriter); ok {
		w = rw.w // lets MaxBytesReader close the connection after a 413
	}
	rd := http.MaxBytesReader(w, r.Body, max)
	buf := (*bp)[:0]
	// Trust Content-Length for the first allocation only up to a bound, so
	// that a client cannot make the agent reserve memory it never sends.
	if need := min(r.ContentLength+1, maxPooledBuf); int64(cap(buf)) < need {
		buf = make([]byte, 0, need)
	}
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := rd.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			*bp = buf
			if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
				return nil, tooLarge
			}
			return nil, badField("body", "cannot be read: "+err.Error())
		}
	}
	*bp = buf
	return buf, nil
}

// queryParams is the validated query of a request.
type queryParams struct {
	ids   []string // content_id, in order
	scope string   // region, default global
}

// Query parameters a route accepts.
const (
	allowIDs = 1 << iota
	allowRegion
)

// query parses and validates r's query string, accepting only the
// parameters in allow. content_id values are appended to ids[:0].
func (a *api) query(r *http.Request, allow int, ids []string) (queryParams, *apiError) {
	q := queryParams{ids: ids[:0], scope: engagement.GlobalScope}
	seenRegion := false
	e := eachParam(r.URL.RawQuery, func(k, v string) *apiError {
		switch {
		case k == "content_id" && allow&allowIDs != 0:
			if len(q.ids) == a.cfg.MaxBatchIDs {
				return badField("content_id", fmt.Sprintf("must be given 1 to %d times", a.cfg.MaxBatchIDs))
			}
			if !engagement.ValidID(v) {
				return badField("content_id["+strconv.Itoa(len(q.ids))+"]", msgID)
			}
			q.ids = append(q.ids, v)
		case k == "region" && allow&allowRegion != 0:
			if seenRegion {
				return badField("region", msgDup)
			}
			seenRegion = true
			if !a.scopes[v] {
				return badField("region", "must be one of "+a.scopeList)
			}
			q.scope = v
		default:
			return badField(fieldName(k), "is not a known query parameter")
		}
		return nil
	})
	if e != nil {
		return q, e
	}
	if allow&allowIDs != 0 && len(q.ids) == 0 {
		return q, badField("content_id", fmt.Sprintf("must be given 1 to %d times", a.cfg.MaxBatchIDs))
	}
	return q, nil
}

// eachParam calls fn with every parameter of a raw query string, decoded,
// in order, and stops at the first error: a ';' separator or a bad escape
// is an error of the field "query".
func eachParam(raw string, fn func(k, v string) *apiError) *apiError {
	for raw != "" {
		var part string
		part, raw, _ = strings.Cut(raw, "&")
		if part == "" {
			continue
		}
		if strings.Contains(part, ";") {
			return badField("query", "must separate parameters with '&', not ';'")
		}
		k, v, _ := strings.Cut(part, "=")
		k, err1 := url.QueryUnescape(k)
		v, err2 := url.QueryUnescape(v)
		if err := errors.Join(err1, err2); err != nil {
			return badField("query", "is malformed: "+err.Error())
		}
		if e := fn(k, v); e != nil {
			return e
		}
	}
	return nil
}

// readPost checks a POST's Content-Type and query and reads its body.
func (a *api) readPost(w http.ResponseWriter, r *http.Request, bp *[]byte) ([]byte, *apiError) {
	if e := checkContentType(r); e != nil {
		return nil, e
	}
	if _, e := a.query(r, 0, nil); e != nil {
		return nil, e
	}
	return a.readBody(w, r, bp)
}

func (a *api) postReaction(w http.ResponseWriter, r *http.Request) {
	bp := a.getBuf()
	defer a.putBuf(bp)
	body, e := a.readPost(w, r, bp)
	if e != nil {
		a.writeError(w, e)
		return
	}
	req, e := decodeReaction(string(body))
	if e != nil {
		a.writeError(w, e)
		return
	}
	res, err := a.svc.React(r.Context(), req.UserID, req.ContentID, req.Action)
	if err != nil {
		a.serviceError(w, r, err)
		return
	}
	*bp = appendReactResult((*bp)[:0], req.UserID, req.ContentID, res)
	writeJSON(w, http.StatusOK, *bp)
}

func (a *api) postIncrements(w http.ResponseWriter, r *http.Request) {
	bp := a.getBuf()
	body, e := a.readPost(w, r, bp)
	if e != nil {
		a.putBuf(bp)
		a.writeError(w, e)
		return
	}
	s := string(body) // the increments' strings share this one copy
	a.putBuf(bp)
	ip := a.incs.Get().(*[]region.Increment)
	incs, e := decodeIncrements(s, a.cfg.MaxIncrements, (*ip)[:0])
	n := len(incs)
	var err error
	if e == nil {
		err = a.svc.Increment(r.Context(), incs)
	}
	clear(incs) // do not pin request bodies from the pool
	if *ip = incs[:0]; cap(incs) <= maxPooledIncs {
		a.incs.Put(ip)
	}
	switch {
	case e != nil:
		a.writeError(w, e)
		return
	case err != nil:
		a.serviceError(w, r, err)
		return
	}
	a.m.increments.Add(float64(n))
	bp = a.getBuf()
	*bp = append(strconv.AppendInt(append((*bp)[:0], `{"accepted":`...), int64(n), 10), '}')
	writeJSON(w, http.StatusAccepted, *bp)
	a.putBuf(bp)
}

func (a *api) getReaction(w http.ResponseWriter, r *http.Request) {
	userID, contentID := r.PathValue("user_id"), r.PathValue("content_id")
	var e *apiError
	switch {
	case !engagement.ValidID(userID):
		e = badField("user_id", msgID)
	case !engagement.ValidID(contentID):
		e = badField("content_id", msgID)
	default:
		_, e = a.query(r, 0, nil)
	}
	if e != nil {
		a.writeError(w, e)
		return
	}
	rx, found, err := a.svc.GetReaction(r.Context(), userID, contentID)
	if err != nil {
		a.serviceError(w, r, err)
		return
	}
	bp := a.getBuf()
	*bp = appendReaction((*bp)[:0], userID, contentID, rx, found)
	writeJSON(w, http.StatusOK, *bp)
	a.putBuf(bp)
}

func (a *api) getReactions(w http.ResponseWriter, r *http.Request) {
	userID := r.PathValue("user_id")
	if !engagement.ValidID(userID) {
		a.writeError(w, badField("user_id", msgID))
		return
	}
	ip := a.getIDs()
	defer a.putIDs(ip)
	q, e := a.query(r, allowIDs, *ip)
	*ip = q.ids
	if e != nil {
		a.writeError(w, e)
		return
	}
	rows, err := a.svc.GetReactions(r.Context(), userID, q.ids)
	if err != nil {
		a.serviceError(w, r, err)
		return
	}
	bp := a.getBuf()
	buf := append((*bp)[:0], `{"reactions":[`...)
	for i, id := range q.ids {
		if i > 0 {
			buf = append(buf, ',')
		}
		rx, found := rows[id]
		buf = appendReaction(buf, userID, id, rx, found)
	}
	*bp = append(buf, "]}"...)
	writeJSON(w, http.StatusOK, *bp)
	a.putBuf(bp)
}

func (a *api) getCount(w http.ResponseWriter, r *http.Request) {
	contentID := r.PathValue("content_id")
	if !engagement.ValidID(contentID) {
		a.writeError(w, badField("content_id", msgID))
		return
	}
	ip := a.getIDs()
	defer a.putIDs(ip)
	q, e := a.query(r, allowRegion, nil)
	if e != nil {
		a.writeError(w, e)
		return
	}
	*ip = append((*ip)[:0], contentID)
	rows, err := a.svc.Counts(r.Context(), *ip)
	if err != nil {
		a.serviceError(w, r, err)
		return
	}
	bp := a.getBuf()
	*bp = appendCounts((*bp)[:0], contentID, q.scope, scopeRow(rows[contentID], q.scope))
	writeJSON(w, http.StatusOK, *bp)
	a.putBuf(bp)
}

func (a *api) getCounts(w http.ResponseWriter, r *http.Request) {
	ip := a.getIDs()
	defer a.putIDs(ip)
	q, e := a.query(r, allowIDs|allowRegion, *ip)
	*ip = q.ids
	if e != nil {
		a.writeError(w, e)
		return
	}
	rows, err := a.svc.Counts(r.Context(), q.ids)
	if err != nil {
		a.serviceError(w, r, err)
		return
	}
	bp := a.getBuf()
	buf := append((*bp)[:0], `{"counts":[`...)
	for i, id := range q.ids {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = appendCounts(buf, id, q.scope, scopeRow(rows[id], q.scope))
	}
	*bp = append(buf, "]}"...)
	writeJSON(w, http.StatusOK, *bp)
	a.putBuf(bp)
}

func (a *api) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, []byte(`{"status":"ok"}`))
}

func (a *api) readyz(w http.ResponseWriter, r *http.Request) {
	if err := a.svc.Ready(r.Context()); err != nil {
		bp := a.getBuf()
		buf := append((*bp)[:0], `{"status":"not ready","error":`...)
		*bp = append(appendString(buf, err.Error()), '}')
		writeJSON(w, http.StatusServiceUnavailable, *bp)
		a.putBuf(bp)
		return
	}
	if d, ok := a.svc.(Degrader); ok {
		if problems := d.Degraded(r.Context()); len(problems) > 0 {
			bp := a.getBuf()
			buf := append((*bp)[:0], `{"status":"degraded","degraded":[`...)
			for i, p := range problems {
				if i > 0 {
					buf = append(buf, ',')
				}
				buf = appendString(buf, p)
			}
			*bp = append(buf, "]}"...)
			writeJSON(w, http.StatusOK, *bp)
			a.putBuf(bp)
			return
		}
	}
	writeJSON(w, http.StatusOK, []byte(`{"status":"ready"}`))
}

// Degrader is implemented by a Service that can run with a dependency
// down (e.g. the Redis directory: writes go on with cached shard counts).
// /readyz then stays 200, so load balancers keep sending writes, and lists
// what is degraded.
type Degrader interface {
	Degraded(ctx context.Context) []string
}
