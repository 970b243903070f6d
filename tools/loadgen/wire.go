package main

import (
	"flag"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// The -body and -pipeline flags: protobuf request bodies
// (proto/edgecount/v1/edgecount.proto) and HTTP/1.1 pipelining (the worker
// writes -pipeline requests before it reads their answers).

func init() {
	wireFormats["protobuf"] = protobufFormat{}
	flagHooks = append(flagHooks, func(fs *flag.FlagSet) func(*options) error {
		body := fs.String("body", "json", "body `format` of incr and get16: json or protobuf")
		pipeline := fs.Int("pipeline", 1, "`N` requests written before their answers are read, per connection (HTTP/1.1 pipelining)")
		return func(o *options) error {
			f, ok := wireFormats[*body]
			if !ok {
				return fmt.Errorf("body %q: want json or protobuf", *body)
			}
			o.format, o.pipeline = f, *pipeline
			return nil
		}
	})
}

// protobufFormat posts an IncrementsRequest to POST /v1/increments and a
// CountsRequest to POST /v1/counts.
type protobufFormat struct{}

func (protobufFormat) appendIncrements(dst []byte, b *builder, ids []int) []byte {
	body := b.scratch[:0]
	var inc [64]byte
	for _, k := range ids {
		m := protowire.AppendTag(inc[:0], 1, protowire.BytesType)
		m = protowire.AppendVarint(m, uint64(idLen(k)))
		m = appendID(m, k)
		m = protowire.AppendTag(m, 2, protowire.BytesType)
		m = protowire.AppendString(m, "view")
		m = protowire.AppendTag(m, 3, protowire.VarintType)
		m = protowire.AppendVarint(m, 1)
		body = protowire.AppendTag(body, 1, protowire.BytesType)
		body = protowire.AppendBytes(body, m)
	}
	b.scratch = body
	return b.appendRequest(dst, "POST", []byte("/v1/increments"), "application/x-protobuf", body)
}

func (protobufFormat) appendCounts(dst []byte, b *builder, ids []int) []byte {
	body := b.scratch[:0]
	for _, k := range ids {
		body = protowire.AppendTag(body, 1, protowire.BytesType)
		body = protowire.AppendVarint(body, uint64(idLen(k)))
		body = appendID(body, k)
	}
	b.scratch = body
	return b.appendRequest(dst, "POST", []byte("/v1/counts"), "application/x-protobuf", body)
}

// idLen is the length of appendID's id of k.
func idLen(k int) int {
	n := len("item-") + 1
	for ; k >= 10; k /= 10 {
		n++
	}
	return n
}
