package httpapi

import (
	"fmt"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/edgecount/edgecount/httpserver"
)

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
// panics and records metrics. The admin routes are answered ahead of all
// this, by their own handler: its mux, its 404 and 405 (see WithAdmin).
func (a *api) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if a.admin != nil && strings.HasPrefix(r.URL.Path, adminPrefix) {
		a.admin.ServeHTTP(w, r)
		return
	}
	var start time.Time
	if s, ok := w.(startedWriter); ok {
		start = s.Started() // httpserver's: when the request was read
	} else {
		start = time.Now()
	}
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
	if a.muxOnly || !a.fastRoute(rw, r) {
		a.mux.ServeHTTP(rw, r)
	}
}

// countPrefix starts the path of GET /v1/counts/{content_id}.
const countPrefix = "/v1/counts/"

// fastRoute serves the hot routes (the reads and writes measured against
// Redis) without the mux, when the mux would take them to the same
// handler: the exact method, a path in canonical form without escapes,
// and for a count read one non-empty segment that the mux would not clean
// away ("." or ".."). It returns false to leave r to the mux.
// TestFastRouteAgreesWithMux holds the two to the same answers.
func (a *api) fastRoute(rw *respWriter, r *http.Request) bool {
	path := r.URL.Path
	if r.URL.RawPath != "" || len(path) < 10 || path[:4] != "/v1/" {
		return false
	}
	var h func(http.ResponseWriter, *http.Request)
	var pattern string
	switch {
	case r.Method == http.MethodGet && strings.HasPrefix(path, countPrefix):
		id := path[len(countPrefix):]
		if id == "" || id == "." || id == ".." || strings.IndexByte(id, '/') >= 0 {
			return false
		}
		r.Pattern = routeGetCount
		rw.routed = true
		a.serveCount(rw, r, id, nil)
		return true
	case r.Method == http.MethodGet && path == "/v1/counts":
		h, pattern = a.getCounts, routeGetCounts
	case r.Method == http.MethodPost && path == "/v1/increments":
		h, pattern = a.postIncrements, routeIncrements
	case r.Method == http.MethodPost && path == "/v1/counts":
		h, pattern = a.postCounts, routePostCounts
	default:
		return false
	}
	r.Pattern = pattern
	rw.routed = true
	h(rw, r)
	return true
}

// HeadersRead tells httpserver (as a HeaderSkipper) which requests the
// API answers reading no header: GET /v1/counts and GET
// /v1/counts/{content_id}, however the mux or fastRoute takes them
// (getCounts, getCount and serveCount read none; any other path under
// /v1/counts, e.g. /v1/countsx, goes to the mux's 404, which reads none
// either); and which it answers reading only Content-Type: POST
// /v1/counts (postCounts reads it to tell protobuf, nothing else). Every
// other request gets all its headers.
func (a *api) HeadersRead(method string, uri []byte) httpserver.HeaderUse {
	const p = "/v1/counts"
	if len(uri) < len(p) || string(uri[:len(p)]) != p {
		return httpserver.ReadsAllHeaders
	}
	switch {
	case method == http.MethodGet:
		return httpserver.ReadsNoHeader
	case method == http.MethodPost && (len(uri) == len(p) || uri[len(p)] == '?'):
		return httpserver.ReadsContentType
	}
	return httpserver.ReadsAllHeaders
}

// startedWriter is a ResponseWriter that knows when its request was read:
// httpserver's.
type startedWriter interface {
	Started() time.Time
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
	a.writeError(rw, errInternal)
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

// StartWhole is the server writer's StartWhole (wholeWriter) through the
// wrapper, for a route's whole answer, whose body the caller appends
// (writeWhole) or builds in place (buildAnswer); false when w.w is another
// writer or the answer cannot be whole.
func (w *respWriter) StartWhole(status int, contentType string) ([]byte, bool) {
	ww, ok := w.w.(wholeWriter)
	if !ok || w.wrote || !w.routed || status < 200 {
		return nil, false
	}
	buf, ok := ww.StartWhole(status, contentType)
	if ok {
		w.wrote, w.status = true, status
	}
	return buf, ok
}

// EndWhole hands the body StartWhole's buffer was appended to back to
// the server's writer.
func (w *respWriter) EndWhole(body []byte) { w.w.(wholeWriter).EndWhole(body) }

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
