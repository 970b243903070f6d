// Command loadgen drives an edge agent's HTTP API from loopback for a fixed
// time and reports what it measured. It speaks HTTP/1.1 over raw keep-alive
// connections with pre-built requests, so that the generator costs little
// next to the system under test (pin the two to different cores, see
// scripts/bench.sh).
//
//	loadgen -addr 127.0.0.1:8080 -mode incr100 -conns 32 -duration 10s
//	loadgen -mode get16 -body protobuf -pipeline 8
//
// Modes: incr1 (one increment a request), incr100 (100 a request), get1
// (one count a request), get16 (16 counts a request), react (toggle
// reactions of distinct users). It prints one line of JSON:
// {"mode","requests","units","seconds","requests_per_s","units_per_s","errors","dial_errors","p50_us","p99_us"}
// where units are increments or counts.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
}

type result struct {
	Mode        string  `json:"mode"`
	Requests    int64   `json:"requests"`
	Units       int64   `json:"units"`
	Seconds     float64 `json:"seconds"`
	RequestsPS  float64 `json:"requests_per_s"`
	UnitsPS     float64 `json:"units_per_s"`
	Errors      int64   `json:"errors"`
	DialErrors  int64   `json:"dial_errors"`
	P50Micros   int64   `json:"p50_us"`
	P99Micros   int64   `json:"p99_us"`
	FirstStatus string  `json:"first_error,omitempty"`
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:8080", "agent `host:port`")
	mode := fs.String("mode", "incr100", "incr1, incr100, get1, get16 or react")
	conns := fs.Int("conns", 32, "concurrent keep-alive connections")
	duration := fs.Duration("duration", 10*time.Second, "how long to run (bounded: at most 5m)")
	items := fs.Int("items", 10000, "distinct content ids")
	pipeline := fs.Int("pipeline", 1, "requests written back to back before reading their answers, per connection (HTTP/1.1 pipelining)")
	bodyFormat := fs.String("body", "json", "request bodies: json, or protobuf (incr1, incr100, get16)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *duration <= 0 || *duration > 5*time.Minute {
		return fmt.Errorf("duration %v: want (0, 5m]", *duration)
	}
	if *conns < 1 || *conns > 1024 {
		return fmt.Errorf("conns %d: want 1..1024", *conns)
	}
	host, _, err := net.SplitHostPort(*addr)
	if err != nil || !(host == "127.0.0.1" || host == "localhost" || host == "::1") {
		return fmt.Errorf("addr %q: load stays on loopback", *addr)
	}
	if *pipeline < 1 || *pipeline > 1024 {
		return fmt.Errorf("pipeline %d: want 1..1024", *pipeline)
	}
	builder := requestBuilder
	switch *bodyFormat {
	case "json":
	case "protobuf":
		builder = protobufBuilder
	default:
		return fmt.Errorf("body %q: want json or protobuf", *bodyFormat)
	}
	build, units, err := builder(*mode, *addr, *items)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *duration)
	defer cancel()
	var (
		mu        sync.Mutex
		total     result
		latencies []time.Duration
		wg        sync.WaitGroup
	)
	start := time.Now()
	for w := 0; w < *conns; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			var local result
			lat := make([]time.Duration, 0, 1<<16)
			rng := rand.New(rand.NewPCG(uint64(w), 42))
			gen := func() []byte { return build(rng) }
			var err error
			if *pipeline > 1 {
				err = pipelineWorker(ctx, *addr, *pipeline, gen, &local, &lat)
			} else {
				err = worker(ctx, *addr, gen, &local, &lat)
			}
			mu.Lock()
			defer mu.Unlock()
			total.Requests += local.Requests
			total.Errors += local.Errors
			total.DialErrors += local.DialErrors
			if total.FirstStatus == "" {
				total.FirstStatus = local.FirstStatus
			}
			if err != nil && total.FirstStatus == "" {
				total.FirstStatus = err.Error()
			}
			latencies = append(latencies, lat...)
		}(w)
	}
	wg.Wait()
	secs := time.Since(start).Seconds()
	total.Mode = *mode
	total.Seconds = secs
	total.Units = (total.Requests - total.Errors) * int64(units)
	total.RequestsPS = float64(total.Requests-total.Errors) / secs
	total.UnitsPS = float64(total.Units) / secs
	slices.Sort(latencies)
	if n := len(latencies); n > 0 {
		total.P50Micros = latencies[n/2].Microseconds()
		total.P99Micros = latencies[n*99/100].Microseconds()
	}
	return json.NewEncoder(stdout).Encode(total)
}

