package httpserver

// OpenConns returns the number of connections the sweeper watches: those
// accepted and not yet closed.
func (s *Server) OpenConns() int { return len(s.conns.snapshot(nil)) }
