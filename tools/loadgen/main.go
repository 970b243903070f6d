// Command loadgen drives an edge agent's HTTP API from loopback for a fixed
// time and reports what it measured. It speaks HTTP/1.1 over raw keep-alive
// connections and sends requests it built before the clock started (-pool
// bytes of them per connection, sent in turn; -pool 0 builds each one when
// it is sent, by appending into reused buffers, without allocating), so
// that the generator costs little next to the system under test (pin the
// two to different cores, see scripts/bench.sh).
//
//	loadgen -addr 127.0.0.1:8080 -mode incr100 -conns 32 -duration 10s
//	loadgen -mix incr=70,react=10,get=20 -zipf 1.0 -items 1000000 -rate 20000
//
// Ops: incr1 (one increment a request), incr100 (100 a request), get1 (one
// count a request), get16 (16 counts a request), react (a reaction of a
// distinct user); incr, get and reaction are aliases. -mode OP is -mix OP.
// Keys are uniform over -items, or Zipf with -zipf S (rank k drawn with
// probability ∝ k^-S; item-0 is the hottest). -rate N sends N requests a
// second in all on a fixed schedule and measures each latency from the
// intended send time (no coordinated omission); without it each connection
// sends as fast as it is answered. A progress line (rate, p50/p99, errors,
// elapsed of total) goes to stderr when it is a terminal, or with -progress.
//
// -client sends every request through package client instead (net/http,
// JSON, one connection a worker, retries off): what a Go integrator gets,
// measured against the raw path in the same run (not with -pipeline or
// -body protobuf). -token-file FILE sends a bearer token (its first
// field) on either path; -wait-ready D asks /readyz through the client
// until it answers 200, for at most D, before the clock starts.
//
// The report (stdout) is one line of JSON by default (-report json):
// {"mode","requests","units","seconds","requests_per_s","units_per_s",
// "errors","p50_us","p99_us",...,"ops":{op:{...}}} where units are
// increments or counts; -report md prints a markdown table row (-report
// md-header the header above it). The target stays on loopback and a run
// lasts at most 5 minutes.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"strings"
	"sync"
	"time"

	"github.com/edgecount/edgecount/auth"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
}

const (
	maxItems    = 10_000_000
	maxDuration = 5 * time.Minute
	maxRate     = 10_000_000
)

// options are the parsed, validated flags.
type options struct {
	addr     string
	conns    int
	duration time.Duration
	items    int
	zipf     float64
	mix      mix
	rate     float64 // requests/s in all; 0: flat out
	progress bool
	report   string // json, md or md-header
	pool     int    // bytes of pre-built requests per connection; 0: build each when sent
	keys     *keys

	// Set by the wire flags (wire.go): the body format of batched requests
	// and how many requests a connection writes before reading answers.
	format   wireFormat
	pipeline int

	// Set by the client flags (client.go): send through package client;
	// the bearer token to send ("" for none).
	client    bool
	token     string
	waitReady time.Duration // 0: start at once
}

// flagHooks let another file add flags: each registers its flags on the
// set and returns a function that applies them to the options once parsed
// (after the defaults are set), returning an error for a bad value.
var flagHooks []func(fs *flag.FlagSet) func(*options) error

