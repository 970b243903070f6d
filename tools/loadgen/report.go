package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"
)

// result is the final report. The first fields are the ones loadgen has
// always printed (scripts read them); the rest were added after.
type result struct {
	Mode        string  `json:"mode"` // the mix, e.g. "incr100" or "get1=20,incr1=70,react=10"
	Requests    int64   `json:"requests"`
	Units       int64   `json:"units"`
	Seconds     float64 `json:"seconds"`
	RequestsPS  float64 `json:"requests_per_s"`
	UnitsPS     float64 `json:"units_per_s"`
	Errors      int64   `json:"errors"`
	P50Micros   float64 `json:"p50_us"`
	P99Micros   float64 `json:"p99_us"`
	FirstStatus string  `json:"first_error,omitempty"`

	P999Micros float64             `json:"p999_us"`
	MaxMicros  float64             `json:"max_us"`
	IOErrors   int64               `json:"io_errors"`
	Conns      int                 `json:"conns"`
	Pipeline   int                 `json:"pipeline"`
	Body       string              `json:"body"`
	Client     bool                `json:"client,omitempty"`    // sent through package client (-client)
	Rate       float64             `json:"rate,omitempty"`      // the target, requests/s
	Saturated  bool                `json:"saturated,omitempty"` // answered < 95% of the target rate
	Items      int                 `json:"items"`
	Zipf       float64             `json:"zipf"`
	Ops        map[string]opResult `json:"ops"`
}

type opResult struct {
	Requests  int64   `json:"requests"`
	Units     int64   `json:"units"`
	Errors    int64   `json:"errors"`
	P50Micros float64 `json:"p50_us"`
	P99Micros float64 `json:"p99_us"`
}

func micros(d time.Duration) float64 {
	return float64(d.Nanoseconds()/10) / 100 // two decimals
}

func gather(o *options, workers []*worker, elapsed time.Duration) *result {
	res := &result{
		Mode: o.mix.String(), Seconds: elapsed.Seconds(), Conns: o.conns, Pipeline: o.pipeline,
		Body: formatName(o.format), Client: o.client, Rate: o.rate, Items: o.items, Zipf: o.zipf, Ops: map[string]opResult{},
	}
	var all snapshot
	for i := range numOps {
		if o.mix.weights[i] == 0 {
			continue
		}
		var s snapshot
		var or opResult
		for _, w := range workers {
			s.add(w.hist[i])
			or.Requests += w.requests[i].Load()
			or.Errors += w.errors[i].Load()
		}
		or.Units = (or.Requests - or.Errors) * int64(opUnits[i])
		or.P50Micros, or.P99Micros = micros(s.quantile(0.50)), micros(s.quantile(0.99))
		res.Ops[opNames[i]] = or
		res.Requests += or.Requests
		res.Errors += or.Errors
		res.Units += or.Units
		for j := range s {
			all[j] += s[j]
		}
	}
	for _, w := range workers {
		res.IOErrors += w.ioErrors.Load()
		if p := w.firstErr.Load(); p != nil && res.FirstStatus == "" {
			res.FirstStatus = *p
		}
	}
	secs := elapsed.Seconds()
	res.RequestsPS = float64(res.Requests-res.Errors) / secs
	res.UnitsPS = float64(res.Units) / secs
	res.P50Micros, res.P99Micros = micros(all.quantile(0.50)), micros(all.quantile(0.99))
	res.P999Micros, res.MaxMicros = micros(all.quantile(0.999)), micros(all.maximum())
	if o.rate > 0 && float64(res.Requests)/o.duration.Seconds() < 0.95*o.rate {
		res.Saturated = true
	}
	return res
}

func formatName(f wireFormat) string {
	for name, g := range wireFormats {
		if g == f {
			return name
		}
	}
	return fmt.Sprintf("%T", f)
}

const mdHeader = "| mix | keys | conns | rate | requests/s | units/s | p50 | p99 | errors |\n|---|---|---|---|---|---|---|---|---|\n"

func writeReport(w io.Writer, o *options, res *result) error {
	if o.report == "md" {
		_, err := io.WriteString(w, mdRow(res))
		return err
	}
	return json.NewEncoder(w).Encode(res)
}

func mdRow(r *result) string {
	keys := "uniform"
	if r.Zipf > 0 {
		keys = "Zipf " + strconv.FormatFloat(r.Zipf, 'g', 3, 64)
	}
	keys += " over " + si(float64(r.Items))
	rate := "flat out"
	if r.Rate > 0 {
		rate = si(r.Rate) + "/s"
		if r.Saturated {
			rate += " (saturated)"
		}
	}
	errs := strconv.FormatInt(r.Errors, 10)
	if r.IOErrors > 0 {
		errs += " (+" + strconv.FormatInt(r.IOErrors, 10) + " I/O)"
	}
	return fmt.Sprintf("| %s | %s | %d | %s | %s | %s | %s | %s | %s |\n",
		r.Mode, keys, r.Conns, rate, si(r.RequestsPS), si(r.UnitsPS),
		dur(r.P50Micros), dur(r.P99Micros), errs)
}

// si formats n with k/M suffixes and three significant digits.
func si(n float64) string {
	switch {
	case n >= 1e6:
		return strconv.FormatFloat(n/1e6, 'f', sig(n/1e6), 64) + " M"
	case n >= 1e3:
		return strconv.FormatFloat(n/1e3, 'f', sig(n/1e3), 64) + " k"
	}
	return strconv.FormatFloat(n, 'f', 0, 64)
}

func sig(x float64) int {
	switch {
	case x >= 100:
		return 0
	case x >= 10:
		return 1
	}
	return 2
}

// dur formats microseconds as µs or ms.
func dur(us float64) string {
	if us >= 1000 {
		return strconv.FormatFloat(us/1000, 'f', sig(us/1000), 64) + " ms"
	}
	return strconv.FormatFloat(us, 'f', sig(us), 64) + " µs"
}

// progressLoop prints a status line every second until done: on a terminal
// it rewrites one line, elsewhere (-progress to a file) it prints a line a
// second. The figures are of the last second.
func progressLoop(w io.Writer, tty bool, workers []*worker, o *options, start time.Time, done <-chan struct{}) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	var prev, cur snapshot
	var prevReq int64
	last := start
	for {
		select {
		case <-done:
			if tty {
				fmt.Fprint(w, "\r\033[K")
			}
			return
		case now := <-t.C:
			cur = snapshot{}
			var req, errs, ioe int64
			for _, wk := range workers {
				for i := range numOps {
					if wk.hist[i] != nil {
						cur.add(wk.hist[i])
					}
					req += wk.requests[i].Load()
					errs += wk.errors[i].Load()
				}
				ioe += wk.ioErrors.Load()
			}
			window := cur
			window.sub(&prev)
			prev = cur
			secs := now.Sub(last).Seconds()
			last = now
			line := fmt.Sprintf("%5.1fs/%s  %s req/s  p50 %s  p99 %s  errors %d",
				now.Sub(start).Seconds(), o.duration, si(float64(req-prevReq)/secs),
				dur(micros(window.quantile(0.5))), dur(micros(window.quantile(0.99))), errs)
			if ioe > 0 {
				line += fmt.Sprintf(" (+%d I/O)", ioe)
			}
			prevReq = req
			if tty {
				fmt.Fprint(w, "\r\033[K"+line)
			} else {
				fmt.Fprintln(w, line)
			}
		}
	}
}
