package httpserver

import (
	"net"
	"runtime"
	"sync/atomic"
	"time"
)

// lingerListener hands out connections that can close without losing the
// answer to a request whose body was left unread.
// Their deadlines are coarse (deadline.go): conns is where the sweeper
// finds them.
type lingerListener struct {
	net.Listener
	conns *connSet
}

func (l lingerListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		lc := &lingerConn{TCPConn: tc, set: l.conns, remote: tc.RemoteAddr().String()}
		l.conns.add(lc)
		return lc, nil
	}
	return c, nil
}

// A closing connection drains what the client still sends, as nginx's
// lingering close does: until the client has sent everything (EOF), it
// stays silent for lingerIdle, lingerTime has passed or lingerBytes were
// read, whichever comes first.
const (
	lingerIdle  = time.Second
	lingerTime  = 5 * time.Second
	lingerBytes = 64 << 20
)

// lingerConn is a TCP connection. After an error answer to a request
// fasthttp could not read (a body over the limit: its bytes still coming),
// Close first shuts the write side and drains the client's bytes (within
// lingerIdle, lingerTime and lingerBytes): closing a socket with unread
// data sends a reset, which can destroy the answer before a client that
// writes its whole body before it reads (Python's urllib, many SDKs) has
// read it.
//
// Its deadlines are coarse: set holds it for the sweeper (deadline.go).
type lingerConn struct {
	*net.TCPConn
	linger atomic.Bool
	dl     deadlines
	set    *connSet
	remote string // RemoteAddr().String(), once
}

// Write writes b, then lets the other goroutines that are ready run
// before this connection's goroutine goes on to read its next request.
// A busy server thereby answers its ready connections in turn, as an
// event loop does, and by the time this one reads again its client has
// usually sent the next request: the read finds it instead of failing
// with EAGAIN and parking the goroutine until the poller wakes it (0.6 of
// those reads a request before). On an idle server the yield returns at
// once. Measured (docs/server-path.md, "Yield after the answer"): +10–15 %
// requests/s for 16-id reads and single reads on one core.
func (c *lingerConn) Write(b []byte) (int, error) {
	n, err := c.TCPConn.Write(b)
	runtime.Gosched()
	return n, err
}

func (c *lingerConn) Close() error {
	c.set.remove(c) // the drain below sets its own deadlines
	if c.linger.Load() {
		c.TCPConn.CloseWrite() //nolint:errcheck // closing either way
		c.drain()
	}
	return c.TCPConn.Close()
}

// drain reads and discards what the client sends, within the linger
// bounds.
func (c *lingerConn) drain() {
	end := time.Now().Add(lingerTime)
	buf := make([]byte, 32<<10)
	for read := 0; read < lingerBytes; {
		deadline := time.Now().Add(lingerIdle)
		if deadline.After(end) {
			deadline = end
		}
		c.TCPConn.SetReadDeadline(deadline) //nolint:errcheck // a failed read ends the drain
		n, err := c.TCPConn.Read(buf)
		read += n
		if err != nil {
			return // EOF, the idle or total deadline, or a broken connection
		}
	}
}
