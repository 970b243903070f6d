package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
)

// fixedResponse is what every request gets in -mode fixed: a small JSON
// body, like a count.
var fixedResponse = []byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 16\r\n\r\n{\"counts\":\"ok\"}\n")

// row is one count as GET /v1/counts answers it (~190 bytes).
const row = `{"content_id":"item-42","region":"global","likes":0,"dislikes":0,"counters":{"view":17},"updated_at":"2026-12-01T11:00:00.754033061Z","as_of":"2026-12-01T11:00:01.715Z","staleness_ms":0}`

// answer is the fixed answer of the count-row modes: its body (one row, or
// with N rows a {"counts":[…]} of N rows, the size of an N-id read's
// answer) and the whole HTTP response carrying it.
type answer struct {
	body     string
	response []byte
}

// newAnswer is the answer of rows rows (one row when rows ≤ 1).
func newAnswer(rows int) answer {
	body := row
	if rows > 1 {
		body = `{"counts":[` + strings.Repeat(row+",", rows-1) + row + `]}`
	}
	return answer{body: body, response: []byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\n\r\n" + body)}
}

// serveConns answers connections on ln with handle until ctx ends, then
// closes them all and waits for their goroutines. handle returns when its
// connection is done; serveConns closes it.
func serveConns(ctx context.Context, ln net.Listener, handle func(net.Conn)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu    sync.Mutex
		conns = map[net.Conn]struct{}{}
		wg    sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		<-ctx.Done()
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
	}()
	var err error
	for {
		c, aerr := ln.Accept()
		if aerr != nil {
			if ctx.Err() == nil {
				err = aerr
			}
			break
		}
		mu.Lock()
		conns[c] = struct{}{}
		mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			handle(c)
			mu.Lock()
			delete(conns, c)
			mu.Unlock()
			c.Close()
		}()
	}
	cancel() // ends the closer goroutine, which closes every connection
	wg.Wait()
	return err
}

// answerFixed reads requests into one buffer and writes fixedResponse for
// each complete one; it returns when the peer closes or sends a bad request.
func answerFixed(c net.Conn) {
	buf := make([]byte, 64<<10)
	out := make([]byte, 0, 16*len(fixedResponse))
	n := 0    // bytes in buf
	skip := 0 // body bytes still to drop
	for {
		m, err := c.Read(buf[n:])
		if m == 0 && err != nil {
			return
		}
		n += m
		data := buf[:n]
		out = out[:0]
		for {
			if skip > 0 {
				d := min(skip, len(data))
				data, skip = data[d:], skip-d
				if skip > 0 {
					break
				}
			}
			end := bytes.Index(data, []byte("\r\n\r\n"))
			if end < 0 {
				break
			}
			length, err := contentLength(data[:end])
			if err != nil {
				return
			}
			data, skip = data[end+4:], length
			out = append(out, fixedResponse...)
		}
		if len(out) > 0 {
			if _, err := c.Write(out); err != nil {
				return
			}
		}
		n = copy(buf, data)
		if n == len(buf) { // a head larger than the buffer
			return
		}
	}
}

var errBadLength = errors.New("bad Content-Length")

// contentLength is the first Content-Length of a request head (its lines
// without the blank line that ends it), 0 without one.
func contentLength(head []byte) (int, error) {
	for len(head) > 0 {
		line := head
		if i := bytes.Index(head, []byte("\r\n")); i >= 0 {
			line, head = head[:i], head[i+2:]
		} else {
			head = nil
		}
		if n, ok, err := headerContentLength(line); ok || err != nil {
			return n, err
		}
	}
	return 0, nil
}

// headerContentLength reads a header line (with or without its line end):
// ok reports whether it is a Content-Length, and a length that is not a
// non-negative integer is errBadLength.
func headerContentLength(line []byte) (n int, ok bool, err error) {
	if len(line) <= 15 || !bytes.EqualFold(line[:15], []byte("Content-Length:")) {
		return 0, false, nil
	}
	n, err = strconv.Atoi(string(bytes.TrimSpace(line[15:])))
	if err != nil || n < 0 {
		return 0, true, errBadLength
	}
	return n, true, nil
}

// readHead reads lines up to the blank line that ends a request head and
// returns the last Content-Length among them (0 without one).
func readHead(br *bufio.Reader) (int, error) {
	length := 0
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return 0, err
		}
		if len(line) <= 2 {
			return length, nil
		}
		n, ok, err := headerContentLength(line)
		if err != nil {
			return 0, err
		}
		if ok {
			length = n
		}
	}
}

// serveBare answers each request it finds with a's response; the answers
// to every request read so far go out in one write.
func serveBare(c net.Conn, a answer) {
	br := bufio.NewReaderSize(c, 64<<10)
	out := make([]byte, 0, 64<<10)
	for {
		if err := skipRequest(br); err != nil {
			return
		}
		out = append(out, a.response...)
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
	length, err := readHead(br)
	if err != nil {
		return err
	}
	_, err = br.Discard(length)
	return err
}