// requestBuilder returns a function building one raw request, and how many
// units (increments or counts) one request carries.
func requestBuilder(mode, addr string, items int) (func(*rand.Rand) []byte, int, error) {
	head := func(method, path string, body []byte) []byte {
		var b bytes.Buffer
		fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\n", method, path, addr)
		if body != nil {
			fmt.Fprintf(&b, "Content-Type: application/json\r\nContent-Length: %d\r\n", len(body))
		}
		b.WriteString("\r\n")
		b.Write(body)
		return b.Bytes()
	}
	id := func(r *rand.Rand) string { return "item-" + strconv.Itoa(r.IntN(items)) }
	switch mode {
	case "incr1", "incr100":
		n := 1
		if mode == "incr100" {
			n = 100
		}
		return func(r *rand.Rand) []byte {
			var b strings.Builder
			b.WriteString(`{"increments":[`)
			for i := 0; i < n; i++ {
				if i > 0 {
					b.WriteByte(',')
				}
				fmt.Fprintf(&b, `{"content_id":%q,"counter":"view","delta":1}`, id(r))
			}
			b.WriteString("]}")
			return head("POST", "/v1/increments", []byte(b.String()))
		}, n, nil
	case "get1":
		return func(r *rand.Rand) []byte { return head("GET", "/v1/counts/"+id(r), nil) }, 1, nil
	case "get16":
		return func(r *rand.Rand) []byte {
			var b strings.Builder
			b.WriteString("/v1/counts?")
			for i := 0; i < 16; i++ {
				if i > 0 {
					b.WriteByte('&')
				}
				b.WriteString("content_id=" + id(r))
			}
			return head("GET", b.String(), nil)
		}, 16, nil
	case "react":
		actions := []string{"like", "dislike", "none"}
		return func(r *rand.Rand) []byte {
			body := fmt.Sprintf(`{"user_id":"user-%d","content_id":%q,"action":%q}`, r.IntN(1<<30), id(r), actions[r.IntN(3)])
			return head("POST", "/v1/reactions", []byte(body))
		}, 1, nil
	}
	return nil, 0, fmt.Errorf("mode %q: want incr1, incr100, get1, get16 or react", mode)
}

// worker sends requests one after another on one connection until ctx ends.
// Requests are built ahead (a ring of 64) so building costs nothing per send.
func worker(ctx context.Context, addr string, build func() []byte, res *result, lat *[]time.Duration) error {
	reqs := make([][]byte, 64)
	for i := range reqs {
		reqs[i] = build()
	}
	var conn net.Conn
	var br *bufio.Reader
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	for i := 0; ctx.Err() == nil; i++ {
		if conn == nil {
			var err error
			conn, err = (&net.Dialer{Timeout: time.Second}).DialContext(ctx, "tcp", addr)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				// A busy server accepts late; a worker that gave up here
				// would run the rest of the load with fewer connections.
				res.DialErrors++
				time.Sleep(10 * time.Millisecond)
				continue
			}
			br = bufio.NewReaderSize(conn, 64<<10)
		}
		deadline, _ := ctx.Deadline()
		conn.SetDeadline(deadline.Add(time.Second))
		t0 := time.Now()
		if _, err := conn.Write(reqs[i%len(reqs)]); err != nil {
			conn.Close()
			conn = nil
			continue
		}
		status, err := readResponse(br)
		if err != nil {
			conn.Close()
			conn = nil
			if ctx.Err() != nil {
				return nil
			}
			continue
		}
		*lat = append(*lat, time.Since(t0))
		res.Requests++
		if status >= 300 {
			res.Errors++
			if res.FirstStatus == "" {
				res.FirstStatus = "HTTP " + strconv.Itoa(status)
			}
		}
	}
	return nil
}

// readResponse reads one HTTP/1.1 response with a Content-Length body and
// returns its status.
func readResponse(br *bufio.Reader) (int, error) {
	line, err := br.ReadSlice('\n')
	if err != nil {
		return 0, err
	}
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.1 ")) {
		return 0, errors.New("bad status line")
	}
	status, err := strconv.Atoi(string(line[9:12]))
	if err != nil {
		return 0, err
	}
	length := -1
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return 0, err
		}
		if len(line) <= 2 {
			break
		}
		if len(line) > 16 && bytes.EqualFold(line[:15], []byte("Content-Length:")) {
			length, err = strconv.Atoi(string(bytes.TrimSpace(line[15:])))
			if err != nil {
				return 0, err
			}
		}
	}
	if length < 0 {
		return 0, errors.New("response without Content-Length")
	}
	_, err = br.Discard(length)
	return status, err
}
