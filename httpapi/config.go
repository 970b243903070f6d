package httpapi

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/httpserver"
)

// Config configures the API. Zero limits take their defaults (see
// DefaultConfig); the defaults are the limits docs/design.md promises.
type Config struct {
	// Region is the agent's own region. Required.
	Region string
	// Regions lists every known region; ?region= must be "global" or one of
	// these. Empty means just Region. It must contain Region.
	Regions []string
	// MaxBodyBytes bounds a request body; a larger one is answered 413.
	// Default 1 MiB.
	MaxBodyBytes int64
	// MaxIncrements bounds the increments of one POST /v1/increments.
	// Default 10,000.
	MaxIncrements int
	// MaxBatchIDs bounds the content_id parameters of one batch read.
	// Default 100.
	MaxBatchIDs int
	// RetryAfter is sent (rounded up to whole seconds) with 503 and 409
	// answers. Default 1s.
	RetryAfter time.Duration
	// TrendingCounters lists the counters GET /v1/trending answers for
	// (the agent's trending counters); any other is a 400.
	TrendingCounters []string
}

// Defaults. The body limit is the server's (httpserver), so that a body
// over it gets the same 413 from either.
const (
	DefaultMaxBodyBytes  = httpserver.DefaultMaxBodyBytes
	DefaultMaxIncrements = 10000
	DefaultMaxBatchIDs   = 100
	DefaultRetryAfter    = time.Second
)

// DefaultConfig returns the configuration of a standalone agent: region
// "local" and the default limits.
func DefaultConfig() Config {
	return Config{
		Region:        "local",
		Regions:       []string{"local"},
		MaxBodyBytes:  DefaultMaxBodyBytes,
		MaxIncrements: DefaultMaxIncrements,
		MaxBatchIDs:   DefaultMaxBatchIDs,
		RetryAfter:    DefaultRetryAfter,
	}
}

// withDefaults returns c with zero fields replaced by their defaults.
func (c Config) withDefaults() Config {
	if len(c.Regions) == 0 && c.Region != "" {
		c.Regions = []string{c.Region}
	}
	c.MaxBodyBytes = cmp.Or(c.MaxBodyBytes, DefaultMaxBodyBytes)
	c.MaxIncrements = cmp.Or(c.MaxIncrements, DefaultMaxIncrements)
	c.MaxBatchIDs = cmp.Or(c.MaxBatchIDs, DefaultMaxBatchIDs)
	c.RetryAfter = cmp.Or(c.RetryAfter, DefaultRetryAfter)
	return c
}

// Validate reports every problem of c (after defaults are applied), joined.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	if !engagement.ValidRegion(c.Region) {
		errs = append(errs, fmt.Errorf("region %q is not a valid region name", c.Region))
	}
	for i, r := range c.Regions {
		if !engagement.ValidRegion(r) {
			errs = append(errs, fmt.Errorf("regions[%d] %q is not a valid region name", i, r))
		}
		if slices.Index(c.Regions, r) != i {
			errs = append(errs, fmt.Errorf("regions[%d] %q is listed twice", i, r))
		}
	}
	if c.Region != "" && !slices.Contains(c.Regions, c.Region) {
		errs = append(errs, fmt.Errorf("regions %q do not contain the own region %q", c.Regions, c.Region))
	}
	for _, limit := range []struct {
		name string
		v    int64
	}{{"max body bytes", c.MaxBodyBytes}, {"max increments", int64(c.MaxIncrements)}, {"max batch ids", int64(c.MaxBatchIDs)}} {
		if limit.v < 0 {
			errs = append(errs, fmt.Errorf("%s %d is negative", limit.name, limit.v))
		}
	}
	if c.RetryAfter < 0 {
		errs = append(errs, fmt.Errorf("retry after %v is negative", c.RetryAfter))
	}
	for i, name := range c.TrendingCounters {
		if !engagement.ValidCounter(name) {
			errs = append(errs, fmt.Errorf("trending counters[%d] %q is not a valid counter name", i, name))
		}
	}
	return errors.Join(errs...)
}
