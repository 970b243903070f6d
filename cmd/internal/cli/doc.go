// Package cli is what the edgecount commands share around their testable
// run function: main's signal context and exit status, the layered loading
// of the configuration (defaults, --config file, EDGECOUNT_* environment,
// flags; weakest first) with every problem listed, the process logger and
// metrics registry, the embedded store of a data directory, the rollup
// process's configuration, the HTTP listener's auth and TLS certificate
// (both reloaded on SIGHUP by a Watch, which the command closes at stop),
// and the logged close of a part at stop. Flags live only here and in the
// commands.
package cli
