package httpserver

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Certs is the server certificate of a TLS listener, loaded from a
// certificate file (PEM, the leaf first, then any intermediates) and a key
// file; Reload replaces it. Every new connection gets the certificate
// current at its handshake; connections already open keep theirs. Safe for
// concurrent use.
type Certs struct {
	certFile, keyFile string
	cur               atomic.Pointer[tls.Certificate]
	reloads           atomic.Uint64 // successful Reload calls
	reloadErrors      atomic.Uint64 // refused Reload calls
	handshakeErrors   atomic.Uint64
	plainHTTP         atomic.Uint64 // plain HTTP requests on the TLS port
	mu                sync.Mutex    // serializes Reload
}

// LoadCerts loads the certificate and key files; see Certs.Reload for what
// is refused.
func LoadCerts(certFile, keyFile string) (*Certs, error) {
	c := &Certs{certFile: certFile, keyFile: keyFile}
	cert, err := loadPair(certFile, keyFile, time.Now())
	if err != nil {
		return nil, err
	}
	c.cur.Store(cert)
	return c, nil
}

// loadPair reads and checks a certificate and its key.
func loadPair(certFile, keyFile string, now time.Time) (*tls.Certificate, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		// The error names the files and what is wrong with them (no PEM
		// block, a key that does not match the certificate), never the
		// key's bytes.
		return nil, fmt.Errorf("cannot load TLS certificate %s and key %s: %w", certFile, keyFile, err)
	}
	if cert.Leaf == nil {
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, fmt.Errorf("cannot parse TLS certificate %s: %w", certFile, err)
		}
	}
	if now.After(cert.Leaf.NotAfter) {
		return nil, fmt.Errorf("TLS certificate %s expired at %s", certFile, cert.Leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	return &cert, nil
}

// Reload reads the files again and serves the new certificate to new
// connections. A pair that cannot be loaded (unreadable, not PEM, a key
// that does not match, an expired certificate) is refused with an error
// naming the files, and the certificate served stays as it was.
func (c *Certs) Reload() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	cert, err := loadPair(c.certFile, c.keyFile, time.Now())
	if err != nil {
		c.reloadErrors.Add(1)
		return err
	}
	c.cur.Store(cert)
	c.reloads.Add(1)
	return nil
}

// Leaf returns the certificate served now.
func (c *Certs) Leaf() *x509.Certificate { return c.cur.Load().Leaf }

// CertStats are counters of a Certs, for metrics.
type CertStats struct {
	// Reloads and ReloadErrors count the reloads done and refused.
	Reloads, ReloadErrors uint64
	// HandshakeErrors counts connections whose TLS handshake failed (a
	// client that does not trust the certificate, speaks an old TLS
	// version, or gave up); PlainHTTP those among them that sent plain
	// HTTP, answered 400.
	HandshakeErrors, PlainHTTP uint64
	// NotAfter is the expiry of the certificate served now.
	NotAfter time.Time
}

// Stats returns the counters.
func (c *Certs) Stats() CertStats {
	return CertStats{
		Reloads: c.reloads.Load(), ReloadErrors: c.reloadErrors.Load(),
		HandshakeErrors: c.handshakeErrors.Load(), PlainHTTP: c.plainHTTP.Load(),
		NotAfter: c.Leaf().NotAfter,
	}
}

// Config returns the server's TLS configuration: TLS 1.2 at least,
// HTTP/1.1 only (the Server does not serve HTTP/2), and the certificate
// current at each handshake.
func (c *Certs) Config() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"http/1.1"},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return c.cur.Load(), nil
		},
	}
}

// tlsListener hands out server-side TLS connections over ln's.
type tlsListener struct {
	net.Listener
	cfg   *tls.Config
	certs *Certs
	log   *slog.Logger
}

func (l tlsListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &tlsConn{Conn: tls.Server(c, l.cfg), raw: c, l: &l}, nil
}

