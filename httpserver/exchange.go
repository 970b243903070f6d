package httpserver

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"net/url"
	"runtime/debug"
	"strings"

	"github.com/valyala/fasthttp"
)

// exchange is one request and its answer as the handler sees them; it is
// pooled, and every field is set afresh for each request.
type exchange struct {
	req  *http.Request
	url  url.URL
	hdr  http.Header
	vals []string // backs the header values
	body bodyReader
	w    fastWriter
	// Strings kept from the previous request, reused when equal.
	host, remote, uri string
	connID            uint64
	tls               *tls.ConnectionState // of connID; nil without TLS
	values            map[string]string
}

// A HeaderSkipper is a handler that answers some requests reading none of
// their headers, or only Content-Type: Server then hands it those requests
// with an empty Header, or one holding only Content-Type, instead of
// copying fasthttp's. Copying the headers (a map entry and an interned
// string each) was ~6 % of a 16-id count read end to end. Wrappers that
// read a header (httpapi.Authenticate) do not offer it, so behind them
// every request gets its headers.
type HeaderSkipper interface {
	// HeadersRead tells which headers the request with this method and
	// request URI is answered from. It is called for every request,
	// concurrently, and must not keep uri.
	HeadersRead(method string, uri []byte) HeaderUse
}

// HeaderUse is the headers a handler reads of a request.
type HeaderUse uint8

// The headers a HeaderSkipper reads of a request.
const (
	ReadsAllHeaders  HeaderUse = iota // every header (the default)
	ReadsNoHeader                     // none
	ReadsContentType                  // Content-Type alone
)

func (s *Server) newExchange() *exchange {
	x := &exchange{hdr: make(http.Header, 8), values: make(map[string]string, 8)}
	x.req = (&http.Request{}).WithContext(s.ctx)
	x.w.hdr = make(http.Header, 8)
	return x
}

// Header names interned so that copying headers does not allocate a key.
var knownHeaders = func() map[string]string {
	m := map[string]string{}
	for _, k := range []string{"Host", "Content-Type", "Content-Length", "Accept", "Accept-Encoding",
		"User-Agent", "Connection", "Transfer-Encoding", "Expect", "Authorization", "Idempotency-Key",
		"Cache-Control", "Content-Encoding", "Cookie", "Origin", "Referer", "X-Forwarded-For", "Traceparent"} {
		m[k] = k
	}
	return m
}()

// methods interned.
var methods = map[string]string{
	http.MethodGet: http.MethodGet, http.MethodPost: http.MethodPost, http.MethodHead: http.MethodHead,
	http.MethodPut: http.MethodPut, http.MethodDelete: http.MethodDelete, http.MethodPatch: http.MethodPatch,
	http.MethodOptions: http.MethodOptions,
}

// intern returns b as a string, the previous one for key when equal.
func (x *exchange) intern(key string, b []byte) string {
	if v, ok := x.values[key]; ok && v == string(b) {
		return v
	}
	v := string(b)
	if len(x.values) < 32 {
		x.values[key] = v
	}
	return v
}

