package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"net"
	"strconv"
	"sync/atomic"
	"time"
)

// worker drives one keep-alive connection: it writes pipeline requests,
// reads as many responses, and records each latency under its op. With a
// rate, the worker's requests have intended send times on a fixed
// schedule and a latency is measured from the intended time, so a slow
// response delays the next sends and that wait is counted (no coordinated
// omission). Its counters are atomics: the progress line reads them live.
type worker struct {
	id   int
	o    *options
	gen  *gen
	hist [numOps]*hist // nil for an op not in the mix

	requests [numOps]atomic.Int64 // answered
	errors   [numOps]atomic.Int64 // answered with a status >= 300
	ioErrors atomic.Int64         // broken connections, bad responses
	firstErr atomic.Pointer[string]
	end      time.Time

	buf  []byte
	ops  []op
	sent []time.Time // intended send time of each request in flight

	pool    [][]byte // pre-built requests, sent in turn; nil: built when sent
	poolOps []op
	poolAt  int
}

func newWorker(id int, o *options) *worker {
	w := &worker{
		id:   id,
		o:    o,
		gen:  newGen(o, uint64(id)+1),
		buf:  make([]byte, 0, 64<<10),
		ops:  make([]op, 0, o.pipeline),
		sent: make([]time.Time, 0, o.pipeline),
	}
	for i, wt := range o.mix.weights {
		if wt > 0 {
			w.hist[i] = new(hist)
		}
	}
	if o.pool > 0 {
		// Requests are appended into one block until it holds o.pool
		// bytes (at least one request); the worker sends them in turn.
		block := make([]byte, 0, o.pool+16<<10)
		for len(w.pool) == 0 || len(block) < o.pool {
			n := len(block)
			var op op
			block, op = w.gen.appendNext(block)
			if cap(block) != o.pool+16<<10 && len(w.pool) > 0 { // grew: this one did not fit
				break
			}
			w.pool = append(w.pool, block[n:len(block):len(block)])
			w.poolOps = append(w.poolOps, op)
		}
	}
	return w
}

// next appends the worker's next request.
func (w *worker) next(dst []byte) ([]byte, op) {
	if w.pool == nil {
		return w.gen.appendNext(dst)
	}
	i := w.poolAt
	w.poolAt = (i + 1) % len(w.pool)
	return append(dst, w.pool[i]...), w.poolOps[i]
}

func (w *worker) fail(msg string) {
	w.firstErr.CompareAndSwap(nil, &msg)
}

// run sends until end (or ctx ends). start anchors the rate schedule.
func (w *worker) run(ctx context.Context, start, end time.Time) {
	w.end = end
	pace := w.pacer(start)
	var conn net.Conn
	var br *bufio.Reader
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	d := net.Dialer{Timeout: time.Second}
	for ctx.Err() == nil {
		now, ok := pace.wait(ctx, end)
		if !ok {
			return
		}
		if conn == nil {
			c, err := d.DialContext(ctx, "tcp", w.o.addr)
			if err != nil {
				if ctx.Err() == nil {
					w.ioErrors.Add(1)
					w.fail(err.Error())
					time.Sleep(10 * time.Millisecond) // a refused dial returns at once
				}
				continue
			}
			conn, br = c, bufio.NewReaderSize(c, 64<<10)
			conn.SetDeadline(end.Add(2 * time.Second))
		}
		w.buf, w.ops, w.sent = w.buf[:0], w.ops[:0], w.sent[:0]
		for range w.o.pipeline {
			var o op
			w.buf, o = w.next(w.buf)
			w.ops = append(w.ops, o)
			at := pace.take(now)
			if at.After(now) { // a later slot of a pipelined batch
				at = now
			}
			w.sent = append(w.sent, at)
		}
		if _, err := conn.Write(w.buf); err != nil {
			w.broken(ctx, &conn, err)
			continue
		}
		for i, o := range w.ops {
			status, err := readResponse(br)
			if err != nil {
				w.broken(ctx, &conn, err)
				break
			}
			w.hist[o].record(time.Since(w.sent[i]))
			w.requests[o].Add(1)
			if status >= 300 {
				w.errors[o].Add(1)
				w.fail(o.String() + ": HTTP " + strconv.Itoa(status))
			}
		}
	}
}

