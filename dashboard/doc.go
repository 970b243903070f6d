// Package dashboard is the agent's operator page, served at GET /: one
// HTML file with its script and style inline (embedded at build time; no
// CDN, no build step). Every couple of seconds it reads the agent's own
// API and shows regional and global trending (5m, 1h, 24h), write, read
// and increment rates, flush time, rollup lag, the intake and outbox log
// backlog and the region's gossip members.
//
// The figures come from routes that exist for other clients: /metrics
// (Prometheus text; rates are the change of the counters between two
// refreshes), /v1/trending and /v1/cluster. With a token file these need
// the read scope: the page asks for a token, keeps it in the tab's
// sessionStorage and sends it as a Bearer token. The page itself holds no
// data and is served without a token.
//
// The test drives the page in headless Chromium (scripts/chromium.sh
// install) and compares what it shows with the API's answers.
package dashboard
