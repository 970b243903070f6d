package httpserver

import (
	"errors"
	"net"
	"os"
	"testing"
	"time"
)

// expire fails a waiting read with a timeout; a new deadline lifts it.
func TestLingerConnExpireAndLift(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var set connSet
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := lingerListener{ln, &set}.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	c := (<-accepted).(*lingerConn)
	defer c.Close()
	if got := set.snapshot(nil); len(got) != 1 || got[0] != c {
		t.Fatalf("set holds %v, want the accepted connection", got)
	}

	// A deadline that has not passed is not expired.
	c.SetReadDeadline(time.Now().Add(time.Hour)) //nolint:errcheck // noted only
	c.expire(time.Now().UnixNano())
	readErr := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 1))
		readErr <- err
	}()
	select {
	case err := <-readErr:
		t.Fatalf("read returned %v before its deadline", err)
	case <-time.After(50 * time.Millisecond):
	}
	// Once passed, expire fails the waiting read with a timeout.
	c.SetReadDeadline(time.Now().Add(-time.Second)) //nolint:errcheck // noted only
	c.expire(time.Now().UnixNano())
	select {
	case err := <-readErr:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("read = %v, want a deadline error", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("read still waiting after its deadline expired")
	}
	// A new deadline lifts the expired one.
	c.SetReadDeadline(time.Time{}) //nolint:errcheck // noted only
	if _, err := client.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(make([]byte, 1)); err != nil {
		t.Fatalf("read after the deadline was lifted: %v", err)
	}
	c.Close()
	if got := set.snapshot(nil); len(got) != 0 {
		t.Fatalf("set holds %d connections after Close, want 0", len(got))
	}
}

func TestSweepTick(t *testing.T) {
	for _, tc := range []struct{ shortest, want time.Duration }{
		{30 * time.Second, 250 * time.Millisecond},
		{time.Second, time.Second / 16},
		{10 * time.Millisecond, 5 * time.Millisecond},
	} {
		if got := sweepTick(tc.shortest); got != tc.want {
			t.Errorf("sweepTick(%v) = %v, want %v", tc.shortest, got, tc.want)
		}
	}
}
