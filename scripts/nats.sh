#!/usr/bin/env bash
# Builds, starts, stops and reports on an external nats-server with JetStream
# for edgecount's non-standalone runs (tests and standalone mode embed the
# server in-process instead).
#
#   scripts/nats.sh install   build nats-server from the version go.mod requires
#                             into .cache/bin/nats-server (only when it is
#                             missing or go.mod's version changed)
#   scripts/nats.sh start     reuse a server already answering on the address,
#                             or start one (building it first if needed) and
#                             wait until it is ready
#   scripts/nats.sh stop      stop the server this script started, and only it
#   scripts/nats.sh status    say what answers on the address and whether this
#                             script started it; fail when nothing answers
#
# The server listens on 127.0.0.1:$EDGECOUNT_NATS_PORT (default 4222), serves
# monitoring (/healthz, /varz, /jsz) on 127.0.0.1:$EDGECOUNT_NATS_HTTP_PORT
# (default the client port + 4000, so 8222) and keeps JetStream in
# .cache/nats/jetstream-<port>, syncing every write to disk. Its configuration
# is rendered from scripts/nats/nats.conf.in; configuration, pid file and log
# live under .cache/nats/ as nats-<port>.{conf,pid,log}. Several servers run
# side by side on different ports (one per region, e.g. 4222, 4223, 4224).
#
# Environment:
#   EDGECOUNT_NATS_PORT           client port (default 4222)
#   EDGECOUNT_NATS_HTTP_PORT      monitoring port (default client port + 4000)
#   EDGECOUNT_NATS_FRESH=1        start wipes the JetStream store first
#                                 (ignored when a running server is reused)
#   EDGECOUNT_NATS_START_TIMEOUT  seconds start waits for readiness (default 30)
#   EDGECOUNT_NATS_STOP_TIMEOUT   seconds stop waits before SIGKILL (default 30)
set -euo pipefail
# shellcheck source=service-lib.sh
. "$(dirname "$0")/service-lib.sh"

REPO=$(cd "$(dirname "$0")/.." && pwd)
HOST=127.0.0.1
PORT=${EDGECOUNT_NATS_PORT:-4222}
[[ $PORT =~ ^[0-9]+$ ]] && ((PORT > 0 && PORT < 65536)) || { echo "nats: EDGECOUNT_NATS_PORT must be a port number, not '$PORT'" >&2; exit 2; }
HTTP_PORT=${EDGECOUNT_NATS_HTTP_PORT:-$((PORT + 4000))}
[[ $HTTP_PORT =~ ^[0-9]+$ ]] && ((HTTP_PORT > 0 && HTTP_PORT < 65536)) || { echo "nats: EDGECOUNT_NATS_HTTP_PORT must be a port number, not '$HTTP_PORT'" >&2; exit 2; }
FRESH=${EDGECOUNT_NATS_FRESH:-0}
START_TIMEOUT=${EDGECOUNT_NATS_START_TIMEOUT:-30} # seconds
STOP_TIMEOUT=${EDGECOUNT_NATS_STOP_TIMEOUT:-30}   # seconds
[[ $START_TIMEOUT =~ ^[0-9]+$ && $STOP_TIMEOUT =~ ^[0-9]+$ ]] || { echo "nats: EDGECOUNT_NATS_START_TIMEOUT and EDGECOUNT_NATS_STOP_TIMEOUT are whole seconds" >&2; exit 2; }

MODULE=github.com/nats-io/nats-server/v2
BINDIR=$REPO/.cache/bin
BIN=$BINDIR/nats-server
STAMP=$BINDIR/nats-server.version # the go.mod version BIN was built from
TEMPLATE=$REPO/scripts/nats/nats.conf.in
DIR=$REPO/.cache/nats
CONF=$DIR/nats-$PORT.conf
PIDFILE=$DIR/nats-$PORT.pid
LOGFILE=$DIR/nats-$PORT.log
STORE=$DIR/jetstream-$PORT

SERVICE=nats

