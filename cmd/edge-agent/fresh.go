package main

import (
	"context"
	"fmt"

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
