#!/usr/bin/env bash
# Installs, starts, stops and reports on the Redis server that the
# directory/redis tests and local runs use.
#
#   scripts/redis.sh install   install Debian's redis-server and redis-tools
#                              (only when redis-server is not on PATH)
#   scripts/redis.sh start     reuse a server already answering PING on the
#                              address, or start one (installing it first if
#                              needed) and wait until it answers
#   scripts/redis.sh stop      stop the server this script started, and only it
#   scripts/redis.sh status    say what answers on the address and whether this
#                              script started it
#
# The server listens on 127.0.0.1:$EDGECOUNT_REDIS_PORT (default 6379), keeps
# no data on disk (--save '' --appendonly no) and runs as a daemon whose pid
# file and log live under .cache/redis/ in the repository. Tests find it at
# EDGECOUNT_REDIS (default 127.0.0.1:6379).
#
# On a Debian machine running systemd, installing the package also starts
# the package's own service on 127.0.0.1:6379; start then reuses it, and
# stop leaves it alone (systemctl stop redis-server stops it).
set -euo pipefail
# shellcheck source=service-lib.sh
. "$(dirname "$0")/service-lib.sh"

REPO=$(cd "$(dirname "$0")/.." && pwd)
HOST=127.0.0.1
PORT=${EDGECOUNT_REDIS_PORT:-6379}
DIR=$REPO/.cache/redis
PIDFILE=$DIR/redis-$PORT.pid
LOGFILE=$DIR/redis-$PORT.log
START_TIMEOUT=${EDGECOUNT_REDIS_START_TIMEOUT:-30} # seconds

SERVICE=redis

# answers: true when something on HOST:PORT replies +PONG to PING. Uses bash's
# /dev/tcp so that it works before redis-tools is installed.
answers() {
	timeout 2 bash -c '
		exec 3<>"/dev/tcp/$0/$1" || exit 1
		printf "PING\r\n" >&3
		IFS= read -r reply <&3 || exit 1
		[[ $reply == +PONG* ]]
	' "$HOST" "$PORT" 2>/dev/null
}


# our_pid: prints the pid from our pid file if that process is a live
# redis-server; fails otherwise.
our_pid() { pid_from "$PIDFILE" redis-server; }

cmd_install() {
	if command -v redis-server >/dev/null; then
		say "redis-server already installed: $(command -v redis-server), $(redis-server --version | sed -n 's/.* v=\([^ ]*\).*/v\1/p')"
		return
	fi
	command -v apt-get >/dev/null || die "redis-server is not on PATH and there is no apt-get; install Redis 7 by hand"
	local t0
	t0=$(now_ns)
	apt_install redis-server redis-tools
	command -v redis-server >/dev/null || die "redis-server still not on PATH after apt-get install"
	say "installed $(redis-server --version | sed -n 's/.* v=\([^ ]*\).*/Redis \1/p') in $(elapsed "$t0")s"
}

cmd_start() {
	if answers; then
		if pid=$(our_pid); then
			say "already running (pid $pid, started by this script) on $HOST:$PORT"
		else
			say "reusing the server already answering on $HOST:$PORT (not started by this script; stop will leave it alone)"
		fi
		return
	fi
	command -v redis-server >/dev/null || cmd_install
	mkdir -p "$DIR"
	if pid=$(our_pid); then
		die "pid $pid from $PIDFILE is a redis-server that does not answer on $HOST:$PORT; see $LOGFILE or run '$0 stop'"
	fi
	rm -f "$PIDFILE"
	local t0
	t0=$(now_ns)
	redis-server --daemonize yes --bind "$HOST" --port "$PORT" --save '' --appendonly no \
		--dir "$DIR" --pidfile "$PIDFILE" --logfile "$LOGFILE" ||
		die "redis-server failed to start; see $LOGFILE"
	local deadline=$((SECONDS + START_TIMEOUT))
	until answers; do
		if ((SECONDS >= deadline)); then
			tail -n 20 "$LOGFILE" >&2 || true
			die "no PING answer on $HOST:$PORT after ${START_TIMEOUT}s; log: $LOGFILE"
		fi
		sleep 0.05
	done
	say "started Redis $(redis-server --version | sed -n 's/.* v=\([^ ]*\).*/\1/p') (pid $(<"$PIDFILE")) on $HOST:$PORT in $(elapsed "$t0")s; log: $LOGFILE"
}

cmd_stop() {
	started_pid || return 0
	local pid=$STARTED_PID
	local t0
	t0=$(now_ns)
	# SHUTDOWN acts at once; SIGTERM waits for the server's next cron tick
	# (about a second). The pid file is per port, so the server answering on
	# the port is the one in the pid file.
	if ! { command -v redis-cli >/dev/null && redis-cli -h "$HOST" -p "$PORT" SHUTDOWN NOSAVE >/dev/null 2>&1; }; then
		kill -TERM "$pid" 2>/dev/null || true
	fi
	local killed
	killed=$(wait_exit "$pid" 30)
	rm -f "$PIDFILE"
	say "stopped pid $pid$killed in $(elapsed "$t0")s"
}

cmd_status() {
	local pid owner="not started by this script"
	if pid=$(our_pid); then
		owner="started by this script, pid $pid"
	fi
	if answers; then
		local version=""
		if command -v redis-cli >/dev/null; then
			version=$(redis-cli -h "$HOST" -p "$PORT" INFO server 2>/dev/null | tr -d '\r' | sed -n 's/^redis_version://p')
		fi
		say "answering on $HOST:$PORT${version:+ (Redis $version)}, $owner"
	else
		say "nothing answers on $HOST:$PORT ($owner)"
		return 1
	fi
}

service_main "$@"
