# shellcheck shell=bash
# Helpers shared by the measurement scripts (bench.sh, bench-g13.sh,
# profile-writes.sh, measure-server-path.sh, read-ab.sh); sourced, not run.
#
# The caller has changed to the repository's root, put Go on PATH and set
# work (its directory under .cache, with a bin/ in it), SUT_CORE (the core
# of the servers under test) and GEN_CORE (the core of the load
# generators).
# shellcheck disable=SC2154 # work, round and out are the caller's

# build NAME...: builds each NAME into $work/bin: edge-agent from
# ./cmd/edge-agent, any other from the tools module (tools/NAME).
build() {
	local name
	for name in "$@"; do
		if [ "$name" = edge-agent ]; then
			go build -o "$work/bin/edge-agent" ./cmd/edge-agent
		else
			go build -C tools -o "$PWD/$work/bin/$name" "./$name"
		fi
	done
}

# build_base_agent REV: builds the edge-agent of commit REV (its tree
# unpacked in $work/base, which must exist and be empty) as
# $work/bin/edge-agent-base.
build_base_agent() {
	git archive "$1" | tar -x -C "$work/base"
	(cd "$work/base" && go build -o ../bin/edge-agent-base ./cmd/edge-agent)
}

# The servers the script started, stopped by stop_all (by pid: only
# ours). The script sets trap stop_all EXIT.
pids=()
stop_all() {
	local p
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	pids=()
}

# sut CMD...: starts CMD in the background pinned to SUT_CORE and adds
# its pid ($!) to pids.
sut() {
	taskset -c "$SUT_CORE" "$@" &
	pids+=($!)
}

# wait_http PORT PATH: waits up to 20 s for 127.0.0.1:PORT to answer
# PATH with a 2xx; fails, saying so, when it does not.
wait_http() {
	for _ in $(seq 200); do
		curl -fsS "127.0.0.1:$1$2" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	echo "$(basename "$0"): nothing answers on :$1$2" >&2
	return 1
}

# json REPORT KEY: KEY's value in loadgen's REPORT (needs benchreport
# built).
json() { "$work/bin/benchreport" get "$2" <<<"$1"; }

# ratio A B: A ÷ B to three decimals, nan when B is not above 0.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.3f", a / b; else print "nan" }'; }

# cpu_ticks PID: the CPU time of process PID (utime + stime), in clock
# ticks. On one core a server answers at most 1 s ÷ its CPU per request
# a second, whatever else runs: a bound less noisy than a rate.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# redis_rps: reads redis-benchmark -q's output and prints the first
# requests-per-second figure.
redis_rps() { tr '\r' '\n' | awk -F'[:,]' '/requests per second/ {gsub(/[^0-9.]/, "", $2); print $2; exit}'; }

# The same-run A/B scripts (measure-server-path.sh, read-ab.sh) write
# their figures to $out, a line a figure, "ROUND NAME VALUE [MORE]", and
# summarize them over the rounds with an awk program that starts with
# figures_awk.

# figure NAME PORT LOADGEN-ARGS...: runs loadgen on GEN_CORE against
# 127.0.0.1:PORT (32 connections, DURATION) and appends round $round's
# figure NAME (units a second, then the p99 and the errors) to $out,
# printing it too.
figure() {
	local name=$1 port=$2 r
	shift 2
	r=$(taskset -c "$GEN_CORE" "$work/bin/loadgen" -addr "127.0.0.1:$port" -duration "$DURATION" -conns 32 "$@")
	echo "$round $name $(sed -E 's/.*"units_per_s":([0-9.e+]+).*/\1/' <<<"$r") p99_us=$(sed -E 's/.*"p99_us":([0-9.]+).*/\1/' <<<"$r") errors=$(sed -E 's/.*"errors":([0-9]+).*/\1/' <<<"$r")" | tee -a "$out"
}

# figures_awk: the awk rules that read the figure lines (# lines are
# skipped) and the function stat(NAME, PEER, SCALE) for the program's END
# block: the median (min-max) over the rounds of NAME's value, or, with a
# PEER, of its ratio to PEER's value × SCALE, round by round.
# shellcheck disable=SC2016,SC2034 # awk's $ fields; the sourcing scripts use it
figures_awk='
  /^#/ { next }
  { v[$2, $1] = $3; names[$2] = 1; rounds[$1] = 1 }
  function isort(a, n,   i, j, t) { for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j > 0 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t } }
  function stat(name, peer, scale,   r, k, a, n) {
    n = 0
    for (r in rounds) if ((name, r) in v && (peer == "" || v[peer, r] > 0)) a[++n] = (peer == "" ? v[name, r] : v[name, r] / (v[peer, r] * scale))
    if (n == 0) return "n/a"
    isort(a, n)
    return sprintf(peer == "" ? "%.0f (%.0f-%.0f)" : "%.2f (%.2f-%.2f)", a[int((n + 1) / 2)], a[1], a[n])
  }
'
