#!/usr/bin/env bash
# Starts and stops one Apache Cassandra 5.0 cluster with a data centre per
# region on loopback: node N (1, 2, …) is the only node of data centre dcN,
# on address BASE+N-1 (127.0.0.11, 127.0.0.12 by default) with the usual
# ports there (CQL 9042, storage 7000). All of 127.0.0.0/8 reaches loopback
# on Linux; no aliases are needed. The single node of scripts/cassandra.sh
# (127.0.0.1) is a different cluster and is never touched.
#
#   scripts/cassandra-cluster.sh up            start every node (fresh data), one after another
#   scripts/cassandra-cluster.sh down          stop every node this script started (SIGTERM)
#   scripts/cassandra-cluster.sh status        one line per node; exit 3 when a node is down
#   scripts/cassandra-cluster.sh stop-dc DC [--kill]
#                                              stop DC's node: SIGTERM (Cassandra drains,
#                                              SIGKILL after 60 s), or SIGKILL at once
#   scripts/cassandra-cluster.sh start-dc DC   start DC's node again on its data and wait
#   scripts/cassandra-cluster.sh hosts         print the CQL contact points, comma-separated
#
# Every node serves plain and TLS clients on the same port (client
# encryption optional, PEM key material the script makes with openssl under
# STATE/tls: ca.pem is the CA to trust; client.pem/client-key.pem a client
# certificate it signed). Server certificates name the node's IP address.
#
# Environment:
#   EDGECOUNT_CASSANDRA_CLUSTER_BASE  address of node 1 (default 127.0.0.11); node N is BASE+N-1
#   EDGECOUNT_CASSANDRA_CLUSTER_DIR   state directory (default <repo>/.cache/cassandra-cluster)
#   EDGECOUNT_CASSANDRA_CLUSTER_DCS   number of data centres, one node each (default 2, at most 5)
#   EDGECOUNT_CASSANDRA_CLUSTER_AUTH  "password": PasswordAuthenticator (login cassandra/cassandra
#                                     until a test creates its role); default: no authentication
#   EDGECOUNT_CASSANDRA_DIR           where scripts/cassandra.sh installed the jars (its lib/)
#   EDGECOUNT_CASSANDRA_HEAP          JVM heap per node (default 1G)
#   EDGECOUNT_CASSANDRA_TIMEOUT       seconds a node may take to become ready (default 240)
#   EDGECOUNT_CASSANDRA_CPUS          pin the nodes to these CPUs with taskset
#   JAVA17                            java binary (default /usr/lib/jvm/java-17-openjdk-amd64/bin/java)
#
# JMX of node N listens on 127.0.0.1 port 7200 + the last octet of its
# address (7211, 7212 by default), so two clusters on different bases do not
# collide. Two clusters must use disjoint address ranges and state dirs.
set -euo pipefail
# shellcheck source=service-lib.sh
. "$(dirname "$0")/service-lib.sh"
SERVICE=cassandra-cluster.sh

repo="$(cd "$(dirname "$0")/.." && pwd)"
here="$repo/scripts/cassandra"
state="${EDGECOUNT_CASSANDRA_CLUSTER_DIR:-$repo/.cache/cassandra-cluster}"
base="${EDGECOUNT_CASSANDRA_CLUSTER_BASE:-127.0.0.11}"
ndcs="${EDGECOUNT_CASSANDRA_CLUSTER_DCS:-2}"
auth="${EDGECOUNT_CASSANDRA_CLUSTER_AUTH:-}"
lib="${EDGECOUNT_CASSANDRA_DIR:-$repo/.cache/cassandra}/lib"
# start-dc uses the jars up used (recorded in the state dir).
if [[ -z ${EDGECOUNT_CASSANDRA_DIR:-} && -f $state/lib ]]; then lib=$(<"$state/lib"); fi
heap="${EDGECOUNT_CASSANDRA_HEAP:-1G}"
timeout="${EDGECOUNT_CASSANDRA_TIMEOUT:-240}"
cpus="${EDGECOUNT_CASSANDRA_CPUS:-}"
java="${JAVA17:-/usr/lib/jvm/java-17-openjdk-amd64/bin/java}"
native_port=9042
storage_port=7000
# A joining node waits ring_delay for pending ranges (30 s by default); one
# node joining at a time on loopback needs far less.
ring_delay="${EDGECOUNT_CASSANDRA_CLUSTER_RING_DELAY_MS:-3000}"

