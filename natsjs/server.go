package natsjs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// ServerConfig configures an embedded NATS server with JetStream.
type ServerConfig struct {
	// StoreDir is the JetStream file store directory (required). The server
	// keeps its data under StoreDir/jetstream.
	StoreDir string
	// Host is the client listen address (default 127.0.0.1).
	Host string
	// Port is the client port: -1 picks a random free port, 0 does not
	// listen on TCP at all (only in-process connections, see Server.Connect).
	Port int
	// SyncAlways syncs every JetStream write to disk before it is
	// acknowledged (true in DefaultServerConfig). Without it the file store
	// syncs every two minutes and a machine crash can lose acknowledged
	// messages (nats-server issue 7564).
	SyncAlways bool
	// StartTimeout bounds how long StartServer waits for the server to be
	// ready (default 10s).
	StartTimeout time.Duration
	// Logger receives the server's warnings and errors; its notices are
	// logged at debug level. Nil discards them.
	Logger *slog.Logger
}

// DefaultServerConfig returns the configuration of the standalone server:
// loopback, no TCP listener (in-process connections only), sync on every
// write.
func DefaultServerConfig(storeDir string) ServerConfig {
	return ServerConfig{
		StoreDir:     storeDir,
		Host:         "127.0.0.1",
		Port:         0,
		SyncAlways:   true,
		StartTimeout: 10 * time.Second,
	}
}

// Validate reports every problem with c.
func (c ServerConfig) Validate() error {
	var errs []error
	if c.StoreDir == "" {
		errs = append(errs, errors.New("store dir is required"))
	}
	if c.Port < -1 || c.Port > 65535 {
		errs = append(errs, fmt.Errorf("port %d is out of range -1..65535", c.Port))
	}
	if c.StartTimeout < 0 {
		errs = append(errs, fmt.Errorf("start timeout %s is negative", c.StartTimeout))
	}
	return errors.Join(errs...)
}

// Server is an embedded NATS server with JetStream enabled.
type Server struct {
	srv    *server.Server
	listen bool
	once   sync.Once
}

// StartServer starts an embedded server and waits until it accepts
// connections with JetStream enabled. Zero Host and StartTimeout take their
// defaults.
func StartServer(cfg ServerConfig) (*Server, error) {
	if cfg.Host == "" {
		cfg.Host = "127.0.0.1"
	}
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = 10 * time.Second
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("cannot start nats server: %w", err)
	}
	opts := &server.Options{
		ServerName:             "edgecount-embedded",
		Host:                   cfg.Host,
		Port:                   cfg.Port,
		DontListen:             cfg.Port == 0,
		JetStream:              true,
		StoreDir:               cfg.StoreDir,
		SyncAlways:             cfg.SyncAlways,
		NoSigs:                 true, // the process owns its signals
		DisableJetStreamBanner: true,
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("cannot create nats server: %w", err)
	}
	logger := newServerLogger(cfg.Logger)
	srv.SetLoggerV2(logger, false, false, false)
	srv.Start() // returns once the server's own goroutines run

	s := &Server{srv: srv, listen: cfg.Port != 0}
	if err := s.waitReady(logger, cfg.StartTimeout); err != nil {
		s.Shutdown()
		return nil, fmt.Errorf("cannot start nats server: %w", err)
	}
	return s, nil
}

// waitReady polls readiness in short steps so that a fatal start error (the
// server gives up without ever becoming ready) is reported at once.
func (s *Server) waitReady(logger *serverLogger, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if msg := logger.fatal(); msg != "" {
			return errors.New(msg)
		}
		if s.srv.ReadyForConnections(50 * time.Millisecond) {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %s", timeout)
		}
	}
	if !s.srv.JetStreamEnabled() {
		if msg := logger.fatal(); msg != "" {
			return errors.New(msg)
		}
		return errors.New("jetstream is not enabled")
	}
	return nil
}

// ClientURL returns the URL TCP clients connect to, or "" when the server
// does not listen on TCP.
func (s *Server) ClientURL() string {
	if !s.listen {
		return ""
	}
	return s.srv.ClientURL()
}

// SyncAlways reports whether the running JetStream syncs every write to
// disk before acknowledging it.
func (s *Server) SyncAlways() bool {
	c := s.srv.JetStreamConfig()
	return c != nil && c.SyncAlways
}

// Connect opens an in-process connection (no TCP), which works whether or
// not the server listens. Close it before Shutdown; after Shutdown it
// cannot reconnect.
func (s *Server) Connect(name string) (*nats.Conn, error) {
	nc, err := nats.Connect("", nats.InProcessServer(s.srv), nats.Name(name))
	if err != nil {
		return nil, fmt.Errorf("cannot connect in-process to nats server: %w", err)
	}
	return nc, nil
}

// Shutdown stops the server and waits until it has stopped. It may be
// called more than once.
func (s *Server) Shutdown() {
	s.once.Do(func() {
		s.srv.Shutdown()
		s.srv.WaitForShutdown()
	})
}

// serverLogger routes the server's log lines to slog: warnings and errors at
// their level, notices, debug and trace lines at debug level. The first
// fatal line is remembered so that StartServer can report it.
type serverLogger struct {
	log *slog.Logger

	mu       sync.Mutex
	fatalMsg string
}

func newServerLogger(l *slog.Logger) *serverLogger {
	if l == nil {
		l = slog.New(slog.DiscardHandler)
	}
	return &serverLogger{log: l.With("component", "nats-server")}
}

func (l *serverLogger) emit(level slog.Level, format string, v []any) {
	ctx := context.Background()
	if !l.log.Enabled(ctx, level) {
		return
	}
	l.log.Log(ctx, level, fmt.Sprintf(format, v...))
}

func (l *serverLogger) Noticef(format string, v ...any) { l.emit(slog.LevelDebug, format, v) }
func (l *serverLogger) Warnf(format string, v ...any)   { l.emit(slog.LevelWarn, format, v) }
func (l *serverLogger) Errorf(format string, v ...any)  { l.emit(slog.LevelError, format, v) }
func (l *serverLogger) Debugf(format string, v ...any)  { l.emit(slog.LevelDebug, format, v) }
func (l *serverLogger) Tracef(format string, v ...any)  { l.emit(slog.LevelDebug, format, v) }

// Fatalf logs at error level; unlike the server's own logger it does not
// exit the process. The server stops what it was starting by itself.
func (l *serverLogger) Fatalf(format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	l.mu.Lock()
	if l.fatalMsg == "" {
		l.fatalMsg = msg
	}
	l.mu.Unlock()
	l.log.Error(msg, "fatal", true)
}

func (l *serverLogger) fatal() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.fatalMsg
}
