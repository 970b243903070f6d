package httpapi

import (
	"sync"
	"sync/atomic"
	"time"
)

// Coarse deadlines.
//
// fasthttp would set three deadlines on a connection for every request
// (the idle wait, the read, the write), each after a clock read and as a
// timer update under the poller's lock: 5.5 % of a single count read's CPU
// and 3.6 % of a 16-id read's under load (perf, docs/server-path.md), and
// its three clock reads a request were still 1.6 % once the timer updates
// were gone. So fasthttp runs without timeouts and the connection keeps
// fasthttp's rules itself, from a clock the sweeper reads once a tick
// (connSet.now):
//
//   - a new connection's first request (a TLS handshake included) must be
//     read within ReadTimeout of the accept;
//   - after each answer (Server.serve's end: answered) the next request's
//     first byte must come within IdleTimeout and the answer be written
//     within WriteTimeout;
//   - from that first byte (lingerConn.Read) the request must be read
//     within ReadTimeout, and an answer to it fasthttp writes itself (a
//     100 Continue, a 400, 408 or 413) within ReadTimeout + WriteTimeout.
//
// A lingerConn only notes each deadline; the sweeper, every tick, expires
// on the socket each one that has passed, so that the read or write
// waiting on it fails with the timeout error the deadline itself would
// have raised (fasthttp then answers 408, or closes). A deadline is noted
// one tick past the time it is due by the sweeper's clock, which is at
// most a tick behind, so it never fires early and fires at most two ticks
// late: sweepTick is 1/32 of the Server's shortest timeout, at most 125 ms,
// at least 5 ms.
//
// The idle wait thereby counts from the start of the answer's write, not
// its end (fasthttp's): an answer slow to write shortens it.

// The two sides of a connection's deadlines.
const (
	readSide = iota
	writeSide
)

// pastDeadline is a deadline that has passed: set on a socket, it fails the
// read or write waiting on it, and every later one, at once.
var pastDeadline = time.Unix(1, 0)

// deadlines is a connection's deadlines as asked for (want, UnixNano, 0 for
// none) and whether the sweeper has expired them on the socket.
type deadlines struct {
	mu      sync.Mutex
	want    [2]int64
	expired [2]bool
}

func (c *lingerConn) SetDeadline(t time.Time) error {
	if err := c.setDeadline(readSide, t); err != nil {
		return err
	}
	return c.setDeadline(writeSide, t)
}

func (c *lingerConn) SetReadDeadline(t time.Time) error  { return c.setDeadline(readSide, t) }
func (c *lingerConn) SetWriteDeadline(t time.Time) error { return c.setDeadline(writeSide, t) }

// setDeadline notes t as side's deadline; the socket's own deadline is
// touched only to lift one the sweeper has expired.
func (c *lingerConn) setDeadline(side int, t time.Time) error {
	var ns int64
	if !t.IsZero() {
		ns = max(t.UnixNano(), 1)
	}
	c.dl.mu.Lock()
	defer c.dl.mu.Unlock()
	return c.want(side, ns)
}

// want notes ns (UnixNano, 0 for none) as side's deadline, lifting the
// socket's if the sweeper expired it; c.dl.mu is held.
func (c *lingerConn) want(side int, ns int64) error {
	c.dl.want[side] = ns
	if !c.dl.expired[side] {
		return nil
	}
	c.dl.expired[side] = false
	return c.socketDeadline(side, time.Time{})
}

// wantBoth notes the read and write deadlines, each the given timeout
// (ns) from the sweeper's clock, as one step.
func (c *lingerConn) wantBoth(read, write int64) {
	now := c.set.now.Load() + c.set.tick
	c.dl.mu.Lock()
	c.want(readSide, now+read)   //nolint:errcheck // a closed socket fails its next read anyway
	c.want(writeSide, now+write) //nolint:errcheck // likewise its next write
	c.dl.mu.Unlock()
}

// Read reads from the socket; the first bytes of a request after an answer
// start its read timeout.
func (c *lingerConn) Read(b []byte) (int, error) {
	n, err := c.TCPConn.Read(b)
	if n > 0 && c.idle {
		c.idle = false
		c.wantBoth(c.set.read, c.set.read+c.set.write)
	}
	return n, err
}

// answered starts the wait for the next request (IdleTimeout) and the
// write of the answer (WriteTimeout): Server.serve calls it once the
// handler has answered.
func (c *lingerConn) answered() {
	c.idle = true
	c.wantBoth(c.set.idleTimeout, c.set.write)
}

// expire expires on the socket each deadline that has passed at now
// (UnixNano).
func (c *lingerConn) expire(now int64) {
	c.dl.mu.Lock()
	defer c.dl.mu.Unlock()
	for side, w := range c.dl.want {
		if w != 0 && w <= now && !c.dl.expired[side] {
			c.dl.expired[side] = true
			c.socketDeadline(side, pastDeadline) //nolint:errcheck // a closed socket has nothing to expire
		}
	}
}

func (c *lingerConn) socketDeadline(side int, t time.Time) error {
	if side == readSide {
		return c.TCPConn.SetReadDeadline(t)
	}
	return c.TCPConn.SetWriteDeadline(t)
}

// connSet is the Server's open connections, for the sweeper, and the
// clock and timeouts (ns) their deadlines are noted with.
type connSet struct {
	mu    sync.Mutex
	conns map[*lingerConn]struct{}
	// now is the sweeper's clock (UnixNano), read once a tick.
	now                      atomic.Int64
	read, write, idleTimeout int64
	tick                     int64
}

// add holds c for the sweeper, its first request due within the read
// timeout.
func (s *connSet) add(c *lingerConn) {
	c.wantBoth(s.read, s.read+s.write)
	s.mu.Lock()
	if s.conns == nil {
		s.conns = make(map[*lingerConn]struct{})
	}
	s.conns[c] = struct{}{}
	s.mu.Unlock()
}

func (s *connSet) remove(c *lingerConn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// snapshot appends the open connections to dst.
func (s *connSet) snapshot(dst []*lingerConn) []*lingerConn {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		dst = append(dst, c)
	}
	return dst
}

// sweepTick is the sweeper's period for a Server whose shortest timeout
// is shortest.
func sweepTick(shortest time.Duration) time.Duration {
	return min(max(shortest/32, 5*time.Millisecond), 125*time.Millisecond)
}

// startSweeping starts the sweeper unless it runs; s.mu is held.
func (s *Server) startSweeping() {
	if s.sweeping {
		return
	}
	s.sweeping = true
	s.conns.now.Store(time.Now().UnixNano())
	go s.sweep()
}

// sweep expires the connections' passed deadlines every s.tick, until the
// Server's context ends (Shutdown) or no Serve runs and no connection is
// left open.
func (s *Server) sweep() {
	t := time.NewTicker(s.tick)
	defer t.Stop()
	var open []*lingerConn
	for {
		select {
		case <-s.ctx.Done():
			s.mu.Lock()
			s.sweeping = false
			s.mu.Unlock()
			return
		case <-t.C:
			// The clock as the sweep runs, not as the tick was due: a
			// sweep that runs late must not leave the clock further behind.
			now := time.Now().UnixNano()
			s.conns.now.Store(now)
			open = s.conns.snapshot(open[:0])
			for _, c := range open {
				c.expire(now)
			}
			clear(open)
			s.mu.Lock()
			if s.serving == 0 && len(open) == 0 {
				s.sweeping = false
				s.mu.Unlock()
				return
			}
			s.mu.Unlock()
		}
	}
}
