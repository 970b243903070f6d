// Package apijson writes the two pieces of JSON that edgecount's HTTP API
// and the server under it both write, so that they are the same to the
// byte wherever they are written: a JSON string (AppendString) and the
// API's error body, {"error":"…","field":"…"} (AppendError). httpapi's
// encoders and httpserver's own refusals (a body over the limit, a request
// that is not HTTP/1.1) use it; docs/http-api.md documents the shape.
//
// Invariants: AppendString's output reads back, with encoding/json, as the
// string it was given, invalid UTF-8 bytes as U+FFFD (FuzzAppendString);
// HTML characters are not escaped. Appending never reads or keeps dst
// beyond the append.
//
// The functions hold no state and are safe for concurrent use.
package apijson