func parseFlags(args []string, stderr io.Writer, stderrTTY bool) (*options, error) {
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:8080", "agent `host:port` (loopback only)")
	mode := fs.String("mode", "", "one op alone: incr1, incr100, get1, get16 or react (same as -mix OP)")
	mixFlag := fs.String("mix", "", "weighted ops, e.g. `incr=70,react=10,get=20` (default incr100)")
	conns := fs.Int("conns", 32, "concurrent keep-alive connections (1..1024)")
	duration := fs.Duration("duration", 10*time.Second, "how long to run (bounded: at most 5m)")
	items := fs.Int("items", 10000, "distinct content ids (1..10^7)")
	zipf := fs.Float64("zipf", 0, "Zipf exponent `S` of the keys (0: uniform)")
	rate := fs.Float64("rate", 0, "requests/s in all, open loop on a fixed schedule (0: flat out)")
	progress := fs.Bool("progress", false, "print the progress line even when stderr is not a terminal")
	report := fs.String("report", "json", "final report: json, md (a markdown table row) or md-header")
	pool := fs.Int("pool", 1<<20, "`bytes` of requests each connection builds before the run and sends in turn (0: build each request when it is sent: the exact key distribution, more generator CPU)")
	var apply []func(*options) error
	for _, h := range flagHooks {
		apply = append(apply, h(fs))
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	o := &options{addr: *addr, conns: *conns, duration: *duration, items: *items, zipf: *zipf,
		rate: *rate, progress: *progress || stderrTTY, report: *report, pool: *pool, format: wireFormats["json"], pipeline: 1}
	var errs []string
	if *duration <= 0 || *duration > maxDuration {
		errs = append(errs, fmt.Sprintf("duration %v: want (0, 5m]", *duration))
	}
	if *conns < 1 || *conns > 1024 {
		errs = append(errs, fmt.Sprintf("conns %d: want 1..1024", *conns))
	}
	if !auth.Loopback(*addr) {
		errs = append(errs, fmt.Sprintf("addr %q: load stays on loopback (127.0.0.0/8, ::1, localhost)", *addr))
	}
	if math.IsNaN(*rate) || *rate < 0 || *rate > maxRate {
		errs = append(errs, fmt.Sprintf("rate %v: want 0 (flat out) .. %d requests/s", *rate, maxRate))
	} else if *rate > 0 && *rate < float64(*conns)/maxDuration.Seconds() {
		errs = append(errs, fmt.Sprintf("rate %v: too low for %d connections", *rate, *conns))
	}
	if *pool < 0 || *pool > 64<<20 {
		errs = append(errs, fmt.Sprintf("pool %d: want 0..%d bytes", *pool, 64<<20))
	}
	switch *report {
	case "json", "md", "md-header":
	default:
		errs = append(errs, fmt.Sprintf("report %q: want json, md or md-header", *report))
	}
	var err error
	if o.keys, err = newKeys(*items, *zipf); err != nil {
		errs = append(errs, err.Error())
	}
	switch {
	case *mode != "" && *mixFlag != "":
		errs = append(errs, "mode and mix: give one")
	case *mode != "":
		if _, ok := parseOp(*mode); !ok || strings.ContainsAny(*mode, ",=") {
			errs = append(errs, fmt.Sprintf("mode %q: want incr1, incr100, get1, get16 or react", *mode))
		} else {
			o.mix, _ = parseMix(*mode)
		}
	default:
		m := *mixFlag
		if m == "" {
			m = "incr100"
		}
		if o.mix, err = parseMix(m); err != nil {
			errs = append(errs, err.Error())
		}
	}
	for _, f := range apply {
		if err := f(o); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if err := checkClient(o); err != nil {
		errs = append(errs, err.Error())
	}
	if o.pipeline < 1 || o.pipeline > 1024 {
		errs = append(errs, fmt.Sprintf("pipeline %d: want 1..1024", o.pipeline))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("bad flags: %s", strings.Join(errs, "; "))
	}
	return o, nil
}

// isTerminal reports whether f is a character device (a terminal).
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	tty := false
	if f, ok := stderr.(*os.File); ok {
		tty = isTerminal(f)
	}
	o, err := parseFlags(args, stderr, tty)
	if err != nil {
		return err
	}
	if o.report == "md-header" {
		_, err := io.WriteString(stdout, mdHeader)
		return err
	}
	if o.waitReady > 0 {
		if err := awaitReady(ctx, o); err != nil {
			return err
		}
	}
	res := load(ctx, o, stderr, tty)
	return writeReport(stdout, o, res)
}

// load runs the workers for o.duration and gathers what they measured.
func load(ctx context.Context, o *options, stderr io.Writer, tty bool) *result {
	workers := make([]*worker, o.conns)
	for i := range workers {
		workers[i] = newWorker(i, o)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	end := start.Add(o.duration)
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if o.client {
				w.runClient(ctx, start, end)
			} else {
				w.run(ctx, start, end)
			}
		}()
	}
	done := make(chan struct{})
	var pwg sync.WaitGroup
	if o.progress {
		pwg.Add(1)
		go func() {
			defer pwg.Done()
			progressLoop(stderr, tty, workers, o, start, done)
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(done)
	pwg.Wait()
	return gather(o, workers, elapsed)
}
