package httpapi

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// Server serves an http.Handler (New's, NewRollup's) over fasthttp's
// HTTP/1.1 connection handling: one goroutine per connection, buffers reused
// across requests, pipelined requests answered in order with one write for
// all the answers already due. Each request reaches the handler as a pooled
// *http.Request and http.ResponseWriter, so every rule of the handler holds
// unchanged (docs/server-path.md measures why, and what it costs).
//
// What differs from net/http: the body is read in full (up to
// ServerConfig.MaxBodyBytes, else a JSON 413) before the handler runs; the
// request context is the server's, done at Shutdown, not when the client
// goes away; HTTP/2 and Hijack are not served.
//
// With ServerConfig.TLS every listener serves HTTPS (TLS 1.2 at least) with
// the certificate current at each handshake (Certs.Reload replaces it); a
// plain HTTP request on it gets a 400, and a failed handshake closes the
// connection without an error line.
type Server struct {
	fs      *fasthttp.Server
	h       http.Handler
	log     *slog.Logger
	ctx     context.Context
	cancel  context.CancelFunc
	pool    sync.Pool // *exchange
	closed  atomic.Bool
	mu      sync.Mutex
	lns     []net.Listener
	tooBig  []byte // the JSON 413
	maxBody int64
	tls     *tls.Config // nil: plain HTTP
	// skip, when the handler offers it, says which requests it answers
	// without reading a header.
	skip  headerSkipper
	certs *Certs
	// The open connections, whose deadlines the sweeper enforces every
	// tick (deadline.go) while sweeping; serving counts the running Serves.
	conns    connSet
	tick     time.Duration
	sweeping bool // under mu
	serving  int  // under mu
}

// ServerConfig configures a Server. Zero values take the defaults.
type ServerConfig struct {
	// MaxBodyBytes bounds a request body; a larger one is answered 413
	// before the handler runs. Default DefaultMaxBodyBytes. A handler
	// may enforce a lower limit itself.
	MaxBodyBytes int64
	// ReadTimeout bounds reading one request, headers and body. Default 30s.
	ReadTimeout time.Duration
	// WriteTimeout bounds writing one answer. Default 30s.
	WriteTimeout time.Duration
	// IdleTimeout bounds the wait for the next request on a kept-alive
	// connection. Default 2m.
	//
	// Each timeout fires up to 1/16 of the shortest of the three late
	// (at most 250 ms): a sweeper enforces them (deadline.go).
	IdleTimeout time.Duration
	// Logger receives the server's own errors (panics outside the
	// handler's recovery, connection errors); nil discards.
	Logger *slog.Logger
	// TLS, when set, makes every listener serve HTTPS with its
	// certificate (httpapi/tls.go).
	TLS *Certs
}

// maxRequestHead bounds a request line and its headers: 100 content_id
// parameters of 128 bytes, every byte percent-encoded, fit in it.
const maxRequestHead = 64 << 10

// NewServer returns a Server answering every request with h.
func NewServer(h http.Handler, cfg ServerConfig) *Server {
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{h: h, log: cfg.Logger.With("component", "httpserver"), maxBody: cfg.MaxBodyBytes}
	s.skip, _ = h.(headerSkipper)
	if cfg.TLS != nil {
		s.certs, s.tls = cfg.TLS, cfg.TLS.Config()
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	readTimeout := orDefault(cfg.ReadTimeout, 30*time.Second)
	writeTimeout := orDefault(cfg.WriteTimeout, 30*time.Second)
	idleTimeout := orDefault(cfg.IdleTimeout, 2*time.Minute)
	s.tick = sweepTick(min(readTimeout, writeTimeout, idleTimeout))
	s.tooBig = appendError(nil, &apiError{status: http.StatusRequestEntityTooLarge, field: "body",
		msg: "body is larger than " + strconv.FormatInt(cfg.MaxBodyBytes, 10) + " bytes"})
	s.pool.New = func() any { return s.newExchange() }
	s.fs = &fasthttp.Server{
		Handler:               s.serve,
		ErrorHandler:          s.requestError,
		MaxRequestBodySize:    int(min(cfg.MaxBodyBytes, 1<<30)),
		ReadBufferSize:        maxRequestHead,
		ReadTimeout:           readTimeout,
		WriteTimeout:          writeTimeout,
		IdleTimeout:           idleTimeout,
		NoDefaultServerHeader: true,
		// fasthttp writes the Date header itself, from a line it renders
		// once a second (one goroutine a process, started with the first
		// answer, never ended), and drops a Date set through its header
		// API: NoDefaultDate would send answers without one (RFC 9110
		// section 6.6.1 requires it of a server with a clock).
		NoDefaultDate: false,
		// Idle worker goroutines end after this; so does the pool's
		// cleaner once Serve returns (it sleeps this long between rounds).
		MaxIdleWorkerDuration:         200 * time.Millisecond,
		NoDefaultContentType:          true,
		DisablePreParseMultipartForm:  true,
		DisableHeaderNamesNormalizing: false,
		Logger:                        fasthttpLogger{s.log},
		CloseOnShutdown:               true,
	}
	return s
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// Serve serves connections from ln until Shutdown, then returns
// http.ErrServerClosed (as net/http's Server does), or the listener's error.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closed.Load() {
		s.mu.Unlock()
		return http.ErrServerClosed
	}
	s.lns = append(s.lns, ln)
	s.serving++
	s.startSweeping()
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.serving--
		s.mu.Unlock()
	}()
	var served net.Listener = lingerListener{ln, &s.conns}
	if s.tls != nil {
		// TLS over the lingering TCP connection: a 413's drain reads the
		// client's encrypted bytes after the close_notify.
		served = tlsListener{Listener: served, cfg: s.tls, certs: s.certs, log: s.log}
	}
	err := s.fs.Serve(served)
	if s.closed.Load() {
		return http.ErrServerClosed
	}
	if err == nil {
		err = errors.New("listener closed")
	}
	return err
}

