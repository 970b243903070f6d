package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/edgecount/edgecount/internal/testenv"
)

// TestMain checks that no test leaves a goroutine running but fasthttp's
// two that outlive a server: the Date clock (testenv.FasthttpDate) and a
// worker pool's cleaner, which sees the pool stopped only after its sleep
// (-mode fasthttp keeps fasthttp's default of 10 s).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, testenv.FasthttpDate,
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2"))
}

func startFloor(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serveConns(ctx, ln, answerFixed) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve = %v", err)
		}
	})
	return ln.Addr().String()
}

// TestAnswersPipelinedRequests: requests with and without bodies, written
// in one go and split at odd places, each get one response, in order.
func TestAnswersPipelinedRequests(t *testing.T) {
	addr := startFloor(t)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	body := `{"increments":[{"content_id":"a","counter":"view","delta":1}]}`
	reqs := "GET /v1/counts/a HTTP/1.1\r\nHost: x\r\n\r\n" +
		"POST /v1/increments HTTP/1.1\r\nHost: x\r\ncontent-length: " + strings.TrimSpace(itoa(len(body))) + "\r\n\r\n" + body +
		"GET /v1/counts?content_id=a HTTP/1.1\r\nHost: x\r\n\r\n"
	const copies = 50
	all := strings.Repeat(reqs, copies)
	go func() { // write in uneven pieces
		for i := 0; i < len(all); i += 37 {
			c.Write([]byte(all[i:min(i+37, len(all))]))
		}
	}()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	for i := range 3 * copies {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || !bytes.Equal(b, fixedResponse[len(fixedResponse)-16:]) {
			t.Fatalf("response %d: %d %q", i, resp.StatusCode, b)
		}
	}
}

func TestBadRequestClosesConnection(t *testing.T) {
	addr := startFloor(t)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("POST / HTTP/1.1\r\nContent-Length: -3\r\n\r\n"))
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if n, err := c.Read(make([]byte, 100)); err != io.EOF {
		t.Fatalf("read = %d, %v; want EOF: the floor closes on a bad Content-Length", n, err)
	}
}

func TestFlags(t *testing.T) {
	for _, args := range [][]string{{"-addr", "10.1.2.3:80"}, {"-addr", "nohost"}, {"-lifetime", "2h"}, {"-lifetime", "0s"}, {"-mode", "nope"}} {
		if err := run(context.Background(), args, io.Discard); err == nil {
			t.Errorf("run %q = nil, want an error", args)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestModes: every -mode answers a count read through run, and run
// returns nil once its context ends.
func TestModes(t *testing.T) {
	for _, tc := range []struct{ mode, want string }{
		{"fixed", `{"counts":"ok"}` + "\n"},
		{"bare", row},
		{"nethttp", row},
		{"fasthttp", row},
		{"server", row},
		{"bare-lookup", strings.Replace(row, "item-42", "item-3", 1)},
		{"lookup", strings.Replace(row, "item-42", "item-3", 1)},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			pr, pw := io.Pipe()
			done := make(chan error, 1)
			go func() {
				done <- run(ctx, []string{"-addr", "127.0.0.1:0", "-mode", tc.mode}, pw)
				pw.Close()
			}()
			line, err := bufio.NewReader(pr).ReadString('\n')
			go io.Copy(io.Discard, pr)
			if err != nil || !strings.HasPrefix(line, "floor listening on http://") {
				cancel()
				t.Fatalf("start line %q, %v (run: %v)", line, err, <-done)
			}
			client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
			resp, err := client.Get(strings.TrimSpace(strings.TrimPrefix(line, "floor listening on ")) + "/v1/counts/item-3")
			if err == nil {
				b, rerr := io.ReadAll(resp.Body)
				resp.Body.Close()
				if rerr != nil || resp.StatusCode != http.StatusOK || string(b) != tc.want {
					t.Errorf("GET = %d %q (%v), want 200 %q", resp.StatusCode, b, rerr, tc.want)
				}
			} else {
				t.Errorf("GET: %v", err)
			}
			cancel()
			if err := <-done; err != nil {
				t.Errorf("run = %v after its context ended, want nil", err)
			}
		})
	}
}