[[ $base =~ ^127\.([0-9]+)\.([0-9]+)\.([0-9]+)$ ]] || die "EDGECOUNT_CASSANDRA_CLUSTER_BASE=$base is not a 127.x.y.z address"
prefix="127.${BASH_REMATCH[1]}.${BASH_REMATCH[2]}"
first=${BASH_REMATCH[3]}
[[ $ndcs =~ ^[1-5]$ ]] || die "EDGECOUNT_CASSANDRA_CLUSTER_DCS=$ndcs: want 1..5"
((first >= 2 && first + ndcs - 1 <= 254)) || die "EDGECOUNT_CASSANDRA_CLUSTER_BASE=$base leaves no room for $ndcs nodes (last octet 2..$((255 - ndcs)))"
[[ -z $auth || $auth == password ]] || die "EDGECOUNT_CASSANDRA_CLUSTER_AUTH=$auth: want empty or password"

addr() { echo "$prefix.$((first + $1 - 1))"; }
jmx_port() { echo $((7200 + first + $1 - 1)); }
# token N: evenly spaced single tokens (num_tokens 1), all non-negative.
token() { echo $(( ($1 - 1) * (9223372036854775807 / ndcs) )); }
nodedir() { echo "$state/node$1"; }
pidfile() { echo "$state/node$1.pid"; }

# dc_node DC: the node number of data centre DC (dc1 → 1).
dc_node() {
	[[ $1 =~ ^dc([1-9])$ ]] && ((BASH_REMATCH[1] <= ndcs)) || die "no data centre $1 (have dc1..dc$ndcs)"
	echo "${BASH_REMATCH[1]}"
}

answers() { (exec 3<>"/dev/tcp/$(addr "$1")/$native_port") 2>/dev/null; }

# node_pid N: the pid of node N if this script started it and it still runs
# (the command line names this state dir, so a recycled pid is not taken).
node_pid() { pid_from "$(pidfile "$1")" CassandraDaemon "$(nodedir "$1")/"; }

check_java() {
	[[ -x "$java" ]] || die "no JDK 17 at $java (apt-get install openjdk-17-jdk-headless, or set JAVA17)"
	local v
	v="$("$java" -version 2>&1 | head -n1)"
	[[ "$v" == *'"17.'* ]] || die "$java is not Java 17 ($v); Cassandra 5.0 breaks on JDK 18+"
}

