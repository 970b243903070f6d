// Command floor serves a fixed HTTP/1.1 answer to every request, three
// ways, so that docs/server-path.md can put the cost of a server path beside
// the floor it sits on (same pinning, same load generator):
//
//	floor -addr 127.0.0.1:18090 -mode bare      # a read/write loop
//	floor -addr 127.0.0.1:18090 -mode nethttp   # net/http, trivial handler
//	floor -addr 127.0.0.1:18090 -mode fasthttp  # fasthttp, trivial handler
//
// The answer is a count row of the size GET /v1/counts/{id} answers. bare
// parses only what it must to find the end of each request (headers, a
// Content-Length body) and answers every request read in one write, which is
// what pipelining lets a server do. It runs until interrupted.
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"

	"github.com/valyala/fasthttp"
)

const body = `{"content_id":"item-42","region":"global","likes":0,"dislikes":0,"counters":{"view":17},"updated_at":"2026-12-01T11:00:00Z"}`

var answer = []byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
	strconv.Itoa(len(body)) + "\r\n\r\n" + body)

func main() {
	addr := flag.String("addr", "127.0.0.1:18090", "listen `host:port`")
	mode := flag.String("mode", "bare", "bare, nethttp or fasthttp")
	flag.Parse()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "floor:", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, os.Kill)
	defer stop()
	go func() { <-ctx.Done(); ln.Close() }()
	switch *mode {
	case "bare":
		err = bare(ln)
	case "nethttp":
		err = (&http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h := w.Header()
			h["Content-Type"] = []string{"application/json"}
			h["Content-Length"] = []string{strconv.Itoa(len(body))}
			w.Write([]byte(body)) //nolint:errcheck // the client may be gone
		})}).Serve(ln)
	case "fasthttp":
		err = (&fasthttp.Server{Handler: func(c *fasthttp.RequestCtx) {
			c.SetContentType("application/json")
			c.SetBodyString(body)
		}}).Serve(ln)
	default:
		err = fmt.Errorf("mode %q: want bare, nethttp or fasthttp", *mode)
	}
	if err != nil && ctx.Err() == nil {
		fmt.Fprintln(os.Stderr, "floor:", err)
		os.Exit(1)
	}
}

func bare(ln net.Listener) error {
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go serveBare(c)
	}
}

// serveBare answers each request it finds; the answers to every request
// read so far go out in one write.
func serveBare(c net.Conn) {
	defer c.Close()
	br := bufio.NewReaderSize(c, 64<<10)
	out := make([]byte, 0, 64<<10)
	for {
		if err := skipRequest(br); err != nil {
			return
		}
		out = append(out, answer...)
		if br.Buffered() == 0 || len(out) > 32<<10 {
			if _, err := c.Write(out); err != nil {
				return
			}
			out = out[:0]
		}
	}
}

// skipRequest reads one request's head and its Content-Length body.
func skipRequest(br *bufio.Reader) error {
	length := 0
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return err
		}
		if len(line) <= 2 {
			break
		}
		if len(line) > 16 && bytes.EqualFold(line[:15], []byte("Content-Length:")) {
			if length, err = strconv.Atoi(string(bytes.TrimSpace(line[15:]))); err != nil || length < 0 {
				return errors.New("bad Content-Length")
			}
		}
	}
	_, err := br.Discard(length)
	return err
}
