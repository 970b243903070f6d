package httpapi

import (
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// routeUnmatched labels requests no route took (404, 405, bad paths).
const routeUnmatched = "unmatched"

// metrics holds the API's collectors, registered on an injected registerer.
type metrics struct {
	requests   *prometheus.CounterVec
	duration   *prometheus.HistogramVec
	panics     prometheus.Counter
	increments prometheus.Counter
	routes     map[string]*routeMetrics // read-only after newMetrics
}

// routeMetrics caches one route's children so that observing a request does
// not hash label values.
type routeMetrics struct {
	name     string
	requests *prometheus.CounterVec
	duration prometheus.Observer
	codes    [500]atomic.Pointer[codeCounter] // status 100..599
}

type codeCounter struct{ prometheus.Counter }

func newMetrics(reg prometheus.Registerer, routes []string) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "edgecount",
			Subsystem: "http",
			Name:      "requests_total",
			Help:      "HTTP requests answered, by route pattern and status code.",
		}, []string{"route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "edgecount",
			Subsystem: "http",
			Name:      "request_duration_seconds",
			Help:      "Time from receiving a request to the end of its handler, by route pattern.",
			Buckets:   []float64{50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3, 250e-3, 500e-3, 1, 2.5},
		}, []string{"route"}),
		panics: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "edgecount",
			Subsystem: "http",
			Name:      "panics_total",
			Help:      "Handler panics recovered.",
		}),
		increments: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "edgecount",
			Subsystem: "http",
			Name:      "increments_accepted_total",
			Help:      "Increments accepted by POST /v1/increments.",
		}),
		routes: make(map[string]*routeMetrics, len(routes)+1),
	}
	for _, c := range []prometheus.Collector{m.requests, m.duration, m.panics, m.increments} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("cannot register http metrics: %w", err)
		}
	}
	for _, r := range append(routes, routeUnmatched) {
		m.routes[r] = &routeMetrics{name: r, requests: m.requests, duration: m.duration.WithLabelValues(r)}
	}
	return m, nil
}

// route returns the metrics of a route pattern ("" for unmatched).
func (m *metrics) route(pattern string) *routeMetrics {
	if rm, ok := m.routes[pattern]; ok {
		return rm
	}
	return m.routes[routeUnmatched]
}

// observe counts one answered request.
func (rm *routeMetrics) observe(code int, seconds float64) {
	rm.duration.Observe(seconds)
	if code < 100 || code > 599 {
		rm.requests.WithLabelValues(rm.name, strconv.Itoa(code)).Inc()
		return
	}
	slot := &rm.codes[code-100]
	c := slot.Load()
	if c == nil {
		c = &codeCounter{rm.requests.WithLabelValues(rm.name, strconv.Itoa(code))}
		slot.Store(c) // a racing store holds the same child
	}
	c.Inc()
}
