#!/usr/bin/env bash
# Installs, starts and stops one Apache Cassandra 5.0 node on loopback for
# edgecount's tests and local runs.
#
#   scripts/cassandra.sh install   fetch the server jars from Maven Central (idempotent)
#   scripts/cassandra.sh start     start a node with a fresh data directory and wait
#                                  until it serves CQL (reuses one that already answers)
#   scripts/cassandra.sh stop      stop the node this script started
#   scripts/cassandra.sh status    say whether a node runs and answers
#
# Needs only JDK 17, Maven and bash: the server is Maven Central's
# org.apache.cassandra:cassandra-all with its runtime dependencies, run with
# the JVM options of Cassandra's own conf/jvm17-server.options
# (scripts/cassandra/jvm17.options) and a cassandra.yaml rendered from
# scripts/cassandra/cassandra.yaml.in. Jars, data and logs live under the
# cache directory, which git ignores.
#
# Environment:
#   EDGECOUNT_CASSANDRA_DIR      cache directory (default <repo>/.cache/cassandra)
#   EDGECOUNT_CASSANDRA_VERSION  cassandra-all version (default: the pom's, 5.0.x)
#   EDGECOUNT_CASSANDRA_PAXOS    paxos_variant, v1 or v2 (default v2)
#   EDGECOUNT_CASSANDRA_HEAP     JVM heap, -Xms and -Xmx (default 1G)
#   EDGECOUNT_CASSANDRA_TIMEOUT  seconds start waits for readiness (default 180)
#   EDGECOUNT_CASSANDRA_CPUS     pin the node to these CPUs with taskset, e.g. "1"
#                                (benchmarks pin the load generator to the others)
#   JAVA17                       java binary (default /usr/lib/jvm/java-17-openjdk-amd64/bin/java)
set -euo pipefail
# shellcheck source=service-lib.sh
. "$(dirname "$0")/service-lib.sh"
SERVICE=cassandra.sh

repo="$(cd "$(dirname "$0")/.." && pwd)"
here="$repo/scripts/cassandra"
cache="${EDGECOUNT_CASSANDRA_DIR:-$repo/.cache/cassandra}"
version="${EDGECOUNT_CASSANDRA_VERSION:-}"
paxos="${EDGECOUNT_CASSANDRA_PAXOS:-v2}"
heap="${EDGECOUNT_CASSANDRA_HEAP:-1G}"
timeout="${EDGECOUNT_CASSANDRA_TIMEOUT:-180}"
cpus="${EDGECOUNT_CASSANDRA_CPUS:-}"
java="${JAVA17:-/usr/lib/jvm/java-17-openjdk-amd64/bin/java}"

# The node listens on loopback only, on Cassandra's usual ports.
listen=127.0.0.1
native_port=9042
storage_port=7000
jmx_port=7199

lib="$cache/lib"
run="$cache/run"              # data, commit log, rendered configuration, log
pidfile="$cache/cassandra.pid"
log="$run/node.log"

# answers reports whether something accepts TCP connections on the native port.
answers() {
	(exec 3<>"/dev/tcp/$listen/$native_port") 2>/dev/null
}

# node_pid prints the pid of the node this script started, if it still runs.
# The pid must still be our JVM, not a recycled pid.
node_pid() { pid_from "$pidfile" CassandraDaemon "$cache"; }

pom_version() {
	sed -n 's:.*<cassandra.version>\(.*\)</cassandra.version>.*:\1:p' "$here/pom.xml"
}

check_java() {
	[[ -x "$java" ]] || die "no JDK 17 at $java (apt-get install openjdk-17-jdk-headless, or set JAVA17)"
	local v
	v="$("$java" -version 2>&1 | head -n1)"
	[[ "$v" == *'"17.'* ]] || die "$java is not Java 17 ($v); Cassandra 5.0 breaks on JDK 18+"
}

cmd_install() {
	check_java
	command -v mvn >/dev/null || die "no mvn on PATH (apt-get install maven)"
	[[ -n "$version" ]] || version="$(pom_version)"
	local marker="$lib/.installed-$version"
	if [[ -f "$marker" ]]; then
		say "cassandra-all $version already installed in $lib ($(ls "$lib"/*.jar | wc -l) jars)"
		return
	fi
	local start=$SECONDS tmp="$cache/lib.tmp"
	rm -rf "$tmp"
	mkdir -p "$cache"
	say "fetching org.apache.cassandra:cassandra-all:$version and its runtime dependencies"
	# Fully qualified goal: a bare dependency: prefix may not resolve. Cassandra's
	# parent pom prints a harmless [ERROR] about ${jmc5.path}.
	if ! mvn -B -q -f "$here/pom.xml" \
		org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies \
		-Dcassandra.version="$version" -DincludeScope=runtime -DoutputDirectory="$tmp" \
		>"$cache/install.log" 2>&1; then
		tail -n 30 "$cache/install.log" >&2
		die "maven could not fetch cassandra-all $version (log: $cache/install.log)"
	fi
	[[ -f "$tmp/cassandra-all-$version.jar" ]] || die "maven ran but $tmp has no cassandra-all-$version.jar"
	rm -rf "$lib"
	mv "$tmp" "$lib"
	touch "$lib/.installed-$version"
	say "installed cassandra-all $version: $(ls "$lib"/*.jar | wc -l) jars, $(du -sh "$lib" | cut -f1), in $((SECONDS - start))s"
}

