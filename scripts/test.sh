#!/usr/bin/env bash
# Runs the whole edgecount test suite on a fresh machine: installs and starts
# the services the tests need (reusing any already running), runs go vet and
# go test -race ./..., and stops what it started.
#
# Most tests start their parts in-process (NATS JetStream, the embedded
# store). The rest need real servers on 127.0.0.1: nats-server built from
# its Go module (scripts/nats.sh), Debian's redis-server (scripts/redis.sh)
# and Cassandra 5.0 from Maven Central on Java 17 (scripts/cassandra.sh),
# plus a second Cassandra cluster with one node per data centre (dc1 on
# 127.0.0.11, dc2 on 127.0.0.12, password authentication, optional client
# TLS: scripts/cassandra-cluster.sh) for store/cassandra's multi-DC tests,
# which find it through EDGECOUNT_CASSANDRA_CLUSTER (its contact points)
# and EDGECOUNT_CASSANDRA_CLUSTER_DIR (its state dir: TLS files, pids).
# Under CI=true a test that cannot reach its server fails instead of
# skipping.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"

started=()
cluster_started=""
cleanup() {
	local s
	if [[ -n $cluster_started ]]; then
		./scripts/cassandra-cluster.sh down || true
	fi
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
bring_up nats
bring_up redis
bring_up cassandra
# The cluster starts after the single node, its nodes one after another
# (each start is printed).
t0=$SECONDS
export EDGECOUNT_CASSANDRA_CLUSTER_AUTH=${EDGECOUNT_CASSANDRA_CLUSTER_AUTH:-password}
if ./scripts/cassandra-cluster.sh status >/dev/null 2>&1; then
	echo "== cassandra-cluster: already running, reused"
else
	cluster_started=1
	./scripts/cassandra-cluster.sh up
	echo "== cassandra-cluster: up in $((SECONDS - t0))s"
fi
export EDGECOUNT_CASSANDRA_CLUSTER=${EDGECOUNT_CASSANDRA_CLUSTER:-$(./scripts/cassandra-cluster.sh hosts)}
export EDGECOUNT_CASSANDRA_CLUSTER_DIR=${EDGECOUNT_CASSANDRA_CLUSTER_DIR:-$PWD/.cache/cassandra-cluster}
export EDGECOUNT_NATS=${EDGECOUNT_NATS:-127.0.0.1:4222}
export EDGECOUNT_REDIS=${EDGECOUNT_REDIS:-127.0.0.1:6379}
export EDGECOUNT_CASSANDRA=${EDGECOUNT_CASSANDRA:-127.0.0.1:9042}

echo "== go vet ./..."
go vet ./...
echo "== go test -race ./... (e2e last and alone: it pauses the shared Cassandra)"
go test -race -count=1 -timeout 20m $(go list ./... | grep -v '/e2e$')
go test -race -count=1 -timeout 20m ./e2e/
# The race detector changes allocation sizes, so the test that compares a
# summary's Bytes with the heap it really took only runs without -race.
go test -count=1 -run 'TestBytesIsWhatIsAllocated' ./topk/
echo "== done in $((SECONDS - start))s"
