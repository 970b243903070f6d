package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
)

// Results is one bench.sh invocation: its metadata and every run's
// figures. It is the JSON file bench.sh keeps and render reads.
type Results struct {
	Started    string  `json:"started"`     // when the runs began, UTC, RFC 3339
	Commit     string  `json:"commit"`      // the tree measured: a short hash, "with local changes" when dirty
	Quick      bool    `json:"quick"`       // bench.sh -quick: short loads, not for the record
	Duration   string  `json:"duration"`    // of each load, e.g. "10s"
	Out        string  `json:"out"`         // the Markdown file bench.sh writes (bench.sh -report rewrites it)
	SUTCore    string  `json:"sut_core"`    // the core (taskset list) of the servers under test
	GenCore    string  `json:"gen_core"`    // the core of the load generators
	Conns      int     `json:"conns"`       // loadgen's and wrk's connections
	LoadBefore string  `json:"load_before"` // /proc/loadavg's 1, 5 and 15 min before the runs
	LoadAfter  string  `json:"load_after"`  // and after
	Machine    Machine `json:"machine"`
	Runs       []Run   `json:"runs"` // in the order they ran
}

// Machine is what the runs ran on.
type Machine struct {
	Cores     int    `json:"cores"`      // nproc
	CPU       string `json:"cpu"`        // /proc/cpuinfo's model name
	MemoryKiB int64  `json:"memory_kib"` // /proc/meminfo's MemTotal
	Kernel    string `json:"kernel"`     // uname -r
	Go        string `json:"go"`         // go version's version and platform
	Redis     string `json:"redis"`      // redis-server --version's first three words
}

// Run is one run's figures by key (bench.sh's kv names); a nil value is a
// figure the run could not measure.
type Run map[string]*float64

// runCollect is the collect subcommand: -meta's key=value lines and the
// kv files, one a run, as one results JSON.
func runCollect(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("collect", flag.ContinueOnError)
	metaPath := fs.String("meta", "", "the runs' metadata, key=value lines (`file`)")
	out := fs.String("o", "", "write the JSON to `file` (default stdout)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *metaPath == "" || fs.NArg() == 0 {
		return errUsage
	}
	meta, err := readKVFile(*metaPath)
	if err != nil {
		return err
	}
	res, err := resultsOf(meta)
	if err != nil {
		return fmt.Errorf("cannot read %s: %w", *metaPath, err)
	}
	for _, path := range fs.Args() {
		kv, err := readKVFile(path)
		if err != nil {
			return err
		}
		r, err := runOf(kv)
		if err != nil {
			return fmt.Errorf("cannot read %s: %w", path, err)
		}
		res.Runs = append(res.Runs, r)
	}
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return fmt.Errorf("cannot encode the results: %w", err)
	}
	return writeOutput(*out, append(b, '\n'), stdout)
}

// kvPair is one key=value line.
type kvPair struct{ key, value string }

// readKVFile reads a file of key=value lines (the value runs to the end of
// the line), skipping empty lines.
func readKVFile(path string) ([]kvPair, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %w", path, err)
	}
	var kv []kvPair
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("cannot read %s:%d: %q is not key=value", path, n, line)
		}
		kv = append(kv, kvPair{k, v})
	}
	return kv, nil
}

// resultsOf is Results with the metadata of meta (bench.sh's names) and
// no runs; every key must be known.
func resultsOf(meta []kvPair) (*Results, error) {
	res := &Results{}
	strs := map[string]*string{
		"started": &res.Started, "commit": &res.Commit, "duration": &res.Duration, "out": &res.Out,
		"sut_core": &res.SUTCore, "gen_core": &res.GenCore, "load_before": &res.LoadBefore, "load_after": &res.LoadAfter,
		"cpu": &res.Machine.CPU, "kernel": &res.Machine.Kernel, "go": &res.Machine.Go, "redis": &res.Machine.Redis,
	}
	for _, p := range meta {
		if s, ok := strs[p.key]; ok {
			*s = p.value
			continue
		}
		var err error
		switch p.key {
		case "quick":
			res.Quick = p.value == "1"
		case "conns":
			res.Conns, err = strconv.Atoi(p.value)
		case "cores":
			res.Machine.Cores, err = strconv.Atoi(p.value)
		case "memory_kib":
			res.Machine.MemoryKiB, err = strconv.ParseInt(p.value, 10, 64)
		default:
			err = fmt.Errorf("unknown key")
		}
		if err != nil {
			return nil, fmt.Errorf("cannot read %s=%q: %w", p.key, p.value, err)
		}
	}
	return res, nil
}

// runOf is a run's kv pairs as a Run: "nan", an empty value and a number
// that is not finite (NaN, ±Inf) are nil; any other value must be a
// number, and a key may appear once.
func runOf(kv []kvPair) (Run, error) {
	r := make(Run, len(kv))
	for _, p := range kv {
		if _, dup := r[p.key]; dup {
			return nil, fmt.Errorf("cannot take %s twice in one run", p.key)
		}
		if p.value == "" || p.value == "nan" {
			r[p.key] = nil
			continue
		}
		v, err := strconv.ParseFloat(p.value, 64)
		if err != nil {
			return nil, fmt.Errorf("cannot read %s=%q: %w", p.key, p.value, err)
		}
		if math.IsNaN(v) || math.IsInf(v, 0) { // JSON has no such numbers
			r[p.key] = nil
			continue
		}
		r[p.key] = &v
	}
	return r, nil
}

// readResults reads a results JSON file.
func readResults(path string) (*Results, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read the results: %w", err)
	}
	var res Results
	if err := json.Unmarshal(b, &res); err != nil {
		return nil, fmt.Errorf("cannot decode %s: %w", path, err)
	}
	return &res, nil
}
