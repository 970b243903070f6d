// Command floor serves HTTP/1.1 count answers in several
// ways, so that docs/server-path.md can put the cost of a server path beside
// the floor it sits on (same pinning, same load generator):
//
//	floor -addr 127.0.0.1:18090 -mode bare      # a read/write loop
//	floor -addr 127.0.0.1:18090 -mode nethttp   # net/http, trivial handler
//	floor -addr 127.0.0.1:18090 -mode fasthttp  # fasthttp, trivial handler
//	floor -addr 127.0.0.1:18090 -mode server    # httpserver.Server, trivial handler
//	floor -addr 127.0.0.1:18090 -mode lookup    # httpserver.Server, the least read
//	floor -addr 127.0.0.1:18090 -mode bare-lookup  # a read/write loop, the least read
//
// The answer is a count row of the size GET /v1/counts/{id} answers (with
// -rows 16, the size of a 16-id read's answer); lookup answers count reads
// with the least work a read can do (lookupHandler), whatever -rows. bare
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
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/valyala/fasthttp"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/edgecount/edgecount/httpserver"
)

// row is one count as GET /v1/counts answers it (~190 bytes).
const row = `{"content_id":"item-42","region":"global","likes":0,"dislikes":0,"counters":{"view":17},"updated_at":"2026-12-01T11:00:00.754033061Z","as_of":"2026-12-01T11:00:01.715Z","staleness_ms":0}`

// body and answer are the fixed answer: one row, or with -rows N a
// {"counts":[…]} of N rows, the size of an N-id read's answer.
var body string
var answer []byte

func setAnswer(rows int) {
	body = row
	if rows > 1 {
		body = `{"counts":[` + strings.Repeat(row+",", rows-1) + row + `]}`
	}
	answer = []byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\n\r\n" + body)
}

func main() {
	addr := flag.String("addr", "127.0.0.1:18090", "listen `host:port`")
	mode := flag.String("mode", "bare", "bare, bare-lookup, nethttp, fasthttp, server or lookup")
	rows := flag.Int("rows", 1, "answer `N` count rows ({\"counts\":[…]} when N > 1): the size of an N-id read's answer")
	flag.Parse()
	setAnswer(*rows)
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
		err = bare(ln, serveBare)
	case "bare-lookup":
		l := newLookup()
		err = bare(ln, func(c net.Conn) { serveBareLookup(c, l) })
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
	case "server":
		// httpserver.Server (fasthttp under the net/http adapter the agent
		// runs) with a trivial handler: what the adapter adds to fasthttp.
		b, ct := []byte(body), []string{"application/json"}
		err = httpserver.New(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header()["Content-Type"] = ct
			w.Write(b) //nolint:errcheck // the client may be gone
		}), httpserver.Config{}).Serve(ln)
	case "lookup":
		err = httpserver.New(lookupHandler(), httpserver.Config{}).Serve(ln)
	default:
		err = fmt.Errorf("mode %q: want bare, bare-lookup, nethttp, fasthttp, server or lookup", *mode)
	}
	if err != nil && ctx.Err() == nil {
		fmt.Fprintln(os.Stderr, "floor:", err)
		os.Exit(1)
	}
}

// bare serves each connection of ln with serve.
func bare(ln net.Listener, serve func(net.Conn)) error {
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go serve(c)
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

// lookup answers count reads with the least work one needs: the ids cut
// from the path or the query (no unescaping, no checks), or read from a
// POST's protobuf CountsRequest (field 1, nothing else checked), each
// looked up in a Go map of 10^4 answers encoded beforehand (item-0 …
// item-9999, as loadgen and scripts/wrk/counts.lua read them), copied out:
// JSON rows, or protobuf Count messages for a POST.
type lookup struct {
	rows, pbRows map[string][]byte
	zero, pbZero []byte
}

func newLookup() *lookup {
	l := &lookup{rows: make(map[string][]byte, 10000), pbRows: make(map[string][]byte, 10000),
		zero: []byte(row), pbZero: pbCount("item-42")}
	for k := range 10000 {
		id := "item-" + strconv.Itoa(k)
		l.rows[id] = []byte(strings.Replace(row, "item-42", id, 1))
		l.pbRows[id] = pbCount(id)
	}
	return l
}

// answer appends the answer to a request for path and query (a GET) or
// with body (a POST) to dst, and reports whether it is protobuf.
func (l *lookup) answer(dst []byte, post bool, path, query string, body []byte) ([]byte, bool) {
	if id, ok := strings.CutPrefix(path, "/v1/counts/"); ok {
		return append(dst, rowOf(l.rows, id, l.zero)...), false
	}
	if post {
		for len(body) > 2 && body[0] == 0x0a && int(body[1]) <= len(body)-2 {
			id := body[2 : 2+int(body[1])]
			dst = protowire.AppendBytes(protowire.AppendTag(dst, 1, protowire.BytesType), rowOf(l.pbRows, string(id), l.pbZero))
			body = body[2+len(id):]
		}
		return dst, true
	}
	dst = append(dst, `{"counts":[`...)
	for n := 0; query != ""; n++ {
		var p string
		p, query, _ = strings.Cut(query, "&")
		if id, ok := strings.CutPrefix(p, "content_id="); ok {
			if n > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, rowOf(l.rows, id, l.zero)...)
		}
	}
	return append(dst, "]}"...), false
}

