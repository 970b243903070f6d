// Command scale measures how the edge agent's memory and flush time grow
// with the distinct counters it holds in one flush interval: agent RSS,
// memory per live counter, memory per warm count (a total held by the read
// cache) and the time of one flush that drains them all.
//
//	go run -C tools ./scale -n 1000000               # one size, one line of JSON
//	go run -C tools ./scale -png ../docs/scale.png   # 10^4..10^7, each in a fresh process; table on stdout
//
// One size runs a real region.Agent in this process (durability none, the
// default trending summaries, no hot rule): it adds one increment to each
// of n counters, reads up to -warm of the items through Agent.Counts twice
// (the second pass must hit the cache), then stops the agent, whose final
// flush drains every counter.
// The publisher is a sink that counts messages and bytes and the totals
// come from a reader that makes the rows a store would: the figures are
// the agent's own, not the broker's or the store's (see G9, G10). Memory
// is the Go heap in use after a GC (per counter, per warm count) and the
// process's RSS (/proc/self/status).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "scale:", err)
		os.Exit(1)
	}
}

const maxCounters = 10_000_000

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("scale", flag.ContinueOnError)
	fs.SetOutput(stderr)
	n := fs.Int("n", 0, "measure this many distinct counters in this process and print one line of JSON (1..10^7)")
	warm := fs.Int("warm", 1_000_000, "read at most this many items into the read cache (memory per warm count)")
	sizes := fs.String("sizes", "1e4,1e5,1e6,1e7", "without -n: the sizes to measure, each in a child process")
	png := fs.String("png", "", "without -n: write the plot to this PNG file")
	runs := fs.Int("runs", 3, "without -n: measure each size this many times; the table and plot show the run of median flush time")
	jsonl := fs.String("jsonl", "", "without -n: append every run's JSON line to this `file`")
	cpuProfile := fs.String("flush-profile", "", "with -n: write a CPU profile of the flush to this `file`")
	plotOnly := fs.Bool("plot-only", false, "measure nothing: read the runs from -jsonl and write the table and -png")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *warm < 0 || *warm > maxCounters {
		return fmt.Errorf("warm %d: want 0..%d", *warm, maxCounters)
	}
	var err error
	if *n != 0 {
		if *n < 1 || *n > maxCounters {
			return fmt.Errorf("n %d: want 1..%d", *n, maxCounters)
		}
		res, err := measure(ctx, *n, min(*warm, *n), *cpuProfile)
		if err != nil {
			return err
		}
		return writeJSON(stdout, res)
	}
	if *runs < 1 || *runs > 9 {
		return fmt.Errorf("runs %d: want 1..9", *runs)
	}
	var all []*result
	if *plotOnly {
		if *jsonl == "" {
			return errors.New("plot-only needs -jsonl")
		}
		if all, err = readJSONL(*jsonl); err != nil {
			return err
		}
	} else {
		ns, err := parseSizes(*sizes)
		if err != nil {
			return err
		}
		if all, err = measureAll(ctx, ns, *warm, *runs, *jsonl, stderr); err != nil {
			return err
		}
	}
	results := medianRuns(all)
	writeTable(stdout, results)
	if *png != "" {
		return plotPNG(*png, results)
	}
	return nil
}

func createFile(path string) (*os.File, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cannot create the plot: %w", err)
	}
	return f, nil
}
