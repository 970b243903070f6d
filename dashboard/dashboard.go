package dashboard

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"fmt"
	"html/template"
	"net/http"
	"strconv"
	"strings"
	"time"
)

//go:embed index.html app.js style.css
var files embed.FS

// DefaultRefresh is the page's refresh interval when Config.Refresh is 0.
const DefaultRefresh = 2 * time.Second

// Config is what the page needs to know of its agent.
type Config struct {
	// Region is the agent's region: the page shows its trending lists
	// beside the global ones.
	Region string
	// TrendingCounters are the counters with trending lists; the page
	// offers them in a selector, the first one shown. Empty: the page
	// says trending is off.
	TrendingCounters []string
	// Refresh is the interval between two refreshes of the page's
	// figures. Default DefaultRefresh.
	Refresh time.Duration
}

// Handler returns the handler of the page: GET and HEAD answer the HTML
// (text/html; charset=utf-8) with its script and style inline, under a
// Content-Security-Policy that allows only them and requests to the
// agent itself. The page holds no data; it fetches /metrics, /v1/trending
// and /v1/cluster with the token the user enters (kept in the tab's
// sessionStorage), so it needs no authentication itself.
func Handler(cfg Config) (http.Handler, error) {
	if cfg.Refresh <= 0 {
		cfg.Refresh = DefaultRefresh
	}
	read := func(name string) string {
		b, err := files.ReadFile(name)
		if err != nil {
			panic(err) // embedded at build time
		}
		return string(b)
	}
	tmpl, err := template.New("index.html").Parse(read("index.html"))
	if err != nil {
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	script, style := read("app.js"), read("style.css")
	var page bytes.Buffer
	err = tmpl.Execute(&page, struct {
		Region, Counters, IntervalMS string
		Script                       template.JS
		Style                        template.CSS
	}{cfg.Region, strings.Join(cfg.TrendingCounters, ","), strconv.FormatInt(cfg.Refresh.Milliseconds(), 10),
		template.JS(script), template.CSS(style)}) //nolint:gosec // our own embedded files
	if err != nil {
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	body := page.Bytes()
	csp := "default-src 'none'; script-src '" + digest(script) + "'; style-src '" + digest(style) +
		"'; connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
	length := strconv.Itoa(len(body))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Content-Length", length)
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
		if r.Method != http.MethodHead {
			w.Write(body) //nolint:errcheck // the client may be gone
		}
	}), nil
}

// digest is the CSP source of an inline script or style.
func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256-" + base64.StdEncoding.EncodeToString(sum[:])
}