// tlsConn is a server-side TLS connection whose failed handshake ends the
// connection quietly, as a client that closed at once: the failure is
// counted and logged at debug level (a port scanner or a client that does
// not trust the certificate must not fill the log), and a client that sent
// plain HTTP gets a plain-text 400 saying to use https, as net/http's
// server answers it.
type tlsConn struct {
	*tls.Conn
	raw  net.Conn
	l    *tlsListener
	done bool // the handshake succeeded; only the serving goroutine reads it
}

// plainHTTPAnswer is written, unencrypted, to a client that sent plain
// HTTP to the TLS port.
const plainHTTPAnswer = "HTTP/1.0 400 Bad Request\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n" +
	`{"error":"this port serves HTTPS: the client sent plain HTTP","field":"scheme"}` + "\n"

func (c *tlsConn) Read(p []byte) (int, error) {
	if !c.done {
		if err := c.Handshake(); err != nil {
			c.l.certs.handshakeErrors.Add(1)
			var rec tls.RecordHeaderError
			if errors.As(err, &rec) && rec.Conn != nil && looksLikeHTTP(rec.RecordHeader[:]) {
				c.l.certs.plainHTTP.Add(1)
				if lc, ok := c.raw.(*lingerConn); ok {
					// The rest of the request is unread: drain it, so
					// that the close does not reset the answer away.
					lc.linger.Store(true)
				}
				rec.Conn.SetWriteDeadline(time.Now().Add(time.Second)) //nolint:errcheck // a failed write ends the answer
				io.WriteString(rec.Conn, plainHTTPAnswer)              //nolint:errcheck // best effort, then closed
			}
			c.l.log.Debug("TLS handshake failed", "remote", c.raw.RemoteAddr().String(), "err", err)
			return 0, io.EOF
		}
		c.done = true
	}
	return c.Conn.Read(p)
}

// looksLikeHTTP reports whether the first bytes of a connection start an
// HTTP/1 request line.
func looksLikeHTTP(b []byte) bool {
	for _, m := range []string{"GET ", "POST ", "PUT ", "HEAD ", "DELETE ", "PATCH ", "OPTIONS ", "CONNECT ", "TRACE "} {
		n := min(len(m), len(b))
		if string(b[:n]) == m[:n] {
			return true
		}
	}
	return false
}

// rawConn returns the connection under a TLS connection, or c.
func rawConn(c net.Conn) net.Conn {
	if tc, ok := c.(*tlsConn); ok {
		return tc.raw
	}
	return c
}

// Register exports c's counters and the served certificate's expiry on
// reg: edgecount_http_tls_cert_expiry_timestamp_seconds (alert well before
// it), edgecount_http_tls_reloads_total{result="ok"|"refused"},
// edgecount_http_tls_handshake_errors_total and
// edgecount_http_tls_plain_http_total.
func (c *Certs) Register(reg prometheus.Registerer) error {
	reloads := func(result string, v *atomic.Uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "edgecount_http_tls_reloads_total",
			Help:        "Reloads of the HTTP listener's certificate (SIGHUP), by result; refused ones keep the certificate served.",
			ConstLabels: prometheus.Labels{"result": result},
		}, func() float64 { return float64(v.Load()) })
	}
	var errs []error
	for _, col := range []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "edgecount_http_tls_cert_expiry_timestamp_seconds",
			Help: "Expiry (NotAfter, unix seconds) of the certificate the HTTP listener serves.",
		}, func() float64 { return float64(c.Leaf().NotAfter.Unix()) }),
		reloads("ok", &c.reloads),
		reloads("refused", &c.reloadErrors),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "edgecount_http_tls_handshake_errors_total",
			Help: "Connections to the HTTP listener whose TLS handshake failed (plain HTTP included).",
		}, func() float64 { return float64(c.handshakeErrors.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "edgecount_http_tls_plain_http_total",
			Help: "Plain HTTP requests on the TLS listener (answered 400).",
		}, func() float64 { return float64(c.plainHTTP.Load()) }),
	} {
		errs = append(errs, reg.Register(col))
	}
	return errors.Join(errs...)
}
