// Package httpapi serves edgecount's HTTP routes: the edge agent's API (v1:
// reactions, increments, counts, trending, /v1/cluster; JSON, and protobuf
// bodies for increments and batched count reads), its health, readiness and
// metrics, and the rollup's admin routes, in the agent and in the rollup
// process. It decodes and validates requests, calls the agent through
// interfaces declared here (Service, Cluster, Recounter), and encodes
// answers, errors and request metrics. httpserver carries the handlers
// over fasthttp's connections as pooled net/http requests; the handlers
// take its fast paths (a whole answer appended to its buffer, the body
// without a copy, the headers they read) through interfaces declared here,
// and serve under net/http's server as well. Profiling puts Go's profiles
// (net/http/pprof, under /debug/pprof/) in front of either process's
// handler; they answer as that package does, outside the invariants below.
//
// Invariants:
//   - A rejected request writes nothing: a body is decoded and every field
//     validated before the Service is called, and a request that fails any
//     rule never reaches the Service at all (reads included).
//   - Every answer of New's handler and of httpserver's own refusals is
//     JSON or, for a protobuf request's success, protobuf; only /metrics
//     answers in the Prometheus text format. An error is {"error": "...", "field":
//     "..."}; input errors (400, 404, 405, 413, 415, 431) name the field,
//     other errors carry none. NewRollup's handler leaves unknown paths to
//     http.ServeMux's plain-text 404/405.
//   - No input makes a handler panic; a panic is recovered, logged once and
//     answered 500 (or the connection is cut if the answer had started).
//
// The handlers are safe for concurrent use; they hold no state between
// requests except pooled buffers and the metrics. Reference:
// docs/http-api.md (routes, input rules, protobuf, service errors) and
// docs/server-path.md (the server path, measured against its floor).
package httpapi
