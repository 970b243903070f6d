// Package metrics exports the running totals that the core components keep
// in plain atomic fields (region.Stats, rollup.Stats, natsjs.ConsumerStats)
// as Prometheus metrics on an injected registerer. It is an adapter: the
// core packages never import Prometheus.
//
// Every metric is read at scrape time from the component, so registering
// costs nothing on the hot paths. Registration functions return an error
// rather than panic when a name is already registered.
//
// NewRegistry is the registry a process serves on /metrics: the Go
// runtime's and the process's collectors, edgecount_build_info (which
// build runs, package buildinfo), and then the components'.
package metrics
