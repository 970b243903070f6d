package natsjs

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// SourceState is how far the hub stream has taken one region's stream.
type SourceState struct {
	Region, Domain string
	// Active is the time since the source last had activity; -1 when it
	// never had. During a cut of the region's link it grows while Lag
	// stays at its last value (0), so it is what shows a cut.
	Active time.Duration
	// Lag is how many messages the source is behind, as last reported by
	// the origin.
	Lag uint64
	// Seq is the last origin sequence the hub took.
	Seq uint64
	// Err is the server's error for the source ("" when healthy).
	Err string
}

// Sources returns the state of every source of the hub stream of cfg
// (cfg.Hub set), in cfg's order; a source the server does not report has
// Active -1.
func (c *Client) Sources(ctx context.Context, cfg StreamConfig) ([]SourceState, error) {
	st, err := c.js.Stream(ctx, cfg.Name)
	if err != nil {
		return nil, fmt.Errorf("cannot look up hub stream %s: %w", cfg.Name, err)
	}
	info := st.CachedInfo()
	out := make([]SourceState, 0, len(cfg.sources()))
	for _, src := range cfg.sources() {
		s := SourceState{Region: src.Region, Domain: src.Domain, Active: -1}
		prefix := "$JS." + src.Domain + ".API"
		for _, si := range info.Sources {
			if si == nil || si.External == nil || strings.TrimSuffix(si.External.APIPrefix, ".") != prefix {
				continue
			}
			s.Active, s.Lag, s.Seq = si.Active, si.Lag, si.Seq
			if si.Error != nil {
				s.Err = si.Error.Error()
			}
		}
		out = append(out, s)
	}
	return out, nil
}

// StreamUsage is how much of its limits a stream uses: on a region's
// origin stream, how much of the outage budget.
type StreamUsage struct {
	Bytes, Msgs uint64
	// LimitBytes is the stream's MaxBytes (-1: none); MaxAge its age
	// limit (0: none).
	LimitBytes int64
	MaxAge     time.Duration
	// Oldest is the time of the oldest message held (zero when empty):
	// now − Oldest is the span of flushes a re-sourcing hub could still
	// take, the outage budget the stream covers at the current rate.
	Oldest time.Time
}

// Usage returns the usage of the stream of cfg.
func (c *Client) Usage(ctx context.Context, cfg StreamConfig) (StreamUsage, error) {
	st, err := c.js.Stream(ctx, cfg.Name)
	if err != nil {
		return StreamUsage{}, fmt.Errorf("cannot look up stream %s: %w", cfg.Name, err)
	}
	info := st.CachedInfo()
	u := StreamUsage{Bytes: info.State.Bytes, Msgs: info.State.Msgs, LimitBytes: info.Config.MaxBytes, MaxAge: info.Config.MaxAge}
	if info.State.Msgs > 0 {
		u.Oldest = info.State.FirstTime
	}
	return u, nil
}
