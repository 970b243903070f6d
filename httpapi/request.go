package httpapi

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unsafe"

	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/region"
)

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
	mode  region.Consistency
}

// Query parameters a route accepts.
const (
	allowIDs = 1 << iota
	allowRegion
	allowConsistency
)

// msgConsistency is the 400 of a bad consistency value.
const msgConsistency = "must be eventual or fresh"

// query parses and validates r's query string, accepting only the
// parameters in allow. content_id values are appended to ids[:0].
func (a *api) query(r *http.Request, allow int, ids []string) (queryParams, *apiError) {
	q := queryParams{ids: ids[:0], scope: engagement.GlobalScope}
	seenRegion, seenMode := false, false
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
		case k == "consistency" && allow&allowConsistency != 0:
			if seenMode {
				return badField("consistency", msgDup)
			}
			seenMode = true
			mode, ok := region.ParseConsistency(v)
			if !ok {
				return badField("consistency", msgConsistency)
			}
			q.mode = mode
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

// queryIDs parses the query of a batch read (content_id 1 to MaxBatchIDs
// times, and the parameters in allow) into the pooled list *ip.
func (a *api) queryIDs(r *http.Request, allow int, ip *[]string) (queryParams, *apiError) {
	q, e := a.query(r, allowIDs|allow, *ip)
	*ip = q.ids // the list goes back to the pool with what it holds now
	return q, e
}

// pathID returns the id in r's path value name, and its 400 when it is not
// a valid id.
func pathID(r *http.Request, name string) (string, *apiError) {
	id := r.PathValue(name)
	if !engagement.ValidID(id) {
		return id, badField(name, msgID)
	}
	return id, nil
}

// eachParam calls fn with every parameter of a raw query string, decoded,
// in order, and stops at the first error: a ';' separator or a bad escape
// is an error of the field "query".
func eachParam(raw string, fn func(k, v string) *apiError) *apiError {
	// One scan of the whole query for what needs a closer look; a query
	// without '%' and '+' is its own unescaping (16 ids a request spent
	// ~10% of an in-process read in url.QueryUnescape's byte loop).
	semi := strings.IndexByte(raw, ';') >= 0
	escaped := strings.IndexByte(raw, '%') >= 0 || strings.IndexByte(raw, '+') >= 0
	for raw != "" {
		var part string
		part, raw, _ = strings.Cut(raw, "&")
		if part == "" {
			continue
		}
		if semi && strings.Contains(part, ";") {
			return badField("query", "must separate parameters with '&', not ';'")
		}
		k, v, _ := strings.Cut(part, "=")
		if escaped {
			var err1, err2 error
			k, err1 = url.QueryUnescape(k)
			v, err2 = url.QueryUnescape(v)
			if err := errors.Join(err1, err2); err != nil {
				return badField("query", "is malformed: "+err.Error())
			}
		}
		if e := fn(k, v); e != nil {
			return e
		}
	}
	return nil
}

// readPost checks a POST's Content-Type and query and reads its body. The
// body is copied once, into the string: the decoded request's strings are
// substrings of it, and the read buffer goes back to the pool.
func (a *api) readPost(w http.ResponseWriter, r *http.Request) (string, *apiError) {
	if e := checkContentType(r); e != nil {
		return "", e
	}
	return a.readBodyString(w, r)
}

// readBodyString is readPost without the Content-Type check.
func (a *api) readBodyString(w http.ResponseWriter, r *http.Request) (string, *apiError) {
	return a.readBodyAs(w, r, false)
}

// readBodyTransient is readBodyString, except that httpserver's body is
// not copied: the string is fasthttp's request buffer itself, which fasthttp
// reuses once the handler returns. So it is for a handler whose decoded
// strings go only to a call whose contract says they are valid during the
// call alone (Service.Increment, Idempotent.IncrementOnce) and to the
// answer, written before the handler returns. It saves the body's
// allocation and copy, and the write barriers of storing ids from a fresh
// allocation while the GC runs: a 100-increment protobuf request took
// 19.9 µs of the agent's CPU instead of 25.2 (docs/write-path.md).
func (a *api) readBodyTransient(w http.ResponseWriter, r *http.Request) (string, *apiError) {
	return a.readBodyAs(w, r, true)
}

// heldBody is a request body the server has read whole and holds in its
// own buffer: httpserver's.
type heldBody interface {
	// Size is the length of the whole body.
	Size() int64
	// TakeRest returns the unread rest of the body, the server's buffer
	// itself (valid until the handler returns), and marks it read.
	TakeRest() []byte
}

func (a *api) readBodyAs(w http.ResponseWriter, r *http.Request, transient bool) (string, *apiError) {
	if _, e := a.query(r, 0, nil); e != nil {
		return "", e
	}
	if hb, ok := r.Body.(heldBody); ok && hb.Size() <= a.cfg.MaxBodyBytes {
		// httpserver's body, already read whole (and within its own
		// limit): copied once, straight into the string, unless transient.
		b := hb.TakeRest()
		if transient {
			return unsafe.String(unsafe.SliceData(b), len(b)), nil
		}
		return string(b), nil
	}
	bp := a.getBuf()
	defer a.putBuf(bp)
	body, e := a.readBody(w, r, bp)
	return string(body), e
}
