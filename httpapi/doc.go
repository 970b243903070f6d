// Package httpapi is the JSON HTTP API (v1) of the edge agent: it decodes and
// validates requests, calls the agent through the Service interface declared
// here, and encodes answers, errors and request metrics.
//
// Routes (net/http ServeMux method+path patterns):
//
//	POST /v1/reactions                           {"user_id","content_id","action"}
//	GET  /v1/reactions/{user_id}/{content_id}
//	GET  /v1/reactions/{user_id}?content_id=a&content_id=b
//	POST /v1/increments                          {"increments":[{"content_id","counter","delta"}]}
//	GET  /v1/counts/{content_id}?region=R
//	GET  /v1/counts?content_id=a&content_id=b&region=R
//	GET  /v1/trending?region=R|global&counter=like&window=5m&k=10
//	GET  /healthz, GET /readyz, GET /metrics
//
// # Invariants
//
//   - A rejected request writes nothing: a request body is decoded and every
//     field of it validated before the Service is called, and a request that
//     fails any rule never reaches the Service at all (reads included).
//   - Every answer the package writes is JSON, including 404 and 405 from the
//     mux and 500 after a recovered panic; only /metrics answers in the
//     Prometheus text format. An error is {"error": "...", "field": "..."}.
//     Input errors (400, 404, 405, 413, 415) always name the field precisely:
//     a JSON path with list indexes ("increments[3].delta", `""` for an empty
//     key), a query parameter with its index among its repeats
//     ("content_id[2]"), a path parameter ("user_id"), or one of "body",
//     "query", "path", "method", "Content-Type". Errors that are not about
//     the input (409, 499, 5xx) carry no field. No input makes a handler
//     panic; a panic is recovered, logged once and answered 500 (or, when
//     the answer had already started, the connection is aborted).
//
// # Input rules and choices
//
//   - ids (user_id, content_id): 1–128 bytes of printable ASCII without spaces
//     or '/' (engagement.ValidID). In a path, an id that is "." or ".." (or holds
//     '%', '?', '#') must be percent-encoded ("%2E"); a path that is not in
//     canonical form (empty, "." or ".." segments) is answered 400 field
//     "path" rather than redirected.
//   - counter: [a-z][a-z0-9_]{0,31} (engagement.ValidCounter), and never "like" or
//     "dislike", which change only through POST /v1/reactions.
//   - delta: a JSON integer literal from 1 to 1,000,000. Literals with a
//     fraction or an exponent are rejected even when their value is a whole
//     number (1.0, 1e3), and so are strings ("5") and null: a client that
//     sends them has a bug worth hearing about.
//   - increments: 1 to Config.MaxIncrements (10,000) per request; body at most
//     Config.MaxBodyBytes (1 MiB), else 413 field "body".
//   - batch reads: 1 to Config.MaxBatchIDs (100) content_id parameters; ids
//     may repeat and are answered in the order asked.
//   - region (?region=): "global" (the default) or one of Config.Regions; at
//     most once.
//   - trending (GET /v1/trending): region as above; counter (default
//     "like") one of Config.TrendingCounters; window (default "5m") one of
//     5m, 1h, 24h; k (default 10) 1 to 4 decimal digits worth 1..1000. Each
//     at most once; anything else is a 400 naming the parameter. The answer
//     is {"region","counter","window","as_of","items":[{"content_id",
//     "count","error"}]}: at most k items ranked by count, the true count of
//     each in [count-error, count], as_of null when nothing is stored yet.
//   - JSON: strict RFC 8259 syntax; object keys match exactly (no case
//     folding); unknown fields, duplicate fields, missing fields, null and
//     wrong types are 400s naming the field; data after the value is a 400
//     (field "body"); an empty body is a 400. Syntax errors win over field
//     errors; otherwise the first field error in document order is reported.
//     As with encoding/json, strings need not be valid UTF-8; no field
//     accepts non-ASCII, so such a string is rejected naming its field.
//   - Unknown query parameters are 400s naming the parameter, on every route.
//   - Content-Type of a POST: absent, application/json (with at most a
//     charset=utf-8 parameter), or application/x-www-form-urlencoded (what
//     `curl -d` sends; the body is still parsed as strict JSON); anything
//     else is 415.
//
// # Service errors
//
//   - store.ErrUnavailable, region.ErrStopping, context.DeadlineExceeded:
//     503 with Retry-After (Config.RetryAfter, whole seconds).
//   - region.ErrContended: 409 with Retry-After. Contention means concurrent
//     writes to the same (user, content) row, i.e. the client's own racing
//     requests; nothing was applied and a retry is safe. It is deliberately
//     not a 5xx, so that it neither feeds load-balancer outlier ejection nor
//     burns the server's error budget.
//   - the client went away (its context is done): 499, not logged.
//   - anything else: 500 "internal error", logged once here.
//
// # Thread-safety
//
// The handler returned by New is safe for concurrent use; it holds no state
// between requests except pooled scratch buffers and the metrics. The Service
// is called concurrently from many requests.
package httpapi