# go_cmd: the go binary (PATH, else the usual /usr/local/go/bin/go).
go_cmd() {
	if command -v go >/dev/null; then
		command -v go
	elif [[ -x /usr/local/go/bin/go ]]; then
		echo /usr/local/go/bin/go
	else
		die "no go on PATH or in /usr/local/go/bin; install Go to build nats-server"
	fi
}

# wanted_version: the nats-server module version go.mod selects, with any
# replacement, e.g. "v2.15.2".
wanted_version() {
	local g
	g=$(go_cmd)
	(cd "$REPO" && "$g" list -m -f '{{.Version}}{{with .Replace}} => {{.Path}}{{with .Version}}@{{.}}{{end}}{{end}}' "$MODULE") ||
		die "cannot read the $MODULE version from go.mod"
}

# info: prints the INFO line that a NATS server sends on connect to
# HOST:PORT; fails when nothing answers so. Uses bash's /dev/tcp.
info() {
	timeout 2 bash -c '
		exec 3<>"/dev/tcp/$0/$1" || exit 1
		IFS= read -r line <&3 || exit 1
		[[ $line == INFO\ * ]] || exit 1
		printf "%s\n" "$line"
	' "$HOST" "$PORT" 2>/dev/null
}

answers() { info >/dev/null; }

# info_field NAME LINE: the value of the string or bool field NAME in the
# INFO JSON LINE (empty when absent).
info_field() {
	sed -n "s/.*\"$1\":\(\"[^\"]*\"\|true\|false\).*/\1/p" <<<"$2" | tr -d '"'
}

# healthy: true when the monitoring endpoint reports the server healthy.
# The full check (not js-enabled-only) also requires that a single server has
# recovered every stream and consumer in its store.
healthy() {
	curl -fsS --max-time 2 -o /dev/null "http://$HOST:$HTTP_PORT/healthz" 2>/dev/null
}


# our_pid: prints the pid from our pid file if that process is a live
# nats-server running this port's configuration; fails otherwise.
our_pid() { pid_from "$PIDFILE" nats-server "$CONF"; }

cmd_install() {
	local want have=""
	want=$(wanted_version)
	[[ -f $STAMP ]] && have=$(<"$STAMP")
	if [[ -x $BIN && $have == "$want" ]]; then
		say "nats-server $want already built: $BIN"
		return
	fi
	local g t0 tmp
	g=$(go_cmd)
	t0=$(now_ns)
	mkdir -p "$BINDIR"
	say "building $MODULE $want${have:+ (replacing $have)} into $BIN"
	# Build into a temporary file and rename, so that concurrent installs
	# and running servers never see a half-written binary.
	tmp=$(mktemp "$BINDIR/.nats-server.XXXXXX")
	if ! (cd "$REPO" && "$g" build -o "$tmp" "$MODULE"); then
		rm -f "$tmp"
		die "cannot build $MODULE $want"
	fi
	mv -f "$tmp" "$BIN"
	echo "$want" >"$STAMP"
	say "built $("$BIN" --version) in $(elapsed "$t0")s"
}

# render writes this port's configuration from the template.
render() {
	local esc='s/[\\|&]/\\&/g'
	sed -e "s|@SERVER_NAME@|edgecount-$PORT|g" \
		-e "s|@HOST@|$HOST|g" -e "s|@PORT@|$PORT|g" -e "s|@HTTP_PORT@|$HTTP_PORT|g" \
		-e "s|@PIDFILE@|$(sed "$esc" <<<"$PIDFILE")|g" \
		-e "s|@STORE_DIR@|$(sed "$esc" <<<"$STORE")|g" \
		"$TEMPLATE" >"$CONF.tmp"
	mv -f "$CONF.tmp" "$CONF"
}

