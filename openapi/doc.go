// Package openapi holds the OpenAPI 3.1 document of edgecount's HTTP API:
// every route the edge agent and the rollup serve, with every parameter
// and its rules, every status each route can answer and the error body
// {"error","field"}. The prose reference is docs/http-api.md; protobuf
// bodies are described as binary strings whose schema is
// proto/edgecount/v1/edgecount.proto.
//
// JSON is the document, embedded, for httpapi to serve at
// GET /v1/openapi.json. The package's test runs a real standalone agent
// and checks every route's real requests and answers, error cases
// included, against the document, so that the document cannot drift from
// the handlers; see docs/openapi.md.
package openapi
