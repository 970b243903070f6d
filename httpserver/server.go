package httpserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/edgecount/edgecount/internal/apijson"
)

// Server serves an http.Handler (httpapi's New, NewRollup) over fasthttp's
// HTTP/1.1 connection handling: one goroutine per connection, buffers reused
// across requests, pipelined requests answered in order with one write for
// all the answers already due. Each request reaches the handler as a pooled
// *http.Request and http.ResponseWriter, so every rule of the handler holds
// unchanged (docs/server-path.md measures why, and what it costs).
//
// What differs from net/http: the body is read in full (up to
// Config.MaxBodyBytes, else a JSON 413) before the handler runs; the
// request context is the server's, done at Shutdown, not when the client
// goes away; HTTP/2 and Hijack are not served.
//
// With Config.TLS every listener serves HTTPS (TLS 1.2 at least) with
// the certificate current at each handshake (Certs.Reload replaces it); a
// plain HTTP request on it gets a 400, and a failed handshake closes the
// connection without an error line.
type Server struct {
	fs     *fasthttp.Server
	h      http.Handler
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc
	pool   sync.Pool // *exchange
	closed atomic.Bool
	mu     sync.Mutex
	lns    []net.Listener
	tooBig []byte      // the JSON 413
	tls    *tls.Config // nil: plain HTTP
	// skip, when the handler offers it, says which requests it answers
	// without reading a header.
	skip  HeaderSkipper
	certs *Certs
	// The open connections, whose deadlines the sweeper enforces every
	// tick (deadline.go) while sweeping; serving counts the running Serves.
	conns    connSet
	tick     time.Duration
	sweeping bool           // under mu
	sweeper  sync.WaitGroup // the sweeper's goroutine, for Shutdown
	serving  int            // under mu
}

// Config configures a Server. Zero values take the defaults.
type Config struct {
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
	// certificate (tls.go).
	TLS *Certs
}

// DefaultMaxBodyBytes is Config.MaxBodyBytes unless set: 1 MiB.
const DefaultMaxBodyBytes = 1 << 20

// maxRequestHead bounds a request line and its headers: 100 content_id
// parameters of 128 bytes, every byte percent-encoded, fit in it.
const maxRequestHead = 64 << 10

// New returns a Server answering every request with h.
func New(h http.Handler, cfg Config) *Server {
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{h: h, log: cfg.Logger.With("component", "httpserver")}
	s.skip, _ = h.(HeaderSkipper)
	if cfg.TLS != nil {
		s.certs, s.tls = cfg.TLS, cfg.TLS.Config()
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	readTimeout := orDefault(cfg.ReadTimeout, 30*time.Second)
	writeTimeout := orDefault(cfg.WriteTimeout, 30*time.Second)
	idleTimeout := orDefault(cfg.IdleTimeout, 2*time.Minute)
	s.tick = sweepTick(min(readTimeout, writeTimeout, idleTimeout))
	s.tooBig = errorBody("body is larger than "+strconv.FormatInt(cfg.MaxBodyBytes, 10)+" bytes", "body")
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

// ServeFastHTTP answers the request fasthttp has read into ctx as Serve
// answers each request of a connection: the path above the connection,
// for measuring it in process (httpapi's BenchmarkServer…). What belongs
// to the connection (coarse deadlines, the lingering close, TLS) is
// Serve's alone.
func (s *Server) ServeFastHTTP(ctx *fasthttp.RequestCtx) { s.serve(ctx) }

// Shutdown stops accepting, lets the requests in progress finish, closes
// idle connections and returns once every connection is closed or ctx is
// done. When ctx is done first, the context of the requests still running
// is done too and their connections are closed (their answers may be
// lost), and Shutdown returns ctx's error: no connection outlives Shutdown
// by more than its handler does. Shutdown waits for the sweeper to end.
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
	if ctx.Err() != nil {
		// fasthttp leaves the connections it did not close running, kept
		// alive, and the sweeper no longer enforces their timeouts.
		s.conns.closeAll()
	}
	s.sweeper.Wait() // no Serve starts it again: closed is set under mu
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

// errorBody is the body of an answer the server gives itself, in the
// API's error shape (apijson.AppendError), as httpapi's handlers write
// theirs.
func errorBody(msg, field string) []byte {
	return apijson.AppendError(nil, msg, field)
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
		body = errorBody("request line and headers are larger than "+strconv.Itoa(maxRequestHead)+" bytes", "header")
	case errors.As(err, &netErr) && netErr.Timeout():
		status = http.StatusRequestTimeout
		body = errorBody("request not received in time", "")
	default:
		status = http.StatusBadRequest
		body = errorBody("request is not valid HTTP/1.1: "+unquoted(err), "request")
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