// Scheme is https when the Server serves TLS, else http.
func (s *Server) Scheme() string {
	if s.tls != nil {
		return "https"
	}
	return "http"
}

// Shutdown stops accepting, lets the requests in progress finish, closes
// idle connections and returns once every connection is closed or ctx is
// done; then the context of the requests still running is done too.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closed.Store(true)
	for _, ln := range s.lns {
		ln.Close() //nolint:errcheck // a Serve that fasthttp has not registered yet stops on it
	}
	s.mu.Unlock()
	// Requests still running when ctx ends see their context done.
	stop := context.AfterFunc(ctx, s.cancel)
	defer stop()
	err := s.fs.ShutdownWithContext(ctx)
	s.cancel()
	if errors.Is(err, net.ErrClosed) {
		err = nil // closed above
	}
	return err
}

// unquoted is fasthttp's reason for refusing a request without the part
// of the request it quotes (a header line, the whole buffer): it may hold
// a token.
func unquoted(err error) string {
	msg := err.Error()
	for _, cut := range []string{`"`, "buffer size=", "contents:"} {
		if i := strings.Index(msg, cut); i >= 0 {
			msg = msg[:i]
		}
	}
	return strings.TrimRight(msg, ": ,")
}

// requestError answers a request fasthttp could not read, in the API's
// error shape.
func (s *Server) requestError(ctx *fasthttp.RequestCtx, err error) {
	var small *fasthttp.ErrSmallBuffer
	var netErr net.Error
	var status int
	var body []byte
	switch {
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		status, body = http.StatusRequestEntityTooLarge, s.tooBig
	case errors.As(err, &small):
		status = http.StatusRequestHeaderFieldsTooLarge
		body = appendError(nil, &apiError{field: "header", msg: "request line and headers are larger than " + strconv.Itoa(maxRequestHead) + " bytes"})
	case errors.As(err, &netErr) && netErr.Timeout():
		status = http.StatusRequestTimeout
		body = appendError(nil, &apiError{msg: "request not received in time"})
	default:
		status = http.StatusBadRequest
		body = appendError(nil, &apiError{field: "request", msg: "request is not valid HTTP/1.1: " + unquoted(err)})
	}
	ctx.Response.Reset()
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBody(body)
	ctx.SetConnectionClose()
	if c, ok := rawConn(ctx.Conn()).(*lingerConn); ok {
		c.linger.Store(true)
	}
}

// lingerListener hands out connections that can close without losing the
// answer to a request whose body was left unread.
// Their deadlines are coarse (deadline.go): conns is where the sweeper
// finds them.
type lingerListener struct {
	net.Listener
	conns *connSet
}

func (l lingerListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		lc := &lingerConn{TCPConn: tc, set: l.conns, remote: tc.RemoteAddr().String()}
		l.conns.add(lc)
		return lc, nil
	}
	return c, nil
}

// A closing connection drains what the client still sends, as nginx's
// lingering close does: until the client has sent everything (EOF), it
// stays silent for lingerIdle, lingerTime has passed or lingerBytes were
// read, whichever comes first.
const (
	lingerIdle  = time.Second
	lingerTime  = 5 * time.Second
	lingerBytes = 64 << 20
)

// lingerConn is a TCP connection. After an error answer to a request
// fasthttp could not read (a body over the limit: its bytes still coming),
// Close first shuts the write side and drains the client's bytes (within
// lingerIdle, lingerTime and lingerBytes): closing a socket with unread
// data sends a reset, which can destroy the answer before a client that
// writes its whole body before it reads (Python's urllib, many SDKs) has
// read it.
//
// Its deadlines are coarse: set holds it for the sweeper (deadline.go).
type lingerConn struct {
	*net.TCPConn
	linger atomic.Bool
	dl     deadlines
	set    *connSet
	remote string // RemoteAddr().String(), once
}