func (w *worker) broken(ctx context.Context, conn *net.Conn, err error) {
	(*conn).Close()
	*conn = nil
	if ctx.Err() == nil && time.Now().Before(w.end) { // past the end: the run's deadline
		w.ioErrors.Add(1)
		w.fail(err.Error())
	}
}

var errNoLength = errors.New("response without Content-Length or chunked body")

// readResponse reads one HTTP/1.1 response (a Content-Length or a chunked
// body) and returns its status.
func readResponse(br *bufio.Reader) (int, error) {
	line, err := br.ReadSlice('\n')
	if err != nil {
		return 0, err
	}
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.1 ")) {
		return 0, errors.New("bad status line")
	}
	status, ok := atoi3(line[9:12])
	if !ok {
		return 0, errors.New("bad status code")
	}
	length, chunked := -1, false
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return 0, err
		}
		if len(line) <= 2 {
			break
		}
		if len(line) > 16 && bytes.EqualFold(line[:15], []byte("Content-Length:")) {
			n, err := strconv.Atoi(string(bytes.TrimSpace(line[15:])))
			if err != nil || n < 0 {
				return 0, errors.New("bad Content-Length")
			}
			length = n
		} else if len(line) > 18 && bytes.EqualFold(line[:18], []byte("Transfer-Encoding:")) {
			chunked = bytes.Contains(bytes.ToLower(line[18:]), []byte("chunked"))
		}
	}
	switch {
	case chunked:
		return status, skipChunks(br)
	case length >= 0:
		_, err = br.Discard(length)
		return status, err
	case status == 204 || status == 304:
		return status, nil
	}
	return 0, errNoLength
}

func skipChunks(br *bufio.Reader) error {
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return err
		}
		hex := bytes.TrimSpace(line)
		if i := bytes.IndexByte(hex, ';'); i >= 0 {
			hex = hex[:i]
		}
		n, err := strconv.ParseUint(string(hex), 16, 31)
		if err != nil {
			return errors.New("bad chunk size")
		}
		if n == 0 { // trailers, then the empty line
			for {
				line, err := br.ReadSlice('\n')
				if err != nil {
					return err
				}
				if len(line) <= 2 {
					return nil
				}
			}
		}
		if _, err := br.Discard(int(n) + 2); err != nil {
			return err
		}
	}
}

func atoi3(b []byte) (int, bool) {
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// pacer holds a worker to its share of -rate: intended send times one
// interval apart, the workers staggered; interval 0: flat out.
type pacer struct {
	interval time.Duration
	next     time.Time
}

func (w *worker) pacer(start time.Time) pacer {
	p := pacer{next: start}
	if w.o.rate > 0 {
		p.interval = time.Duration(float64(w.o.conns) / w.o.rate * float64(time.Second))
		p.next = start.Add(p.interval * time.Duration(w.id) / time.Duration(w.o.conns)) // stagger the workers
	}
	return p
}

// wait sleeps until the next intended send and returns the time; false
// when end comes first or ctx ends.
func (p *pacer) wait(ctx context.Context, end time.Time) (time.Time, bool) {
	now := time.Now()
	if p.interval > 0 && p.next.After(now) {
		if p.next.After(end) {
			return now, false
		}
		t := time.NewTimer(p.next.Sub(now))
		select {
		case <-ctx.Done():
			t.Stop()
			return now, false
		case <-t.C:
		}
		now = time.Now()
	}
	return now, now.Before(end)
}

// take returns the intended time of a send made at now (now itself when
// flat out) and moves the schedule on by one interval.
func (p *pacer) take(now time.Time) time.Time {
	if p.interval == 0 {
		return now
	}
	at := p.next
	p.next = p.next.Add(p.interval)
	return at
}
