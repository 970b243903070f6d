package main

import (
	"bytes"
	_ "embed"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/template"
)

// reportTemplate is BENCHMARKS.md. Besides Results' fields it calls:
//
//	rate KEY            the median (min–max) of a per-second figure, in k or M
//	stat KEY [VERB]     the median (min–max) of a figure, printf VERB (default %.2f)
//	met KEY OP GOAL     whether the median meets the goal, and in how many runs
//	has KEY             whether any run has KEY (measured or not)
//	hasPrefix PREFIX    whether any run has a key starting with PREFIX
//	mode, busy, memory  the header's mode, the busy-machine warning, the memory line
//
//go:embed report.md.tmpl
var reportTemplate string

// runRender is the render subcommand.
func runRender(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("render", flag.ContinueOnError)
	out := fs.String("o", "", "write the Markdown to `file` (default stdout)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errUsage
	}
	res, err := readResults(fs.Arg(0))
	if err != nil {
		return err
	}
	b, err := render(res)
	if err != nil {
		return err
	}
	return writeOutput(*out, b, stdout)
}

// render is the Markdown report of res.
func render(res *Results) ([]byte, error) {
	t, err := template.New("BENCHMARKS.md").Funcs(reportFuncs(res)).Parse(reportTemplate)
	if err != nil {
		return nil, fmt.Errorf("cannot parse the report template: %w", err)
	}
	var b bytes.Buffer
	if err := t.Execute(&b, res); err != nil {
		return nil, fmt.Errorf("cannot render the report: %w", err)
	}
	return b.Bytes(), nil
}

// reportFuncs are the template's functions over res's runs.
func reportFuncs(res *Results) template.FuncMap {
	return template.FuncMap{
		"rate": func(key string) string { return formatRate(values(res.Runs, key)) },
		"stat": func(key string, verb ...string) (string, error) {
			switch len(verb) {
			case 0:
				return formatStat(values(res.Runs, key), "%.2f"), nil
			case 1:
				return formatStat(values(res.Runs, key), verb[0]), nil
			default:
				return "", fmt.Errorf("cannot take stat %s with %d verbs", key, len(verb))
			}
		},
		"met": func(key, op string, goal float64) (string, error) {
			return formatMet(values(res.Runs, key), op, goal)
		},
		"has": func(key string) bool {
			return anyKey(res.Runs, func(k string) bool { return k == key })
		},
		"hasPrefix": func(prefix string) bool {
			return anyKey(res.Runs, func(k string) bool { return strings.HasPrefix(k, prefix) })
		},
		"mode":   func() string { return runMode(res) },
		"busy":   func() string { return busyWarning(res.LoadBefore, res.Machine.Cores) },
		"memory": func() string { return fmt.Sprintf("%.0f GiB", float64(res.Machine.MemoryKiB)/(1<<20)) },
	}
}

// anyKey reports whether a key of some run satisfies match.
func anyKey(runs []Run, match func(string) bool) bool {
	for _, r := range runs {
		for k := range r {
			if match(k) {
				return true
			}
		}
	}
	return false
}

// runMode is the header's account of the runs: how many, how long a load,
// and whether they were bench.sh -quick's.
func runMode(res *Results) string {
	m := fmt.Sprintf("runs: %d, %s a load", len(res.Runs), res.Duration)
	if res.Quick {
		m = "-quick: " + m + " (not for the record)"
	}
	return m
}

// busyWarning is a paragraph saying the machine was busy when the 1-minute
// load average before the runs (loadBefore's first field) exceeded its
// cores, else empty.
func busyWarning(loadBefore string, cores int) string {
	first, _, _ := strings.Cut(loadBefore, " ")
	load, err := strconv.ParseFloat(first, 64)
	if err != nil || load <= float64(cores) {
		return ""
	}
	return fmt.Sprintf("**The machine was busy** (load average %s on %d cores when the runs began): "+
		"other work shared both cores, so the absolute figures are low and the ratios noisy. Re-measure on a quiet machine.", first, cores)
}
