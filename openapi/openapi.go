package openapi

import _ "embed"

// JSON is the OpenAPI 3.1 document (openapi.json). Callers must not
// modify it.
//
//go:embed openapi.json
var JSON []byte
