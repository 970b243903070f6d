#!/usr/bin/env bash
# The regional topology on one machine's loopback: a hub of three clustered
# JetStream servers, one JetStream server per region (a leaf node of the hub
# with a domain of its own), a Cassandra cluster of two data centres, Redis,
# two edge agents per region and two rollups.
#
#   deploy/regions/local.sh up       start everything, wait until ready, print
#                                    and write $EDGECOUNT_LOCAL_DIR/endpoints.json
#   deploy/regions/local.sh down     stop what up started: agents first (they
#                                    flush), rollups, brokers, then the services
#   deploy/regions/local.sh status   each part: up or down, pid, address
#
#   region    broker (leaf, domain)  agents              Cassandra DC
#   us-east   BASE+180 (us-east)     BASE+101, BASE+102  dc1 (CLUSTER_BASE)
#   eu-west   BASE+280 (eu-west)     BASE+201, BASE+202  dc2 (CLUSTER_BASE+1)
#   ap-south  BASE+380 (ap-south)    BASE+301, BASE+302  dc2 (CLUSTER_BASE+1)
#   hub       BASE+11..13 (hub; routes BASE+21..23, leafnodes BASE+31..33)
#   rollups   BASE+0, BASE+1, on the hub, in dc1
# Each broker serves monitoring on its client port + 30 (hub) or + 10
# (regions); each agent gossips on its port + 50. Three regions on two data
# centres: two 1 GB Cassandra nodes are what this machine's 2 cores carry.
#
# Environment:
#   EDGECOUNT_LOCAL_DIR     state directory (default deploy/regions/.local)
#   EDGECOUNT_LOCAL_BASE    port base (default 18100), as above
#   EDGECOUNT_LOCAL_TIMEOUT seconds to wait for each part (default 180)
#   EDGECOUNT_CASSANDRA_CLUSTER_BASE  first node's address (default 127.0.0.11;
#                           node 2 is the next address), and
#   EDGECOUNT_CASSANDRA_CLUSTER_DIR   its state directory: passed to
#                           scripts/cassandra-cluster.sh
#   EDGECOUNT_CASSANDRA_KEYSPACE, EDGECOUNT_REDIS_ADDR: passed to the agents
#                           and rollups (defaults: the region files')
#
# Redis and the Cassandra cluster come from the project's scripts
# (scripts/redis.sh, scripts/cassandra-cluster.sh): one already running is
# reused and left running by down. The brokers' configuration is rendered
# from deploy/regions/nats/{hub,region}.conf.in; the agents run
# deploy/regions/<region>.yaml, the rollups us-east.yaml (which carries
# nats.hub) with EDGECOUNT_NATS_URL set to the hub's three servers.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
# shellcheck source=../../scripts/service-lib.sh
source "$repo/scripts/service-lib.sh"
SERVICE=local.sh

dir="${EDGECOUNT_LOCAL_DIR:-$here/.local}"
base="${EDGECOUNT_LOCAL_BASE:-18100}"
timeout="${EDGECOUNT_LOCAL_TIMEOUT:-180}"
[[ $base =~ ^[0-9]+$ ]] && ((base > 0 && base + 400 < 65536)) || die "EDGECOUNT_LOCAL_BASE must be a port number below 65135, not '$base'"
regions=(us-east eu-west ap-south)
dcs=(dc1 dc2 dc2) # the Cassandra data centre of each region
rollup_dc=dc1
hubs=3
agents_per_region=2
rollups=2
cluster_base="${EDGECOUNT_CASSANDRA_CLUSTER_BASE:-127.0.0.11}"
[[ $cluster_base =~ ^127\.0\.0\.([0-9]+)$ ]] && ((BASH_REMATCH[1] > 0 && BASH_REMATCH[1] < 254)) || die "EDGECOUNT_CASSANDRA_CLUSTER_BASE must be a loopback address 127.0.0.N, not '$cluster_base'"
export EDGECOUNT_CASSANDRA_CLUSTER_BASE=$cluster_base

