// Package httpapi serves edgecount's HTTP routes: the edge agent's JSON API
// (v1: reactions, increments, counts, trending, /v1/cluster), its health,
// readiness and metrics, and the rollup's admin routes (on-demand recount),
// both in the agent and in the rollup process. It decodes and validates
// requests, calls the agent through interfaces declared here (Service, and
// what /v1/cluster and the admin routes need), and encodes answers, errors
// and request metrics.
//
// Invariants:
//   - A rejected request writes nothing: a request body is decoded and every
//     field of it validated before the Service is called, and a request that
//     fails any rule never reaches the Service at all (reads included).
//   - Every answer of New's handler is JSON, including 404, 405 and 500
//     after a recovered panic; only /metrics answers in the Prometheus text
//     format. An error is {"error": "...", "field": "..."}; input errors
//     (400, 404, 405, 413, 415) name the field precisely, other errors (and
//     /v1/cluster's 404 without gossip and its 405) carry none. NewRollup's
//     handler (the rollup process: /healthz, /readyz, /metrics, /admin/)
//     leaves unknown paths to http.ServeMux's plain-text 404/405.
//   - No input makes a handler panic; a panic is recovered, logged once and
//     answered 500 (or the connection is aborted if the answer had started).
//
// The handlers returned by New, NewAdmin and NewRollup are safe for
// concurrent use; they hold no state between
// requests except pooled scratch buffers and the metrics, and call the
// Service concurrently from many requests. Reference: docs/http-api.md
// (routes, input rules, how service errors are answered).
package httpapi
