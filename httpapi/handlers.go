package httpapi

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync"

	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/internal/apijson"
	"github.com/edgecount/edgecount/openapi"
	"github.com/edgecount/edgecount/region"
	"github.com/edgecount/edgecount/store"
)

// writeJSON answers status with body.
func writeJSON(w http.ResponseWriter, status int, body []byte) {
	if writeWhole(w, status, contentTypeJSON[0], body) {
		return
	}
	h := w.Header()
	h["Content-Type"] = contentTypeJSON
	h["Content-Length"] = contentLength(len(body))
	w.WriteHeader(status)
	w.Write(body) //nolint:errcheck // the client may be gone; nothing to do
}

// wholeWriter is a ResponseWriter that takes a whole answer with no
// header but its Content-Type without the header map, its body appended
// straight to the answer's buffer: httpserver's writer, and the API's
// wrapper (respWriter) around it.
type wholeWriter interface {
	// StartWhole starts an answer of status with contentType and returns
	// the body buffer, empty, to append to; it reports false, having
	// done nothing, when the answer has started or has headers set.
	StartWhole(status int, contentType string) ([]byte, bool)
	// EndWhole makes body, StartWhole's buffer appended to, the answer's.
	EndWhole(body []byte)
}

// writeWhole answers status with body through w's StartWhole and EndWhole
// when w has them and no header is set; it reports whether it answered.
func writeWhole(w http.ResponseWriter, status int, contentType string, body []byte) bool {
	ww, ok := w.(wholeWriter)
	if !ok {
		return false
	}
	buf, ok := ww.StartWhole(status, contentType)
	if ok {
		ww.EndWhole(append(buf, body...))
	}
	return ok
}

// contentLengths holds the Content-Length values of small answers, shared
// read-only, so that setting the header allocates nothing.
var contentLengths = func() (t [4096][]string) {
	for i := range t {
		t[i] = []string{strconv.Itoa(i)}
	}
	return t
}()

// contentLength returns the Content-Length header value of n bytes.
func contentLength(n int) []string {
	if n < len(contentLengths) {
		return contentLengths[n]
	}
	return []string{strconv.Itoa(n)}
}

// errInternal is the answer to a failure the client cannot act on; the
// failure is logged where it is found.
var errInternal = &apiError{status: http.StatusInternalServerError, msg: "internal error"}

// writeError answers e. It is the one writer of the API's errors; the
// body is {"error":…,"field":…} (appendError).
func (a *api) writeError(w http.ResponseWriter, e *apiError) {
	switch e.status {
	case http.StatusServiceUnavailable, http.StatusConflict:
		w.Header().Set("Retry-After", a.retryAfter)
	case http.StatusTooManyRequests:
		w.Header().Set("Retry-After", "60")
	case http.StatusRequestEntityTooLarge:
		w.Header().Set("Connection", "close")
	}
	a.answer(w, e.status, func(dst []byte) []byte { return appendError(dst, e) })
}

// answer answers status with the body that build appends to a pooled
// buffer.
func (a *api) answer(w http.ResponseWriter, status int, build func(dst []byte) []byte) {
	if buildAnswer(w, status, contentTypeJSON[0], build) {
		return
	}
	bp := a.getBuf()
	*bp = build((*bp)[:0])
	writeJSON(w, status, *bp)
	a.putBuf(bp)
}

// buildAnswer answers status with the body build appends straight to the
// server's response buffer, when w is httpserver's writer behind the API's
// (respWriter) and the answer can be whole (only a Content-Type): one copy
// of a 16-id read's ~3 KB fewer than building it apart. It reports false,
// having done nothing, otherwise. build is called directly (not through an
// interface), so that the caller's closure stays on its stack.
func buildAnswer(w http.ResponseWriter, status int, contentType string, build func(dst []byte) []byte) bool {
	rw, ok := w.(*respWriter)
	if !ok {
		return false
	}
	buf, ok := rw.StartWhole(status, contentType)
	if ok {
		rw.EndWhole(build(buf))
	}
	return ok
}

