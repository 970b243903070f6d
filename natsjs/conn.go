package natsjs

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edgecount/edgecount/backoff"
)

// ConnConfig configures a connection to an external NATS server.
type ConnConfig struct {
	// URL is one server URL or a comma-separated list
	// (default nats://127.0.0.1:4222). User and password may be given in
	// the URL.
	URL string
	// Name identifies the connection in the server's monitoring.
	Name string
	// CredsFile is a JWT user credentials file (optional).
	CredsFile string
	// NKeyFile is an NKey seed file (optional; not with CredsFile).
	NKeyFile string
	// CAFile verifies the server's certificate (optional).
	CAFile string
	// CertFile and KeyFile are the client certificate for mutual TLS
	// (optional; both or neither).
	CertFile, KeyFile string
	// ConnectTimeout bounds one connection attempt (default 5s).
	ConnectTimeout time.Duration
	// ReconnectMin and ReconnectMax bound the exponential backoff between
	// reconnect attempts (default 100ms..5s). The connection reconnects
	// forever; while it does, publishes are buffered and fail by their
	// context.
	ReconnectMin, ReconnectMax time.Duration
	// PingInterval is how often the client pings an idle server; two
	// unanswered pings close the connection and start reconnecting, so a
	// broker that vanished without closing its sockets (a host crash, a
	// network cut) is noticed within about three intervals (default 5s;
	// nats.go's own default of 2 minutes would leave a dead connection
	// standing for minutes).
	PingInterval time.Duration
	// Domain is the JetStream domain the client's JetStream requests go
	// to (optional): an agent of a region names its regional server's
	// domain, so that its stream and consumer are made there whichever
	// server of the system it is connected to.
	Domain string
	// WaitForServer makes Connect succeed while the server is unreachable:
	// the connection then keeps trying in the background. Without it the
	// first connection attempt must succeed.
	WaitForServer bool
}

// DefaultConnConfig returns the defaults of every zero field of ConnConfig.
func DefaultConnConfig() ConnConfig {
	return ConnConfig{
		URL:            nats.DefaultURL,
		Name:           "edgecount",
		ConnectTimeout: 5 * time.Second,
		ReconnectMin:   100 * time.Millisecond,
		ReconnectMax:   5 * time.Second,
		PingInterval:   5 * time.Second,
	}
}

func (c ConnConfig) withDefaults() ConnConfig { return withDefaults(c, DefaultConnConfig()) }

// Validate reports every problem with c (after defaults are applied).
func (c ConnConfig) Validate() error {
	c = c.withDefaults()
	var errs []error
	if c.CredsFile != "" && c.NKeyFile != "" {
		errs = append(errs, errors.New("creds file and nkey file are exclusive"))
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		errs = append(errs, errors.New("cert file and key file go together"))
	}
	if c.ConnectTimeout < 0 {
		errs = append(errs, fmt.Errorf("connect timeout %s is negative", c.ConnectTimeout))
	}
	if c.PingInterval < 0 {
		errs = append(errs, fmt.Errorf("ping interval %s is negative", c.PingInterval))
	}
	if c.Domain != "" && !validToken(c.Domain) {
		errs = append(errs, fmt.Errorf("domain %q is not a valid domain (a subject token: no dots, wildcards or spaces)", c.Domain))
	}
	if c.ReconnectMin < 0 || c.ReconnectMax < c.ReconnectMin {
		errs = append(errs, fmt.Errorf("reconnect backoff %s..%s is not a range", c.ReconnectMin, c.ReconnectMax))
	}
	return errors.Join(errs...)
}

// Connect connects to an external NATS server. The connection reconnects
// forever with capped exponential backoff and logs each disconnect,
// reconnect and asynchronous error to logger (nil discards them). Close or
// drain it when done.
func Connect(cfg ConnConfig, logger *slog.Logger) (*nats.Conn, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("cannot connect to nats: %w", err)
	}
	cfg = cfg.withDefaults()
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	log := logger.With("component", "nats", "name", cfg.Name)

	opts := []nats.Option{
		nats.Name(cfg.Name),
		nats.Timeout(cfg.ConnectTimeout),
		nats.MaxReconnects(-1),
		nats.PingInterval(cfg.PingInterval),
		nats.MaxPingsOutstanding(2),
		nats.CustomReconnectDelay(func(attempts int) time.Duration {
			return backoff.Delay(cfg.ReconnectMin, cfg.ReconnectMax, attempts)
		}),
		nats.RetryOnFailedConnect(cfg.WaitForServer),
		nats.ConnectHandler(func(nc *nats.Conn) {
			log.Info("nats connected", "url", nc.ConnectedUrlRedacted())
		}),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("nats disconnected", "err", err)
			} else {
				log.Info("nats disconnected")
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("nats reconnected", "url", nc.ConnectedUrlRedacted())
		}),
		nats.ClosedHandler(func(*nats.Conn) {
			log.Info("nats connection closed")
		}),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			if sub != nil {
				log.Warn("nats async error", "subject", sub.Subject, "err", err)
				return
			}
			log.Warn("nats async error", "err", err)
		}),
	}
	if cfg.CredsFile != "" {
		opts = append(opts, nats.UserCredentials(cfg.CredsFile))
	}
	if cfg.NKeyFile != "" {
		o, err := nats.NkeyOptionFromSeed(cfg.NKeyFile)
		if err != nil {
			return nil, fmt.Errorf("cannot read nkey seed %s: %w", cfg.NKeyFile, err)
		}
		opts = append(opts, o)
	}
	if cfg.CAFile != "" {
		opts = append(opts, nats.RootCAs(cfg.CAFile))
	}
	if cfg.CertFile != "" {
		opts = append(opts, nats.ClientCert(cfg.CertFile, cfg.KeyFile))
	}
	nc, err := nats.Connect(cfg.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("cannot connect to nats at %s: %w", redactURL(cfg.URL), err)
	}
	return nc, nil
}

// redactURL hides user names, tokens and passwords given in a URL list.
func redactURL(list string) string {
	parts := strings.Split(list, ",")
	for i, p := range parts {
		if u, err := url.Parse(strings.TrimSpace(p)); err == nil && u.User != nil {
			u.User = url.User("redacted")
			parts[i] = u.String()
		}
	}
	return strings.Join(parts, ",")
}