cmd_start() {
	if answers; then
		local pid
		if pid=$(our_pid); then
			say "already running (pid $pid, started by this script) on $HOST:$PORT"
		else
			say "reusing the server already answering on $HOST:$PORT (not started by this script; stop will leave it alone)"
		fi
		[[ $FRESH != 1 ]] || say "EDGECOUNT_NATS_FRESH=1 ignored: the running server keeps its store"
		return
	fi
	cmd_install
	command -v curl >/dev/null || die "curl is needed to check the server's /healthz"
	mkdir -p "$DIR"
	local pid
	if pid=$(our_pid); then
		die "pid $pid from $PIDFILE is a nats-server that does not answer on $HOST:$PORT; see $LOGFILE or run '$0 stop'"
	fi
	rm -f "$PIDFILE"
	if [[ $FRESH == 1 ]]; then
		rm -rf "$STORE"
		say "wiped the JetStream store $STORE"
	fi
	mkdir -p "$STORE"
	render
	"$BIN" --config "$CONF" -t >/dev/null 2>"$DIR/nats-$PORT.check" || {
		cat "$DIR/nats-$PORT.check" >&2
		die "nats-server rejects $CONF (rendered from $TEMPLATE)"
	}
	rm -f "$DIR/nats-$PORT.check"

	local t0
	t0=$(now_ns)
	echo "==== $(date -u +%FT%TZ) scripts/nats.sh start" >>"$LOGFILE"
	# setsid: the server outlives this shell and gets no signal meant for its
	# process group. The server rewrites the pid file with the same pid.
	setsid "$BIN" --config "$CONF" </dev/null >>"$LOGFILE" 2>&1 &
	pid=$!
	echo "$pid" >"$PIDFILE"
	local deadline
	deadline=$(after "$START_TIMEOUT")
	until answers && healthy; do
		if ! alive "$pid"; then
			rm -f "$PIDFILE"
			tail -n 20 "$LOGFILE" >&2 || true
			die "nats-server exited during startup; log: $LOGFILE"
		fi
		if past "$deadline"; then
			tail -n 20 "$LOGFILE" >&2 || true
			curl -sS --max-time 2 "http://$HOST:$HTTP_PORT/healthz" >&2 || true
			echo >&2
			die "nats-server (pid $pid) not ready on $HOST:$PORT after ${START_TIMEOUT}s; run '$0 stop'; log: $LOGFILE"
		fi
		sleep 0.05
	done
	say "started nats-server $(info_field version "$(info)") (pid $pid) on $HOST:$PORT, monitoring on $HOST:$HTTP_PORT, JetStream in $STORE, in $(elapsed "$t0")s; log: $LOGFILE"
}

cmd_stop() {
	started_pid || return 0
	local pid=$STARTED_PID
	local t0
	t0=$(now_ns)
	# SIGTERM shuts the server down cleanly at once: clients are closed and
	# the JetStream store is flushed and closed. (Lame-duck mode, SIGUSR2,
	# spreads client disconnects over lame_duck_duration, two minutes by
	# default, which only helps a cluster.)
	kill -TERM "$pid" 2>/dev/null || true
	local killed
	killed=$(wait_exit "$pid" "$STOP_TIMEOUT")
	rm -f "$PIDFILE"
	say "stopped pid $pid$killed in $(elapsed "$t0")s"
}

cmd_status() {
	local pid owner="not started by this script" line
	if pid=$(our_pid); then
		owner="started by this script, pid $pid"
	fi
	if line=$(info); then
		local version name js sync=""
		version=$(info_field version "$line")
		name=$(info_field server_name "$line")
		js=$(info_field jetstream "$line")
		# Our server's /varz shows "sync_always": true under jetstream.config
		# (the field is left out when false).
		local varz
		if [[ $owner != not* ]] && varz=$(curl -fsS --max-time 2 "http://$HOST:$HTTP_PORT/varz" 2>/dev/null); then
			sync=$(sed -n 's/.*"sync_always": *\(true\|false\).*/\1/p' <<<"$varz" | head -n 1)
			sync=${sync:-false}
		fi
		say "answering on $HOST:$PORT (nats-server ${version:-?}${name:+, $name}, jetstream ${js:-false}${sync:+, sync_always $sync}), $owner"
	else
		say "nothing answers on $HOST:$PORT ($owner)"
		return 1
	fi
}

service_main "$@"
