// Package testenv is what edgecount's tests need from their environment:
// a way to wait for a condition without fixed sleeps (Eventually, with
// Until or UntilEmpty for simple conditions) or for a call to return
// (Within), a clock the test moves (Clock), a
// uniform rule for the external services (NATS, Redis, Cassandra) that
// integration tests use (NeedService, Unavailable, Addr), and a buffer
// that collects a logger's or a child process's output while the test
// reads it (Buffer), and the goleak option for fasthttp's Date clock
// (FasthttpDate).
//
// The service rule: under CI=true a service that cannot be reached fails
// the test, because a green run must mean the integration tests ran;
// outside CI the test is skipped with a message naming the command that
// starts the service.
//
// Every function is safe to call from parallel tests, and a Buffer and a
// Clock are safe for concurrent use; the package holds no state.
package testenv
