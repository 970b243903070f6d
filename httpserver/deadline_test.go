package httpserver_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/edgecount/edgecount/httpserver"
	"github.com/edgecount/edgecount/httpserver/httpservertest"
)

// The Server's timeouts, enforced by the sweeper (deadline.go), against a
// real loopback connection: each fires, no earlier than asked and at most
// a tick (plus scheduling) late, and a connection kept busy is never cut.

const testTimeout = 400 * time.Millisecond

// timeoutServer serves h with every timeout testTimeout and returns the
// Server and its address.
func timeoutServer(t *testing.T, h http.Handler) (*httpserver.Server, string) {
	t.Helper()
	return httpservertest.Serve(t, h, httpserver.Config{ReadTimeout: testTimeout, WriteTimeout: testTimeout, IdleTimeout: testTimeout})
}

// dial connects to addr; the connection closes when the test ends.
func dial(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, bufio.NewReader(c)
}

// get sends GET /x on c and reads its answer whole, returning its status.
func get(c net.Conn, br *bufio.Reader) (int, error) {
	if _, err := io.WriteString(c, "GET /x HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		return 0, err
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return 0, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, err
}

// late is how much later than asked a timeout may fire: a tick, and room
// for a loaded test machine.
const late = time.Second

func okHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"ok":true}`)) //nolint:errcheck // the client reads it
	})
}

// A request whose head stops coming is answered 408 once the read
// timeout from the accept has passed, never before. On a kept-alive
// connection the read timeout starts at the request's first byte, not at
// the answer before it; fasthttp then closes without an answer.
func TestReadTimeoutAnswers408(t *testing.T) {
	t.Run("first request", func(t *testing.T) { testReadTimeout(t, false) })
	t.Run("kept-alive", func(t *testing.T) { testReadTimeout(t, true) })
}

func testReadTimeout(t *testing.T, keptAlive bool) {
	_, addr := timeoutServer(t, okHandler())
	c, br := dial(t, addr)
	if keptAlive {
		if _, err := get(c, br); err != nil {
			t.Fatal(err)
		}
		// Idle for most of the idle timeout: the idle wait must not
		// count against the request's read.
		time.Sleep(testTimeout * 3 / 4)
	}
	start := time.Now()
	// Half a request head, then silence.
	if _, err := io.WriteString(c, "GET /v1/counts/x HTTP/1.1\r\nHost: x\r\n"); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(testTimeout + late)) //nolint:errcheck // the read below fails without it
	resp, err := http.ReadResponse(br, nil)
	took := time.Since(start)
	if took < testTimeout {
		t.Errorf("answered or closed after %v, before the %v read timeout", took, testTimeout)
	}
	if keptAlive {
		if !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
			t.Fatalf("after %v: %v, want the server's close", took, err)
		}
		return
	}
	if err != nil {
		t.Fatalf("after %v: %v, want a 408", took, err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(body), `"error"`) {
		t.Fatalf("status %d body %s, want a JSON 408", resp.StatusCode, body)
	}
}

func TestIdleTimeoutCloses(t *testing.T) {
	_, addr := timeoutServer(t, okHandler())
	c, br := dial(t, addr)
	if _, err := get(c, br); err != nil {
		t.Fatal(err)
	}
	idle := time.Now()
	c.SetReadDeadline(time.Now().Add(testTimeout + late)) //nolint:errcheck // the read below fails without it
	_, err := br.ReadByte()
	took := time.Since(idle)
	if !errors.Is(err, io.EOF) {
		t.Fatalf("after %v idle: %v, want the server's close (EOF)", took, err)
	}
	if took < testTimeout {
		t.Errorf("closed after %v idle, before the %v idle timeout", took, testTimeout)
	}
}

func TestWriteTimeoutCloses(t *testing.T) {
	big := make([]byte, 32<<20) // more than both sockets' buffers hold
	answered := make(chan time.Time, 1)
	srv, addr := timeoutServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write(big)           //nolint:errcheck // the client does not read it
		answered <- time.Now() // the Server writes it after the handler
	}))
	c, _ := dial(t, addr)
	if _, err := io.WriteString(c, "GET /x HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	// The client reads nothing: the server's write blocks until its
	// timeout, then the server closes the connection.
	start := <-answered
	for srv.OpenConns() > 0 {
		if time.Since(start) > testTimeout+late {
			t.Fatalf("connection still open %v after the answer began, write timeout %v", time.Since(start), testTimeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if took := time.Since(start); took < testTimeout {
		t.Errorf("connection closed %v after the answer began, before the %v write timeout", took, testTimeout)
	}
}

// A connection in use keeps going past every timeout: each request sets
// its deadlines anew, and one the sweeper expired is lifted.
func TestBusyConnectionOutlivesTimeouts(t *testing.T) {
	_, addr := timeoutServer(t, okHandler())
	c, br := dial(t, addr)
	end := time.Now().Add(4 * testTimeout)
	for n := 0; time.Now().Before(end); n++ {
		status, err := get(c, br)
		if err != nil {
			t.Fatalf("request %d: %v", n, err)
		}
		if status != http.StatusOK {
			t.Fatalf("request %d: status %d", n, status)
		}
		time.Sleep(testTimeout / 4) // idle, well within the idle timeout
	}
}
