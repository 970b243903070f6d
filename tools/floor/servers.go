package main

import (
	"context"
	"net"
	"net/http"
	"strconv"

	"github.com/valyala/fasthttp"

	"github.com/edgecount/edgecount/httpserver"
)

// serveUntil runs serve on ln and closes ln when ctx ends; serve's error
// after that is the listener's closing, not a failure.
func serveUntil(ctx context.Context, ln net.Listener, serve func(net.Listener) error) error {
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	err := serve(ln)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// serveNetHTTP is -mode nethttp: net/http with a trivial handler answering
// a's body.
func serveNetHTTP(ctx context.Context, ln net.Listener, a answer) error {
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h["Content-Type"] = []string{"application/json"}
		h["Content-Length"] = []string{strconv.Itoa(len(a.body))}
		w.Write([]byte(a.body)) //nolint:errcheck // the client may be gone
	})}
	return serveUntil(ctx, ln, srv.Serve)
}

// serveFasthttp is -mode fasthttp: fasthttp with a trivial handler
// answering a's body.
func serveFasthttp(ctx context.Context, ln net.Listener, a answer) error {
	srv := &fasthttp.Server{Handler: func(c *fasthttp.RequestCtx) {
		c.SetContentType("application/json")
		c.SetBodyString(a.body)
	}}
	return serveUntil(ctx, ln, srv.Serve)
}

// serveServer is -mode server: httpserver.Server (fasthttp under the net/http
// adapter the agent runs) with a trivial handler answering a's body, what
// the adapter adds to fasthttp.
func serveServer(ctx context.Context, ln net.Listener, a answer) error {
	b, ct := []byte(a.body), []string{"application/json"}
	srv := httpserver.New(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Content-Type"] = ct
		w.Write(b) //nolint:errcheck // the client may be gone
	}), httpserver.Config{})
	return serveUntil(ctx, ln, srv.Serve)
}

// serveLookup is -mode lookup: httpserver.Server with lookupHandler, the
// least read on the agent's server path (whatever -rows).
func serveLookup(ctx context.Context, ln net.Listener, _ answer) error {
	return serveUntil(ctx, ln, httpserver.New(lookupHandler(), httpserver.Config{}).Serve)
}
