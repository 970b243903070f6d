#!/usr/bin/env bash
# Measures edgecount against Redis on this machine, in one run, and prints
# the ratios of DESIGN.md's targets G1, G2, G5, G6 (HTTP API, loopback),
# G3, G4 (counter micro-benchmarks). G13 (the agent's durable log) is
# measured by scripts/bench-g13.sh.
#
# The system under test (edge-agent, redis-server) is pinned to core 1, the
# load generators (loadgen, redis-benchmark) to core 0: on this 2-core VM a
# cross-core wake-up costs ~50 µs, so unpinned figures mostly measure the
# scheduler. Every load is bounded in time and stays on 127.0.0.1.
#
#   ./scripts/bench.sh            # ~2 minutes
#   DURATION=20s ./scripts/bench.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
DURATION=${DURATION:-10s}
SUT_CORE=${SUT_CORE:-1}
GEN_CORE=${GEN_CORE:-0}
work=.cache/bench
mkdir -p "$work/bin"
go build -o "$work/bin/edge-agent" ./cmd/edge-agent
go build -o "$work/bin/loadgen" ./cmd/loadgen

./scripts/redis.sh install >/dev/null
./scripts/redis.sh start
redis_pid=$(redis-cli -h 127.0.0.1 -p 6379 info server | awk -F: '/^process_id/ {print $2}' | tr -d '\r')
taskset -pc "$SUT_CORE" "$redis_pid" >/dev/null

rb() { # redis-benchmark requests/s for: test, pipeline
  taskset -c "$GEN_CORE" redis-benchmark -h 127.0.0.1 -p 6379 -t "$1" -P "$2" -n "$3" -q 2>/dev/null | tr '\r' '\n' |
    awk -F'[:,]' '/requests per second/ {gsub(/[^0-9.]/, "", $2); print $2; exit}'
}
echo "== redis-benchmark (server on core $SUT_CORE, client on core $GEN_CORE)"
incr1=$(rb incr 1 300000); incr64=$(rb incr 64 4000000); get1=$(rb get 1 300000); get16=$(rb get 16 3000000)
echo "INCR $incr1/s, INCR -P 64 $incr64/s, GET $get1/s, GET -P 16 $get16/s"

echo "== edge-agent (standalone, core $SUT_CORE) driven by loadgen (core $GEN_CORE), $DURATION each"
rm -rf "$work/data"
taskset -c "$SUT_CORE" "$work/bin/edge-agent" --data "$work/data" --http 127.0.0.1:18080 --log-level warn >"$work/agent.out" 2>"$work/agent.err" &
agent=$!
trap 'kill -TERM $agent 2>/dev/null; wait $agent 2>/dev/null || true' EXIT
for _ in $(seq 100); do curl -fsS 127.0.0.1:18080/readyz >/dev/null 2>&1 && break; sleep 0.1; done
lg() { taskset -c "$GEN_CORE" "$work/bin/loadgen" -addr 127.0.0.1:18080 -mode "$1" -duration "$DURATION" -conns 32; }
json() { sed -E "s/.*\"$2\":([0-9.e+]+).*/\1/" <<<"$1"; }
r_incr100=$(lg incr100); r_incr1=$(lg incr1)
sleep 2 # one flush interval plus rollup: the reads below hit real rows
r_get1=$(lg get1); r_get16=$(lg get16)
for r in "$r_incr100" "$r_incr1" "$r_get1" "$r_get16"; do echo "$r"; done
kill -TERM $agent; wait $agent; trap - EXIT

echo "== counter micro-benchmarks (go test -bench, core $SUT_CORE for -cpu 1)"
b1=$(taskset -c "$SUT_CORE" go test ./region/ -run '^$' -bench 'HotCounter/atomic$|ColdKeys' -cpu 1 -benchtime 1s -count 1)
b2=$(go test ./region/ -run '^$' -bench 'HotCounter/sharded$' -cpu 2 -benchtime 1s -count 1)
ns() { awk -v n="$2" '$1 ~ n {print $3; exit}' <<<"$1"; }
atomic1=$(ns "$b1" 'HotCounter/atomic$'); sharded2=$(ns "$b2" 'HotCounter/sharded-2$')
cold=$(ns "$b1" 'ColdKeys/counters$'); private=$(ns "$b1" 'ColdKeys/private-map$'); syncmap=$(ns "$b1" 'ColdKeys/sync-map$')

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }
cat <<TABLE

| # | edgecount | peer (same run) | ratio | goal |
|---|---|---|---|---|
| G1 | $(json "$r_incr100" units_per_s | cut -d. -f1) increments/s (100 a request) | Redis INCR -P 64: $incr64/s | $(ratio "$(json "$r_incr100" units_per_s)" "$incr64") | ≥ 2.0 |
| G2 | $(json "$r_incr1" units_per_s | cut -d. -f1) increments/s (1 a request) | Redis INCR: $incr1/s | $(ratio "$(json "$r_incr1" units_per_s)" "$incr1") | ≥ 1.2 |
| G3 | sharded hot counter, 2 goroutines: $sharded2 ns/add | one uncontended atomic: $atomic1 ns | $(ratio "$atomic1" "$(awk -v s="$sharded2" 'BEGIN{print 2*s}')") | ≥ 0.8 |
| G4 | keyed add, 100k keys: $cold ns | private map: $private ns; sync.Map: $syncmap ns | $(ratio "$private" "$cold"); $(ratio "$syncmap" "$cold")× sync.Map | ≥ 0.7; ≥ 1.5× |
| G5 | $(json "$r_get1" units_per_s | cut -d. -f1) counts/s (1 a request) | Redis GET: $get1/s | $(ratio "$(json "$r_get1" units_per_s)" "$get1") | ≥ 1.5 |
| G6 | $(json "$r_get16" units_per_s | cut -d. -f1) counts/s (16 a request) | Redis GET -P 16: $get16/s | $(ratio "$(json "$r_get16" units_per_s)" "$get16") | ≥ 1.0 and ≥ 250k/s |
TABLE
