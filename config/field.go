package config

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// field is a setting's typed access to its field of a Config.
type field interface {
	kind() Kind
	// get returns the field's value in c, written as set takes it.
	get(c *Config) string
	// set parses v into the field of c; name is v's source, for errors.
	set(c *Config, name, v string) error
}

// typedField is a field of type T: where it is, how it is parsed and how
// it is written.
type typedField[T any] struct {
	k      Kind
	ptr    func(*Config) *T
	parse  func(name, v string) (T, error)
	format func(T) string
}

func (f typedField[T]) kind() Kind { return f.k }

func (f typedField[T]) get(c *Config) string { return f.format(*f.ptr(c)) }

// set stores what v parses to even when it does not parse: the zero value,
// or the part that did.
func (f typedField[T]) set(c *Config, name, v string) error {
	x, err := f.parse(name, v)
	*f.ptr(c) = x
	return err
}

// named makes parse's error name the value's source: "NAME: error".
func named[T any](parse func(string) (T, error)) func(name, v string) (T, error) {
	return func(name, v string) (T, error) {
		x, err := parse(v)
		if err != nil {
			return x, fmt.Errorf("%s: %w", name, err)
		}
		return x, nil
	}
}

func stringField(p func(*Config) *string) field {
	return typedField[string]{KindString, p,
		func(_, v string) (string, error) { return v, nil },
		func(v string) string { return v }}
}

func boolField(p func(*Config) *bool) field {
	return typedField[bool]{KindBool, p, named(strconv.ParseBool), strconv.FormatBool}
}

func intField(p func(*Config) *int) field {
	return typedField[int]{KindInt, p, named(strconv.Atoi), strconv.Itoa}
}

func int64Field(p func(*Config) *int64) field {
	return typedField[int64]{KindInt64, p,
		named(func(v string) (int64, error) { return strconv.ParseInt(v, 10, 64) }),
		func(n int64) string { return strconv.FormatInt(n, 10) }}
}

func durationField(p func(*Config) *time.Duration) field {
	return typedField[time.Duration]{KindDuration, p, named(time.ParseDuration), formatDuration}
}

// formatDuration writes d as time.Duration does, without the zero units
// it ends with: 24h, 10m, 1m30s.
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// listField is comma-separated strings, taken as they are.
func listField(p func(*Config) *[]string) field {
	return typedField[[]string]{KindList, p,
		func(_, v string) ([]string, error) { return strings.Split(v, ","), nil },
		func(l []string) string { return strings.Join(l, ",") }}
}

// partitionsField is comma-separated partition numbers; each one that is
// not a number is an error of its own.
func partitionsField(p func(*Config) *[]int) field {
	return typedField[[]int]{KindPartitions, p, parsePartitions, func(ps []int) string {
		var s []string
		for _, n := range ps {
			s = append(s, strconv.Itoa(n))
		}
		return strings.Join(s, ",")
	}}
}

func parsePartitions(name, v string) ([]int, error) {
	var (
		out  []int
		errs []error
	)
	for _, f := range strings.Split(v, ",") {
		p, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %q is not a number", name, f))
			continue
		}
		out = append(out, p)
	}
	return out, errors.Join(errs...)
}

func hubSourcesField(p func(*Config) *[]HubSource) field {
	return typedField[[]HubSource]{KindHubSources, p, named(ParseHubSources), func(srcs []HubSource) string {
		var s []string
		for _, h := range srcs {
			f := h.Region + "=" + h.Domain
			if h.Stream != "" {
				f += "/" + h.Stream
			}
			s = append(s, f)
		}
		return strings.Join(s, ",")
	}}
}

// dataCentersField is comma-separated dc=factor pairs, written in the
// order of the names.
func dataCentersField(p func(*Config) *map[string]int) field {
	return typedField[map[string]int]{KindDataCenters, p, parseDataCenters, func(m map[string]int) string {
		var s []string
		for _, dc := range slices.Sorted(maps.Keys(m)) {
			s = append(s, dc+"="+strconv.Itoa(m[dc]))
		}
		return strings.Join(s, ",")
	}}
}

func parseDataCenters(name, v string) (map[string]int, error) {
	out := map[string]int{}
	var errs []error
	for _, f := range strings.Split(v, ",") {
		dc, n, ok := strings.Cut(strings.TrimSpace(f), "=")
		factor, err := strconv.Atoi(n)
		if !ok || dc == "" || err != nil {
			errs = append(errs, fmt.Errorf("%s: %q: want dc=factor", name, f))
			continue
		}
		out[dc] = factor
	}
	return out, errors.Join(errs...)
}
