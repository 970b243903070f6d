package main

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"google.golang.org/protobuf/encoding/protowire"
)

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
		length, err := readHead(br)
		if err != nil || length > 1<<20 {
			return
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
