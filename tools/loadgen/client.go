package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/edgecount/edgecount/client"
)

// The -client flag: every request goes through package client (typed
// calls over net/http, JSON bodies, an Idempotency-Key on each POST)
// instead of loadgen's raw connections, so that a run measures what an
// integrator's Go program gets. Retries are off: one call is one request,
// and an answer other than 2xx counts as an error, as on the raw path.
// -token-file (either path) sends a bearer token from a file (its first
// field), for an agent with a token file. -wait-ready asks the agent's
// /readyz through the client until it answers 200 before the clock starts.

func init() {
	flagHooks = append(flagHooks, func(fs *flag.FlagSet) func(*options) error {
		viaClient := fs.Bool("client", false, "send through package client (net/http, JSON) instead of raw connections; not with -pipeline or -body protobuf")
		tokenFile := fs.String("token-file", "", "`file` whose first field is a bearer token to send (an agent with auth.tokens_file)")
		waitReady := fs.Duration("wait-ready", 0, "wait up to this long for the agent's /readyz to answer 200 before the clock starts (0: do not ask)")
		return func(o *options) error {
			o.client, o.waitReady = *viaClient, *waitReady
			if *waitReady < 0 || *waitReady > maxDuration {
				return fmt.Errorf("wait-ready %v: want 0..5m", *waitReady)
			}
			if *tokenFile != "" {
				tok, err := readToken(*tokenFile)
				if err != nil {
					return err
				}
				o.token = tok
			}
			return nil
		}
	})
}

// checkClient reports a flag -client cannot honour; parseFlags calls it
// once every flag hook has run.
func checkClient(o *options) error {
	switch {
	case !o.client:
		return nil
	case o.pipeline != 1:
		return errors.New("client: net/http does not pipeline; drop -pipeline or -client")
	case formatName(o.format) != "json":
		return errors.New("client: the client sends JSON; drop -body or -client")
	}
	return nil
}

// newClient is a worker's client: one keep-alive connection (as a raw
// worker has), no retries.
func newClient(o *options) (*client.Client, *http.Transport, error) {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: time.Second}).DialContext,
		MaxIdleConns:        1,
		MaxIdleConnsPerHost: 1,
		MaxConnsPerHost:     1,
		IdleConnTimeout:     time.Minute,
		DisableCompression:  true,
	}
	opts := []client.Option{client.WithHTTPClient(&http.Client{Transport: tr, Timeout: 10 * time.Second}),
		client.WithRetries(1, 0, 0)}
	if o.token != "" {
		opts = append(opts, client.WithToken(o.token))
	}
	c, err := client.New("http://"+o.addr, opts...)
	return c, tr, err
}

// runClient is run for -client: the same schedule, each request a call
// of the worker's client.
func (w *worker) runClient(ctx context.Context, start, end time.Time) {
	w.end = end
	c, tr, err := newClient(w.o)
	if err != nil {
		w.ioErrors.Add(1)
		w.fail(err.Error())
		return
	}
	defer tr.CloseIdleConnections()
	pace := w.pacer(start)
	ctx, cancel := context.WithDeadline(ctx, end.Add(2*time.Second))
	defer cancel()
	incs := make([]client.Increment, 0, 100)
	ids := make([]string, 0, 16)
	for ctx.Err() == nil {
		now, ok := pace.wait(ctx, end)
		if !ok {
			return
		}
		at := pace.take(now)
		g := w.gen
		o := g.mix.next(g.rng)
		switch o {
		case opIncr1, opIncr100:
			incs = incs[:0]
			for _, k := range g.draw(opUnits[o]) {
				incs = append(incs, client.Increment{ContentID: itemID(k), Counter: "view", Delta: 1})
			}
			_, err = c.Increments(ctx, incs)
		case opGet1:
			_, err = c.Count(ctx, itemID(g.keys.next(g.rng)), "")
		case opGet16:
			ids = ids[:0]
			for _, k := range g.draw(16) {
				ids = append(ids, itemID(k))
			}
			_, err = c.Counts(ctx, "", ids...)
		default: // opReact
			user := "user-" + strconv.FormatUint(g.rng.Uint64()>>34, 10)
			_, err = c.React(ctx, user, itemID(g.keys.next(g.rng)), reactActions[g.rng.IntN(len(reactActions))])
		}
		var answer *client.Error
		switch {
		case err == nil:
		case errors.As(err, &answer):
			w.errors[o].Add(1)
			w.fail(o.String() + ": HTTP " + strconv.Itoa(answer.Status))
		default:
			if ctx.Err() == nil && time.Now().Before(end) {
				w.ioErrors.Add(1)
				w.fail(err.Error())
			}
			continue
		}
		w.hist[o].record(time.Since(at))
		w.requests[o].Add(1)
	}
}

// itemID is appendID's id of k as a string.
func itemID(k int) string { return "item-" + strconv.Itoa(k) }

// readToken returns the first field of the first line of file that is
// not empty or a comment (a token file's own format works too).
func readToken(file string) (string, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("token-file: %w", err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && !strings.HasPrefix(f[0], "#") {
			return f[0], nil
		}
	}
	return "", fmt.Errorf("token-file %s: no token in it", file)
}

// awaitReady polls the agent's /readyz through package client until it
// answers 200, for at most o.waitReady.
func awaitReady(ctx context.Context, o *options) error {
	c, tr, err := newClient(o)
	if err != nil {
		return err
	}
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(ctx, o.waitReady)
	defer cancel()
	for {
		err := c.Ready(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("agent at %s not ready after %v: %w", o.addr, o.waitReady, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
