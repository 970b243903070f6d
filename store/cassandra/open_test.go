package cassandra

import (
	"context"
	"errors"
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

// TestLoginRefused: only a refused login ends Open's retries. The messages
// are the ones Cassandra 5 sent here: a wrong password, and a node of dc2
// that could not read its roles while dc1's replica of system_auth was
// frozen (a nemesis run; the agent's start failed on the first try).
func TestLoginRefused(t *testing.T) {
	tests := []struct {
		msg  string
		want bool
	}{
		{"gocql: unable to create session: unable to discover protocol version: Provided username edgecount_test and/or password are incorrect", true},
		{`unexpected authenticator "com.example.Kerberos"`, true},
		{"gocql: unable to create session: unable to discover protocol version: Unable to perform authentication: Cannot achieve consistency level QUORUM", false},
		{"gocql: unable to create session: unable to connect to initial hosts: host was filtered: 127.0.0.12 (92af061e-16ff-49af-973a-7dca5c13e146)", false},
		{"gocql: unable to create session: unable to discover protocol version: dial tcp 127.0.0.11:9042: i/o timeout", false},
	}
	for _, tt := range tests {
		if got := loginRefused(errors.New(tt.msg)); got != tt.want {
			t.Errorf("loginRefused(%q) = %v; want %v", tt.msg, got, tt.want)
		}
	}
}
