// Package natsjstest gives tests outside natsjs a real JetStream bus: an
// embedded server, a client and a stream, torn down when the test ends.
package natsjstest

import (
	"testing"

	"github.com/edgecount/edgecount/natsjs"
)

// Stream starts an embedded JetStream server with cfg, connects a client
// named name to it and creates stream. At cleanup the client is closed,
// then the server shut down. It fails tb when any step fails.
func Stream(tb testing.TB, cfg natsjs.ServerConfig, name string, stream natsjs.StreamConfig) *natsjs.Client {
	tb.Helper()
	srv, err := natsjs.StartServer(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(srv.Shutdown)
	c, err := srv.Client(name)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	if err := c.EnsureStream(tb.Context(), stream); err != nil {
		tb.Fatal(err)
	}
	return c
}
