package main

import (
	"fmt"
	"slices"
)

// values is key's figures over runs, in run order, leaving out the runs
// that did not measure it.
func values(runs []Run, key string) []float64 {
	var vs []float64
	for _, r := range runs {
		if v := r[key]; v != nil {
			vs = append(vs, *v)
		}
	}
	return vs
}

// median is the middle of sorted (ascending, not empty), or the mean of
// its two middle values.
func median(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

// spread formats the median of vs, then with two or more values the
// spread in brackets, "median (min–max)", each with format; "n/a" when vs
// is empty.
func spread(vs []float64, format func(float64) string) string {
	if len(vs) == 0 {
		return "n/a"
	}
	s := slices.Sorted(slices.Values(vs))
	m := format(median(s))
	if len(s) == 1 {
		return m
	}
	return m + " (" + format(s[0]) + "–" + format(s[len(s)-1]) + ")"
}

// formatStat is spread with a printf verb such as "%.2f".
func formatStat(vs []float64, verb string) string {
	return spread(vs, func(x float64) string { return fmt.Sprintf(verb, x) })
}

// formatRate is spread for a per-second figure, in k or M (si).
func formatRate(vs []float64) string { return spread(vs, si) }

// si formats a rate with three significant digits from 1000 on, in k or
// M; below 1000 as a whole number.
func si(x float64) string {
	switch {
	case x >= 1e6:
		return fmt.Sprintf("%.2f M", x/1e6)
	case x >= 1e5:
		return fmt.Sprintf("%.0f k", x/1e3)
	case x >= 1e4:
		return fmt.Sprintf("%.1f k", x/1e3)
	case x >= 1e3:
		return fmt.Sprintf("%.2f k", x/1e3)
	default:
		return fmt.Sprintf("%.0f", x)
	}
}

// formatMet says whether the median of vs meets goal under op (">=" or
// "<="), and in how many runs each value did: "met (2 of 3 runs)",
// "**not met** (0 of 3 runs)", or "not measured" when vs is empty.
func formatMet(vs []float64, op string, goal float64) (string, error) {
	var meets func(float64) bool
	switch op {
	case ">=":
		meets = func(x float64) bool { return x >= goal }
	case "<=":
		meets = func(x float64) bool { return x <= goal }
	default:
		return "", fmt.Errorf("cannot compare with %q: want >= or <=", op)
	}
	if len(vs) == 0 {
		return "not measured", nil
	}
	hits := 0
	for _, v := range vs {
		if meets(v) {
			hits++
		}
	}
	verdict := "**not met**"
	if meets(median(slices.Sorted(slices.Values(vs)))) {
		verdict = "met"
	}
	return fmt.Sprintf("%s (%d of %d runs)", verdict, hits, len(vs)), nil
}