// lookupHandler serves lookup's answers as an http.Handler.
func lookupHandler() http.Handler {
	l := newLookup()
	ct, pbCT := []string{"application/json"}, []string{"application/x-protobuf"}
	pool := sync.Pool{New: func() any { b := make([]byte, 0, 8<<10); return &b }}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		bp := pool.Get().(*[]byte)
		var body []byte
		post := r.Method == http.MethodPost
		if post {
			body, _ = io.ReadAll(r.Body)
		}
		out, pb := l.answer((*bp)[:0], post, r.URL.Path, r.URL.RawQuery, body)
		if pb {
			w.Header()["Content-Type"] = pbCT
		} else {
			w.Header()["Content-Type"] = ct
		}
		w.Write(out) //nolint:errcheck // the client may be gone
		*bp = out
		pool.Put(bp)
	})
}

// serveBareLookup is serveBare answering lookup's answers: the request
// line's method and URI, Content-Length and the body are all it reads of a
// request, and an answer's head is a status line, Content-Type and
// Content-Length.
func serveBareLookup(c net.Conn, l *lookup) {
	defer c.Close()
	br := bufio.NewReaderSize(c, 64<<10)
	out := make([]byte, 0, 64<<10)
	var body, ans []byte
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return
		}
		method, rest, _ := bytes.Cut(line, []byte(" "))
		uri, _, _ := bytes.Cut(rest, []byte(" "))
		post := string(method) == http.MethodPost
		path, query, _ := strings.Cut(string(uri), "?")
		length := 0
		for {
			h, err := br.ReadSlice('\n')
			if err != nil {
				return
			}
			if len(h) <= 2 {
				break
			}
			if len(h) > 16 && bytes.EqualFold(h[:15], []byte("Content-Length:")) {
				if length, err = strconv.Atoi(string(bytes.TrimSpace(h[15:]))); err != nil || length < 0 || length > 1<<20 {
					return
				}
			}
		}
		body = append(body[:0], make([]byte, length)...)
		if _, err := io.ReadFull(br, body); err != nil {
			return
		}
		var pb bool
		ans, pb = l.answer(ans[:0], post, path, query, body)
		out = append(out, "HTTP/1.1 200 OK\r\nContent-Type: "...)
		if pb {
			out = append(out, "application/x-protobuf"...)
		} else {
			out = append(out, "application/json"...)
		}
		out = append(out, "\r\nContent-Length: "...)
		out = strconv.AppendInt(out, int64(len(ans)), 10)
		out = append(out, "\r\n\r\n"...)
		out = append(out, ans...)
		if br.Buffered() == 0 || len(out) > 32<<10 {
			if _, err := c.Write(out); err != nil {
				return
			}
			out = out[:0]
			runtime.Gosched() // as httpserver.Server's lingerConn does
		}
	}
}

// pbCount is id's protobuf Count (proto/edgecount/v1/edgecount.proto) with
// the values of row.
func pbCount(id string) []byte {
	b := protowire.AppendTag(nil, 1, protowire.BytesType)
	b = protowire.AppendString(b, id)
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendString(b, "global")
	entry := protowire.AppendTag(nil, 1, protowire.BytesType)
	entry = protowire.AppendString(entry, "view")
	entry = protowire.AppendTag(entry, 2, protowire.VarintType)
	entry = protowire.AppendVarint(entry, 17)
	b = protowire.AppendTag(b, 5, protowire.BytesType)
	b = protowire.AppendBytes(b, entry)
	for _, f := range []protowire.Number{6, 7} {
		b = protowire.AppendTag(b, f, protowire.VarintType)
		b = protowire.AppendVarint(b, 1796405699415712622)
	}
	b = protowire.AppendTag(b, 8, protowire.VarintType)
	return protowire.AppendVarint(b, 0)
}

func rowOf(rows map[string][]byte, id string, zero []byte) []byte {
	if b, ok := rows[id]; ok {
		return b
	}
	return zero
}
