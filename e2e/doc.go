// Package e2e holds end-to-end tests that run edgecount's real binaries as
// separate processes against real servers: an external nats-server, Redis
// and Cassandra, started by scripts/test.sh (or by hand with
// scripts/nats.sh, scripts/redis.sh and scripts/cassandra.sh). Under
// CI=true a test whose server is unreachable fails; otherwise it skips and
// says which command starts the server (internal/testenv.NeedService). The
// fault tests pause (SIGSTOP) the Cassandra JVM they find, so they must not
// run beside other users of that node.
package e2e
