#!/usr/bin/env bash
# Runs the whole edgecount test suite on a fresh machine.
#
# The tests start what they need themselves: a real NATS JetStream server
# in-process and real embedded stores in temporary directories. Services
# that cannot run in-process (Redis, Cassandra) are installed and started
# here once the backends that need them exist.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"

start=$(date +%s)
echo "== go vet"
go vet ./...
echo "== go test -race ./..."
go test -race -count=1 -timeout 20m ./...
echo "== done in $(( $(date +%s) - start ))s"
