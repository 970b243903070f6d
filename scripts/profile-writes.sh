#!/usr/bin/env bash
# Where the CPU time of a write goes in a standalone edge agent, beside the
# peers' CPU time per request, measured in one run: the proof docs/design.md asks
# for when G1 or G2 is not met ("a profile and the floor").
#
# Every server is pinned to core SUT_CORE (1), every generator to GEN_CORE
# (0). For each server this prints its CPU time per request (utime + stime
# of the process over the load ÷ requests answered): on one core a server
# cannot answer more than 1 s ÷ that per second, whatever else runs, so the
# ratio of two such figures bounds a G ratio from above and is far less
# sensitive to other load on the machine than requests/s.
#
#   redis      redis-server under redis-benchmark INCR (50 clients; -P 64)
#   fasthttp   tools/floor -mode fasthttp: a trivial handler
#   agent      edge-agent --durability fsync (default) and none, loadgen
#              -mode incr1, incr100 and incr100 -body protobuf
#
# With perf(1) installed (and allowed: perf_event_paranoid ≤ 1 or root),
# each agent load is also sampled (perf record -g) and its samples sorted
# into the parts of a write by the first matching frame of each stack
# (rollup in process, embedded broker, log fdatasync, log, counters,
# decoding, handler, HTTP server and socket syscalls, GC and allocation,
# scheduler, other), printed as the part's share of the CPU per request (µs,
# and % of the samples). Output: key=value lines.
#
#   ./scripts/profile-writes.sh              # ~2 minutes
#   DURATION=10s ./scripts/profile-writes.sh
set -euo pipefail
# shellcheck source=measure-lib.sh
. "$(dirname "$0")/measure-lib.sh"
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
DURATION=${DURATION:-6s}
SUT_CORE=${SUT_CORE:-1}
GEN_CORE=${GEN_CORE:-0}
CONNS=${CONNS:-32}
PORT=${PORT:-18095}
REDIS_PORT=${REDIS_PORT:-16379}
REDIS_N=${REDIS_N:-300000}
work=.cache/profile-writes
mkdir -p "$work/bin"
build edge-agent loadgen benchreport floor
HAS_PERF=0
if command -v perf >/dev/null && perf record -o /dev/null -- true >/dev/null 2>&1; then HAS_PERF=1; fi
echo "loadavg_before=$(cut -d' ' -f1 /proc/loadavg)"

trap stop_all EXIT
tck=$(getconf CLK_TCK)
per_req() { awk -v a="$1" -v b="$2" -v n="$3" -v t="$tck" 'BEGIN { if (n > 0) printf "%.1f", (b - a) * 1e6 / t / n; else print "nan" }'; }
lg() { taskset -c "$GEN_CORE" "$work/bin/loadgen" -addr "127.0.0.1:$PORT" -duration "$DURATION" -conns "$CONNS" "$@"; }

# Redis: CPU per INCR, unpipelined and at -P 64.
sut redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no --daemonize no --logfile /dev/null
rpid=$!
for _ in $(seq 100); do redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
for p in 1 64; do
	n=$REDIS_N
	[ "$p" = 64 ] && n=$((REDIS_N * 10))
	t0=$(cpu_ticks "$rpid")
	rps=$(taskset -c "$GEN_CORE" redis-benchmark -h 127.0.0.1 -p "$REDIS_PORT" -t incr -P "$p" -n "$n" -q 2>/dev/null | redis_rps)
	t1=$(cpu_ticks "$rpid")
	echo "redis_incr_p${p}_per_s=$rps"
	echo "redis_incr_p${p}_cpu_us=$(per_req "$t0" "$t1" "$n")"
done
kill "$rpid"
wait "$rpid" 2>/dev/null || true

# fasthttp with a trivial handler: what the server path alone costs.
sut "$work/bin/floor" -addr "127.0.0.1:$PORT" -mode fasthttp -lifetime 1h >/dev/null 2>&1
fpid=$!
wait_http "$PORT" /
# The same handler sent the batched bodies: what reading a request of 100
# increments costs the server before any of its work.
for load in incr1 incr100 incr100pb; do
	args=(-mode "$load")
	[ "$load" = incr100pb ] && args=(-mode incr100 -body protobuf)
	t0=$(cpu_ticks "$fpid")
	r=$(lg "${args[@]}")
	t1=$(cpu_ticks "$fpid")
	echo "fasthttp_${load}_per_s=$(json "$r" requests_per_s)"
	echo "fasthttp_${load}_cpu_us=$(per_req "$t0" "$t1" "$(json "$r" requests)")"
