# Helpers shared by the service scripts (nats.sh, redis.sh); sourced, not run.

# now_ns: nanoseconds since the epoch.
now_ns() { date +%s%N; }

# elapsed START_NS: seconds since START_NS, two decimals.
elapsed() { local d=$(( $(now_ns) - $1 )); printf '%d.%02d' $((d / 1000000000)) $((d % 1000000000 / 10000000)); }

# alive PID: true while PID runs. A zombie counts as gone: a daemon is
# reparented to pid 1, which may reap it late.
alive() {
	local stat
	stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	stat=${stat##*) }
	[[ ${stat%% *} != Z ]]
}
