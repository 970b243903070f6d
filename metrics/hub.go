package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgecount/edgecount/natsjs"
)

// scrapeTimeout bounds the stream lookup a scrape of the hub and region
// stream metrics makes; a broker that does not answer in time leaves them
// out of that scrape (and _up at 0).
const scrapeTimeout = 2 * time.Second

// RegisterHubSources exports, per region the rollup's hub stream sources,
// the source's activity and lag (docs/regions.md): alert on Active, which
// grows during a cut while Lag stays at 0.
func RegisterHubSources(reg prometheus.Registerer, c *natsjs.Client, hub natsjs.StreamConfig) error {
	return reg.Register(&hubCollector{c: c, cfg: hub,
		active: prometheus.NewDesc("edgecount_hub_source_active_seconds", "Time since the hub stream's source of a region last had activity (grows while the region's link is cut; -1: never).", []string{"region"}, nil),
		lag:    prometheus.NewDesc("edgecount_hub_source_lag", "Messages the hub stream's source of a region is behind, as last reported (stays 0 during a cut: watch active_seconds).", []string{"region"}, nil),
		failed: prometheus.NewDesc("edgecount_hub_source_error", "1 while the hub reports an error for a region's source.", []string{"region"}, nil),
		up:     prometheus.NewDesc("edgecount_hub_stream_up", "1 when the hub stream answered this scrape.", nil, nil),
	})
}

type hubCollector struct {
	c                       *natsjs.Client
	cfg                     natsjs.StreamConfig
	active, lag, failed, up *prometheus.Desc
}

func (h *hubCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- h.active
	ch <- h.lag
	ch <- h.failed
	ch <- h.up
}

func (h *hubCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	srcs, err := h.c.Sources(ctx, h.cfg)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(h.up, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(h.up, prometheus.GaugeValue, 1)
	for _, s := range srcs {
		active := -1.0
		if s.Active >= 0 {
			active = s.Active.Seconds()
		}
		failed := 0.0
		if s.Err != "" {
			failed = 1
		}
		ch <- prometheus.MustNewConstMetric(h.active, prometheus.GaugeValue, active, s.Region)
		ch <- prometheus.MustNewConstMetric(h.lag, prometheus.GaugeValue, float64(s.Lag), s.Region)
		ch <- prometheus.MustNewConstMetric(h.failed, prometheus.GaugeValue, failed, s.Region)
	}
}

// RegisterRegionStream exports an agent's regional (origin) stream's use
// of its limits: the outage budget being used.
func RegisterRegionStream(reg prometheus.Registerer, c *natsjs.Client, stream natsjs.StreamConfig) error {
	return reg.Register(&regionCollector{c: c, cfg: stream,
		bytes:  prometheus.NewDesc("edgecount_region_stream_bytes", "Bytes the region's own stream holds (limits retention: the last max_age of flushes, sourced or not).", nil, nil),
		limit:  prometheus.NewDesc("edgecount_region_stream_limit_bytes", "The region's stream's max_bytes; at it the oldest flushes are dropped, sourced or not.", nil, nil),
		msgs:   prometheus.NewDesc("edgecount_region_stream_messages", "Messages the region's own stream holds.", nil, nil),
		oldest: prometheus.NewDesc("edgecount_region_stream_oldest_seconds", "Age of the oldest message held: the outage budget the stream covers now (below nats.max_age when max_bytes binds first).", nil, nil),
		maxAge: prometheus.NewDesc("edgecount_region_stream_max_age_seconds", "The region's stream's max_age: the outage budget it is configured for.", nil, nil),
		up:     prometheus.NewDesc("edgecount_region_stream_up", "1 when the region's stream answered this scrape.", nil, nil),
	})
}

type regionCollector struct {
	c                                      *natsjs.Client
	cfg                                    natsjs.StreamConfig
	bytes, limit, msgs, oldest, maxAge, up *prometheus.Desc
}

func (r *regionCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{r.bytes, r.limit, r.msgs, r.oldest, r.maxAge, r.up} {
		ch <- d
	}
}

func (r *regionCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	u, err := r.c.Usage(ctx, r.cfg)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(r.up, prometheus.GaugeValue, 0)
		return
	}
	oldest := 0.0
	if !u.Oldest.IsZero() {
		oldest = max(time.Since(u.Oldest).Seconds(), 0)
	}
	ch <- prometheus.MustNewConstMetric(r.up, prometheus.GaugeValue, 1)
	ch <- prometheus.MustNewConstMetric(r.bytes, prometheus.GaugeValue, float64(u.Bytes))
	ch <- prometheus.MustNewConstMetric(r.limit, prometheus.GaugeValue, float64(u.LimitBytes))
	ch <- prometheus.MustNewConstMetric(r.msgs, prometheus.GaugeValue, float64(u.Msgs))
	ch <- prometheus.MustNewConstMetric(r.oldest, prometheus.GaugeValue, oldest)
	ch <- prometheus.MustNewConstMetric(r.maxAge, prometheus.GaugeValue, u.MaxAge.Seconds())
}
