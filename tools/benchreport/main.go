// Command benchreport keeps scripts/bench.sh's results as JSON and renders
// BENCHMARKS.md from them. bench.sh records each run's figures as
// key=value lines (.cache/bench/runs/N.kv) and the runs' metadata (when,
// which commit, the machine) as key=value lines too; benchreport turns
// them into one JSON file, renders that file as Markdown, and reads single
// values out of a JSON object for the script (loadgen's report, the
// results), so that no shell code parses JSON:
//
//	benchreport collect -meta runs/meta -o runs/results.json runs/1.kv runs/2.kv runs/3.kv
//	benchreport render -o BENCHMARKS.md runs/results.json
//	loadgen ... | benchreport get requests_per_s p50_us
//
// A figure that was not measured ("nan" or empty in a kv file) is null in
// the JSON and left out of the medians, as bench.sh always did.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
)

func main() {
	if err := run(os.Args[1:], os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "benchreport:", err)
		os.Exit(1)
	}
}

const usage = `usage:
  benchreport collect -meta FILE [-o FILE] KV-FILE...   the runs' kv files as one results JSON
  benchreport render [-o FILE] RESULTS-JSON             BENCHMARKS.md from a results JSON
  benchreport get KEY...                                each KEY of the JSON object on stdin, one a line`

var errUsage = errors.New(usage)

// run dispatches a subcommand; stdin is only read by get.
func run(args []string, stdin io.Reader, stdout io.Writer) error {
	if len(args) == 0 {
		return errUsage
	}
	switch args[0] {
	case "collect":
		return runCollect(args[1:], stdout)
	case "render":
		return runRender(args[1:], stdout)
	case "get":
		return runGet(args[1:], stdin, stdout)
	default:
		return fmt.Errorf("unknown subcommand %q\n%w", args[0], errUsage)
	}
}

// writeOutput writes b to path, or to stdout when path is empty or "-".
func writeOutput(path string, b []byte, stdout io.Writer) error {
	if path == "" || path == "-" {
		_, err := stdout.Write(b)
		return err
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	return nil
}
