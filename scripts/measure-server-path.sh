#!/usr/bin/env bash
# Measures the server path for docs/server-path.md, in one run: a private
# redis-server, the floor servers (a bare read/write loop, net/http and
# fasthttp with a trivial handler) and two standalone edge-agents, one built
# from this tree (httpserver.Server) and one from $BASE (net/http). Every
# server runs pinned to core $SUT_CORE, every generator on core $GEN_CORE;
# in each round a figure is measured right after its Redis peer, and the
# ratios are taken within the round. It prints each round's figures and the
# median (min-max) of every figure and ratio over $ROUNDS rounds.
#
#   scripts/measure-server-path.sh                 # ~6 minutes
#   ROUNDS=1 DURATION=3s BASE=8e444db scripts/measure-server-path.sh
set -euo pipefail
# shellcheck source=measure-lib.sh
. "$(dirname "$0")/measure-lib.sh"
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5s}
SUT_CORE=${SUT_CORE:-1}
GEN_CORE=${GEN_CORE:-0}
BASE=${BASE:-8e444db}
work=.cache/server-path
rm -rf "$work" && mkdir -p "$work/bin" "$work/base"
build floor loadgen edge-agent
build_base_agent "$BASE"

trap stop_all EXIT
sut redis-server --port 16379 --bind 127.0.0.1 --save '' --appendonly no >"$work/redis.log" 2>&1
sut "$work/bin/floor" -addr 127.0.0.1:18191 -mode bare -lifetime 1h
sut "$work/bin/floor" -addr 127.0.0.1:18192 -mode nethttp -lifetime 1h
sut "$work/bin/floor" -addr 127.0.0.1:18193 -mode fasthttp -lifetime 1h
sut "$work/bin/edge-agent" --data "$work/data-new" --http 127.0.0.1:18180 --log-level warn
sut "$work/bin/edge-agent-base" --data "$work/data-base" --http 127.0.0.1:18181 --log-level warn
for a in 18180 18181; do
  for _ in $(seq 100); do curl -fsS "127.0.0.1:$a/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
done
redis-cli -p 16379 ping >/dev/null

out="$work/figures.txt"
: >"$out"
rb() { # name test pipeline requests
  local v
  v=$(taskset -c "$GEN_CORE" timeout 120 redis-benchmark -h 127.0.0.1 -p 16379 -t "$2" -P "$3" -n "$4" -q 2>/dev/null | redis_rps)
  echo "$round $1 $v" | tee -a "$out"
}
for round in $(seq "$ROUNDS"); do
  echo "# round $round: $(uptime)" | tee -a "$out"
  rb redis-INCR incr 1 200000
  figure new-incr1 18180 -mode incr1
  figure base-incr1 18181 -mode incr1
  rb redis-INCR-P64 incr 64 3000000
  figure new-incr100-json 18180 -mode incr100
  figure new-incr100-protobuf 18180 -mode incr100 -body protobuf
  figure base-incr100-json 18181 -mode incr100
  sleep 2 # a flush and the rollup: the reads hit rows
  rb redis-GET get 1 200000
  figure floor-bare-get1 18191 -mode get1
  figure floor-nethttp-get1 18192 -mode get1
  figure floor-fasthttp-get1 18193 -mode get1
  figure new-get1 18180 -mode get1
  figure base-get1 18181 -mode get1
  rb redis-GET-P16 get 16 2000000
  figure new-get16-json 18180 -mode get16
  figure new-get16-protobuf 18180 -mode get16 -body protobuf
  figure base-get16-json 18181 -mode get16
  figure floor-bare-get1-pipeline16 18191 -mode get1 -pipeline 16
  figure floor-nethttp-get1-pipeline16 18192 -mode get1 -pipeline 16
  figure floor-fasthttp-get1-pipeline16 18193 -mode get1 -pipeline 16
  figure new-get1-pipeline16 18180 -mode get1 -pipeline 16
done
echo "# medians (min-max) over $ROUNDS rounds"
awk "$figures_awk"'
  END {
    split("G2:new-incr1:redis-INCR G2:base-incr1:redis-INCR G1:new-incr100-json:redis-INCR-P64 G1:new-incr100-protobuf:redis-INCR-P64 G1:base-incr100-json:redis-INCR-P64 G5:new-get1:redis-GET G5:base-get1:redis-GET floor:floor-bare-get1:redis-GET floor:floor-nethttp-get1:redis-GET floor:floor-fasthttp-get1:redis-GET G6:new-get16-json:redis-GET-P16 G6:new-get16-protobuf:redis-GET-P16 G6:base-get16-json:redis-GET-P16", rows, " ")
    for (n in names) printf "%-32s %s /s\n", n, stat(n, "", 1) | "sort"
    close("sort")
    for (i = 1; i in rows; i++) { split(rows[i], f, ":"); printf "%-6s %-24s / %-14s %s\n", f[1], f[2], f[3], stat(f[2], f[3], 1) }
    split("new-incr1:base-incr1 new-incr100-json:base-incr100-json new-get1:base-get1 new-get16-json:base-get16-json new-incr100-protobuf:new-incr100-json new-get16-protobuf:new-get16-json new-get1-pipeline16:new-get1 floor-fasthttp-get1-pipeline16:floor-bare-get1-pipeline16", pairs, " ")
    for (i = 1; i in pairs; i++) { split(pairs[i], f, ":"); printf "%-6s %-24s / %-14s %s\n", "same", f[1], f[2], stat(f[1], f[2], 1) }
    printf "%-6s %-24s / %-14s %s\n", "floor", "new-get1", "floor-bare-get1", stat("new-get1", "floor-bare-get1", 1)
    printf "%-6s %-24s / %-14s %s\n", "floor", "floor-fasthttp-get1", "floor-bare-get1", stat("floor-fasthttp-get1", "floor-bare-get1", 1)
    printf "%-6s %-24s / %-14s %s\n", "floor", "floor-nethttp-get1", "floor-bare-get1", stat("floor-nethttp-get1", "floor-bare-get1", 1)
  }' "$out"
