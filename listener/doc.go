// Package listener is what a daemon's HTTP listener needs: bearer-token
// auth and its TLS certificate, each reloaded on SIGHUP. The edge-agent
// (package agentd) and the rollup command wrap their handler with
// Authenticate and serve the certificates TLS loads.
//
// Each reload runs on a Watch's goroutine, one at a time, on every SIGHUP
// the process receives, until the daemon closes the watch at stop (Close
// waits for the goroutine and is safe on a nil watch, which is what an
// open listener or plain HTTP gets). A reload that fails is logged and
// changes nothing: the tokens or the certificate served stay as they
// were. The token keeper and the certificates are safe for concurrent
// use, so requests are served while a reload runs.
package listener
