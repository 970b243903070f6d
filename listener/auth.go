package listener

import (
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgecount/edgecount/auth"
	"github.com/edgecount/edgecount/config"
	"github.com/edgecount/edgecount/httpapi"
)

// Authenticate decides how the listener on listen authenticates (cfg.Auth,
// auth.Decide), says so in the log, and wraps h with the token check. With
// a token file the returned watch reloads it on SIGHUP (a bad file is
// refused and the tokens stay as they were); close it at stop. An open
// listener gets h back and a nil watch.
func Authenticate(cfg config.Auth, listen string, h http.Handler, reg prometheus.Registerer, logger *slog.Logger) (http.Handler, *Watch, error) {
	p, err := auth.Decide(listen, cfg.TokensFile, cfg.Mode, cfg.OpenMetrics)
	if err != nil {
		return nil, nil, err
	}
	if p.Open() {
		logger.Warn("the HTTP API runs open: no token file (auth.tokens_file, --auth-tokens)", "listen", listen, "auth_mode", cfg.Mode)
	} else {
		logger.Info("the HTTP API needs bearer tokens", "listen", listen, "tokens_file", cfg.TokensFile,
			"tokens", p.Keeper.Tokens().Len(), "open_metrics", p.OpenMetrics)
	}
	wrapped, err := httpapi.Authenticate(h, p, reg)
	if err != nil || p.Open() {
		return wrapped, nil, err
	}
	return wrapped, onHUP(func() {
		if err := p.Keeper.Reload(); err != nil {
			logger.Error("token file reload failed; tokens unchanged", "err", err)
		} else {
			logger.Info("token file reloaded", "tokens", p.Keeper.Tokens().Len())
		}
	}), nil
}
