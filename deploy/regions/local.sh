#!/usr/bin/env bash
# Three regions on one machine: loopback NATS, Redis and Cassandra, two edge
# agents per region and two rollups.
#
#   deploy/regions/local.sh up       start everything, wait until ready, print
#                                    and write deploy/regions/.local/endpoints.json
#   deploy/regions/local.sh down     stop what up started (agents first, so they
#                                    flush), then the services it started
#   deploy/regions/local.sh status   say what runs
#
# Environment:
#   EDGECOUNT_LOCAL_DIR     state directory (default deploy/regions/.local)
#   EDGECOUNT_LOCAL_BASE    port base (default 18100): rollup k (0, 1) listens on
#                           BASE+k; agent j (1, 2) of region i (1 us-east,
#                           2 eu-west, 3 ap-south) on BASE+100*i+j, and
#                           gossips on that port +50
#   EDGECOUNT_LOCAL_TIMEOUT seconds to wait for readiness (default 120)
#
# The services are the project's scripts (scripts/nats.sh, redis.sh,
# cassandra.sh): a service already running is reused and left running.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
# shellcheck source=../../scripts/service-lib.sh
source "$repo/scripts/service-lib.sh"

dir="${EDGECOUNT_LOCAL_DIR:-$here/.local}"
base="${EDGECOUNT_LOCAL_BASE:-18100}"
timeout="${EDGECOUNT_LOCAL_TIMEOUT:-120}"
regions=(us-east eu-west ap-south)
agents_per_region=2
rollups=2

say() { echo "local.sh: $*"; }
die() { echo "local.sh: $*" >&2; exit 1; }

agent_port() { echo $((base + 100 * ($1 + 1) + $2)); }
gossip_port() { echo $(($(agent_port "$1" "$2") + 50)); }
rollup_port() { echo $((base + $1)); }

