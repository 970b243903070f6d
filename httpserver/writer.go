package httpserver

import (
	"io"
	"net/http"
	"time"

	"github.com/valyala/fasthttp"
)

// The request body and the response writer a handler gets. Next to
// io.ReadCloser and http.ResponseWriter (and http.Flusher) they offer a
// few methods for a handler's fast paths, which a handler reaches through
// interfaces of its own (httpapi declares them): the body fasthttp read,
// without a copy (Size, TakeRest); a whole answer appended straight to
// fasthttp's response buffer (StartWhole, EndWhole); and the time the
// request was read (Started).

// bodyReader reads the request body fasthttp has read.
type bodyReader struct {
	b []byte
	i int
}

// Size returns the length of the whole body, read or not.
func (r *bodyReader) Size() int64 { return int64(len(r.b)) }

// TakeRest returns the unread rest of the body and marks it read. The
// bytes are fasthttp's request buffer itself, not a copy: the caller must
// not modify them nor use them after the handler returns, when fasthttp
// reads the connection's next request into the buffer.
func (r *bodyReader) TakeRest() []byte {
	b := r.b[r.i:]
	r.i = len(r.b)
	return b
}

func (r *bodyReader) reset(b []byte) { r.b, r.i = b, 0 }
func (r *bodyReader) Close() error   { return nil }

func (r *bodyReader) Read(p []byte) (int, error) {
	if r.i >= len(r.b) {
		return 0, io.EOF
	}
	n := copy(p, r.b[r.i:])
	r.i += n
	return n, nil
}

// fastWriter is the handler's http.ResponseWriter: the status and headers
// are copied to fasthttp's response at the first write, the body appended
// to it.
type fastWriter struct {
	ctx   *fasthttp.RequestCtx
	hdr   http.Header
	wrote bool
}

func (w *fastWriter) reset(ctx *fasthttp.RequestCtx) {
	w.ctx, w.wrote = ctx, false
	if len(w.hdr) > 0 {
		clear(w.hdr)
	}
}

func (w *fastWriter) Header() http.Header { return w.hdr }

func (w *fastWriter) WriteHeader(code int) {
	if w.wrote || code < 200 {
		return // 1xx: fasthttp answers Expect: 100-continue itself
	}
	w.wrote = true
	resp := &w.ctx.Response
	resp.SetStatusCode(code)
	for k, vs := range w.hdr {
		switch k {
		case "Content-Length", "Transfer-Encoding", "Date":
			// fasthttp frames the answer (the body is buffered) and dates
			// it.
		case "Content-Type":
			if len(vs) > 0 {
				resp.Header.SetContentType(vs[0])
			}
		case "Connection":
			for _, v := range vs {
				if v == "close" {
					w.ctx.SetConnectionClose()
				}
			}
		default:
			for _, v := range vs {
				resp.Header.Add(k, v)
			}
		}
	}
}

// Started returns the time fasthttp read the request: the start of its
// latency, without another clock read (two vDSO calls, ~2 % of a 16-id
// read here).
func (w *fastWriter) Started() time.Time { return w.ctx.Time() }

// StartWhole starts a whole answer: status, contentType and no other
// header, the body in one piece. It returns the response's body buffer,
// empty, for the caller to append the body to and hand back to EndWhole:
// WriteHeader and Write without the header map and without a copy of the
// body. It returns false, having done nothing, when the answer has
// started or a header is set; the caller then answers through WriteHeader
// and Write. Between StartWhole and EndWhole the writer is not to be used.
func (w *fastWriter) StartWhole(status int, contentType string) ([]byte, bool) {
	if w.wrote || len(w.hdr) != 0 || status < 200 {
		return nil, false
	}
	w.wrote = true
	resp := &w.ctx.Response
	resp.SetStatusCode(status)
	resp.Header.SetContentType(contentType)
	// The response's pooled buffer, taken out; EndWhole puts it back.
	return resp.SwapBody(nil)[:0], true
}

// EndWhole makes body, StartWhole's buffer appended to, the answer's body.
func (w *fastWriter) EndWhole(body []byte) { w.ctx.Response.SwapBody(body) }

func (w *fastWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ctx.Write(b)
}

// Flush is a no-op: the answer is sent when the handler returns.
func (w *fastWriter) Flush() {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
}

// finish sends the status of a handler that wrote nothing.
func (w *fastWriter) finish() {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
}
