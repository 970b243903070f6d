// Command floor is the syscall floor for scripts/bench.sh: a bare Go
// read/write loop that answers every HTTP/1.1 request on a keep-alive
// connection with one fixed 200 response, parsing no more than the request
// head's end and its Content-Length (pipelined requests are answered in
// order, in one write per read). Pinned like the agent, it shows what any
// HTTP server in Go can reach on this machine; the agent's figures are read
// against it. It listens on loopback only and exits after -lifetime.
//
//	floor -addr 127.0.0.1:18090 -lifetime 10m
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"sync"
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

// response is what every request gets: a small JSON body, like a count.
var response = []byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 16\r\n\r\n{\"counts\":\"ok\"}\n")

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("floor", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:18090", "listen `host:port` (loopback only)")
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
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("cannot listen: %w", err)
	}
	fmt.Fprintf(stdout, "floor listening on http://%s\n", ln.Addr())
	ctx, cancel := context.WithTimeout(ctx, *lifetime)
	defer cancel()
	return serve(ctx, ln)
}

// serve answers connections on ln until ctx ends, then closes them all and
// waits for their goroutines.
func serve(ctx context.Context, ln net.Listener) error {
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
			answer(c)
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

// answer reads requests into one buffer and writes a response for each
// complete one; it returns when the peer closes or sends a bad request.
func answer(c net.Conn) {
	buf := make([]byte, 64<<10)
	out := make([]byte, 0, 16*len(response))
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
			out = append(out, response...)
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

func contentLength(head []byte) (int, error) {
	for len(head) > 0 {
		line := head
		if i := bytes.Index(head, []byte("\r\n")); i >= 0 {
			line, head = head[:i], head[i+2:]
		} else {
			head = nil
		}
		if len(line) > 15 && bytes.EqualFold(line[:15], []byte("Content-Length:")) {
			n, err := strconv.Atoi(string(bytes.TrimSpace(line[15:])))
			if err != nil || n < 0 {
				return 0, errBadLength
			}
			return n, nil
		}
	}
	return 0, nil
}
