// Package storetest is the conformance suite every store implementation
// passes unchanged: the embedded bbolt store and the Cassandra store run the
// same Run against a real database.
//
// Run checks behaviour only through the Store interface. Each subtest calls
// open for its own store (which may share a database with other subtests) and
// uses ids made unique per subtest, so the suite also works on a shared
// keyspace. Subtests run in parallel; open must be safe to call from several
// goroutines and must register its own cleanup.
//
// Times in the suite are truncated to the microsecond and compared with
// time.Equal: an implementation must keep at least microseconds and may
// return any location. A nil and an empty Counters map (or Items list) are
// treated as equal.
//
// The package holds no state; Run may be called any number of times.
package storetest
