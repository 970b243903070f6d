// Command floor serves HTTP/1.1 answers with the least work, in several
// ways, so that the agent's figures can be read against the floor they sit
// on (same pinning, same load generator): scripts/bench.sh,
// scripts/profile-writes.sh, scripts/measure-server-path.sh and
// scripts/read-ab.sh (docs/server-path.md) run it.
//
//	floor -mode fixed        # a bare read/write loop answering a fixed 200 (bench.sh's floor)
//	floor -mode bare         # a read/write loop answering a count row
//	floor -mode bare-lookup  # a read/write loop, the least read
//	floor -mode nethttp      # net/http, trivial handler
//	floor -mode fasthttp     # fasthttp, trivial handler
//	floor -mode server       # httpserver.Server, trivial handler
//	floor -mode lookup       # httpserver.Server, the least read
//
// fixed answers every request on a keep-alive connection with one fixed
// 200 and a 16-byte JSON body, parsing no more than the request head's end
// and its Content-Length; the requests of one read (pipelined) are
// answered in order, in one write. The other modes answer a count row of
// the size GET /v1/counts/{id} answers (with -rows 16, the size of a
// 16-id read's answer); lookup and bare-lookup answer count reads with the
// least work a read can do (see lookup), whatever -rows. bare parses only
// what it must to find the end of each request (headers, a Content-Length
// body) and answers every request read in one write, which is what
// pipelining lets a server do.
//
// floor listens on loopback only and exits after -lifetime (10 minutes by
// default, at most an hour) or when interrupted.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "floor:", err)
		os.Exit(1)
	}
}

// modes are floor's servers by -mode; each serves ln until ctx ends.
var modes = map[string]func(ctx context.Context, ln net.Listener, a answer) error{
	"fixed": func(ctx context.Context, ln net.Listener, _ answer) error {
		return serveConns(ctx, ln, answerFixed)
	},
	"bare": func(ctx context.Context, ln net.Listener, a answer) error {
		return serveConns(ctx, ln, func(c net.Conn) { serveBare(c, a) })
	},
	"bare-lookup": func(ctx context.Context, ln net.Listener, _ answer) error {
		l := newLookup()
		return serveConns(ctx, ln, func(c net.Conn) { serveBareLookup(c, l) })
	},
	"nethttp":  serveNetHTTP,
	"fasthttp": serveFasthttp,
	"server":   serveServer,
	"lookup":   serveLookup,
}

// modeNames lists modes' names, sorted.
func modeNames() string { return strings.Join(slices.Sorted(maps.Keys(modes)), ", ") }

// run parses the flags, listens and serves until ctx ends or -lifetime
// passes.
func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("floor", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:18090", "listen `host:port` (loopback only)")
	mode := fs.String("mode", "fixed", "the server: "+modeNames())
	rows := fs.Int("rows", 1, "answer `N` count rows ({\"counts\":[…]} when N > 1): the size of an N-id read's answer (not fixed, lookup, bare-lookup)")
	lifetime := fs.Duration("lifetime", 10*time.Minute, "exit after this long (at most 1h)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	host, _, err := net.SplitHostPort(*addr)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("addr %q: want a loopback host:port", *addr)
	}
	if *lifetime <= 0 || *lifetime > time.Hour {
		return fmt.Errorf("lifetime %v: want (0, 1h]", *lifetime)
	}
	serve, ok := modes[*mode]
	if !ok {
		return fmt.Errorf("mode %q: want one of %s", *mode, modeNames())
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("cannot listen: %w", err)
	}
	fmt.Fprintf(stdout, "floor listening on http://%s\n", ln.Addr())
	ctx, cancel := context.WithTimeout(ctx, *lifetime)
	defer cancel()
	return serve(ctx, ln, newAnswer(*rows))
}