// serviceError answers an error of the Service, logging it when it is
// unexpected.
func (a *api) serviceError(w http.ResponseWriter, r *http.Request, err error) {
	var e *apiError
	switch {
	case r.Context().Err() != nil:
		e = &apiError{status: StatusClientClosedRequest, msg: "client closed request"}
	case errors.Is(err, region.ErrKeyConflict):
		e = errKeyConflict
	case errors.Is(err, region.ErrContended) && errors.Is(err, store.ErrContention):
		e = &apiError{status: http.StatusConflict, msg: "the store timed out deciding this reaction (concurrent changes of it, or a slow replica); the agent settles its outcome and counts it once, retry"}
	case errors.Is(err, region.ErrContended):
		e = &apiError{status: http.StatusConflict, msg: "too many concurrent changes to this reaction; nothing was applied, retry"}
	case errors.Is(err, region.ErrTooFrequent):
		e = &apiError{status: http.StatusTooManyRequests, msg: "this reaction changed too often in the last 10 minutes; nothing was applied, retry later"}
	case errors.Is(err, region.ErrStopping):
		e = &apiError{status: http.StatusServiceUnavailable, msg: "agent is stopping; retry, possibly on another agent"}
	case errors.Is(err, region.ErrBacklog):
		e = &apiError{status: http.StatusServiceUnavailable, msg: "agent log full: the broker has been unreachable longer than the log's budget covers; nothing was written, retry later or on another agent"}
	case errors.Is(err, region.ErrLogFull):
		e = &apiError{status: http.StatusServiceUnavailable, msg: "agent log full (size budget or disk); nothing was written, retry later or on another agent"}
	case errors.Is(err, region.ErrLogFailed):
		a.log.Error("agent log failed; restart the agent", "err", err)
		e = &apiError{status: http.StatusServiceUnavailable, msg: "agent log failed; nothing was written, retry on another agent"}
	case errors.Is(err, region.ErrRecovering):
		e = &apiError{status: http.StatusServiceUnavailable, msg: "agent is replaying its log; retry shortly"}
	case errors.Is(err, store.ErrUnavailable):
		e = &apiError{status: http.StatusServiceUnavailable, msg: "store unavailable; retry later"}
	case errors.Is(err, context.DeadlineExceeded):
		e = &apiError{status: http.StatusServiceUnavailable, msg: "timed out; retry later"}
	default:
		a.log.Error("request failed", "method", r.Method, "route", r.Pattern, "err", err)
		e = errInternal
	}
	a.writeError(w, e)
}

func (a *api) postReaction(w http.ResponseWriter, r *http.Request) {
	key, e := a.idempotencyKeyOf(r)
	if e != nil {
		a.writeError(w, e)
		return
	}
	body, e := a.readPost(w, r)
	if e != nil {
		a.writeError(w, e)
		return
	}
	req, e := decodeReaction(body)
	if e != nil {
		a.writeError(w, e)
		return
	}
	var res region.ReactResult
	var err error
	if key != "" {
		var replayed bool
		res, replayed, err = a.idem.ReactOnce(r.Context(), idempotencyKey(r, key), req.UserID, req.ContentID, req.Action)
		if replayed {
			markReplayed(w)
		}
	} else {
		res, err = a.svc.React(r.Context(), req.UserID, req.ContentID, req.Action)
	}
	if err != nil {
		a.serviceError(w, r, err)
		return
	}
	a.answer(w, http.StatusOK, func(dst []byte) []byte {
		return appendReactResult(dst, req.UserID, req.ContentID, res)
	})
}

// errIncrementsType is the 415 of POST /v1/increments.
var errIncrementsType = &apiError{status: http.StatusUnsupportedMediaType, field: "Content-Type",
	msg: "Content-Type must be application/json or " + contentTypeProtobuf}

