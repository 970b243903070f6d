package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// The -body and -pipeline flags: protobuf request bodies
// (proto/edgecount/v1/edgecount.proto) and HTTP/1.1 pipelining.

// protobufBuilder is requestBuilder for -body protobuf: incr1 and incr100
// post an IncrementsRequest, get16 posts a CountsRequest to POST /v1/counts.
func protobufBuilder(mode, addr string, items int) (func(*rand.Rand) []byte, int, error) {
	head := func(path string, body []byte) []byte {
		var b bytes.Buffer
		fmt.Fprintf(&b, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/x-protobuf\r\nContent-Length: %d\r\n\r\n", path, addr, len(body))
		b.Write(body)
		return b.Bytes()
	}
	id := func(r *rand.Rand) string { return "item-" + strconv.Itoa(r.IntN(items)) }
	switch mode {
	case "incr1", "incr100":
		n := 1
		if mode == "incr100" {
			n = 100
		}
		return func(r *rand.Rand) []byte {
			var body, inc []byte
			for i := 0; i < n; i++ {
				inc = protowire.AppendTag(inc[:0], 1, protowire.BytesType)
				inc = protowire.AppendString(inc, id(r))
				inc = protowire.AppendTag(inc, 2, protowire.BytesType)
				inc = protowire.AppendString(inc, "view")
				inc = protowire.AppendTag(inc, 3, protowire.VarintType)
				inc = protowire.AppendVarint(inc, 1)
				body = protowire.AppendTag(body, 1, protowire.BytesType)
				body = protowire.AppendBytes(body, inc)
			}
			return head("/v1/increments", body)
		}, n, nil
	case "get16":
		return func(r *rand.Rand) []byte {
			var body []byte
			for i := 0; i < 16; i++ {
				body = protowire.AppendTag(body, 1, protowire.BytesType)
				body = protowire.AppendString(body, id(r))
			}
			return head("/v1/counts", body)
		}, 16, nil
	}
	return nil, 0, fmt.Errorf("mode %q with -body protobuf: want incr1, incr100 or get16", mode)
}

// pipelineWorker is worker with depth requests written back to back before
// their depth answers are read, on one connection. Each request's latency
// is that of its round (the write of the first to the read of the last).
func pipelineWorker(ctx context.Context, addr string, depth int, build func() []byte, res *result, lat *[]time.Duration) error {
	rounds := make([][]byte, 16)
	for i := range rounds {
		for j := 0; j < depth; j++ {
			rounds[i] = append(rounds[i], build()...)
		}
	}
	var conn net.Conn
	var br *bufio.Reader
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	for i := 0; ctx.Err() == nil; i++ {
		if conn == nil {
			var err error
			conn, err = (&net.Dialer{Timeout: time.Second}).DialContext(ctx, "tcp", addr)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
			br = bufio.NewReaderSize(conn, 256<<10)
		}
		deadline, _ := ctx.Deadline()
		conn.SetDeadline(deadline.Add(time.Second))
		t0 := time.Now()
		if _, err := conn.Write(rounds[i%len(rounds)]); err != nil {
			conn.Close()
			conn = nil
			continue
		}
		for j := 0; j < depth; j++ {
			status, err := readResponse(br)
			if err != nil {
				conn.Close()
				conn = nil
				break
			}
			res.Requests++
			if status >= 300 {
				res.Errors++
				if res.FirstStatus == "" {
					res.FirstStatus = "HTTP " + strconv.Itoa(status)
				}
			}
		}
		if conn == nil {
			if ctx.Err() != nil {
				return nil
			}
			continue
		}
		d := time.Since(t0)
		for j := 0; j < depth; j++ {
			*lat = append(*lat, d)
		}
	}
	return nil
}