done
kill "$fpid"
wait "$fpid" 2>/dev/null || true

# The parts of a request, from perf's stacks: each sample goes to the first
# rule (in this order) that some frame of its stack matches, i.e. to the part
# that owns the work (an allocation in the rollup counts as the rollup's).
classify() {
	perf script -i "$1" -F ip,sym 2>/dev/null | awk -v cpu="$2" '
	function part(s) {
		if (s ~ /rollupd\.|\/rollup\.|natsjs\.\(\*Consumer\)|natsjs\.\(\*RowPusher\)|region\.\(\*statsCache\)|region\.\(\*Agent\)\.(onRows|applyPush)/) return "rollup"
		if (s ~ /nats-server|nats-io\/nats\.go|nats\.\(\*Conn\)|server\.\(\*(client|fileStore|stream|Server|msgBlock|consumer)\)/) return "broker"
		if (s ~ /wal\./ && s ~ /[Ff]datasync|[Ff]sync/) return "log_fdatasync"
		if (s ~ /region\.\(\*Agent\)\.addIncrements|region\.\(\*Counters\)/) return "counters" # runs inside the log'"'"'s AppendApply
		if (s ~ /wal\./) return "log"
		if (s ~ /region\./) return "agent_other"
		if (s ~ /httpapi\.decode/) return "decode"
		if (s ~ /httpapi\.\(\*api\)/) return "handler"
		if (s ~ /fasthttp|httpapi\./) return "http_server"
		if (s ~ /gcBgMarkWorker|gcDrain|bgsweep|bgscavenge|gcMark|mallocgc/) return "gc_alloc"
		if (s ~ /runtime\.(schedule|findRunnable|netpoll|park_m|mcall|goready|stopm|startm|handoffp|exitsyscall|entersyscall|sysmon)/) return "scheduler"
		return "other"
	}
	function done() { if (st != "") { c[part(st)]++; tot++ } st = "" }
	/^$/ { done(); next }
	{ st = st "|" $0 }
	END {
		done()
		for (k in c) printf "%s %.2f %.1f\n", k, cpu * c[k] / tot, 100 * c[k] / tot
	}'
}

for durab in fsync none; do
	rm -rf "$work/data"
	sut "$work/bin/edge-agent" --data "$work/data" --http "127.0.0.1:$PORT" --log-level warn --durability "$durab" \
		>"$work/agent.out" 2>"$work/agent.err"
	apid=$!
	wait_http "$PORT" /readyz
	for load in incr1 incr100 incr100pb; do
		args=(-mode "$load")
		[ "$load" = incr100pb ] && args=(-mode incr100 -body protobuf)
		key="agent_${durab}_${load}"
		hz=999
		prec=()
		if [ "$HAS_PERF" = 1 ]; then
			perf record -e cpu-clock -F "$hz" -g -p "$apid" -o "$work/$key.perf" >/dev/null 2>&1 &
			prec=($!)
			sleep 0.2
		fi
		t0=$(cpu_ticks "$apid")
		r=$(lg "${args[@]}")
		t1=$(cpu_ticks "$apid")
		[ "${#prec[@]}" = 1 ] && { kill -INT "${prec[0]}"; wait "${prec[0]}" 2>/dev/null || true; }
		n=$(json "$r" requests)
		echo "${key}_per_s=$(json "$r" requests_per_s)"
		echo "${key}_units_per_s=$(json "$r" units_per_s)"
		echo "${key}_errors=$(json "$r" errors)"
		cpu=$(per_req "$t0" "$t1" "$n")
		echo "${key}_cpu_us=$cpu"
		if [ "$HAS_PERF" = 1 ]; then # the CPU per request split by the parts' shares of the samples
			classify "$work/$key.perf" "$cpu" | sort | while read -r part us pct; do echo "${key}_part_${part}_us=$us (${pct}%)"; done
		fi
	done
	curl -fsS "127.0.0.1:$PORT/metrics" | awk -v k="agent_${durab}" '
		$1 ~ /^edgecount_agent_log_fsync_seconds_count/ { printf "%s_fsyncs=%.0f\n", k, $2 }
		$1 ~ /^edgecount_agent_log_fsync_seconds_sum/ { printf "%s_fsync_seconds=%.3f\n", k, $2 }
		$1 ~ /^edgecount_rollup_rows_written_total/ { printf "%s_rollup_rows=%.0f\n", k, $2 }'
	kill "$apid"
	wait "$apid" 2>/dev/null || true
done
echo "loadavg_after=$(cut -d' ' -f1 /proc/loadavg)"