agent_port() { echo $((base + 100 * ($1 + 1) + $2)); }
gossip_port() { echo $(($(agent_port "$1" "$2") + 50)); }
rollup_port() { echo $((base + $1)); }
hub_port() { echo $((base + 10 + $1)); }         # hub server 1..3
hub_route_port() { echo $((base + 20 + $1)); }
hub_leaf_port() { echo $((base + 30 + $1)); }
hub_http_port() { echo $((base + 40 + $1)); }
region_port() { echo $((base + 100 * ($1 + 1) + 80)); } # region index 0..2
region_http_port() { echo $((base + 100 * ($1 + 1) + 90)); }
# dc_host DC: the address of the data centre's node (dc1 the cluster base,
# dc2 the next address).
dc_host() {
	local last=${cluster_base##*.}
	echo "127.0.0.$((last + ${1#dc} - 1))"
}

hub_urls() {
	local h urls=()
	for h in $(seq 1 $hubs); do urls+=("nats://127.0.0.1:$(hub_port "$h")"); done
	(IFS=,; echo "${urls[*]}")
}

# alive_name NAME: prints the pid up recorded for NAME while it runs.
alive_name() {
	local f="$dir/pids/$1" pid
	[[ -f $f ]] || return 1
	pid=$(<"$f")
	alive "$pid" || return 1
	echo "$pid"
}

# procs lists "name pid" of the processes up started and that still run.
procs() {
	local f name pid
	for f in "$dir"/pids/*; do
		[[ -e $f ]] || continue
		name=$(basename "$f")
		if pid=$(alive_name "$name"); then echo "$name $pid"; fi
	done
}

# ok URL: true when URL answers 200.
ok() { curl -fs -o /dev/null --max-time 2 "$1" 2>/dev/null; }

# wait_url NAME URL: waits until URL answers 200 while NAME runs.
wait_url() {
	local name=$1 url=$2 start pid
	start=$(now_ns)
	until ok "$url"; do
		pid=$(alive_name "$name") || die "$name exited before it was ready; log: $dir/logs/$name.log"
		(($(now_ns) - start < timeout * 1000000000)) || die "$name (pid $pid) not ready after ${timeout}s; log: $dir/logs/$name.log"
		sleep 0.2
	done
	say "$name ready on $url after $(elapsed "$start")s"
}

# launch NAME CMD...: start CMD in its own session, logging to logs/NAME.log.
launch() {
	local name=$1
	shift
	echo "==== $(date -u +%FT%TZ) local.sh up" >>"$dir/logs/$name.log"
	setsid "$@" >>"$dir/logs/$name.log" 2>&1 </dev/null &
	echo $! >"$dir/pids/$name"
}

# launch_env NAME LINES CMD...: launch with each KEY=VALUE line of LINES
# in CMD's environment.
launch_env() {
	local name=$1 envs=()
	mapfile -t envs <<<"$2"
	shift 2
	launch "$name" env "${envs[@]}" "$@"
}

# render TEMPLATE OUT KEY=VALUE...: TEMPLATE with each @KEY@ replaced.
render() {
	local tpl=$1 out=$2 kv args=()
	shift 2
	for kv in "$@"; do
		args+=(-e "s|@${kv%%=*}@|$(sed 's/[\\|&]/\\&/g' <<<"${kv#*=}")|g")
	done
	sed "${args[@]}" "$tpl" >"$out"
	"$nats_bin" --config "$out" -t >/dev/null 2>"$out.check" || {
		cat "$out.check" >&2
		die "nats-server rejects $out (rendered from $tpl)"
	}
	rm -f "$out.check"
}

# start_brokers: the hub's three servers, then one server per region, each
# leaf linked to all three hub servers.
start_brokers() {
	"$repo/scripts/nats.sh" install >/dev/null
	nats_bin="$repo/.cache/bin/nats-server"
	local h i routes=() leafs=() name start
	for h in $(seq 1 $hubs); do
		routes+=("\"nats-route://127.0.0.1:$(hub_route_port "$h")\"")
		leafs+=("\"nats-leaf://127.0.0.1:$(hub_leaf_port "$h")\"")
	done
	start=$(now_ns)
	for h in $(seq 1 $hubs); do
		name="hub-$h"
		mkdir -p "$dir/data/$name"
		render "$here/nats/hub.conf.in" "$dir/conf/$name.conf" NAME="$name" HOST=127.0.0.1 \
			PORT="$(hub_port "$h")" HTTP_PORT="$(hub_http_port "$h")" STORE_DIR="$dir/data/$name" \
			CLUSTER=hub CLUSTER_PORT="$(hub_route_port "$h")" ROUTES="$(IFS=,; echo "${routes[*]}")" \
			LEAF_PORT="$(hub_leaf_port "$h")"
		launch "$name" "$nats_bin" --config "$dir/conf/$name.conf"
	done
	# A clustered server is healthy once the JetStream cluster has a
	# metadata leader, which needs two of the three.
	for h in $(seq 1 $hubs); do wait_url "hub-$h" "http://127.0.0.1:$(hub_http_port "$h")/healthz"; done
	say "hub of $hubs JetStream servers up in $(elapsed "$start")s"
	for i in "${!regions[@]}"; do
		name="nats-${regions[$i]}"
		mkdir -p "$dir/data/$name"
		render "$here/nats/region.conf.in" "$dir/conf/$name.conf" NAME="$name" HOST=127.0.0.1 \
			PORT="$(region_port "$i")" HTTP_PORT="$(region_http_port "$i")" STORE_DIR="$dir/data/$name" \
			DOMAIN="${regions[$i]}" LEAF_URLS="$(IFS=,; echo "${leafs[*]}")"
		launch "$name" "$nats_bin" --config "$dir/conf/$name.conf"
	done
	for i in "${!regions[@]}"; do
		name="nats-${regions[$i]}"
		wait_url "$name" "http://127.0.0.1:$(region_http_port "$i")/healthz"
		start=$(now_ns)
		# Linked: the regional server has its leaf connection to the hub.
		until curl -fs --max-time 2 "http://127.0.0.1:$(region_http_port "$i")/leafz" 2>/dev/null | grep -q '"leafnodes": *[1-9]'; do
			(($(now_ns) - start < timeout * 1000000000)) || die "$name has no leaf link to the hub after ${timeout}s; log: $dir/logs/$name.log"
			sleep 0.2
		done
		say "$name linked to the hub after $(elapsed "$start")s"
	done
}

# service NAME: scripts/NAME.sh's service, reused when it already answers.
service() {
	local svc=$1
	if "$repo/scripts/$svc.sh" status >/dev/null 2>&1; then
		say "$svc already runs; reusing it"
		return
	fi
	"$repo/scripts/$svc.sh" install
	"$repo/scripts/$svc.sh" start
	echo "$svc" >>"$dir/services"
}

# cql_answers HOST: true when HOST:9042 accepts a connection.
cql_answers() { (exec 3<>"/dev/tcp/$1/9042") 2>/dev/null; }

# start_cassandra: the two-DC cluster, its nodes started one after another
# by scripts/cassandra-cluster.sh (which prints how long each took).
start_cassandra() {
	local cc="$repo/scripts/cassandra-cluster.sh" start
	[[ -x $cc ]] || die "no $cc: the two-DC Cassandra cluster needs it"
	"$repo/scripts/cassandra.sh" install >/dev/null # the jars the nodes run
	if cql_answers "$(dc_host dc1)" && cql_answers "$(dc_host dc2)"; then
		say "a Cassandra cluster answers on $(dc_host dc1) and $(dc_host dc2); reusing it"
		return
	fi
	start=$(now_ns)
	"$cc" up
	echo cassandra-cluster >>"$dir/services"
	say "Cassandra cluster (dc1 $(dc_host dc1), dc2 $(dc_host dc2)) up in $(elapsed "$start")s"
}

# rollup_env / agent_env REGION-INDEX: the settings local.sh gives each
# process on top of its region file (the files hold the default base's).
rollup_env() {
	echo "EDGECOUNT_NATS_URL=$(hub_urls)"
	echo "EDGECOUNT_CASSANDRA_HOSTS=$(dc_host dc1),$(dc_host dc2)"
	echo "EDGECOUNT_CASSANDRA_LOCAL_DC=$rollup_dc"
}
agent_env() {
	local i=$1
	echo "EDGECOUNT_NATS_URL=nats://127.0.0.1:$(region_port "$i")"
	echo "EDGECOUNT_NATS_DOMAIN=${regions[$i]}"
	echo "EDGECOUNT_CASSANDRA_HOSTS=$(dc_host dc1),$(dc_host dc2)"
	echo "EDGECOUNT_CASSANDRA_LOCAL_DC=${dcs[$i]}"
}

up() {
	if [[ -n $(procs) ]]; then die "already up (deploy/regions/local.sh status; down first)"; fi
	mkdir -p "$dir/bin" "$dir/logs" "$dir/pids" "$dir/data" "$dir/conf"
	rm -f "$dir/pids/"* "$dir/services" "$dir/endpoints.json"
	local start
	start=$(now_ns)
	(cd "$repo" && go build -o "$dir/bin/" ./cmd/edge-agent ./cmd/rollup)
	say "built edge-agent and rollup in $(elapsed "$start")s"
	start_brokers
	start_cassandra
	service redis
	# One gossip key for the three regions (their labels keep them apart).
	if [[ ! -s $dir/gossip.key ]]; then
		head -c 32 /dev/urandom | base64 >"$dir/gossip.key"
		chmod 600 "$dir/gossip.key"
	fi

	local i j k name port
	for k in $(seq 0 $((rollups - 1))); do
		name="rollup-$k"
		port=$(rollup_port "$k")
		# Both rollups share all partitions: each partition is pinned to
		# one of them at a time and moves to the other if one dies.
		# One after another: the first creates the hub stream.
		launch_env "$name" "$(rollup_env; echo "EDGECOUNT_ROLLUP_MEMBER_ID=$name")" "$dir/bin/rollup" --config "$here/us-east.yaml" --http "127.0.0.1:$port"
		wait_url "$name" "http://127.0.0.1:$port/readyz"
	done
	# Wait until the rollups see each other, so the partitions are split
	# before the first write instead of handed over under traffic.
	for k in $(seq 0 $((rollups - 1))); do
		local t0
		t0=$(now_ns)
		until [[ $(curl -fs --max-time 2 "http://127.0.0.1:$(rollup_port "$k")/metrics" 2>/dev/null | awk '/^edgecount_group_members[{ ]/ {print $NF}') == "$rollups" ]]; do
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
			launch_env "$name" "$(
				agent_env "$i"
				echo "EDGECOUNT_GOSSIP_BIND=127.0.0.1:$(gossip_port "$i" "$j")"
				echo "EDGECOUNT_GOSSIP_SEEDS=$(IFS=,; echo "${seeds[*]}")"
				echo "EDGECOUNT_GOSSIP_KEY_FILE=$dir/gossip.key"
				echo "EDGECOUNT_GOSSIP_PROFILE=local"
			)" "$dir/bin/edge-agent" --config "$here/$r.yaml" --http "127.0.0.1:$port" \
				--agent-id "$name" --data "$dir/data/$name"
		done
	done
	for i in "${!regions[@]}"; do
		for j in $(seq 1 $agents_per_region); do
			wait_url "${regions[$i]}-$j" "http://127.0.0.1:$(agent_port "$i" "$j")/readyz"
		done
	done
	endpoints >"$dir/endpoints.json.tmp"
	mv -f "$dir/endpoints.json.tmp" "$dir/endpoints.json"
	say "up in $(elapsed "$start")s; endpoints ($dir/endpoints.json):"
	cat "$dir/endpoints.json"
}

# json_list ITEM...: a JSON array of strings.
json_list() {
	local out="" s
	for s in "$@"; do out+="${out:+, }\"$s\""; done
	echo "[$out]"
}

# endpoints: endpoints.json. "regions" maps each region to its agents'
# URLs (the shape e2e tests read); "topology" names every part's address.
endpoints() {
	local i j k h agents=() hub=() ru=() regs="" topo=""
	for h in $(seq 1 $hubs); do hub+=("nats://127.0.0.1:$(hub_port "$h")"); done
	for k in $(seq 0 $((rollups - 1))); do ru+=("http://127.0.0.1:$(rollup_port "$k")"); done
	for i in "${!regions[@]}"; do
		agents=()
		for j in $(seq 1 $agents_per_region); do agents+=("http://127.0.0.1:$(agent_port "$i" "$j")"); done
		regs+="${regs:+, }\"${regions[$i]}\": $(json_list "${agents[@]}")"
		topo+="${topo:+,}
    \"${regions[$i]}\": {\"agents\": $(json_list "${agents[@]}"), \"nats\": \"nats://127.0.0.1:$(region_port "$i")\", \"nats_monitor\": \"http://127.0.0.1:$(region_http_port "$i")\", \"jetstream_domain\": \"${regions[$i]}\", \"cassandra_dc\": \"${dcs[$i]}\", \"cassandra\": [\"$(dc_host "${dcs[$i]}"):9042\"]}"
	done
	local mon=()
	for h in $(seq 1 $hubs); do mon+=("http://127.0.0.1:$(hub_http_port "$h")"); done
	cat <<EOF
{"regions": {$regs},
  "rollups": $(json_list "${ru[@]}"),
  "hub": {"nats": $(json_list "${hub[@]}"), "nats_monitor": $(json_list "${mon[@]}"), "jetstream_domain": "hub", "cassandra_dc": "$rollup_dc", "cassandra": ["$(dc_host $rollup_dc):9042"]},
  "topology": {$topo},
  "cassandra": {"dc1": ["$(dc_host dc1):9042"], "dc2": ["$(dc_host dc2):9042"]},
  "redis": "${EDGECOUNT_REDIS_ADDR:-127.0.0.1:6379}"}
EOF
}

# stop_procs PATTERN...: SIGTERM the running processes whose names match a
# PATTERN, and wait for them to flush and exit (SIGKILL after the timeout).
stop_procs() {
	local name pid pids=() names=() p t0 match
	while read -r name pid; do
		match=""
		for p in "$@"; do
			# shellcheck disable=SC2053
			if [[ $name == $p ]]; then match=1; fi
		done
		[[ -n $match ]] || continue
		kill -TERM "$pid" 2>/dev/null || true
		pids+=("$pid")
		names+=("$name")
	done < <(procs)
	((${#pids[@]})) || return 0
	t0=$(now_ns)
	for k in "${!pids[@]}"; do
		local killed
		killed=$(wait_exit "${pids[$k]}" "$timeout")
		rm -f "$dir/pids/${names[$k]}"
		say "stopped ${names[$k]} (pid ${pids[$k]})$killed"
	done
	say "stopped ${names[*]} in $(elapsed "$t0")s"
}

down() {
	# Agents first: on SIGTERM each flushes what it holds to its region's
	# broker; the rollups then drain the hub before they stop.
	stop_procs 'us-east-*' 'eu-west-*' 'ap-south-*'
	stop_procs 'rollup-*'
	stop_procs 'nats-*'
	stop_procs 'hub-*'
	rm -f "$dir/pids/"*
	if [[ -f $dir/services ]]; then
		local svc
		while read -r svc; do "$repo/scripts/$svc.sh" "$([[ $svc == cassandra-cluster ]] && echo down || echo stop)"; done <"$dir/services"
		rm -f "$dir/services"
	fi
	rm -f "$dir/endpoints.json"
	say "down"
}

# row NAME ADDRESS CHECK-URL: one status line.
row() {
	local name=$1 addr=$2 url=$3 pid state=down
	if pid=$(alive_name "$name"); then
		state="up"
		[[ -z $url ]] || ok "$url" || state="running, not ready"
	else
		pid="-"
	fi
	printf '%-16s %-18s pid %-8s %s\n' "$name" "$state" "$pid" "$addr"
	[[ $state == up ]]
}

status() {
	local rc=0 h i j k
	for h in $(seq 1 $hubs); do
		row "hub-$h" "nats://127.0.0.1:$(hub_port "$h") (domain hub)" "http://127.0.0.1:$(hub_http_port "$h")/healthz" || rc=1
	done
	for i in "${!regions[@]}"; do
		row "nats-${regions[$i]}" "nats://127.0.0.1:$(region_port "$i") (domain ${regions[$i]})" "http://127.0.0.1:$(region_http_port "$i")/healthz" || rc=1
	done
	for k in $(seq 0 $((rollups - 1))); do
		row "rollup-$k" "http://127.0.0.1:$(rollup_port "$k") ($rollup_dc)" "http://127.0.0.1:$(rollup_port "$k")/readyz" || rc=1
	done
	for i in "${!regions[@]}"; do
		for j in $(seq 1 $agents_per_region); do
			row "${regions[$i]}-$j" "http://127.0.0.1:$(agent_port "$i" "$j") (${dcs[$i]})" "http://127.0.0.1:$(agent_port "$i" "$j")/readyz" || rc=1
		done
	done
	local dc n pid who state
	for dc in dc1 dc2; do
		n=${dc#dc}
		pid=$(pid_from "${EDGECOUNT_CASSANDRA_CLUSTER_DIR:-$repo/.cache/cassandra-cluster}/node$n.pid" CassandraDaemon 2>/dev/null) || pid="-"
		who=""
		for i in "${!regions[@]}"; do [[ ${dcs[$i]} != "$dc" ]] || who+="${who:+, }${regions[$i]}"; done
		[[ $dc != "$rollup_dc" ]] || who+=", rollups"
		state=up
		cql_answers "$(dc_host "$dc")" || { state=down; rc=1; }
		printf '%-16s %-18s pid %-8s %s\n' "cassandra-$dc" "$state" "$pid" "$(dc_host "$dc"):9042 ($who)"
	done
	"$repo/scripts/redis.sh" status || rc=1
	return $rc
}

case "${1:-}" in
up) up ;;
down) down ;;
status) status ;;
*) die "usage: $0 up|down|status" ;;
esac