# render writes the node's configuration into $run/conf.
render() {
	mkdir -p "$run/conf" "$run/tmp" "$run/logs"
	sed -e "s|@RUN@|$run|g" -e "s|@LISTEN@|$listen|g" \
		-e "s|@NATIVE_PORT@|$native_port|g" -e "s|@STORAGE_PORT@|$storage_port|g" \
		-e "s|@PAXOS_VARIANT@|$paxos|g" \
		"$here/cassandra.yaml.in" >"$run/conf/cassandra.yaml"
	cp "$here/logback.xml" "$run/conf/logback.xml"
}

# diagnose prints what the log says about a failed start.
diagnose() {
	echo "---- last 40 lines of $log" >&2
	tail -n 40 "$log" >&2 || true
	echo "---- errors in $log" >&2
	grep -nE 'FATAL|Exception|Invalid yaml|ERROR' "$log" | head -n 20 >&2 || true
}

cmd_start() {
	if answers; then
		if pid="$(node_pid)"; then
			say "node (pid $pid) already answers on $listen:$native_port; reusing it"
		else
			say "something already answers on $listen:$native_port (not started by this script); reusing it"
		fi
		return
	fi
	check_java
	[[ -n "$version" ]] || version="$(pom_version)"
	[[ -f "$lib/.installed-$version" ]] || die "cassandra-all $version is not installed; run: $0 install"
	[[ "$paxos" == v1 || "$paxos" == v2 ]] || die "EDGECOUNT_CASSANDRA_PAXOS must be v1 or v2, not $paxos"
	if pid="$(node_pid)"; then
		die "node pid $pid is running but does not answer on $listen:$native_port; run: $0 stop"
	fi

	# A fresh data directory for every start keeps runs independent.
	rm -rf "$run"
	render
	local opts=()
	while IFS= read -r line; do
		[[ -z "$line" || "$line" == \#* ]] && continue
		# "--add-opens x" is one option with its argument.
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

	local start=$SECONDS
	# setsid: the node outlives this shell and gets no signal meant for it.
	setsid "${pin[@]}" "$java" \
		-Xms"$heap" -Xmx"$heap" \
		"${opts[@]}" \
		-Djava.io.tmpdir="$run/tmp" -Djna.tmpdir="$run/tmp" \
		-Dcassandra.config="file://$run/conf/cassandra.yaml" \
		-Dcassandra.storagedir="$run" \
		-Dcassandra.logdir="$run/logs" \
		-Dlogback.configurationFile="$run/conf/logback.xml" \
		-Dcassandra-foreground=yes \
		-Dcassandra.jmx.local.port="$jmx_port" \
		-cp "$run/conf:$lib/*" \
		org.apache.cassandra.service.CassandraDaemon \
		</dev/null >"$log" 2>&1 &
	local pid=$!
	echo "$pid" >"$pidfile"
	say "started node pid $pid (cassandra-all $version, paxos $paxos, heap $heap${cpus:+, cpus $cpus}); log: $log"

	while :; do
		if ! kill -0 "$pid" 2>/dev/null; then
			rm -f "$pidfile"
			diagnose
			die "node exited during startup after $((SECONDS - start))s"
		fi
		if grep -qs "Starting listening for CQL clients" "$log" && answers; then
			say "node ready on $listen:$native_port after $((SECONDS - start))s"
			return
		fi
		if ((SECONDS - start >= timeout)); then
			diagnose
			say "node not ready after ${timeout}s; stopping it" >&2
			cmd_stop >&2 || true
			exit 1
		fi
		sleep 0.5
	done
}

cmd_stop() {
	local pid
	if ! pid="$(node_pid)"; then
		rm -f "$pidfile"
		if answers; then
			say "no node started by this script runs, but something answers on $listen:$native_port; left alone"
		else
			say "no node running"
		fi
		return
	fi
	local start=$SECONDS killed
	kill -TERM "$pid" 2>/dev/null || true
	# Cassandra drains on SIGTERM; give it 60 s before SIGKILL.
	killed=$(wait_exit "$pid" 60)
	rm -f "$pidfile"
	say "stopped node pid $pid$killed in $((SECONDS - start))s"
}

cmd_status() {
	local pid="" up=no
	pid="$(node_pid)" || pid=""
	answers && up=yes
	if [[ -n "$pid" ]]; then
		say "node pid $pid running (started by this script); CQL on $listen:$native_port answers: $up; log: $log"
	elif [[ "$up" == yes ]]; then
		say "no node started by this script, but CQL on $listen:$native_port answers"
	else
		say "no node running"
		return 3
	fi
}

service_main "$@"
