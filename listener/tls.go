package listener

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgecount/edgecount/config"
	"github.com/edgecount/edgecount/httpserver"
)

// TLS loads the HTTP listener's certificate of t (agent.tls or
// rollup.tls; name is the key, for errors), exports its metrics on reg
// and reloads it on every SIGHUP: a new pair is served to new connections,
// a pair that does not load is logged as an error and the certificate
// served stays. Pass the Certs to httpserver.Config.TLS and close the
// watch at stop. Without a certificate it returns nil, nil: plain HTTP.
func TLS(name string, t config.TLS, reg prometheus.Registerer, logger *slog.Logger) (*httpserver.Certs, *Watch, error) {
	if !t.Enabled() {
		return nil, nil, nil
	}
	certs, err := httpserver.LoadCerts(t.CertFile, t.KeyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", name, err)
	}
	if err := certs.Register(reg); err != nil {
		return nil, nil, err
	}
	logger.Info("the HTTP API serves HTTPS only", "cert_file", t.CertFile, "key_file", t.KeyFile, certAttrs(certs))
	return certs, onHUP(func() {
		if err := certs.Reload(); err != nil {
			logger.Error("TLS certificate reload failed; the certificate served is unchanged", "err", err, certAttrs(certs))
			return
		}
		logger.Info("TLS certificate reloaded", certAttrs(certs))
	}), nil
}

// certAttrs describes the certificate served.
func certAttrs(c *httpserver.Certs) slog.Attr {
	leaf := c.Leaf()
	return slog.Group("cert", "subject", leaf.Subject.String(), "serial", leaf.SerialNumber.Text(16),
		"not_after", leaf.NotAfter.UTC().Format(time.RFC3339))
}