func (a *api) postIncrements(w http.ResponseWriter, r *http.Request) {
	key, e := a.idempotencyKeyOf(r)
	if e != nil {
		a.writeError(w, e)
		return
	}
	pb := isProtobuf(r)
	if !pb {
		e = checkContentType(r)
	}
	var body string
	if e == nil {
		// Nothing decoded from body outlives this handler: Increment and
		// IncrementOnce keep no string of incs past the call.
		body, e = a.readBodyTransient(w, r)
	}
	if e != nil {
		if e.status == http.StatusUnsupportedMediaType {
			e = errIncrementsType
		}
		a.writeError(w, e)
		return
	}
	ip := a.incs.Get().(*[]region.Increment)
	var incs []region.Increment
	if pb {
		incs, e = decodeIncrementsProto(body, a.cfg.MaxIncrements, (*ip)[:0])
	} else {
		incs, e = decodeIncrements(body, a.cfg.MaxIncrements, (*ip)[:0])
	}
	n := len(incs)
	var err error
	switch {
	case e != nil:
	case key != "":
		var replayed bool
		n, replayed, err = a.idem.IncrementOnce(r.Context(), idempotencyKey(r, key), incs)
		if replayed {
			markReplayed(w)
			n = -n // answered as the first time, not counted again below
		}
	default:
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
	if n < 0 {
		n = -n
	} else {
		a.m.increments.Add(float64(n))
	}
	if pb {
		a.answerProtobuf(w, http.StatusAccepted, func(dst []byte) []byte { return appendIntField(dst, 1, int64(n)) })
		return
	}
	a.answer(w, http.StatusAccepted, func(dst []byte) []byte {
		return append(strconv.AppendInt(append(dst, `{"accepted":`...), int64(n), 10), '}')
	})
}

func (a *api) getReaction(w http.ResponseWriter, r *http.Request) {
	// The first problem is answered: user_id, content_id, then the query.
	userID, eUser := pathID(r, "user_id")
	contentID, eContent := pathID(r, "content_id")
	_, eQuery := a.query(r, 0, nil)
	if e := cmp.Or(eUser, eContent, eQuery); e != nil {
		a.writeError(w, e)
		return
	}
	rx, found, err := a.svc.GetReaction(r.Context(), userID, contentID)
	if err != nil {
		a.serviceError(w, r, err)
		return
	}
	a.answer(w, http.StatusOK, func(dst []byte) []byte {
		return appendReaction(dst, userID, contentID, rx, found)
	})
}

func (a *api) getReactions(w http.ResponseWriter, r *http.Request) {
	ip := a.getIDs()
	defer a.putIDs(ip)
	userID, eUser := pathID(r, "user_id")
	q, eQuery := a.queryIDs(r, 0, ip)
	if e := cmp.Or(eUser, eQuery); e != nil {
		a.writeError(w, e)
		return
	}
	rows, err := a.svc.GetReactions(r.Context(), userID, q.ids)
	if err != nil {
		a.serviceError(w, r, err)
		return
	}
	a.answer(w, http.StatusOK, func(dst []byte) []byte {
		return appendList(dst, `{"reactions":[`, q.ids, func(dst []byte, id string) []byte {
			rx, found := rows[id]
			return appendReaction(dst, userID, id, rx, found)
		})
	})
}

func (a *api) getCount(w http.ResponseWriter, r *http.Request) {
	contentID, eContent := pathID(r, "content_id")
	a.serveCount(w, r, contentID, eContent)
}

// serveCount answers GET /v1/counts/{content_id} for the path's id, or
// eContent when the mux found it invalid (fastRoute has not checked it).
func (a *api) serveCount(w http.ResponseWriter, r *http.Request, contentID string, eContent *apiError) {
	if eContent == nil && !engagement.ValidID(contentID) {
		eContent = badField("content_id", msgID)
	}
	q, eQuery := a.query(r, allowRegion|allowConsistency, nil)
	if e := cmp.Or(eContent, eQuery); e != nil {
		a.writeError(w, e)
		return
	}
	ip := a.getIDs()
	defer a.putIDs(ip)
	*ip = append((*ip)[:0], contentID)
	reads, info, err := a.readCounts(r.Context(), *ip, q.mode)
	if err != nil {
		a.serviceError(w, r, err)
		return
	}
	defer putReads(reads)
	a.answer(w, http.StatusOK, func(dst []byte) []byte {
		return a.appendCountJSON(dst, contentID, &q, &(*reads)[0], &info)
	})
}

func (a *api) getCounts(w http.ResponseWriter, r *http.Request) {
	ip := a.getIDs()
	defer a.putIDs(ip)
	q, e := a.queryIDs(r, allowRegion|allowConsistency, ip)
	if e != nil {
		a.writeError(w, e)
		return
	}
	reads, info, err := a.readCounts(r.Context(), q.ids, q.mode)
	if err != nil {
		a.serviceError(w, r, err)
		return
	}
	defer putReads(reads)
	a.answer(w, http.StatusOK, func(dst []byte) []byte {
		dst = a.appendCountsJSON(append(dst, `{"counts":[`...), &q, *reads, &info)
		return append(dst, "]}"...)
	})
}

// readPool holds the per-request lists of count reads.
var readPool = sync.Pool{New: func() any { s := make([]region.CountRead, 0, 16); return &s }}

// readCounts reads ids' counts in mode into a pooled list (putReads
// returns it).
func (a *api) readCounts(ctx context.Context, ids []string, mode region.Consistency) (*[]region.CountRead, region.ReadInfo, error) {
	rp := readPool.Get().(*[]region.CountRead)
	if cap(*rp) < len(ids) {
		*rp = make([]region.CountRead, len(ids))
	}
	*rp = (*rp)[:len(ids)]
	info, err := a.svc.ReadCounts(ctx, ids, mode, *rp)
	if err != nil {
		putReads(rp)
		return nil, info, err
	}
	return rp, info, nil
}

func putReads(rp *[]region.CountRead) {
	clear(*rp) // do not pin rows from the pool
	*rp = (*rp)[:0]
	if cap(*rp) <= 1024 {
		readPool.Put(rp)
	}
}

// serveOpenAPI answers the API's OpenAPI 3.1 document (package openapi).
func serveOpenAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "max-age=300")
	writeJSON(w, http.StatusOK, openapi.JSON)
}

func (a *api) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, []byte(`{"status":"ok"}`))
}

func (a *api) readyz(w http.ResponseWriter, r *http.Request) {
	if err := a.svc.Ready(r.Context()); err != nil {
		a.answer(w, http.StatusServiceUnavailable, func(dst []byte) []byte {
			return append(apijson.AppendString(append(dst, `{"status":"not ready","error":`...), err.Error()), '}')
		})
		return
	}
	if d, ok := a.svc.(Degrader); ok {
		if problems := d.Degraded(r.Context()); len(problems) > 0 {
			a.answer(w, http.StatusOK, func(dst []byte) []byte {
				return appendList(dst, `{"status":"degraded","degraded":[`, problems, apijson.AppendString)
			})
			return
		}
	}
	writeJSON(w, http.StatusOK, []byte(`{"status":"ready"}`))
}
