package httpserver

import (
	"sync"
	"time"
)

// Coarse deadlines.
//
// fasthttp sets three deadlines on a connection for every request (the
// idle wait, the read, the write), each a clock read and a timer update
// under the poller's lock: 5.5 % of a single count read's CPU and 3.6 % of
// a 16-id read's under load (perf, docs/server-path.md). A lingerConn only
// notes the deadline it is asked for; the Server's sweeper, every tick,
// expires on the socket each deadline that has passed, so that the read or
// write waiting on it fails with the timeout error the deadline itself
// would have raised (fasthttp then answers 408, or closes). A deadline
// thereby fires up to one tick late: sweepTick is 1/16 of the Server's
// shortest timeout, at most 250 ms, at least 5 ms.

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
	c.dl.want[side] = ns
	if !c.dl.expired[side] {
		return nil
	}
	c.dl.expired[side] = false
	return c.socketDeadline(side, time.Time{})
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

// connSet is the Server's open connections, for the sweeper.
type connSet struct {
	mu    sync.Mutex
	conns map[*lingerConn]struct{}
}

func (s *connSet) add(c *lingerConn) {
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

// closeAll closes the open connections' sockets, without the lingering
// drain: whatever serves them fails at its next read or write and closes
// them (removing them from the set).
func (s *connSet) closeAll() {
	for _, c := range s.snapshot(nil) {
		c.TCPConn.Close() //nolint:errcheck // closing either way
	}
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
	return min(max(shortest/16, 5*time.Millisecond), 250*time.Millisecond)
}

// startSweeping starts the sweeper unless it runs; s.mu is held, and the
// Server is not closed (Shutdown waits for the sweeper).
func (s *Server) startSweeping() {
	if s.sweeping {
		return
	}
	s.sweeping = true
	s.sweeper.Go(s.sweep)
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
		case now := <-t.C:
			open = s.conns.snapshot(open[:0])
			for _, c := range open {
				c.expire(now.UnixNano())
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
