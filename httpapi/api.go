package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgecount/edgecount/dashboard"
	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/region"
)

// Service is what the API needs from the agent. Every method is called
// concurrently from many requests, with the request's context, and only with
// validated input.
type Service interface {
	// React sets userID's reaction to contentID.
	React(ctx context.Context, userID, contentID string, action engagement.Action) (region.ReactResult, error)
	// GetReaction returns userID's reaction row on contentID; found is false
	// when there is none.
	GetReaction(ctx context.Context, userID, contentID string) (engagement.Reaction, bool, error)
	// GetReactions returns the rows found among contentIDs, keyed by content
	// id. contentIDs may repeat an id; the slice is reused after the call.
	GetReactions(ctx context.Context, userID string, contentIDs []string) (map[string]engagement.Reaction, error)
	// Increment applies every increment or none. incs and its strings are
	// valid only during the call: the slice is reused afterwards and the
	// strings share memory with the request body, so an implementation that
	// keeps a string (e.g. as a map key) must strings.Clone it.
	Increment(ctx context.Context, incs []region.Increment) error
	// ReadCounts puts in dst[i] every scope row (global and per region) of
	// contentIDs[i], with the times the answer reflects, in the accuracy
	// mode asked (region.Agent.ReadCounts); len(dst) == len(contentIDs).
	// contentIDs may repeat an id; the slices are reused after the call and
	// the ids' strings may share memory with the request, so an
	// implementation that keeps one (e.g. as a cache key) must
	// strings.Clone it.
	ReadCounts(ctx context.Context, contentIDs []string, mode region.Consistency, dst []region.CountRead) (region.ReadInfo, error)
	// Ready returns nil when every dependency is reachable.
	Ready(ctx context.Context) error
	// Trending returns the k items with the largest counts of counter over
	// window in scope (engagement.GlobalScope or a region), ranked, each with
	// its error bound, and the time the list is as of.
	Trending(ctx context.Context, scope, counter, window string, k int) (engagement.Trending, error)
}

// Route patterns.
const (
	routePostReaction = "POST /v1/reactions"
	routeGetReaction  = "GET /v1/reactions/{user_id}/{content_id}"
	routeGetReactions = "GET /v1/reactions/{user_id}"
	routeIncrements   = "POST /v1/increments"
	routeGetCount     = "GET /v1/counts/{content_id}"
	routeGetCounts    = "GET /v1/counts"
	routePostCounts   = "POST /v1/counts"
	routeTrending     = "GET /v1/trending"
	routeHealthz      = "GET /healthz"
	routeReadyz       = "GET /readyz"
	routePrometheus   = "GET /metrics"
	routeOpenAPI      = "GET /v1/openapi.json"
	routeDashboard    = "GET /{$}"
	// routeCluster takes every method: its handler answers the 405 itself,
	// with the message and Allow header /v1/cluster has always had.
	routeCluster = "/v1/cluster"
)

// adminPrefix starts the paths of the admin routes (NewAdmin).
const adminPrefix = "/admin/"

// Pooled buffers larger than these are dropped rather than kept.
const (
	maxPooledBuf  = 64 << 10
	maxPooledIncs = 1024
)

// StatusClientClosedRequest is recorded when the client went away before
// its answer (nginx's convention).
const StatusClientClosedRequest = 499

var contentTypeJSON = []string{"application/json"}

type api struct {
	svc        Service
	idem       Idempotent // nil: svc keeps no idempotency keys
	cfg        Config
	mux        *http.ServeMux
	m          *metrics
	log        *slog.Logger
	scopes     map[string]bool // valid ?region= values
	scopeIndex map[string]int  // the same, numbered from 0 (global)
	id         uint32          // of this handler in the process, for memo tags
	scopeList  string          // the same, for messages
	trending   map[string]bool // counters with trending lists
	retryAfter string
	tooLarge   *apiError    // the 413 of a body over MaxBodyBytes
	bufs       sync.Pool    // *[]byte
	incs       sync.Pool    // *[]region.Increment
	ids        sync.Pool    // *[]string, content_id lists of reads
	writers    sync.Pool    // *respWriter
	cluster    Cluster      // nil: the agent runs no gossip
	admin      http.Handler // nil: no admin routes
	muxOnly    bool         // tests: route every request through the mux
}

// Option adds an optional route to the handler of New. Without options the
// handler serves the API, /healthz, /readyz, /metrics and a 404 on
// /v1/cluster.
type Option func(*options)

type options struct {
	cluster Cluster
	admin   Recounter
}

// WithCluster serves GET /v1/cluster from c, the agent's gossip node.
// Without it, or with a nil c, /v1/cluster answers 404 "this agent runs no
// gossip (set gossip.bind)". A nil *gossip.Node is not a nil c: an agent
// without gossip passes no option.
func WithCluster(c Cluster) Option { return func(o *options) { o.cluster = c } }

// WithAdmin serves NewAdmin(rc)'s routes under /admin/ (the in-process
// rollup of a standalone agent; keep such an address private). They are
// answered ahead of the API, by the admin's own rules and without the
// API's request metrics. Without it, or with a nil rc, /admin/… is a path
// like any other: the API's 404.
func WithAdmin(rc Recounter) Option { return func(o *options) { o.admin = rc } }

