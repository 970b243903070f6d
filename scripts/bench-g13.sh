#!/usr/bin/env bash
# Measures docs/design.md's G13 in one run: durable ingest (durability fsync, the
# default) ÷ the same ingest with durability none, for batches of 100
# increments a request and for single increments, and the ack p99 the log
# adds ÷ the p99 of a bare write+fsync of the same size.
#
# Two standalone edge agents run side by side, both pinned to core
# $SUT_CORE, one with --durability fsync and one with none; loadgen (core
# $GEN_CORE) drives them in turn, same shape, same duration, fsync first
# then none, for each concurrency. G13 is stated at $G13_CONNS concurrent
# keep-alive connections (a regional load balancer keeps a pool of upstream
# connections per agent; 128 is e.g. 8 balancer threads × 16), the other
# concurrencies are printed as context: group commit amortizes one fsync
# over the requests in flight, so the ratio grows with them.
#
# Output: key=value lines (bench.sh takes medians of them over runs):
#   g13_conns, g13_{batched,single}_{durable,none}_per_s (increments/s),
#   g13_{batched,single}_ratio, g13_{batched,single}_{durable,none}_p99_us,
#   the same per concurrency as g13_cN_..., plus g13_cN_..._requests_per_fsync
#   and g13_cN_..._{durable,none}_cpu_us_per_request (the agent's CPU time
#   per request, less sensitive to other load than req/s),
#   g13_ack_added_p99_us, g13_bare_fsync_p99_us, g13_p99_ratio,
#   g13_loadavg_{before,after}.
#
#   ./scripts/bench-g13.sh                 # ~2.5 minutes
#   DURATION=5s CONNS="128" ./scripts/bench-g13.sh
set -euo pipefail
# shellcheck source=measure-lib.sh
. "$(dirname "$0")/measure-lib.sh"
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
DURATION=${DURATION:-10s}
SUT_CORE=${SUT_CORE:-1}
GEN_CORE=${GEN_CORE:-0}
G13_CONNS=${G13_CONNS:-128}
CONNS=${CONNS:-"32 128 512"}
case " $CONNS " in *" $G13_CONNS "*) ;; *) CONNS="$CONNS $G13_CONNS" ;; esac
work=.cache/bench-g13
mkdir -p "$work/bin"
build edge-agent loadgen benchreport
echo "g13_loadavg_before=$(cut -d' ' -f1 /proc/loadavg)"

trap stop_all EXIT
port_fsync=18091 port_none=18092
for mode in fsync none; do
  rm -rf "$work/data-$mode"
  port=port_$mode
  sut "$work/bin/edge-agent" --data "$work/data-$mode" --http "127.0.0.1:${!port}" \
    --log-level warn --durability "$mode" >"$work/agent-$mode.out" 2>"$work/agent-$mode.err"
done
for port in $port_fsync $port_none; do
  wait_http "$port" /readyz
done

lg() { taskset -c "$GEN_CORE" "$work/bin/loadgen" -addr "127.0.0.1:$1" -mode "$2" -duration "$DURATION" -conns "$3"; }
# Two figures less sensitive to other load on the machine than req/s: the
# agent's CPU time (cpu_ticks) and the log's fsyncs (intake and outbox;
# the outbox adds ~2 a second) during a run.
fsyncs() { curl -fsS "127.0.0.1:$1/metrics" | awk '/^edgecount_agent_log_fsync_seconds_count/ {print $2}'; }
per() { awk -v a="$1" -v b="$2" -v s="${3:-1}" 'BEGIN { if (b > 0) printf "%.1f", s * a / b; else print "nan" }'; }
tick_us=$((1000000 / $(getconf CLK_TCK)))
for c in $CONNS; do
  for shape in batched single; do
    mode=incr100
    [ "$shape" = single ] && mode=incr1
    c0=$(cpu_ticks "${pids[0]}") f0=$(fsyncs $port_fsync)
    d=$(lg $port_fsync $mode "$c")
    c1=$(cpu_ticks "${pids[0]}") f1=$(fsyncs $port_fsync)
    sleep 1 # the flush and rollup of that load end before the peer's run
    n0=$(cpu_ticks "${pids[1]}")
    n=$(lg $port_none $mode "$c")
    n1=$(cpu_ticks "${pids[1]}")
    sleep 1
    for v in "$d" "$n"; do
      if [ "$(json "$v" errors)" != 0 ]; then echo "loadgen reported errors: $v" >&2; exit 1; fi
    done
    dps=$(json "$d" units_per_s | cut -d. -f1) nps=$(json "$n" units_per_s | cut -d. -f1)
    echo "g13_c${c}_${shape}_durable_per_s=$dps"
    echo "g13_c${c}_${shape}_none_per_s=$nps"
    echo "g13_c${c}_${shape}_ratio=$(ratio "$dps" "$nps")"
    echo "g13_c${c}_${shape}_durable_p99_us=$(json "$d" p99_us)"
    echo "g13_c${c}_${shape}_none_p99_us=$(json "$n" p99_us)"
    echo "g13_c${c}_${shape}_requests_per_fsync=$(per "$(json "$d" requests)" $((f1 - f0)))"
    echo "g13_c${c}_${shape}_durable_cpu_us_per_request=$(per $((c1 - c0)) "$(json "$d" requests)" $tick_us)"
    echo "g13_c${c}_${shape}_none_cpu_us_per_request=$(per $((n1 - n0)) "$(json "$n" requests)" $tick_us)"
    if [ "$c" = "$G13_CONNS" ]; then
      echo "g13_${shape}_durable_per_s=$dps"
      echo "g13_${shape}_none_per_s=$nps"
      echo "g13_${shape}_ratio=$(ratio "$dps" "$nps")"
      echo "g13_${shape}_durable_p99_us=$(json "$d" p99_us)"
      echo "g13_${shape}_none_p99_us=$(json "$n" p99_us)"
    fi
  done
done
echo "g13_conns=$G13_CONNS"
stop_all

# The latency bound: one client, single increments alternately to a
# durable and a memory-only node, and a bare write+fsync of the log
# record's size on the same disk in between (cmd/edge-agent's
# BenchmarkAckLatency).
ack=$(taskset -c "$SUT_CORE" go test ./cmd/edge-agent/ -run '^$' -bench 'AckLatency' -benchtime 2000x -count 1)
metricOf() { awk -v m="$2" '{for (i = 2; i <= NF; i++) if ($i == m) {print $(i-1); exit}}' <<<"$1"; }
echo "g13_ack_added_p99_us=$(metricOf "$ack" added-p99-µs)"
echo "g13_bare_fsync_p99_us=$(metricOf "$ack" bare-fsync-p99-µs)"
echo "g13_p99_ratio=$(metricOf "$ack" added/bare)"
echo "g13_loadavg_after=$(cut -d' ' -f1 /proc/loadavg)"
