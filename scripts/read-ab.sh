#!/usr/bin/env bash
# Same-run A/B of the count reads (issue 13's G5 and G6) for
# docs/server-path.md: a private redis-server (GET, GET -P 16), fasthttp
# with a trivial handler (the floor of an HTTP answer) and two standalone
# edge-agents, one built from $BASE (default main) and one from this tree,
# each preloaded with increments so that the reads hit real rows. Every
# server runs pinned to core $SUT_CORE, every generator on core $GEN_CORE.
# Prints each round's figures and the median (min-max) over $ROUNDS rounds
# of every figure and ratio.
#
#   scripts/read-ab.sh                  # ~3 minutes
#   ROUNDS=1 DURATION=3s BASE=main scripts/read-ab.sh
#   PERF=1 ...   also records perf profiles of this tree's agent
#   SUMMARY_ONLY=1 scripts/read-ab.sh   # the last run's table again
set -euo pipefail
# shellcheck source=measure-lib.sh
. "$(dirname "$0")/measure-lib.sh"
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5s}
SUT_CORE=${SUT_CORE:-1}
GEN_CORE=${GEN_CORE:-0}
BASE=${BASE:-main}
work=.cache/read-ab

summary() {
  echo "# medians (min-max) over $ROUNDS rounds"
  awk "$figures_awk"'
    END {
      for (n in names) printf "%-24s %s /s\n", n, stat(n, "", 1) | "sort"
      close("sort")
      # G6 compares counts a second with Redis GET -P 16 keys a second.
      split("G5:new-get1:redis-GET G5:base-get1:redis-GET floor:fasthttp-get1:redis-GET G6:new-get16-json:redis-GET-P16 G6:new-get16-protobuf:redis-GET-P16 G6:base-get16-json:redis-GET-P16 G6:base-get16-protobuf:redis-GET-P16 fh:new-get1:fasthttp-get1 fh:base-get1:fasthttp-get1 new:new-get1:base-get1 new:new-get16-json:base-get16-json new:new-get16-protobuf:base-get16-protobuf", rows, " ")
      for (i = 1; i in rows; i++) { split(rows[i], f, ":"); printf "%-6s %-20s / %-16s %s\n", f[1], f[2], f[3], stat(f[2], f[3], 1) }
      # Per request, above the trivial handler: a get16 request against 16 trivial answers.
      printf "%-6s %-20s / %-16s %s\n", "fh", "new-get16-json", "fasthttp-get1x16", stat("new-get16-json", "fasthttp-get1", 16)
    }' "$work/figures.txt"
}
if [ "${SUMMARY_ONLY:-}" = 1 ]; then summary; exit 0; fi # of the last run
rm -rf "$work" && mkdir -p "$work/bin" "$work/base"
build floor loadgen edge-agent
build_base_agent "$BASE"

trap stop_all EXIT
sut redis-server --port 16379 --bind 127.0.0.1 --save '' --appendonly no >"$work/redis.log" 2>&1
sut "$work/bin/floor" -addr 127.0.0.1:18293 -mode fasthttp -lifetime 1h
sut "$work/bin/edge-agent" --data "$work/data-new" --http 127.0.0.1:18280 --log-level warn
newpid=$!
sut "$work/bin/edge-agent-base" --data "$work/data-base" --http 127.0.0.1:18281 --log-level warn
for a in 18280 18281 18293; do
  for _ in $(seq 100); do curl -fsS "127.0.0.1:$a/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
done
for _ in $(seq 50); do redis-cli -p 16379 ping >/dev/null 2>&1 && break; sleep 0.1; done
redis-cli -p 16379 set key:__rand_int__ 1 >/dev/null
# Rows to read: increments of the items the reads pick, then a flush and
# the in-process rollup.
for a in 18280 18281; do
  taskset -c "$GEN_CORE" "$work/bin/loadgen" -addr "127.0.0.1:$a" -mode incr100 -duration 3s -conns 32 >/dev/null
done
sleep 2

out="$work/figures.txt"
: >"$out"
rb() { # name pipeline requests
  local r v
  r=$(taskset -c "$GEN_CORE" timeout 120 redis-benchmark -h 127.0.0.1 -p 16379 -t get -P "$2" -n "$3" -c 32 -q 2>/dev/null || true)
  v=$(redis_rps <<<"$r")
  echo "$round $1 $v" | tee -a "$out"
}
for round in $(seq "$ROUNDS"); do
  echo "# round $round: $(uptime)" | tee -a "$out"
  rb redis-GET 1 200000
  rb redis-GET-P16 16 2000000
  figure fasthttp-get1 18293 -mode get1
  # The two agents alternate which goes first.
  order="base:18281 new:18280"
  [ $((round % 2)) = 0 ] && order="new:18280 base:18281"
  for fig in "get1:-mode get1" "get16-json:-mode get16" "get16-protobuf:-mode get16 -body protobuf"; do
    for ag in $order; do
      # shellcheck disable=SC2086 # the figure's loadgen flags
      figure "${ag%%:*}-${fig%%:*}" "${ag##*:}" ${fig#*:}
    done
  done
done
if [ "${PERF:-}" = 1 ]; then
  for m in get1 get16; do
    taskset -c "$GEN_CORE" "$work/bin/loadgen" -addr 127.0.0.1:18280 -mode "$m" -duration 8s -conns 32 >/dev/null &
    lgpid=$!
    sleep 1
    perf record -g -o "$work/perf-$m.data" -p "$newpid" -- sleep 5 >/dev/null 2>&1 || true
    wait "$lgpid"
    perf report -i "$work/perf-$m.data" --no-children --percent-limit 1 --stdio 2>/dev/null | grep -E '^ +[0-9]' >"$work/perf-$m-self.txt" || true
    perf report -i "$work/perf-$m.data" --children --percent-limit 2 --stdio 2>/dev/null | grep -E '^ +[0-9]' >"$work/perf-$m-children.txt" || true
    echo "# perf $m: $work/perf-$m-self.txt, $work/perf-$m-children.txt"
  done
fi
summary
