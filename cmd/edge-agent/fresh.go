package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgecount/edgecount/gossip"
	"github.com/edgecount/edgecount/region"
)

// freshPeers asks the region's other agents for their held deltas over
// gossip queries (region.HeldPeers), for ?consistency=fresh.
type freshPeers struct{ g *gossip.Node }

func (p freshPeers) PeerHeld(ctx context.Context, ids []string) []region.PeerHeld {
	answers, err := p.g.Query(ctx, region.AppendHeldQuery(nil, ids))
	if err != nil {
		return []region.PeerHeld{{Agent: "(gossip)", Err: err}}
	}
	out := make([]region.PeerHeld, 0, len(answers))
	for _, a := range answers {
		ph := region.PeerHeld{Agent: a.AgentID, Err: a.Err}
		if ph.Agent == "" {
			ph.Agent = a.Node
		}
		if ph.Err == nil {
			if ph.Held, ph.Err = region.DecodeHeldAnswer(a.Data); ph.Err != nil {
				ph.Err = fmt.Errorf("cannot decode the held deltas of %s: %w", ph.Agent, ph.Err)
			}
		}
		out = append(out, ph)
	}
	return out
}

// registerFresh exports what fresh reads do and hold
// (docs/consistency.md); g is nil when the agent runs no gossip.
func registerFresh(reg prometheus.Registerer, a *region.Agent, g *gossip.Node) error {
	opts := func(name, help string) prometheus.Opts {
		return prometheus.Opts{Namespace: "edgecount", Subsystem: "agent", Name: name, Help: help}
	}
	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts(opts(name, help)), f)
	}
	counter := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts(opts(name, help)), f)
	}
	cs := []prometheus.Collector{
		counter("fresh_reads_total", "Count reads with consistency=fresh.", func() float64 { return float64(a.Stats().FreshReads.Load()) }),
		counter("fresh_peer_misses_total", "Region peers that did not answer a fresh read in time (the answer names them).",
			func() float64 { return float64(a.Stats().FreshPeerMisses.Load()) }),
		gauge("fresh_held_messages", "Flushed messages remembered for fresh reads until seen applied.", func() float64 { return float64(a.HeldStats().Messages) }),
		gauge("fresh_held_sums", "Partial sums in the flushed messages remembered for fresh reads.", func() float64 { return float64(a.HeldStats().Sums) }),
		counter("fresh_held_dropped_total", "Flushed messages forgotten past the bound before they were seen applied (fresh reads miss them).",
			func() float64 { return float64(a.HeldStats().Dropped) }),
	}
	if g != nil {
		q := func() gossip.QueryStats { return g.QueryStats() }
		cs = append(cs,
			counter("fresh_peer_queries_served_total", "Held-delta queries of region peers this agent answered.", func() float64 { return float64(q().Served) }),
			counter("fresh_peer_queries_dropped_total", "Held-delta queries of region peers dropped (queue full or not a live member).",
				func() float64 { return float64(q().Dropped) }),
		)
	}
	var errs []error
	for _, c := range cs {
		errs = append(errs, reg.Register(c))
	}
	return errors.Join(errs...)
}