// serve is fasthttp's handler: it builds the request, calls the handler
// and copies its answer.
func (s *Server) serve(ctx *fasthttp.RequestCtx) {
	x := s.pool.Get().(*exchange)
	if err := x.fill(ctx, s.skip); err != nil {
		ctx.SetStatusCode(http.StatusBadRequest)
		ctx.SetContentType("application/json")
		ctx.SetBody(errorBody("path is malformed: "+err.Error(), "path"))
		s.pool.Put(x)
		return
	}
	x.w.reset(ctx)
	aborted := false
	func() {
		defer func() {
			p := recover()
			if p == nil {
				return
			}
			aborted = true
			if p != http.ErrAbortHandler {
				s.log.Error("handler panicked", "method", x.req.Method, "path", x.req.URL.Path,
					"panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			}
		}()
		s.h.ServeHTTP(&x.w, x.req)
	}()
	if aborted {
		// The answer may be partial: the client must not take it for a
		// whole one.
		ctx.Response.Reset()
		ctx.Conn().Close() //nolint:errcheck // the connection is dropped either way
	} else {
		x.w.finish()
	}
	x.release()
	s.pool.Put(x)
}

// fill sets the request from ctx, without its headers when skip says the
// handler reads none. It returns the error of a request URI net/http would
// refuse too (url.ParseRequestURI's).
func (x *exchange) fill(ctx *fasthttp.RequestCtx, skip HeaderSkipper) error {
	r, h := x.req, &ctx.Request.Header
	method := h.Method()
	m, ok := methods[string(method)]
	if !ok {
		m = string(method)
	}
	uri := h.RequestURI()
	// The previous request's URI when equal, kept in a field rather than
	// x.values: the map's lookup and store cost a single read ~3 % of its
	// time in process (BenchmarkServerAgentReads), and a 16-id read's URI
	// rarely repeats.
	if x.uri != string(uri) {
		x.uri = string(uri)
	}
	uriStr := x.uri
	if err := x.parseURI(uriStr); err != nil {
		return err
	}
	if len(x.hdr) > 0 {
		clear(x.hdr)
	}
	clear(x.vals)
	x.vals = x.vals[:0]
	use := ReadsAllHeaders
	if skip != nil {
		use = skip.HeadersRead(m, uri)
	}
	switch use {
	case ReadsAllHeaders:
		x.copyHeaders(h)
	case ReadsContentType:
		// fasthttp keeps one Content-Type, the last sent, as it does for
		// copyHeaders.
		if ct := h.ContentType(); len(ct) > 0 {
			x.vals = append(x.vals, x.intern("Content-Type", ct))
			x.hdr["Content-Type"] = x.vals[0:1:1]
		}
	}
	if id := ctx.ConnID(); id != x.connID || x.remote == "" {
		x.connID = id
		if lc, ok := rawConn(ctx.Conn()).(*lingerConn); ok {
			x.remote = lc.remote // formatted once a connection
		} else {
			x.remote = ctx.RemoteAddr().String()
		}
		x.tls = ctx.TLSConnectionState()
	}
	host := h.Host()
	if x.host != string(host) {
		x.host = string(host)
	}
	body := ctx.PostBody()
	x.body.reset(body)
	r.Method = m
	r.URL = &x.url
	r.Proto, r.ProtoMajor, r.ProtoMinor = "HTTP/1.1", 1, 1
	if !h.IsHTTP11() {
		r.Proto, r.ProtoMinor = "HTTP/1.0", 0
	}
	r.Header = x.hdr
	r.Body = &x.body
	r.GetBody = nil
	r.ContentLength = int64(len(body))
	r.TransferEncoding = nil
	r.Close = h.ConnectionClose()
	r.Host = x.host
	r.Form, r.PostForm, r.MultipartForm, r.Trailer = nil, nil, nil, nil
	r.RemoteAddr = x.remote
	r.RequestURI = uriStr
	r.TLS = x.tls
	r.Cancel = nil //nolint:staticcheck // reset like every other field
	r.Response = nil
	r.Pattern = ""
	return nil
}

// copyHeaders sets x.hdr to h's headers.
func (x *exchange) copyHeaders(h *fasthttp.RequestHeader) {
	for k, v := range h.All() {
		key, ok := knownHeaders[string(k)]
		if !ok {
			key = string(k)
		}
		var val string
		if ok {
			val = x.intern(key, v)
		} else {
			val = string(v)
		}
		if prev, ok := x.hdr[key]; ok {
			x.hdr[key] = append(prev, val) // a repeated header: rare
			continue
		}
		// One value per name, sliced from a reused array.
		x.vals = append(x.vals, val)
		n := len(x.vals)
		x.hdr[key] = x.vals[n-1 : n : n]
	}
}

// parseURI parses a request URI into x.url as url.ParseRequestURI does
// (net/http's server), and returns its error; the path and query of a path
// that needs no unescaping are substrings of uri.
func (x *exchange) parseURI(uri string) error {
	path, query, _ := strings.Cut(uri, "?")
	plain := len(path) > 0 && path[0] == '/'
	for i := 0; i < len(path); i++ {
		if !pathSafe[path[i]] {
			plain = false
			break
		}
	}
	if plain && hasCTL(query) {
		plain = false
	}
	if plain {
		x.url = url.URL{Path: path, RawQuery: query}
		return nil
	}
	u, err := url.ParseRequestURI(uri)
	if err != nil {
		return err
	}
	x.url = *u
	return nil
}

// hasCTL reports whether s holds a control byte (below 0x20, or 0x7f),
// eight bytes at a time: a 16-id query is ~350 bytes, and a byte loop over
// it was ~8 % of a 16-id read in process. (fasthttp refuses such a request
// URI before the handler; this keeps parseURI right without relying on it.)
func hasCTL(s string) bool {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	for len(s) >= 8 {
		w := uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
			uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
		// A lane below 0x20 (w - 0x20 borrows into its high bit, which the
		// lane itself did not have), or a lane equal to 0x7f (zero after
		// the xor).
		x := w ^ (0x7f * lo)
		if ((w-0x20*lo)&^w|(x-lo)&^x)&hi != 0 {
			return true
		}
		s = s[8:]
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == 0x7f {
			return true
		}
	}
	return false
}

// pathSafe holds the bytes a path may hold and still be its own escaped
// form (url's encodePath: unreserved characters and "$&+,/:;=@").
var pathSafe = func() (t [256]bool) {
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
	}
	for c := 'A'; c <= 'Z'; c++ {
		t[c] = true
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for _, c := range "-_.~$&+,/:;=@" {
		t[c] = true
	}
	return t
}()

// release drops what the request pointed to.
func (x *exchange) release() {
	x.body.reset(nil)
	x.w.ctx = nil
	x.req.Header = nil
	x.req.Body = nil
	x.req.Form, x.req.PostForm, x.req.MultipartForm = nil, nil, nil
}
