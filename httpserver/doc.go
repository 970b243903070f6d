// Package httpserver is the HTTP/1.1 server of the edge agent and the
// rollup: it serves an http.Handler (httpapi's) over fasthttp's connection
// handling, with coarse deadlines, a lingering close, and TLS with a
// certificate that reloads (Certs). Each request reaches the handler as a
// pooled *http.Request and http.ResponseWriter, so a handler written for
// net/http runs unchanged; docs/server-path.md measures what this saves
// against net/http and what the path costs above its floor.
//
// What differs from net/http's server:
//   - The body is read whole (up to Config.MaxBodyBytes, else a 413)
//     before the handler runs; r.Body reads from that buffer.
//   - The request context is the server's, done at Shutdown (or when
//     Shutdown's context ends), not when the client goes away.
//   - Pipelined requests are answered in order, the answers already due
//     in one write; the answer is sent when the handler returns (Flush
//     does not send it early). HTTP/2, Hijack and 1xx answers are not
//     served (fasthttp answers Expect: 100-continue itself).
//   - The server answers itself, in the API's JSON error shape
//     (internal/apijson), what the handler never sees: a request fasthttp
//     cannot read (a body over the limit, a head over 64 KiB, a read
//     timeout, not HTTP/1.1) and then closes the connection, without
//     quoting the request (it may hold a token); and a request URI that
//     url.ParseRequestURI refuses, a 400 naming the path.
//   - fasthttp writes the Date header; a handler's Date, Content-Length and
//     Transfer-Encoding are dropped (the body is buffered and framed here).
//
// Fast paths. A handler may offer, and the writer and body offer, a few
// methods beyond net/http's, which a handler reaches through interfaces
// it declares itself (httpapi does): HeaderSkipper tells the server which
// requests the handler answers without their headers, so that they are
// not copied; the ResponseWriter's StartWhole and EndWhole let a whole
// answer (a status, a Content-Type, a body) be appended straight to
// fasthttp's response buffer, and Started returns the time the request
// was read; the body's Size and TakeRest hand over fasthttp's buffer
// without a copy, valid until the handler returns. A handler that uses
// none of them behaves as under net/http.
//
// Coarse deadlines (deadline.go): a connection only notes the deadlines
// fasthttp sets for every request; while any Serve runs or a connection is
// open, one sweeper goroutine per Server expires on the socket, every
// tick, each deadline that has passed. The invariant: a timeout never fires
// before it is due and fires at most one tick late, the tick being 1/16 of
// the shortest of the three timeouts (at least 5 ms, at most 250 ms); a
// deadline set again (the next request) lifts one the sweeper expired, so
// a busy connection is never cut. The sweeper ends at Shutdown, which
// waits for it, or once no Serve runs and no connection is left.
//
// Thread-safety: Serve may run on several listeners at once, and Shutdown
// may be called from any goroutine (Serve then returns
// http.ErrServerClosed). The handler is called concurrently, one goroutine
// per connection; the *http.Request and ResponseWriter it gets are reused
// once it returns and must not be kept. Certs is safe for concurrent use,
// Reload included. Goroutines: the connections' (fasthttp's worker pool,
// idle ones ending after 200 ms), the sweeper, and fasthttp's Date clock,
// one a process that never ends (testenv.FasthttpDate lets goleak ignore
// it).
//
// httpservertest runs a Server in a test; httpapi's tests drive the API
// through it.
package httpserver
