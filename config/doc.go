// Package config is the configuration of edgecount's processes: the YAML
// schema of a region file (deploy/regions/<region>.yaml), its defaults, the
// EDGECOUNT_* environment overrides and validation that lists every problem
// at once. Command-line flags are parsed in cmd/ and applied last.
//
// Sources, weakest first: Default(), the file, the environment, flags.
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