// New returns the agent's HTTP handler: the API, the dashboard page at GET /
// (package dashboard), GET /healthz, GET /readyz,
// GET /metrics (served by metrics), /v1/cluster and, with WithAdmin, the
// admin routes. The API's own request metrics are registered on reg. svc,
// metrics and reg are required; a nil logger discards.
func New(svc Service, cfg Config, metrics http.Handler, reg prometheus.Registerer, logger *slog.Logger, opts ...Option) (http.Handler, error) {
	var errs []error
	if svc == nil {
		errs = append(errs, errors.New("nil service"))
	}
	if metrics == nil {
		errs = append(errs, errors.New("nil metrics handler"))
	}
	if reg == nil {
		errs = append(errs, errors.New("nil prometheus registerer"))
	}
	if err := cfg.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("cannot build http api: %w", err)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	cfg = cfg.withDefaults()
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	a := &api{
		svc:        svc,
		cfg:        cfg,
		mux:        http.NewServeMux(),
		log:        logger.With("component", "httpapi"),
		scopes:     map[string]bool{engagement.GlobalScope: true},
		scopeList:  engagement.GlobalScope + ", " + strings.Join(cfg.Regions, ", "),
		retryAfter: strconv.FormatInt(int64((cfg.RetryAfter+time.Second-1)/time.Second), 10),
		tooLarge: &apiError{status: http.StatusRequestEntityTooLarge, field: "body",
			msg: "body is larger than " + strconv.FormatInt(cfg.MaxBodyBytes, 10) + " bytes"},
	}
	for _, r := range cfg.Regions {
		a.scopes[r] = true
	}
	a.id = apiIDs.Add(1)
	a.scopeIndex = map[string]int{engagement.GlobalScope: 0}
	for _, r := range cfg.Regions {
		if _, ok := a.scopeIndex[r]; !ok {
			a.scopeIndex[r] = len(a.scopeIndex)
		}
	}
	a.cluster = o.cluster
	if a.idem, _ = svc.(Idempotent); a.idem != nil {
		if err := registerIdempotency(reg, a.idem); err != nil {
			return nil, fmt.Errorf("cannot build http api: %w", err)
		}
	}
	if o.admin != nil {
		a.admin = NewAdmin(o.admin, logger)
	}
	a.trending = make(map[string]bool, len(cfg.TrendingCounters))
	for _, c := range cfg.TrendingCounters {
		a.trending[c] = true
	}
	a.bufs.New = func() any { b := make([]byte, 0, 4096); return &b }
	a.incs.New = func() any { s := make([]region.Increment, 0, 128); return &s }
	a.ids.New = func() any { s := make([]string, 0, 16); return &s }
	a.writers.New = func() any { return new(respWriter) }

	page, err := dashboard.Handler(dashboard.Config{Region: cfg.Region, TrendingCounters: cfg.TrendingCounters})
	if err != nil {
		return nil, fmt.Errorf("cannot build http api: %w", err)
	}
	routes := []struct {
		pattern string
		h       http.Handler
	}{
		{routePostReaction, http.HandlerFunc(a.postReaction)},
		{routeGetReaction, http.HandlerFunc(a.getReaction)},
		{routeGetReactions, http.HandlerFunc(a.getReactions)},
		{routeIncrements, http.HandlerFunc(a.postIncrements)},
		{routeGetCount, http.HandlerFunc(a.getCount)},
		{routeGetCounts, http.HandlerFunc(a.getCounts)},
		{routePostCounts, http.HandlerFunc(a.postCounts)},
		{routeTrending, http.HandlerFunc(a.getTrending)},
		{routeHealthz, http.HandlerFunc(a.healthz)},
		{routeReadyz, http.HandlerFunc(a.readyz)},
		{routePrometheus, metrics},
		{routeOpenAPI, http.HandlerFunc(serveOpenAPI)},
		{routeCluster, http.HandlerFunc(a.getCluster)},
		{routeDashboard, page},
	}
	patterns := make([]string, 0, len(routes))
	for _, rt := range routes {
		a.mux.Handle(rt.pattern, routed(rt.h))
		patterns = append(patterns, rt.pattern)
	}
	m, err := newMetrics(reg, patterns)
	if err != nil {
		return nil, fmt.Errorf("cannot build http api: %w", err)
	}
	a.m = m
	return a, nil
}

func (a *api) getBuf() *[]byte { return a.bufs.Get().(*[]byte) }

// getIDs returns a pooled content_id list. The Service does not keep the
// list (only, when it must, clones of its strings).
func (a *api) getIDs() *[]string { return a.ids.Get().(*[]string) }

func (a *api) putIDs(ip *[]string) {
	clear(*ip) // do not pin request URLs from the pool
	*ip = (*ip)[:0]
	a.ids.Put(ip)
}

func (a *api) putBuf(bp *[]byte) {
	if cap(*bp) <= maxPooledBuf {
		*bp = (*bp)[:0]
		a.bufs.Put(bp)
	}
}

// Degrader is implemented by a Service that can run with a dependency
// down (e.g. the Redis directory: writes go on with cached shard counts).
// /readyz then stays 200, so load balancers keep sending writes, and lists
// what is degraded.
type Degrader interface {
	Degraded(ctx context.Context) []string
}