// Write writes b, then lets the other goroutines that are ready run
// before this connection's goroutine goes on to read its next request.
// A busy server thereby answers its ready connections in turn, as an
// event loop does, and by the time this one reads again its client has
// usually sent the next request: the read finds it instead of failing
// with EAGAIN and parking the goroutine until the poller wakes it (0.6 of
// those reads a request before). On an idle server the yield returns at
// once. Measured (docs/server-path.md, "Yield after the answer"): +10–15 %
// requests/s for 16-id reads and single reads on one core.
func (c *lingerConn) Write(b []byte) (int, error) {
	n, err := c.TCPConn.Write(b)
	runtime.Gosched()
	return n, err
}

func (c *lingerConn) Close() error {
	c.set.remove(c) // the drain below sets its own deadlines
	if c.linger.Load() {
		c.TCPConn.CloseWrite() //nolint:errcheck // closing either way
		c.drain()
	}
	return c.TCPConn.Close()
}

// drain reads and discards what the client sends, within the linger
// bounds.
func (c *lingerConn) drain() {
	end := time.Now().Add(lingerTime)
	buf := make([]byte, 32<<10)
	for read := 0; read < lingerBytes; {
		deadline := time.Now().Add(lingerIdle)
		if deadline.After(end) {
			deadline = end
		}
		c.TCPConn.SetReadDeadline(deadline) //nolint:errcheck // a failed read ends the drain
		n, err := c.TCPConn.Read(buf)
		read += n
		if err != nil {
			return // EOF, the idle or total deadline, or a broken connection
		}
	}
}

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

// A headerSkipper is a handler that answers some requests reading none of
// their headers, or only Content-Type: Server then hands it those requests
// with an empty Header, or one holding only Content-Type, instead of
// copying fasthttp's. Copying the headers (a map entry and an interned
// string each) was ~6 % of a 16-id count read end to end. Wrappers that
// read a header (Authenticate) do not offer it, so behind them every
// request gets its headers.
type headerSkipper interface {
	// headersRead tells which headers the request with this method and
	// request URI is answered from.
	headersRead(method string, uri []byte) headerUse
}

// headerUse is the headers a handler reads of a request.
type headerUse uint8

const (
	readsAllHeaders  headerUse = iota
	readsNoHeader              // none
	readsContentType           // Content-Type alone
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
	if e := x.fill(ctx, s.skip); e != nil {
		ctx.SetStatusCode(e.status)
		ctx.SetContentType("application/json")
		ctx.SetBody(appendError(nil, e))
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
// handler reads none. It returns the answer to a request URI net/http would
// refuse too.
func (x *exchange) fill(ctx *fasthttp.RequestCtx, skip headerSkipper) *apiError {
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
	if e := x.parseURI(uriStr); e != nil {
		return e
	}
	if len(x.hdr) > 0 {
		clear(x.hdr)
	}
	clear(x.vals)
	x.vals = x.vals[:0]
	use := readsAllHeaders
	if skip != nil {
		use = skip.headersRead(m, uri)
	}
	switch use {
	case readsAllHeaders:
		x.copyHeaders(h)
	case readsContentType:
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
// (net/http's server); the path and query of a path that needs no
// unescaping are substrings of uri.
func (x *exchange) parseURI(uri string) *apiError {
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
		return &apiError{status: http.StatusBadRequest, field: "path", msg: "path is malformed: " + err.Error()}
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

// bodyReader reads the request body fasthttp has read.
type bodyReader struct {
	b []byte
	i int
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

// started returns the time fasthttp read the request: the start of its
// latency, without another clock read (two vDSO calls, ~2 % of a 16-id
// read here).
func (w *fastWriter) started() time.Time { return w.ctx.Time() }

// writeWhole answers status with body and its Content-Type when no other
// header is set: WriteHeader and Write without the header map.
func (w *fastWriter) writeWhole(status int, contentType string, body []byte) bool {
	resp := w.startWhole(status, contentType)
	if resp == nil {
		return false
	}
	resp.AppendBody(body)
	return true
}

// startWhole starts a whole answer of status with only a Content-Type
// and returns the response, for the body to be appended to it; nil, having
// done nothing, when the answer has started or has headers set.
func (w *fastWriter) startWhole(status int, contentType string) *fasthttp.Response {
	if w.wrote || len(w.hdr) != 0 || status < 200 {
		return nil
	}
	w.wrote = true
	resp := &w.ctx.Response
	resp.SetStatusCode(status)
	resp.Header.SetContentType(contentType)
	return resp
}

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

// fasthttpLogger passes fasthttp's own messages to slog.
type fasthttpLogger struct{ log *slog.Logger }

func (l fasthttpLogger) Printf(format string, args ...any) {
	if strings.HasPrefix(format, "error when serving connection") && len(args) == 3 {
		// The error quotes the request it could not read, which may hold a
		// token: only its reason is logged.
		if err, ok := args[2].(error); ok {
			l.log.Warn("error when serving a connection", "local", fmt.Sprint(args[0]), "remote", fmt.Sprint(args[1]), "err", unquoted(err))
			return
		}
	}
	l.log.Warn(fmt.Sprintf(format, args...))
}