# procs lists "name pid" of the processes up started and that still run.
procs() {
	local f name pid
	for f in "$dir"/pids/*; do
		[[ -e $f ]] || continue
		name=$(basename "$f")
		pid=$(cat "$f")
		if alive "$pid"; then echo "$name $pid"; fi
	done
}

# ready URL: true when URL/readyz answers 200.
ready() { curl -fs -o /dev/null --max-time 2 "$1/readyz" 2>/dev/null; }

wait_ready() {
	local name=$1 url=$2 pid=$3 start
	start=$(now_ns)
	until ready "$url"; do
		alive "$pid" || die "$name exited before it was ready; log: $dir/logs/$name.log"
		(($(now_ns) - start < timeout * 1000000000)) || die "$name not ready after ${timeout}s; log: $dir/logs/$name.log"
		sleep 0.2
	done
	say "$name ready on $url after $(elapsed "$start")s"
}

# launch NAME CMD...: start CMD in its own session, logging to logs/NAME.log.
launch() {
	local name=$1
	shift
	setsid "$@" >"$dir/logs/$name.log" 2>&1 </dev/null &
	echo $! >"$dir/pids/$name"
}

service() {
	local svc=$1
	if "$repo/scripts/$svc.sh" status >/dev/null 2>&1; then
		say "$svc already runs; reusing it"
		return
	fi
	if [[ $svc == cassandra ]]; then "$repo/scripts/cassandra.sh" install; fi
	"$repo/scripts/$svc.sh" start
	echo "$svc" >>"$dir/services"
}

up() {
	if [[ -n $(procs) ]]; then die "already up (deploy/regions/local.sh status; down first)"; fi
	mkdir -p "$dir/bin" "$dir/logs" "$dir/pids" "$dir/data"
	rm -f "$dir/pids/"* "$dir/services" "$dir/endpoints.json"
	local start
	start=$(now_ns)
	(cd "$repo" && go build -o "$dir/bin/" ./cmd/edge-agent ./cmd/rollup)
	say "built edge-agent and rollup in $(elapsed "$start")s"
	for svc in nats redis cassandra; do service "$svc"; done
	# One gossip key for the three regions (their labels keep them apart).
	if [[ ! -s $dir/gossip.key ]]; then
		head -c 32 /dev/urandom | base64 >"$dir/gossip.key"
		chmod 600 "$dir/gossip.key"
	fi

	local i j k name port urls=() json_regions="" rollup_urls=()
	for k in $(seq 0 $((rollups - 1))); do
		name="rollup-$k"
		port=$(rollup_port "$k")
		# Both rollups share all partitions: each partition is pinned to
		# one of them at a time and moves to the other if one dies.
		EDGECOUNT_ROLLUP_MEMBER_ID="$name" \
			launch "$name" "$dir/bin/rollup" --config "$here/us-east.yaml" --http "127.0.0.1:$port"
		rollup_urls+=("http://127.0.0.1:$port")
	done
	for k in $(seq 0 $((rollups - 1))); do
		wait_ready "rollup-$k" "${rollup_urls[$k]}" "$(cat "$dir/pids/rollup-$k")"
	done
	# Wait until the rollups see each other, so the partitions are split
	# before the first write instead of handed over under traffic.
	for k in $(seq 0 $((rollups - 1))); do
		local t0
		t0=$(now_ns)
		until [[ $(curl -fs --max-time 2 "${rollup_urls[$k]}/metrics" 2>/dev/null | awk '/^edgecount_group_members[{ ]/ {print $NF}') == "$rollups" ]]; do
			(($(now_ns) - t0 < timeout * 1000000000)) || die "rollup-$k does not see $rollups rollups after ${timeout}s"
			sleep 0.2
		done
	done
	say "the rollups share the partitions"
	for i in "${!regions[@]}"; do
		local r=${regions[$i]} seeds=()
		for j in $(seq 1 $agents_per_region); do seeds+=("127.0.0.1:$(gossip_port "$i" "$j")"); done
		for j in $(seq 1 $agents_per_region); do
			name="$r-$j"
			port=$(agent_port "$i" "$j")
			mkdir -p "$dir/data/$name"
			EDGECOUNT_GOSSIP_BIND="127.0.0.1:$(gossip_port "$i" "$j")" \
				EDGECOUNT_GOSSIP_SEEDS="$(IFS=,; echo "${seeds[*]}")" \
				EDGECOUNT_GOSSIP_KEY_FILE="$dir/gossip.key" EDGECOUNT_GOSSIP_PROFILE=local \
				launch "$name" "$dir/bin/edge-agent" --config "$here/$r.yaml" --http "127.0.0.1:$port" \
				--agent-id "$name" --data "$dir/data/$name"
		done
	done
	for i in "${!regions[@]}"; do
		local r=${regions[$i]}
		urls=()
		for j in $(seq 1 $agents_per_region); do
			name="$r-$j"
			port=$(agent_port "$i" "$j")
			wait_ready "$name" "http://127.0.0.1:$port" "$(cat "$dir/pids/$name")"
			urls+=("\"http://127.0.0.1:$port\"")
		done
		json_regions+="${json_regions:+, }\"$r\": [$(IFS=,; echo "${urls[*]}" | sed 's/,/, /g')]"
	done
	local ru=()
	for u in "${rollup_urls[@]}"; do ru+=("\"$u\""); done
	cat >"$dir/endpoints.json" <<EOF
{"regions": {$json_regions}, "rollups": [$(IFS=,; echo "${ru[*]}" | sed 's/,/, /g')], "nats": "${EDGECOUNT_NATS_URL:-nats://127.0.0.1:4222}", "redis": "${EDGECOUNT_REDIS_ADDR:-127.0.0.1:6379}", "cassandra": "${EDGECOUNT_CASSANDRA_HOSTS:-127.0.0.1}:9042"}
EOF
	say "up in $(elapsed "$start")s; endpoints ($dir/endpoints.json):"
	cat "$dir/endpoints.json"
}

# stop_procs agents|rollups: SIGTERM those processes, wait for them to flush
# and exit (SIGKILL after the timeout).
stop_procs() {
	local kind=$1 name pid pids=() start
	while read -r name pid; do
		if [[ $name == rollup-* ]]; then [[ $kind == rollups ]] || continue; else [[ $kind == agents ]] || continue; fi
		kill -TERM "$pid" 2>/dev/null || true
		pids+=("$pid")
		rm -f "$dir/pids/$name"
	done < <(procs)
	start=$(now_ns)
	for pid in "${pids[@]}"; do
		while alive "$pid"; do
			if (($(now_ns) - start > timeout * 1000000000)); then
				kill -KILL "$pid" 2>/dev/null || true
				say "pid $pid did not stop in ${timeout}s; killed"
			fi
			sleep 0.1
		done
	done
}

down() {
	# Agents first: on SIGTERM each flushes what it holds to NATS; the
	# rollups then drain it before they stop.
	stop_procs agents
	stop_procs rollups
	rm -f "$dir/pids/"*
	if [[ -f $dir/services ]]; then
		while read -r svc; do "$repo/scripts/$svc.sh" stop; done <"$dir/services"
		rm -f "$dir/services"
	fi
	rm -f "$dir/endpoints.json"
	say "down"
}

status() {
	local rc=1 name pid
	while read -r name pid; do
		say "$name runs (pid $pid)"
		rc=0
	done < <(procs)
	for svc in nats redis cassandra; do "$repo/scripts/$svc.sh" status || true; done
	if [[ -f $dir/endpoints.json ]]; then cat "$dir/endpoints.json"; fi
	return $rc
}

case "${1:-}" in
up) up ;;
down) down ;;
status) status ;;
*) die "usage: $0 up|down|status" ;;
esac
