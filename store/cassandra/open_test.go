package cassandra

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"syscall"
	"testing"
)

// refusingDialer refuses the first refuse dials, as a node that is still
// starting (or too loaded to finish a handshake) does, then dials for real.
type refusingDialer struct {
	d      net.Dialer
	mu     sync.Mutex
	refuse int
	dials  int
}

func (r *refusingDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	r.mu.Lock()
	r.dials++
	refused := r.dials <= r.refuse
	r.mu.Unlock()
	if refused {
		return nil, &net.OpError{Op: "dial", Net: network, Err: syscall.ECONNREFUSED}
	}
	return r.d.DialContext(ctx, network, addr)
}

// TestOpenTriesAgain opens a store while the node refuses the first
// connections: Open backs off and tries again instead of failing the
// process's start (CI saw an agent restarted under load exit because its
// one contact point of the local data centre missed a handshake).
func TestOpenTriesAgain(t *testing.T) {
	cfg := nodeConfig(t, fmt.Sprintf("edgecount_test_%016x", rand.Uint64()))
	d := &refusingDialer{refuse: 3}
	cfg.dialer = d
	s := openStore(t, cfg)
	t.Cleanup(func() {
		if err := s.execSchema(context.Background(), "DROP KEYSPACE IF EXISTS "+cfg.Keyspace); err != nil {
			t.Errorf("cannot drop keyspace %s: %v", cfg.Keyspace, err)
		}
	})
	if err := s.Ping(t.Context()); err != nil {
		t.Fatal(err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dials <= d.refuse {
		t.Fatalf("%d dials; want more than the %d refused", d.dials, d.refuse)
	}
}
