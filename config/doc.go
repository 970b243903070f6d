// Package config is the configuration of edgecount's processes: the YAML
// schema of a region file (deploy/regions/<region>.yaml), its defaults, the
// EDGECOUNT_* environment overrides and validation that lists every problem
// at once. Command-line flags are parsed in cmd/ and applied last.
//
// Sources, weakest first: Default(), the file, the environment, flags.
//
// Settings is the one table of settings: each row gives a YAML key, its
// EDGECOUNT_* variable, its flag and the commands that have it, its default
// and its meaning, and reads and writes its field of a Config from a
// string. ApplyEnv reads the environment through it, cmd/internal/cli
// defines the commands' flags from it, and the reference in
// docs/configuration.md is generated from it (go test ./config -run
// TestReference -update). Default takes each default from the package that
// owns the setting; only this package's own choices (listen addresses, data
// directories, the region name, the log level, the shutdown bound) are
// written here, once.
//
// A Config is a plain value, safe to copy; Settings returns a fresh copy of
// the table, so nothing here is shared or mutable between goroutines.
//
// A region file describes one region: its name, the regions whose totals
// may be read, the servers it uses (NATS, Redis, Cassandra) and the settings
// its agents and rollups share. What differs between two processes of the
// same region — HTTP address, agent id, data directory, owned partitions —
// normally comes from flags or the environment.
//
// An empty nats.url, redis.addr or cassandra.hosts selects the embedded
// part instead (embedded broker, in-process directory, embedded store):
// with no file at all the edge agent runs standalone.
package config
