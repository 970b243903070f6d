package main

import (
	"math/rand/v2"
	"strconv"
)

// A wireFormat writes whole raw HTTP/1.1 requests for the two batched
// operations whose body format can vary. jsonFormat is the API's default;
// another file (wire.go) may add formats to wireFormats and a flag that sets
// options.format. Every method appends to dst and must not allocate once
// dst and the builder's scratch have grown.
type wireFormat interface {
	// appendIncrements appends POST /v1/increments with one "view"
	// increment of delta 1 for each id.
	appendIncrements(dst []byte, b *builder, ids []int) []byte
	// appendCounts appends one batched read of the totals of ids.
	appendCounts(dst []byte, b *builder, ids []int) []byte
}

// wireFormats are the body formats by name; "json" is the default.
var wireFormats = map[string]wireFormat{"json": jsonFormat{}}

// builder holds what request building shares: the rendered Host header and
// a scratch buffer for bodies. One per worker.
type builder struct {
	host    string // "Host: 127.0.0.1:8080\r\n" (and the Authorization header of -token-file)
	scratch []byte
}

func newBuilder(addr string) *builder {
	return &builder{host: "Host: " + addr + "\r\n", scratch: make([]byte, 0, 8<<10)}
}

// appendRequest appends a request line, the Host header, a body's
// Content-Type and Content-Length (when body is not nil) and the body.
func (b *builder) appendRequest(dst []byte, method string, path []byte, contentType string, body []byte) []byte {
	dst = append(dst, method...)
	dst = append(dst, ' ')
	dst = append(dst, path...)
	dst = append(dst, " HTTP/1.1\r\n"...)
	dst = append(dst, b.host...)
	if body != nil {
		dst = append(dst, "Content-Type: "...)
		dst = append(dst, contentType...)
		dst = append(dst, "\r\nContent-Length: "...)
		dst = strconv.AppendInt(dst, int64(len(body)), 10)
		dst = append(dst, "\r\n"...)
	}
	dst = append(dst, "\r\n"...)
	return append(dst, body...)
}

// appendID appends the content id of key k ("item-42").
func appendID(dst []byte, k int) []byte {
	dst = append(dst, "item-"...)
	return strconv.AppendInt(dst, int64(k), 10)
}

type jsonFormat struct{}

func (jsonFormat) appendIncrements(dst []byte, b *builder, ids []int) []byte {
	body := append(b.scratch[:0], `{"increments":[`...)
	for i, k := range ids {
		if i > 0 {
			body = append(body, ',')
		}
		body = append(body, `{"content_id":"`...)
		body = appendID(body, k)
		body = append(body, `","counter":"view","delta":1}`...)
	}
	body = append(body, "]}"...)
	b.scratch = body
	return b.appendRequest(dst, "POST", []byte("/v1/increments"), "application/json", body)
}

func (jsonFormat) appendCounts(dst []byte, b *builder, ids []int) []byte {
	path := append(b.scratch[:0], "/v1/counts?"...)
	for i, k := range ids {
		if i > 0 {
			path = append(path, '&')
		}
		path = append(path, "content_id="...)
		path = appendID(path, k)
	}
	b.scratch = path
	return b.appendRequest(dst, "GET", path, "", nil)
}

var reactActions = [...]string{"like", "dislike", "none"}

// gen draws requests: an op from the mix, ids from the key distribution,
// encoded by the wire format. One per worker; not safe for concurrent use.
type gen struct {
	rng    *rand.Rand
	keys   *keys
	mix    mix
	format wireFormat
	b      *builder
	ids    []int
}

func newGen(o *options, seed uint64) *gen {
	g := &gen{
		rng:    rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15)),
		keys:   o.keys,
		mix:    o.mix,
		format: o.format,
		b:      newBuilder(o.addr),
		ids:    make([]int, 0, 100),
	}
	if o.token != "" {
		g.b.host += "Authorization: Bearer " + o.token + "\r\n"
	}
	return g
}

func (g *gen) draw(n int) []int {
	g.ids = g.ids[:0]
	for range n {
		g.ids = append(g.ids, g.keys.next(g.rng))
	}
	return g.ids
}

// appendNext appends one request and returns its op.
func (g *gen) appendNext(dst []byte) ([]byte, op) {
	o := g.mix.next(g.rng)
	switch o {
	case opIncr1, opIncr100:
		return g.format.appendIncrements(dst, g.b, g.draw(opUnits[o])), o
	case opGet1:
		path := append(g.b.scratch[:0], "/v1/counts/"...)
		path = appendID(path, g.keys.next(g.rng))
		g.b.scratch = path
		return g.b.appendRequest(dst, "GET", path, "", nil), o
	case opGet16:
		return g.format.appendCounts(dst, g.b, g.draw(16)), o
	default: // opReact
		body := append(g.b.scratch[:0], `{"user_id":"user-`...)
		body = strconv.AppendUint(body, g.rng.Uint64()>>34, 10)
		body = append(body, `","content_id":"`...)
		body = appendID(body, g.keys.next(g.rng))
		body = append(body, `","action":"`...)
		body = append(body, reactActions[g.rng.IntN(len(reactActions))]...)
		body = append(body, `"}`...)
		g.b.scratch = body
		return g.b.appendRequest(dst, "POST", []byte("/v1/reactions"), "application/json", body), opReact
	}
}
