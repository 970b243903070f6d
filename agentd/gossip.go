package agentd

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/edgecount/edgecount/buildinfo"
	"github.com/edgecount/edgecount/config"
	"github.com/edgecount/edgecount/gossip"
	"github.com/edgecount/edgecount/region"
)

// startGossip joins the region's gossip cluster. Seeds that cannot be
// reached yet are not an error: the node keeps trying while it is alone.
func startGossip(ctx context.Context, cfg config.Config, httpAddr string, logger *slog.Logger) (*gossip.Node, error) {
	gc, err := cfg.GossipConfig(buildinfo.Read().Version) // told to the peers
	if err != nil {
		return nil, err
	}
	gc.HTTPAddr = httpAddr
	g, err := gossip.New(gc, logger.With("component", "gossip"))
	if err != nil {
		return nil, err
	}
	if len(gc.Seeds) > 0 {
		if _, err := g.Join(ctx, gc.Seeds); err != nil {
			logger.Warn("gossip seeds not reachable yet; retrying while alone", "seeds", gc.Seeds, "err", err)
		}
	}
	return g, nil
}

// gossipPeers gives the agent its region peers' trending summaries, as
// broadcast by shareSummaries.
type gossipPeers struct{ g *gossip.Node }

func (p gossipPeers) PeerSummaries(key string) []region.PeerSummary {
	vs := p.g.Peers(key)
	out := make([]region.PeerSummary, 0, len(vs))
	for _, v := range vs {
		out = append(out, region.PeerSummary{Agent: v.AgentID, AsOf: v.Published, Data: v.Data})
	}
	return out
}

// shareSummaries broadcasts the agent's trending summaries every interval
// and reloads the gossip keys on SIGHUP, until ctx ends.
func shareSummaries(ctx context.Context, g *gossip.Node, a *region.Agent, every time.Duration, logger *slog.Logger) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			if err := g.ReloadKeys(); err != nil {
				logger.Error("gossip key reload failed; keys unchanged", "err", err)
			} else {
				logger.Info("gossip keys reloaded", "fingerprints", g.KeyFingerprints())
			}
		case <-t.C:
			for _, s := range a.TrendingSummaries() {
				if err := g.Publish(s.Key, s.Data); err != nil {
					logger.Warn("cannot broadcast trending summary", "key", s.Key, "err", err)
				}
			}
		}
	}
}

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
