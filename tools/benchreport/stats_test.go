package main

import (
	"reflect"
	"testing"
)

func TestValues(t *testing.T) {
	runs := []Run{{"a": ptr(3), "b": nil}, {"a": nil}, {"a": ptr(1)}, {}}
	if got, want := values(runs, "a"), []float64{3, 1}; !reflect.DeepEqual(got, want) {
		t.Errorf("values(a) = %v, want %v", got, want)
	}
	if got := values(runs, "b"); got != nil {
		t.Errorf("values(b) = %v, want none: a null figure was not measured", got)
	}
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		sorted []float64
		want   float64
	}{
		{[]float64{7}, 7},
		{[]float64{1, 2}, 1.5},
		{[]float64{1, 2, 10}, 2},
		{[]float64{1, 2, 3, 10}, 2.5},
		{[]float64{-1, 0, 0, 5, 9}, 0},
	} {
		if got := median(tc.sorted); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.sorted, got, tc.want)
		}
	}
}

func TestFormatStat(t *testing.T) {
	for _, tc := range []struct {
		vs   []float64
		verb string
		want string
	}{
		{nil, "%.2f", "n/a"},
		{[]float64{1.234}, "%.2f", "1.23"},
		{[]float64{2.24, 1.90, 2.38}, "%.2f", "2.24 (1.90–2.38)"},
		{[]float64{1, 2}, "%.2f", "1.50 (1.00–2.00)"},
		{[]float64{1655600, 1739500, 1623500}, "%.0f", "1655600 (1623500–1739500)"},
		{[]float64{1.75, 1.8, 1.66}, "%.1f", "1.8 (1.7–1.8)"},
		{[]float64{0.125}, "%.2f", "0.12"}, // printf rounds an exact half to even, as awk's did
	} {
		if got := formatStat(tc.vs, tc.verb); got != tc.want {
			t.Errorf("formatStat(%v, %q) = %q, want %q", tc.vs, tc.verb, got, tc.want)
		}
	}
}

func TestSI(t *testing.T) {
	for _, tc := range []struct {
		x    float64
		want string
	}{
		{0, "0"},
		{999.4, "999"},
		{1000, "1.00 k"},
		{9994, "9.99 k"},
		{10000, "10.0 k"},
		{99400, "99.4 k"},
		{100000, "100 k"},
		{818000, "818 k"},
		{999999, "1000 k"},
		{1e6, "1.00 M"},
		{1.5549e6, "1.55 M"},
		{2.2e7, "22.00 M"},
	} {
		if got := si(tc.x); got != tc.want {
			t.Errorf("si(%v) = %q, want %q", tc.x, got, tc.want)
		}
	}
}

func TestFormatRate(t *testing.T) {
	for _, tc := range []struct {
		vs   []float64
		want string
	}{
		{nil, "n/a"},
		{[]float64{162000}, "162 k"},
		{[]float64{1.49e6, 2.1e6, 1.55e6}, "1.55 M (1.49 M–2.10 M)"},
		{[]float64{99400, 119000, 118000}, "118 k (99.4 k–119 k)"},
	} {
		if got := formatRate(tc.vs); got != tc.want {
			t.Errorf("formatRate(%v) = %q, want %q", tc.vs, got, tc.want)
		}
	}
}

func TestFormatMet(t *testing.T) {
	for _, tc := range []struct {
		vs   []float64
		op   string
		goal float64
		want string
	}{
		{nil, ">=", 1, "not measured"},
		{[]float64{1.2}, ">=", 1.2, "met (1 of 1 runs)"},
		{[]float64{0.9, 1.1, 1.3}, ">=", 1.0, "met (2 of 3 runs)"},
		{[]float64{0.9, 0.95, 1.3}, ">=", 1.0, "**not met** (1 of 3 runs)"},
		{[]float64{1.5, 2.5}, ">=", 2, "met (1 of 2 runs)"}, // the median of two is their mean
		{[]float64{1.07, 1.01, 1.10}, "<=", 2, "met (3 of 3 runs)"},
		{[]float64{2.5}, "<=", 2, "**not met** (0 of 1 runs)"},
	} {
		got, err := formatMet(tc.vs, tc.op, tc.goal)
		if err != nil || got != tc.want {
			t.Errorf("formatMet(%v, %s, %v) = %q, %v; want %q", tc.vs, tc.op, tc.goal, got, err, tc.want)
		}
	}
	if got, err := formatMet([]float64{1}, ">", 1); err == nil {
		t.Errorf("formatMet with > = %q, want an error", got)
	}
}

func TestBusyWarning(t *testing.T) {
	for _, tc := range []struct {
		load  string
		cores int
		busy  bool
	}{
		{"4.65 10.62 7.61", 2, true},
		{"2.00 1.00 1.00", 2, false},
		{"2.01 0.5 0.5", 2, true},
		{"0.52 0.80 1.10", 2, false},
		{"", 2, false},
	} {
		got := busyWarning(tc.load, tc.cores)
		if (got != "") != tc.busy {
			t.Errorf("busyWarning(%q, %d) = %q, want busy %v", tc.load, tc.cores, got, tc.busy)
		}
	}
	const want = "**The machine was busy** (load average 4.65 on 2 cores when the runs began): other work shared both cores, so the absolute figures are low and the ratios noisy. Re-measure on a quiet machine."
	if got := busyWarning("4.65 10.62 7.61", 2); got != want {
		t.Errorf("busyWarning = %q, want %q", got, want)
	}
}

func TestRunMode(t *testing.T) {
	three := &Results{Duration: "10s", Runs: make([]Run, 3)}
	if got, want := runMode(three), "runs: 3, 10s a load"; got != want {
		t.Errorf("runMode = %q, want %q", got, want)
	}
	quick := &Results{Duration: "2s", Quick: true, Runs: make([]Run, 1)}
	if got, want := runMode(quick), "-quick: runs: 1, 2s a load (not for the record)"; got != want {
		t.Errorf("runMode(quick) = %q, want %q", got, want)
	}
}