# tls: the CA, one server certificate naming every node's address, and a
# client certificate, made once per state dir (PEM, unencrypted PKCS#8 keys).
tls() {
	local d="$state/tls" n sans=""
	[[ -f $d/node.pem && -f $d/client.pem ]] && return
	command -v openssl >/dev/null || die "no openssl on PATH (apt-get install openssl)"
	mkdir -p "$d"
	for ((n = 1; n <= ndcs; n++)); do sans+="${sans:+,}IP:$(addr "$n")"; done
	(
		cd "$d"
		openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=edgecount test CA" \
			-keyout ca-key.pem -out ca.pem
		openssl req -newkey rsa:2048 -nodes -subj "/CN=edgecount cassandra" \
			-keyout node-key.pem -out node.csr
		printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\n' "$sans" >node.ext
		openssl x509 -req -in node.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial \
			-days 3650 -extfile node.ext -out node-cert.pem
		# PEMBasedSslContextFactory reads the key and its chain from one file.
		cat node-key.pem node-cert.pem >node.pem
		openssl req -newkey rsa:2048 -nodes -subj "/CN=edgecount client" \
			-keyout client-key.pem -out client.csr
		printf 'extendedKeyUsage=clientAuth\n' >client.ext
		openssl x509 -req -in client.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial \
			-days 3650 -extfile client.ext -out client.pem
		rm -f ./*.csr ./*.ext ca.srl
	) >"$state/tls.log" 2>&1 || { cat "$state/tls.log" >&2; die "openssl could not make the certificates"; }
}

# render N: node N's configuration (cassandra.yaml from the single node's
# template plus the cluster's differences, cassandra-rackdc.properties).
render() {
	local n=$1 d
	d="$(nodedir "$n")"
	mkdir -p "$d/conf" "$d/tmp" "$d/logs"
	local authn=AllowAllAuthenticator
	[[ $auth == password ]] && authn=PasswordAuthenticator
	sed -e "s|@RUN@|$d|g" -e "s|@LISTEN@|$(addr "$n")|g" \
		-e "s|@NATIVE_PORT@|$native_port|g" -e "s|@STORAGE_PORT@|$storage_port|g" \
		-e "s|@PAXOS_VARIANT@|v2|g" \
		-e "s|^cluster_name:.*|cluster_name: 'edgecount-cluster'|" \
		-e "s|^initial_token:.*|initial_token: '$(token "$n")'|" \
		-e "s|^endpoint_snitch:.*|endpoint_snitch: GossipingPropertyFileSnitch|" \
		-e "s|- seeds: .*|- seeds: \"$(addr 1):$storage_port\"|" \
		-e "s|^authenticator:.*|authenticator: $authn|" \
		-e "s|^hinted_handoff_enabled:.*|hinted_handoff_enabled: true|" \
		"$here/cassandra.yaml.in" >"$d/conf/cassandra.yaml"
	cat >>"$d/conf/cassandra.yaml" <<EOF

# Added by scripts/cassandra-cluster.sh. Hints are on (above): a write taken
# while another data centre is down reaches it when it returns (within
# max_hint_window, 3 h; a longer outage needs a repair).
# Plain and TLS clients on one port:
client_encryption_options:
  enabled: true
  optional: true
  ssl_context_factory:
    class_name: org.apache.cassandra.security.PEMBasedSslContextFactory
  keystore: $state/tls/node.pem
  truststore: $state/tls/ca.pem
  # TLS clients must present a certificate the CA signed (plain ones need none).
  require_client_auth: true
# Roles are read in the client's own data centre, so a login works while
# another data centre is down (system_auth must then be replicated to each).
auth_read_consistency_level: LOCAL_QUORUM
auth_write_consistency_level: EACH_QUORUM
EOF
	printf 'dc=dc%d\nrack=r1\n' "$n" >"$d/conf/cassandra-rackdc.properties"
	cp "$here/logback.xml" "$d/conf/logback.xml"
}

diagnose() {
	local log="$1"
	echo "---- last 40 lines of $log" >&2
	tail -n 40 "$log" >&2 || true
	echo "---- errors in $log" >&2
	grep -nE 'FATAL|Exception|Invalid yaml|ERROR' "$log" | head -n 20 >&2 || true
}

# launch N: start node N's JVM on its directory and wait until it serves CQL.
launch() {
	local n=$1 d log
	d="$(nodedir "$n")"
	log="$d/node.log"
	local opts=() line words
	while IFS= read -r line; do
		[[ -z "$line" || "$line" == \#* ]] && continue
		read -ra words <<<"$line"
		opts+=("${words[@]}")
	done <"$here/jvm17.options"
	local jamm
	jamm="$(ls "$lib"/jamm-*.jar 2>/dev/null | head -n1 || true)"
	[[ -n "$jamm" ]] && opts+=("-javaagent:$jamm")
	local pin=()
	if [[ -n "$cpus" ]]; then
		command -v taskset >/dev/null || die "EDGECOUNT_CASSANDRA_CPUS needs taskset (util-linux)"
		pin=(taskset -c "$cpus")
	fi
	# A restarted node appends to its log; readiness counts only new lines.
	local skip=0
	[[ -f $log ]] && skip=$(wc -l <"$log")
	local t0
	t0=$(now_ns)
	setsid "${pin[@]}" "$java" \
		-Xms"$heap" -Xmx"$heap" \
		"${opts[@]}" \
		-Djava.io.tmpdir="$d/tmp" -Djna.tmpdir="$d/tmp" \
		-Dcassandra.config="file://$d/conf/cassandra.yaml" \
		-Dcassandra.storagedir="$d" \
		-Dcassandra.logdir="$d/logs" \
		-Dlogback.configurationFile="$d/conf/logback.xml" \
		-Dcassandra-foreground=yes \
		-Dcassandra.jmx.local.port="$(jmx_port "$n")" \
		-Dcassandra.skip_wait_for_gossip_to_settle=0 \
		-Dcassandra.superuser_setup_delay_ms=0 \
		-Dcassandra.ring_delay_ms="$ring_delay" \
		-Dcassandra.libjemalloc=- \
		-cp "$d/conf:$lib/*" \
		org.apache.cassandra.service.CassandraDaemon \
		</dev/null >>"$log" 2>&1 &
	local pid=$!
	echo "$pid" >"$(pidfile "$n")"
	say "dc$n: started node pid $pid on $(addr "$n") (token $(token "$n"), jmx $(jmx_port "$n"), heap $heap); log: $log"
	local deadline
	deadline=$(after "$timeout")
	while :; do
		if ! alive "$pid"; then
			rm -f "$(pidfile "$n")"
			diagnose "$log"
			die "dc$n: node exited during startup after $(elapsed "$t0")s"
		fi
		if tail -n +"$((skip + 1))" "$log" | grep -qs "Starting listening for CQL clients" && answers "$n"; then
			say "dc$n: node ready on $(addr "$n"):$native_port after $(elapsed "$t0")s"
			return
		fi
		if past "$deadline"; then
			diagnose "$log"
			kill -KILL "$pid" 2>/dev/null || true
			die "dc$n: node not ready after ${timeout}s; killed it"
		fi
		sleep 0.5
	done
}

cmd_up() {
	check_java
	[[ -n $(ls "$lib"/cassandra-all-*.jar 2>/dev/null) ]] || "$repo/scripts/cassandra.sh" install
	mkdir -p "$state"
	echo "$lib" >"$state/lib"
	tls
	local n pid t0
	t0=$(now_ns)
	for ((n = 1; n <= ndcs; n++)); do
		if pid="$(node_pid "$n")"; then
			answers "$n" || die "dc$n: node pid $pid runs but does not answer on $(addr "$n"):$native_port; run: $0 down"
			say "dc$n: node pid $pid already answers on $(addr "$n"):$native_port; reusing it"
			continue
		fi
		answers "$n" && die "dc$n: something not started by this script answers on $(addr "$n"):$native_port"
		# A fresh data directory for every up keeps runs independent.
		rm -rf "$(nodedir "$n")"
		render "$n"
		launch "$n"
	done
	say "cluster up in $(elapsed "$t0")s: $(cmd_hosts)"
}

# stop_node N SIGNAL: stop node N (TERM: drain, KILL after 60 s; KILL).
stop_node() {
	local n=$1 sig=$2 pid t0 killed=""
	if ! pid="$(node_pid "$n")"; then
		rm -f "$(pidfile "$n")"
		say "dc$n: no node started by this script runs"
		return
	fi
	t0=$(now_ns)
	kill "-$sig" "$pid" 2>/dev/null || true
	killed=$(wait_exit "$pid" 60)
	rm -f "$(pidfile "$n")"
	# The main thread can be a zombie while the others still hold the
	# sockets: wait until CQL no longer answers.
	local deadline
	deadline=$(after 30)
	while answers "$n"; do
		past "$deadline" && die "dc$n: pid $pid is gone but $(addr "$n"):$native_port still answers"
		sleep 0.1
	done
	say "dc$n: stopped node pid $pid with SIG$sig$killed in $(elapsed "$t0")s"
}

cmd_down() {
	local n
	for ((n = ndcs; n >= 1; n--)); do stop_node "$n" TERM; done
}

cmd_stop_dc() {
	local n sig=TERM
	n=$(dc_node "${1:-}")
	case "${2:-}" in
	"") ;;
	--kill) sig=KILL ;;
	*) die "stop-dc $1: unknown option ${2}" ;;
	esac
	stop_node "$n" "$sig"
}

cmd_start_dc() {
	local n pid
	n=$(dc_node "${1:-}")
	check_java
	if pid="$(node_pid "$n")"; then
		say "dc$n: node pid $pid already runs"
		return
	fi
	[[ -f "$(nodedir "$n")/conf/cassandra.yaml" ]] || die "dc$n has no data in $(nodedir "$n"); run: $0 up"
	answers "$n" && die "dc$n: something not started by this script answers on $(addr "$n"):$native_port"
	launch "$n"
}

cmd_status() {
	local n pid up rc=0
	for ((n = 1; n <= ndcs; n++)); do
		up=no
		answers "$n" && up=yes
		if pid="$(node_pid "$n")"; then
			say "dc$n: node pid $pid on $(addr "$n"):$native_port, answers: $up"
		else
			say "dc$n: down ($(addr "$n"):$native_port answers: $up)"
			rc=3
		fi
		[[ $up == yes ]] || rc=3
	done
	return $rc
}

cmd_hosts() {
	local n out=""
	for ((n = 1; n <= ndcs; n++)); do out+="${out:+,}$(addr "$n"):$native_port"; done
	echo "$out"
}

case "${1:-}" in
up) cmd_up ;;
down) cmd_down ;;
status) cmd_status ;;
stop-dc) cmd_stop_dc "${2:-}" "${3:-}" ;;
start-dc) cmd_start_dc "${2:-}" ;;
hosts) cmd_hosts ;;
*)
	echo "usage: $0 up|down|status|stop-dc DC [--kill]|start-dc DC|hosts" >&2
	exit 2
	;;
esac
