package natsjs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgecount/edgecount/backoff"
)

// Client is one connection with its JetStream context: what a process
// wires into its agent (Publisher) or rollup (Consumer), so that callers
// outside this package never handle nats.go types.
type Client struct {
	nc  *nats.Conn
	js  jetstream.JetStream
	log *slog.Logger // for the publishers; nil discards
}

// ClientStats describe a Client's connection.
type ClientStats struct {
	// Connected reports whether the connection is up now.
	Connected bool
	// Reconnects counts reconnections after the connection was lost (a
	// broker restart, a network cut).
	Reconnects uint64
}

// NewClient wraps an open connection. The Client owns nc from then on.
func NewClient(nc *nats.Conn) (*Client, error) { return newClient(nc, "") }

// NewDomainClient wraps an open connection whose JetStream requests go to
// domain (see ConnConfig.Domain). The Client owns nc from then on.
func NewDomainClient(nc *nats.Conn, domain string) (*Client, error) { return newClient(nc, domain) }

func newClient(nc *nats.Conn, domain string) (*Client, error) {
	var (
		js  jetstream.JetStream
		err error
	)
	if domain == "" {
		js, err = jetstream.New(nc)
	} else {
		js, err = jetstream.NewWithDomain(nc, domain)
	}
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("cannot open jetstream context: %w", err)
	}
	return &Client{nc: nc, js: js}, nil
}

// Client opens an in-process client of the embedded server.
func (s *Server) Client(name string) (*Client, error) {
	nc, err := s.Connect(name)
	if err != nil {
		return nil, err
	}
	return NewClient(nc)
}

// Dial connects to an external server (see Connect) and returns a Client.
func Dial(cfg ConnConfig, logger *slog.Logger) (*Client, error) {
	nc, err := Connect(cfg, logger)
	if err != nil {
		return nil, err
	}
	c, err := newClient(nc, cfg.Domain)
	if err != nil {
		return nil, err
	}
	c.log = logger
	return c, nil
}

// DialWait bounds how long DialContext keeps trying a server that does not
// answer (ctx may end it sooner).
const DialWait = 30 * time.Second

// DialContext is Dial, tried again with backoff for up to DialWait, or until
// ctx ends, while no server of cfg.URL answers: a process started while its
// broker restarts (a crash, an upgrade) waits for it instead of exiting, as
// its supervisor would restart it into the same race. Other errors (a
// refused login, a bad TLS file) are returned at once.
func DialContext(ctx context.Context, cfg ConnConfig, logger *slog.Logger) (c *Client, err error) {
	err = backoff.Retry(ctx, DialWait, 250*time.Millisecond, 4*time.Second, func() (bool, error) {
		var err error
		c, err = Dial(cfg, logger)
		return errors.Is(err, nats.ErrNoServers), err
	})
	return c, err
}

// Stats returns the connection's state and counters.
func (c *Client) Stats() ClientStats {
	return ClientStats{Connected: c.nc.IsConnected(), Reconnects: c.nc.Stats().Reconnects}
}

// EnsureStream creates or updates the partial-sum stream (see EnsureStream).
func (c *Client) EnsureStream(ctx context.Context, cfg StreamConfig) error {
	return EnsureStream(ctx, c.js, cfg)
}

// Publisher returns a publisher on the stream, logging to the logger the
// Client was dialled with.
func (c *Client) Publisher(cfg StreamConfig) *Publisher {
	return NewPublisher(c.js, cfg).WithLogger(c.log)
}

// Consumer returns a partition consumer.
func (c *Client) Consumer(cfg ConsumerConfig) *Consumer { return NewConsumer(c.js, cfg) }

// Ping reports whether the connection is up and JetStream answers.
func (c *Client) Ping(ctx context.Context) error {
	if !c.nc.IsConnected() {
		return fmt.Errorf("nats: not connected (status %v)", c.nc.Status())
	}
	if _, err := c.js.AccountInfo(ctx); err != nil {
		return fmt.Errorf("nats: jetstream not answering: %w", err)
	}
	return nil
}

// Close drains the connection (pending publishes and acks are flushed)
// and waits until it is closed. It is safe to call more than once.
func (c *Client) Close() error {
	if c.nc.IsClosed() {
		return nil
	}
	closed := make(chan struct{})
	c.nc.SetClosedHandler(func(*nats.Conn) { close(closed) })
	if err := c.nc.Drain(); err != nil {
		if errors.Is(err, nats.ErrConnectionClosed) {
			return nil
		}
		c.nc.Close()
		return fmt.Errorf("cannot drain nats connection: %w", err)
	}
	<-closed
	return nil
}
