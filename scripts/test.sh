#!/usr/bin/env bash
# Runs the whole edgecount test suite on a fresh machine: installs and starts
# the services the tests need (reusing any already running), runs go vet and
# go test -race ./..., and stops what it started.
#
# In-process parts (NATS JetStream, the embedded store, memberlist) are
# started by the tests themselves. Redis is Debian's redis-server. Under
# CI=true a test that cannot reach its service fails instead of skipping.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"

started=()
cleanup() {
	local s
	for s in "${started[@]}"; do
		"./scripts/$s.sh" stop || true
	done
}
trap cleanup EXIT

# bring_up NAME: install and start scripts/NAME.sh's service unless it is
# already answering; remember to stop it if this run started it.
bring_up() {
	local t0=$SECONDS
	if "./scripts/$1.sh" status >/dev/null 2>&1; then
		echo "== $1: already running, reused"
		return
	fi
	"./scripts/$1.sh" install
	"./scripts/$1.sh" start
	started+=("$1")
	echo "== $1: up in $((SECONDS - t0))s"
}

start=$SECONDS
bring_up redis
export EDGECOUNT_REDIS=${EDGECOUNT_REDIS:-127.0.0.1:6379}

echo "== go vet ./..."
go vet ./...
echo "== go test -race ./..."
go test -race -count=1 -timeout 20m ./...
echo "== done in $((SECONDS - start))s"
