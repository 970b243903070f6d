package httpapi

import (
	"bytes"
	"net/http"
	"net/http/pprof"
	"strings"

	"github.com/edgecount/edgecount/httpserver"
)

// ProfilingPrefix starts the paths of the profiling routes (Profiling).
const ProfilingPrefix = "/debug/pprof/"

// Profiling returns next with net/http/pprof's handlers in front of it,
// for the process's listener when debug.pprof is on:
//
//	GET /debug/pprof/                  the index of the profiles
//	GET /debug/pprof/{name}            a named profile: allocs, block, goroutine, heap, mutex, threadcreate (?debug=1 for text)
//	GET /debug/pprof/profile?seconds=N a CPU profile (30 s by default)
//	GET /debug/pprof/trace?seconds=N   an execution trace (1 s by default)
//	GET /debug/pprof/cmdline, /symbol  the command line; symbols of program counters
//
// Every other path, and /debug/pprof without its slash (redirected there),
// is next's. The profiling routes are answered as net/http/pprof answers
// them, without the API's request metrics; wrap the result, not next, in
// Authenticate, which asks the admin scope for them (auth.RouteScope).
// Without Profiling, /debug/pprof/ is next's 404 like any unknown path. A
// CPU profile or a trace runs until its seconds have passed or the server
// shuts down. If next is an httpserver.HeaderSkipper, so is the result: the
// API's fast paths stay as they were.
func Profiling(next http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(ProfilingPrefix, pprof.Index) // the index, and the named profiles by name
	mux.HandleFunc(ProfilingPrefix+"cmdline", pprof.Cmdline)
	mux.HandleFunc(ProfilingPrefix+"profile", pprof.Profile)
	mux.HandleFunc(ProfilingPrefix+"symbol", pprof.Symbol)
	mux.HandleFunc(ProfilingPrefix+"trace", pprof.Trace)
	p := profiling{next: next, pprof: mux}
	if skip, ok := next.(httpserver.HeaderSkipper); ok {
		return profilingSkipper{p, skip}
	}
	return p
}

// profiling serves the profiling routes from pprof and the rest from next.
type profiling struct {
	next, pprof http.Handler
}

func (p profiling) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if isProfiling(r.URL.Path) {
		p.pprof.ServeHTTP(w, r)
		return
	}
	p.next.ServeHTTP(w, r)
}

// isProfiling reports whether path is a profiling route's, or the prefix
// without its slash, which the mux redirects to the index.
func isProfiling(path string) bool {
	return strings.HasPrefix(path, ProfilingPrefix) || path == ProfilingPrefix[:len(ProfilingPrefix)-1]
}

// profilingSkipper is profiling in front of a HeaderSkipper: the profiling
// routes get every header, the rest what next says it reads.
type profilingSkipper struct {
	profiling
	skip httpserver.HeaderSkipper
}

func (p profilingSkipper) HeadersRead(method string, uri []byte) httpserver.HeaderUse {
	if bytes.HasPrefix(uri, []byte(ProfilingPrefix[:len(ProfilingPrefix)-1])) {
		return httpserver.ReadsAllHeaders
	}
	return p.skip.HeadersRead(method, uri)
}
