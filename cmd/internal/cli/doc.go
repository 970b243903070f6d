// Package cli is what the edgecount commands share around their testable
// run function: main's signal context and exit status, --version (the
// line of package buildinfo), the layered loading of the configuration
// (defaults, --config file, EDGECOUNT_* environment, flags; weakest first)
// with every problem listed, and the process logger.
// Flags live only here and in the commands; what the daemons share past
// the command line lives in packages of its own (listener, closer,
// metrics.NewRegistry, embedded.OpenDir, rollupd.ConfigFrom).
package cli
