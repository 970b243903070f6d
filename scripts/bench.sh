#!/usr/bin/env bash
# Measures edgecount against its peers on this machine and writes
# BENCHMARKS.md: every figure RUNS times (default 3), each ratio taken
# within one run (the peer measured in the same run), then the median and
# the spread (min–max) over the runs.
#
#   G1, G2, G5, G6  the HTTP API (standalone edge-agent, tools/loadgen; G1 and G6
#                   also with -body protobuf once loadgen has it) ÷ Redis
#                   (a private redis-server, redis-benchmark; G1 and G2 also
#                   against a Redis with appendfsync always, like for like
#                   with the agent's default durability, and the agent at
#                   --durability none against Redis in memory); G5 and G6 also
#                   driven by wrk (scripts/wrk/counts.lua); ÷ the agent's own
#                   server path with a handler that does no work (the bound
#                   of G5 and G6: tools/floor -mode server); ÷ the floor
#                   (tools/floor -mode fixed: a bare read/write loop answering a fixed
#                   response, the most any Go HTTP server reaches here)
#   G3, G4          counter micro-benchmarks (go test -bench ./region/)
#   G10             increments per row written, Zipf 1.0 over 10^6 items,
#                   1 s flush (agent metrics; the standalone embedded store)
#   G13             scripts/bench-g13.sh, once per run, medians of its keys
#
# The system under test (edge-agent, redis-server, floor) is pinned to core
# SUT_CORE (1), the load generators to GEN_CORE (0): on this 2-core VM a
# cross-core wake-up costs ~50 µs, so unpinned figures mostly measure the
# scheduler. Every load is bounded in time and stays on 127.0.0.1; the
# servers listen on private ports (AGENT_PORT 18080, FLOOR_PORT 18090,
# REDIS_PORT 16379) and are stopped at the end.
#
# Each run's figures go to .cache/bench/runs/N.kv (key=value lines); at the
# end tools/benchreport collects them and the runs' metadata into one JSON
# file, .cache/bench/runs/results.json, and renders the report from it.
#
#   ./scripts/bench.sh           # 3 runs, 10 s per load: ~10 minutes (+ bench-g13.sh), writes BENCHMARKS.md
#   ./scripts/bench.sh -quick    # 1 run, 2 s per load (G13 at one concurrency): ~1 minute, writes .cache/bench/BENCHMARKS.quick.md
#   ./scripts/bench.sh -report   # rewrite the last runs' file from .cache/bench/runs, measuring nothing
#   RUNS=5 DURATION=20s ./scripts/bench.sh
set -euo pipefail
# shellcheck source=measure-lib.sh
. "$(dirname "$0")/measure-lib.sh"
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
QUICK=0
REPORT_ONLY=0
case "${1:-}" in
-quick | --quick) QUICK=1 ;;
-report) REPORT_ONLY=1 ;; # rewrite the file from the last runs in .cache/bench/runs, measuring nothing
"") ;;
*) echo "usage: $0 [-quick | -report]" >&2; exit 2 ;;
esac
if [ "$QUICK" = 1 ]; then
	RUNS=${RUNS:-1} DURATION=${DURATION:-2s} BENCHTIME=${BENCHTIME:-200ms} REDIS_N=${REDIS_N:-50000}
	OUT=${OUT:-.cache/bench/BENCHMARKS.quick.md}
else
	RUNS=${RUNS:-3} DURATION=${DURATION:-10s} BENCHTIME=${BENCHTIME:-1s} REDIS_N=${REDIS_N:-300000}
	OUT=${OUT:-BENCHMARKS.md}
fi
export QUICK RUNS DURATION
SUT_CORE=${SUT_CORE:-1}
GEN_CORE=${GEN_CORE:-0}
AGENT_PORT=${AGENT_PORT:-18080}
FLOOR_PORT=${FLOOR_PORT:-18090}
REDIS_PORT=${REDIS_PORT:-16379}
CONNS=${CONNS:-32}
work=.cache/bench
results=$work/runs/results.json
mkdir -p "$work/bin" "$work/runs"
# The report's renderer, and the reader of loadgen's JSON reports.
build benchreport
if [ "$REPORT_ONLY" = 0 ]; then

listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
rm -f "$work"/runs/*.kv "$work"/runs/*.json "$work/runs/meta"
for p in "$AGENT_PORT" "$FLOOR_PORT" "$REDIS_PORT"; do
	if listening "$p"; then
		echo "bench.sh: 127.0.0.1:$p is in use (someone else's server?); set AGENT_PORT, FLOOR_PORT or REDIS_PORT" >&2
		exit 1
	fi
done

# The tree the binaries are built from (a later edit must not be credited).
commit="$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!BENCHMARKS.md' 2>/dev/null || echo " with local changes")"
build edge-agent loadgen floor
go test -c -o "$work/bin/region.test" ./region/
# Binary batches when loadgen has them (-body protobuf, tools/loadgen/wire.go).
HAS_BODY=0
lg_help=$("$work/bin/loadgen" -h 2>&1 || true) # not a pipe into grep -q: pipefail would see loadgen's SIGPIPE
[[ $lg_help == *-body* ]] && HAS_BODY=1
./scripts/redis.sh install >/dev/null
# wrk (Debian's): a C client with one event loop, like redis-benchmark,
# for G5 and G6 beside loadgen.
if ! command -v wrk >/dev/null; then
	apt-cache show wrk >/dev/null 2>&1 || apt-get -o DPkg::Lock::Timeout=300 update -q >/dev/null
	DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -q --no-install-recommends wrk >/dev/null
fi
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
started=$(date -u +%Y-%m-%dT%H:%M:%SZ)

# Servers this script started (pids, sut) are stopped on exit.
trap stop_all EXIT
# stop_pid PID: stops one of them.
stop_pid() {
	kill -TERM "$1" 2>/dev/null || true
	wait "$1" 2>/dev/null || true
	local keep=() p
	for p in "${pids[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
	pids=("${keep[@]}")
}

lg() { # loadgen on the generator core: port, then loadgen flags
	local port=$1
	shift
	taskset -c "$GEN_CORE" "$work/bin/loadgen" -addr "127.0.0.1:$port" -duration "$DURATION" -conns "$CONNS" "$@"
}
# wrk_rps PORT MODE: requests/s of wrk (one thread, CONNS connections) on
# the generator core reading counts as loadgen's MODE (get1, get16, or
# get16pb: get16 -body protobuf) does, with scripts/wrk/counts.lua; "nan"
# when any answer was not a 2xx or a socket failed.
wrk_rps() {
	local out ids=1 body=json
	[ "$2" != get1 ] && ids=16
	[ "$2" = get16pb ] && body=protobuf
	out=$(IDS=$ids BODY=$body taskset -c "$GEN_CORE" wrk -t 1 -c "$CONNS" -d "$DURATION" -s scripts/wrk/counts.lua "http://127.0.0.1:$1")
	if grep -qE 'Non-2xx|Socket errors' <<<"$out"; then
		echo "bench.sh: wrk $2 on :$1 saw errors: $(grep -E 'Non-2xx|Socket errors' <<<"$out")" >&2
		echo nan
		return
	fi
	awk '/^Requests\/sec:/ {print $2}' <<<"$out"
}
# zipf_per_row RATE: the expected increments per row written when every
# increment of a 1 s flush interval to an item ends in one write of its
# rows, at RATE increments/s drawn Zipf 1.0 over 10^6 items: RATE over the
# expected distinct items a second, sum_i (1 - e^(-RATE p_i)), halved (each
# sum writes a global and a regional row).
zipf_per_row() {
	awk -v r="$1" 'BEGIN {
		n = 1000000; for (i = 1; i <= n; i++) h += 1 / i
		for (i = 1; i <= n; i++) { x = r / (i * h); d += (x < 1e-6 ? x : 1 - exp(-x)) }
		printf "%.2f", (d > 0 ? r / d / 2 : 0)
	}'
}
rb() { # redis-benchmark requests/s for: test, pipeline, requests[, then more redis-benchmark flags]
	taskset -c "$GEN_CORE" redis-benchmark -h 127.0.0.1 -p "$REDIS_PORT" -t "$1" -P "$2" -n "$3" "${@:4}" -q 2>/dev/null | redis_rps
}
metric() { # sum of a Prometheus counter on the agent
	curl -fsS "127.0.0.1:$AGENT_PORT/metrics" | awk -v m="$1" '$1 == m || index($1, m "{") == 1 {s += $2} END {printf "%.0f", s}'
}
# ns OUTPUT NAME: the median ns/op of the benchmark lines of OUTPUT whose
# name matches NAME (a go test -count N output holds N of each).
ns() { awk -v n="$2" '$1 ~ n {print $3}' <<<"$1" | sort -g | awk '{v[NR] = $1} END { if (NR) print v[int((NR + 1) / 2)] }'; }
kv() { echo "$1=$2" >>"$kvfile"; }
# µs of a process's CPU time (cpu_ticks) per unit.
TCK=$(getconf CLK_TCK)
cpu_us() { awk -v a="$1" -v b="$2" -v n="$3" -v t="$TCK" 'BEGIN { if (n > 0) printf "%.2f", (b - a) * 1e6 / t / n; else print "nan" }'; }
# start_agent ARGS...: a standalone edge-agent on AGENT_PORT, pinned to
# SUT_CORE, on a fresh data directory, with ARGS; its pid in apid.
start_agent() {
	rm -rf "$work/data"
	sut "$work/bin/edge-agent" --data "$work/data" --http "127.0.0.1:$AGENT_PORT" --log-level warn "$@" \
		>"$work/agent.out" 2>"$work/agent.err"
	apid=$!
	wait_http "$AGENT_PORT" /readyz
}
# agent_load KEY LOADGEN-ARGS...: drives the agent with loadgen and
# records KEY_cpu_us (the agent's CPU per request), KEY_ups, KEY_rps,
# KEY_p50_us and KEY_errors; the report stays in r and joins the run's.
agent_load() {
	local key=$1 t0
	shift
	t0=$(cpu_ticks "$apid")
	r=$(lg "$AGENT_PORT" "$@")
	kv "${key}_cpu_us" "$(cpu_us "$t0" "$(cpu_ticks "$apid")" "$(json "$r" requests)")"
	echo "$r" >>"$work/runs/$run.json"
	kv "${key}_ups" "$(json "$r" units_per_s)"
	kv "${key}_rps" "$(json "$r" requests_per_s)"
	kv "${key}_p50_us" "$(json "$r" p50_us)"
	kv "${key}_errors" "$(json "$r" errors)"
}
# start_redis ARGS...: a redis-server on REDIS_PORT, pinned to SUT_CORE,
# without snapshots, with ARGS; its pid in rpid, once it answers PING
# (or 10 s passed).
start_redis() {
	sut redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' "$@" --daemonize no --logfile "$PWD/$work/redis.log"
	rpid=$!
	for _ in $(seq 100); do redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
}
# redis_load KEY PER TEST PIPELINE REQUESTS [FLAGS...]: runs rb on the
# Redis (rpid) and records KEY (requests/s) and KEY_cpu_us (Redis's CPU
# per PER requests).
redis_load() {
	local key=$1 per=$2 t0
	shift 2
	t0=$(cpu_ticks "$rpid")
	kv "$key" "$(rb "$@")"
	kv "${key}_cpu_us" "$(cpu_us "$t0" "$(cpu_ticks "$rpid")" $(($3 / per)))"
}
# floor_load KEY LOADGEN-ARGS...: drives the floor server (fpid) on
# FLOOR_PORT with loadgen and records KEY_rps and KEY_cpu_us (the
# server's CPU per request); the report stays in r.
floor_load() {
	local key=$1 t0
	shift
	t0=$(cpu_ticks "$fpid")
	r=$(lg "$FLOOR_PORT" "$@")
	kv "${key}_rps" "$(json "$r" requests_per_s)"
	kv "${key}_cpu_us" "$(cpu_us "$t0" "$(cpu_ticks "$fpid")" "$(json "$r" requests)")"
}

for run in $(seq "$RUNS"); do
	kvfile=$work/runs/$run.kv
	echo "== run $run of $RUNS ($DURATION a load; load average $(cut -d' ' -f1-3 /proc/loadavg))"

	echo "-- $(date -u +%T) redis-server (core $SUT_CORE) and redis-benchmark (core $GEN_CORE), 50 clients"
	start_redis --appendonly no
	redis_load redis_incr1 1 incr 1 "$REDIS_N"
	redis_load redis_incr64 1 incr 64 $((REDIS_N * 12))
	# Without -r redis-benchmark's INCR adds to one key; loadgen spreads its
	# increments over 10^4 ids. The same keyspace, for context (G1 keeps the
	# figure above, docs/design.md's peer).
	kv redis_incr64_r10k "$(rb incr 64 $((REDIS_N * 12)) -r 10000)"
	redis_load redis_get1 1 get 1 "$REDIS_N"
	# CPU per 16 keys (one pipelined round of -P 16), as the agent's per
	# 16-id read.
	redis_load redis_get16 16 get 16 $((REDIS_N * 10))
	# Likewise GET reads one key; over the 10^4 keys G6 reads (set first),
	# for context.
	rb set 16 $((REDIS_N * 2)) -r 10000 >/dev/null
	redis_load redis_get1_r10k 1 get 1 "$REDIS_N" -r 10000
	redis_load redis_get16_r10k 16 get 16 $((REDIS_N * 10)) -r 10000
	stop_pid "$rpid"

	# The same INCR load on a Redis as durable as the agent's default: an
	# append-only file fsynced before each reply (appendfsync always, one
	# fsync per event-loop pass over all clients: Redis's group commit), on
	# the same disk as the agent's log. G1 and G2 compare like with like:
	# this against the agent at --durability fsync, the Redis above against
	# the agent at --durability none.
	echo "-- $(date -u +%T) redis-server with appendonly yes, appendfsync always (core $SUT_CORE)"
	rm -rf "$work/redis-aof" && mkdir -p "$work/redis-aof"
	start_redis --appendonly yes --appendfsync always --dir "$PWD/$work/redis-aof"
	kv redis_aof_incr1 "$(rb incr 1 "$REDIS_N")"
	kv redis_aof_incr64 "$(rb incr 64 $((REDIS_N * 4)))"
	stop_pid "$rpid"
	rm -rf "$work/redis-aof"

	echo "-- $(date -u +%T) floor (tools/floor -mode fixed, core $SUT_CORE) driven by loadgen (core $GEN_CORE)"
	sut "$work/bin/floor" -addr "127.0.0.1:$FLOOR_PORT" -mode fixed -lifetime 10m >/dev/null
	fpid=$!
	wait_http "$FLOOR_PORT" /
	for mode in get1 get16 incr100; do
		floor_load "floor_$mode" -mode "$mode"
		kv "floor_${mode}_p50_us" "$(json "$r" p50_us)"
	done
	# HTTP/1.1 pipelining: 16 single reads written before their answers
	# are read, on every connection.
	kv floor_get1p16_rps "$(json "$(lg "$FLOOR_PORT" -mode get1 -pipeline 16)" requests_per_s)"
	stop_pid "$fpid"

	echo "-- $(date -u +%T) fasthttp with a trivial handler (tools/floor -mode fasthttp, core $SUT_CORE): the most a server on fasthttp reaches"
	sut "$work/bin/floor" -addr "127.0.0.1:$FLOOR_PORT" -mode fasthttp -lifetime 1h >/dev/null 2>&1
	fpid=$!
	wait_http "$FLOOR_PORT" /
	for mode in get1 get16; do
		floor_load "fasthttp_$mode" -mode "$mode"
	done
	stop_pid "$fpid"

	# The agent's own server path (httpserver.Server: fasthttp, the net/http
	# adapter, the yield after each answer) with a handler that does no
	# work, answering bytes of the size the agent answers (one count row;
	# 16 rows, ~3 KB, for the 16-id load): what a read that cost nothing
	# would reach, the bound of G5 and G6 on this path. Then the same path
	# with the least work a read can do (-mode lookup: the ids cut from the
	# request, looked up in a Go map of answers encoded beforehand, copied).
	for fmode in server lookup; do
		echo "-- $(date -u +%T) httpserver.Server, $fmode handler (tools/floor -mode $fmode, core $SUT_CORE), by loadgen and wrk"
		for rows in 1 16; do
			mode=get1
			[ "$rows" = 16 ] && mode=get16
			sut "$work/bin/floor" -addr "127.0.0.1:$FLOOR_PORT" -mode "$fmode" -rows "$rows" -lifetime 1h >/dev/null 2>&1
			fpid=$!
			wait_http "$FLOOR_PORT" /
			floor_load "${fmode}_$mode" -mode "$mode"
			kv "${fmode}_${mode}_wrk_rps" "$(wrk_rps "$FLOOR_PORT" "$mode")"
			if [ "$fmode" = lookup ] && [ "$rows" = 16 ] && [ "$HAS_BODY" = 1 ]; then
				kv lookup_get16pb_wrk_rps "$(wrk_rps "$FLOOR_PORT" get16pb)"
			fi
			stop_pid "$fpid"
		done
	done

	echo "-- $(date -u +%T) edge-agent standalone (core $SUT_CORE), default durability (fsync), driven by loadgen (core $GEN_CORE)"
	start_agent
	for mode in incr100 incr1; do
		agent_load "ec_$mode" -mode "$mode"
	done
	if [ "$HAS_BODY" = 1 ]; then # binary batches: G1's protobuf goal, G6 in protobuf
		agent_load ec_incr100pb -mode incr100 -body protobuf
	fi
	sleep 2 # one flush interval plus the rollup: the reads below hit real rows
	for mode in get1 get16; do
		agent_load "ec_$mode" -mode "$mode"
		kv "ec_${mode}_wrk_rps" "$(wrk_rps "$AGENT_PORT" "$mode")"
	done

	if [ "$HAS_BODY" = 1 ]; then
		agent_load ec_get16pb -mode get16 -body protobuf
		kv ec_get16pb_wrk_rps "$(wrk_rps "$AGENT_PORT" get16pb)"
	fi
	# One client pipelining: 16 single reads written back to back on each
	# connection before their answers are read (answered in order).
	agent_load ec_get1p16 -mode get1 -pipeline 16

	echo "-- $(date -u +%T) G10: increments per row written, Zipf 1.0 over 10^6 items, 1 s flush (exact key draws: -pool 0)"
	inc0=$(metric edgecount_agent_increments_total)
	rows0=$(metric edgecount_rollup_rows_written_total)
	sums0=$(metric edgecount_rollup_partial_sums_total)
	r=$(lg "$AGENT_PORT" -mode incr100 -zipf 1.0 -items 1000000 -pool 0)
	sums=-1
	for _ in $(seq 60); do # until the rollup has applied every flush
		sleep 1
		s=$(metric edgecount_rollup_partial_sums_total)
		[ "$s" = "$sums" ] && break
		sums=$s
	done
	incs=$(($(metric edgecount_agent_increments_total) - inc0))
	rows=$(($(metric edgecount_rollup_rows_written_total) - rows0))
	kv g10_increments "$incs"
	kv g10_rows "$rows"
	kv g10_sums "$(($(metric edgecount_rollup_partial_sums_total) - sums0))"
	kv g10_incr_per_s "$(json "$r" units_per_s)"
	stop_pid "$apid"

	echo "-- $(date -u +%T) edge-agent standalone (core $SUT_CORE), --durability none: G1 and G2 against the Redis without persistence"
	start_agent --durability none
	agent_load ec_none_incr100 -mode incr100
	agent_load ec_none_incr1 -mode incr1
	if [ "$HAS_BODY" = 1 ]; then
		agent_load ec_none_incr100pb -mode incr100 -body protobuf
	fi
	stop_pid "$apid"

	echo "-- $(date -u +%T) counter micro-benchmarks (go test -bench, core $SUT_CORE for -cpu 1)"
	# Three interleaved rounds (counters, private map, sync.Map, then
	# again), each figure their median: a burst of load from elsewhere on
	# this shared machine then moves one round, not G4's ratio of the run.
	# (go test -count repeats each sub-benchmark in a row, so the rounds
	# are three runs of the binary.)
	b1=$(for _ in 1 2 3; do taskset -c "$SUT_CORE" "$work/bin/region.test" -test.run '^$' -test.bench 'HotCounter/atomic$|ColdKeys' -test.cpu 1 -test.benchtime "$BENCHTIME" -test.count 1; done)
	b2=$("$work/bin/region.test" -test.run '^$' -test.bench 'HotCounter/sharded$' -test.cpu 2 -test.benchtime "$BENCHTIME" -test.count 1)
	kv g3_atomic_ns "$(ns "$b1" 'HotCounter/atomic$')"
	kv g3_sharded2_ns "$(ns "$b2" 'HotCounter/sharded-2$')"
	kv g4_counters_ns "$(ns "$b1" 'ColdKeys/counters$')"
	kv g4_private_ns "$(ns "$b1" 'ColdKeys/private-map$')"
	kv g4_syncmap_ns "$(ns "$b1" 'ColdKeys/sync-map$')"

	if [ -x scripts/bench-g13.sh ]; then
		echo "-- $(date -u +%T) G13: scripts/bench-g13.sh"
		g13_env=()
		[ "$QUICK" = 1 ] && g13_env=(CONNS="${G13_CONNS:-128}") # -quick: only the concurrency G13 is stated at
		if out=$(env "${g13_env[@]}" ./scripts/bench-g13.sh); then
			grep -E '^[a-z0-9_]+=[-0-9.e+]+$' <<<"$out" >>"$kvfile" || true
		else
			echo "bench.sh: scripts/bench-g13.sh failed; G13 left out of run $run" >&2
		fi
	else
		echo "-- G13: skipped, scripts/bench-g13.sh is not there yet"
	fi

	# The ratios, each within this run.
	# shellcheck disable=SC1090
	. <(sed -E 's/^([a-z0-9_]+)=(.*)$/\1="\2"/' "$kvfile")
	kv g1 "$(ratio "$ec_incr100_ups" "$redis_incr64")"
	# Like for like in durability (see the durable Redis above).
	kv g1_durable "$(ratio "$ec_incr100_ups" "$redis_aof_incr64")"
	kv g1_memory "$(ratio "$ec_none_incr100_ups" "$redis_incr64")"
	kv g2_durable "$(ratio "$ec_incr1_ups" "$redis_aof_incr1")"
	kv g2_memory "$(ratio "$ec_none_incr1_ups" "$redis_incr1")"
	kv g1_memory_cpu_bound "$(ratio "$redis_incr64_cpu_us" "$(awk -v c="$ec_none_incr100_cpu_us" 'BEGIN{print c / 100}')")"
	kv g2_memory_cpu_bound "$(ratio "$redis_incr1_cpu_us" "$ec_none_incr1_cpu_us")"
	if [ "$HAS_BODY" = 1 ]; then
		kv g1_protobuf_durable "$(ratio "$ec_incr100pb_ups" "$redis_aof_incr64")"
		kv g1_protobuf_memory "$(ratio "$ec_none_incr100pb_ups" "$redis_incr64")"
		kv g1_protobuf_memory_cpu_bound "$(ratio "$redis_incr64_cpu_us" "$(awk -v c="$ec_none_incr100pb_cpu_us" 'BEGIN{print c / 100}')")"
		kv g1_protobuf "$(ratio "$ec_incr100pb_ups" "$redis_incr64")"
		kv g6_protobuf "$(ratio "$ec_get16pb_ups" "$redis_get16")"
		kv ec_get16pb_wrk_ups "$(awk -v r="$ec_get16pb_wrk_rps" 'BEGIN{print 16 * r}')"
		kv g6_protobuf_wrk "$(ratio "$(awk -v r="$ec_get16pb_wrk_rps" 'BEGIN{print 16 * r}')" "$redis_get16")"
		kv g6_lookup_bound_pb_wrk "$(ratio "$(awk -v r="$lookup_get16pb_wrk_rps" 'BEGIN{print 16 * r}')" "$redis_get16")"
		kv g6_pb_of_lookup_wrk "$(ratio "$ec_get16pb_wrk_rps" "$lookup_get16pb_wrk_rps")"
	fi
	kv g2 "$(ratio "$ec_incr1_ups" "$redis_incr1")"
	kv g5 "$(ratio "$ec_get1_ups" "$redis_get1")"
	kv g6 "$(ratio "$ec_get16_ups" "$redis_get16")"
	kv g1_floor "$(ratio "$ec_incr100_rps" "$floor_incr100_rps")"
	kv g2_floor "$(ratio "$ec_incr1_rps" "$floor_get1_rps")"
	kv g5_floor "$(ratio "$ec_get1_rps" "$floor_get1_rps")"
	kv g6_floor "$(ratio "$ec_get16_rps" "$floor_get16_rps")"
	kv floor_get1_vs_redis "$(ratio "$floor_get1_rps" "$redis_get1")"
	# What a server on fasthttp could reach at best, trivial handler, same run.
	kv fasthttp_get1_floor "$(ratio "$fasthttp_get1_rps" "$floor_get1_rps")"
	kv g5_fasthttp_bound "$(ratio "$fasthttp_get1_rps" "$redis_get1")"
	kv g2_fasthttp_bound "$(ratio "$fasthttp_get1_rps" "$redis_incr1")"
	kv g5_of_fasthttp "$(ratio "$ec_get1_rps" "$fasthttp_get1_rps")"
	# The G1/G2 ratios the CPU per request allows (a server saturating its
	# core): Redis's CPU per increment ÷ the agent's, same run.
	kv g2_cpu_bound "$(ratio "$redis_incr1_cpu_us" "$ec_incr1_cpu_us")"
	kv g1_cpu_bound "$(ratio "$redis_incr64_cpu_us" "$(awk -v c="$ec_incr100_cpu_us" 'BEGIN{print c / 100}')")"
	[ "$HAS_BODY" = 1 ] && kv g1_protobuf_cpu_bound "$(ratio "$redis_incr64_cpu_us" "$(awk -v c="$ec_incr100pb_cpu_us" 'BEGIN{print c / 100}')")"
	kv g2_fasthttp_cpu_bound "$(ratio "$redis_incr1_cpu_us" "$fasthttp_get1_cpu_us")"
	# Likewise G5 and G6: Redis's CPU per GET (per 16 keys of GET -P 16) ÷
	# the agent's per read, and ÷ the trivial handler's and the least
	# read's on the agent's server path.
	kv g5_cpu_bound "$(ratio "$redis_get1_cpu_us" "$ec_get1_cpu_us")"
	# The share of its core each used: CPU per request × requests/s.
	kv redis_get1_cpu_frac "$(awk -v c="$redis_get1_cpu_us" -v r="$redis_get1" 'BEGIN{printf "%.2f", c * r / 1e6}')"
	kv ec_get1_cpu_frac "$(awk -v c="$ec_get1_cpu_us" -v r="$ec_get1_rps" 'BEGIN{printf "%.2f", c * r / 1e6}')"
	kv redis_get16_cpu_frac "$(awk -v c="$redis_get16_cpu_us" -v r="$redis_get16" 'BEGIN{printf "%.2f", c * r / 16e6}')"
	kv ec_get16_cpu_frac "$(awk -v c="$ec_get16_cpu_us" -v r="$ec_get16_rps" 'BEGIN{printf "%.2f", c * r / 1e6}')"
	kv g6_cpu_bound "$(ratio "$redis_get16_cpu_us" "$ec_get16_cpu_us")"
	[ "$HAS_BODY" = 1 ] && kv g6_protobuf_cpu_bound "$(ratio "$redis_get16_cpu_us" "$ec_get16pb_cpu_us")"
	kv g5_server_cpu_bound "$(ratio "$redis_get1_cpu_us" "$server_get1_cpu_us")"
	kv g6_server_cpu_bound "$(ratio "$redis_get16_cpu_us" "$server_get16_cpu_us")"
	kv g5_lookup_cpu_bound "$(ratio "$redis_get1_cpu_us" "$lookup_get1_cpu_us")"
	kv g6_lookup_cpu_bound "$(ratio "$redis_get16_cpu_us" "$lookup_get16_cpu_us")"
	# What a bare read/write loop allows (no HTTP at all): the bound of
	# any Go server that reads and writes once a request.
	kv g5_floor_cpu_bound "$(ratio "$redis_get1_cpu_us" "$floor_get1_cpu_us")"
	kv g6_floor_cpu_bound "$(ratio "$redis_get16_cpu_us" "$floor_get16_cpu_us")"
	# The same against Redis reading the 10^4 keys the agent reads (-r
	# 10000) rather than one key over and over.
	kv g5_r10k "$(ratio "$ec_get1_ups" "$redis_get1_r10k")"
	# Pipelined single reads ÷ Redis GET -P 16 (keys/s), ÷ the pipelined
	# floor, and ÷ the agent's own unpipelined single reads.
	kv pipe16_vs_redis "$(ratio "$ec_get1p16_rps" "$redis_get16")"
	kv pipe16_vs_redis_cpu "$(ratio "$(awk -v c="$redis_get16_cpu_us" 'BEGIN{print c / 16}')" "$ec_get1p16_cpu_us")"
	kv pipe16_floor "$(ratio "$ec_get1p16_rps" "$floor_get1p16_rps")"
	kv pipe16_gain "$(ratio "$ec_get1p16_rps" "$ec_get1_rps")"
	kv g5_r10k_cpu_bound "$(ratio "$redis_get1_r10k_cpu_us" "$ec_get1_cpu_us")"
	kv g6_r10k_cpu_bound "$(ratio "$redis_get16_r10k_cpu_us" "$ec_get16_cpu_us")"
	[ "$HAS_BODY" = 1 ] && kv g6_protobuf_r10k_cpu_bound "$(ratio "$redis_get16_r10k_cpu_us" "$ec_get16pb_cpu_us")"
	kv g6_of_fasthttp "$(ratio "$ec_get16_rps" "$fasthttp_get16_rps")"
	# The same goals with wrk as the client, and what the agent's server
	# path with a handler that does nothing reaches (the bound), same run.
	kv ec_get16_wrk_ups "$(awk -v r="$ec_get16_wrk_rps" 'BEGIN{print 16 * r}')"
	kv g5_wrk "$(ratio "$ec_get1_wrk_rps" "$redis_get1")"
	kv g6_wrk "$(ratio "$(awk -v r="$ec_get16_wrk_rps" 'BEGIN{print 16 * r}')" "$redis_get16")"
	for b in server lookup; do # the trivial handler's bound, the least read's
		for c in "" _wrk; do
			b1=${b}_get1${c}_rps b16=${b}_get16${c}_rps e1=ec_get1${c}_rps e16=ec_get16${c}_rps
			kv "${b}_get16${c}_ups" "$(awk -v r="${!b16}" 'BEGIN{print 16 * r}')"
			kv "g5_${b}_bound${c}" "$(ratio "${!b1}" "$redis_get1")"
			kv "g6_${b}_bound${c}" "$(ratio "$(awk -v r="${!b16}" 'BEGIN{print 16 * r}')" "$redis_get16")"
			kv "g5_of_${b}${c}" "$(ratio "${!e1}" "${!b1}")"
			kv "g6_of_${b}${c}" "$(ratio "${!e16}" "${!b16}")"
		done
	done
	kv g3 "$(ratio "$g3_atomic_ns" "$(awk -v s="$g3_sharded2_ns" 'BEGIN{print 2*s}')")"
	kv g4 "$(ratio "$g4_private_ns" "$g4_counters_ns")"
	kv g4_syncmap "$(ratio "$g4_syncmap_ns" "$g4_counters_ns")"
	kv g10 "$(ratio "$g10_increments" "$g10_rows")"
	kv g10_model_per_row "$(zipf_per_row "$g10_incr_per_s")"
	kv g6_r10k "$(ratio "$ec_get16_ups" "$redis_get16_r10k")"
	[ "$HAS_BODY" = 1 ] && kv g6_protobuf_r10k "$(ratio "$ec_get16pb_ups" "$redis_get16_r10k")"
	kv g10_per_sum "$(ratio "$g10_increments" "$g10_sums")"
	kv g10_sums_per_row "$(ratio "$g10_sums" "$g10_rows")"
	cat "$kvfile"
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
stop_all
# The runs' metadata, the machine's with it, for benchreport collect.
printf '%s\n' "started=$started" "commit=$commit" "quick=$QUICK" "duration=$DURATION" "out=$OUT" \
	"sut_core=$SUT_CORE" "gen_core=$GEN_CORE" "conns=$CONNS" "load_before=$load_before" "load_after=$load_after" \
	"cores=$(nproc)" "cpu=$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)" \
	"memory_kib=$(awk '/MemTotal/ {print $2}' /proc/meminfo)" "kernel=$(uname -r)" \
	"go=$(go version | cut -d' ' -f3-4)" "redis=$(redis-server --version | cut -d' ' -f1-3)" >"$work/runs/meta"
# shellcheck disable=SC2046 # one kv file a run, in run order
"$work/bin/benchreport" collect -meta "$work/runs/meta" -o "$results" $(seq -f "$work/runs/%g.kv" "$RUNS")
fi # REPORT_ONLY
if [ ! -f "$results" ]; then
	echo "bench.sh: no $results to report; run bench.sh without -report first" >&2
	exit 1
fi
if [ "$REPORT_ONLY" = 1 ]; then
	OUT=$("$work/bin/benchreport" get out <"$results") # the file those runs wrote
fi
"$work/bin/benchreport" render -o "$OUT" "$results"
echo
cat "$OUT"
echo "bench.sh: wrote $OUT"
