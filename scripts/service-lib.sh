# Helpers shared by the service scripts (nats.sh, redis.sh, cassandra.sh,
# cassandra-cluster.sh, chromium.sh, systemd.sh) and deploy/regions/local.sh;
# sourced, not run.
#
# A service script sets SERVICE (the prefix of its messages), defines
# cmd_install, cmd_start, cmd_stop and cmd_status, and ends with
# service_main "$@".

# now_ns: nanoseconds since the epoch.
now_ns() { date +%s%N; }

# elapsed START_NS: seconds since START_NS, two decimals.
elapsed() { local d=$(( $(now_ns) - $1 )); printf '%d.%02d' $((d / 1000000000)) $((d % 1000000000 / 10000000)); }

# after SECS: the now_ns value SECS seconds from now; past DEADLINE_NS: true
# once that time has come.
after() { echo $(( $(now_ns) + $1 * 1000000000 )); }
past() { (( $(now_ns) >= $1 )); }

# alive PID: true while PID runs. A zombie counts as gone: a daemon is
# reparented to pid 1, which may reap it late.
alive() {
	local stat
	stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	stat=${stat##*) }
	[[ ${stat%% *} != Z ]]
}

# say MSG / die MSG: a message on stdout / a message on stderr and exit 1,
# prefixed with "$SERVICE: ".
say() { echo "$SERVICE: $*"; }
die() { echo "$SERVICE: $*" >&2; exit 1; }

# as_root CMD...: runs CMD as root (through sudo when not root); dies
# when it cannot.
as_root() {
	if [[ $(id -u) -eq 0 ]]; then
		"$@"
	elif command -v sudo >/dev/null; then
		sudo "$@"
	else
		die "need root (or sudo) to run: $*"
	fi
}

# apt_install PACKAGE...: installs Debian's PACKAGEs with apt-get (as
# root), without recommends, saying so. The package lists are updated
# first only when they do not know the first PACKAGE yet (a fresh image
# ships without lists). Waits for another apt or dpkg run to finish
# instead of failing on its lock.
apt_install() {
	if ! apt-cache show "$1" >/dev/null 2>&1; then
		say "apt-get update"
		as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 update -q
	fi
	say "apt-get install $*"
	as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -q --no-install-recommends "$@"
}

# pid_from PIDFILE WORD...: prints the pid in PIDFILE if that process is
# alive and its command line contains every WORD (so that a recycled pid
# is not taken for the service); fails otherwise.
pid_from() {
	local file=$1 pid cmdline word
	shift
	[[ -f $file ]] || return 1
	pid=$(<"$file")
	[[ $pid =~ ^[0-9]+$ ]] || return 1
	alive "$pid" || return 1
	cmdline=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) || return 1
	for word in "$@"; do
		[[ $cmdline == *"$word"* ]] || return 1
	done
	echo "$pid"
}

# wait_exit PID SECS: waits until PID has exited, sending SIGKILL when it
# still runs SECS seconds after the call and failing when it survives that
# by 10 s. Prints " (killed)" when it had to kill. The caller has asked the
# process to stop (SIGTERM or the service's own shutdown command).
wait_exit() {
	local pid=$1 deadline killed=""
	deadline=$(after "$2")
	while alive "$pid"; do
		if past "$deadline"; then
			[[ -z $killed ]] || die "pid $pid survived SIGKILL"
			say "pid $pid did not exit within ${2}s; sending SIGKILL" >&2
			kill -KILL "$pid" 2>/dev/null || true
			killed=" (killed)"
			deadline=$(after 10)
		fi
		sleep 0.05
	done
	printf '%s' "$killed"
}

# started_pid: sets STARTED_PID to the pid of the server this script
# started (our_pid, which the script defines). When there is none it
# removes the stale PIDFILE, says whether another server answers on
# HOST:PORT (answers, the script's too) and fails, so that stop leaves a
# server it did not start alone.
started_pid() {
	if STARTED_PID=$(our_pid); then
		return 0
	fi
	rm -f "$PIDFILE"
	if answers; then
		say "the server on $HOST:$PORT was not started by this script; leaving it alone"
	else
		say "not running"
	fi
	return 1
}

# service_main ARG: runs the command ARG names, or prints the usage.
service_main() {
	case "${1:-}" in
	install) cmd_install ;;
	start) cmd_start ;;
	stop) cmd_stop ;;
	status) cmd_status ;;
	*)
		echo "usage: $0 install|start|stop|status" >&2
		exit 2
		;;
	esac
}
