#!/usr/bin/env bash
# Installs and reports on the systemd tools that e2e's TestSystemdUnits and
# TestSystemdSysusers run on deploy/systemd: systemd-analyze (verify,
# security --offline) and systemd-sysusers (--dry-run), both from Debian's
# systemd package, and /bin/kill (procps), which verify wants to find
# because the units reload with it. Nothing is started: the tests read
# unit files offline, and need no systemd running as PID 1.
#
#   scripts/systemd.sh install   install the packages that are missing; idempotent
#   scripts/systemd.sh status    say which tools the tests would use; exit 1 when
#                                one is missing
#
# Under CI=true a missing tool fails the tests; otherwise they are skipped
# naming the package.
set -euo pipefail
# shellcheck source=service-lib.sh
. "$(dirname "$0")/service-lib.sh"

SERVICE=systemd

# missing: prints the packages whose tools are not there, one a line.
missing() {
	if ! command -v systemd-analyze >/dev/null || ! command -v systemd-sysusers >/dev/null; then
		echo systemd
	fi
	[[ -x /bin/kill ]] || echo procps
}

version() { systemd-analyze --version | head -n1; }

cmd_install() {
	local pkgs
	pkgs=$(missing)
	if [[ -z $pkgs ]]; then
		say "already installed: $(version), /bin/kill"
		return
	fi
	command -v apt-get >/dev/null || die "missing: $pkgs, and there is no apt-get; install them by hand"
	local t0
	t0=$(now_ns)
	# shellcheck disable=SC2086
	apt_install $pkgs
	[[ -z $(missing) ]] || die "still missing after apt-get install: $(missing)"
	say "installed $pkgs ($(version)) in $(elapsed "$t0")s"
}

cmd_status() {
	local pkgs
	pkgs=$(missing)
	if [[ -n $pkgs ]]; then
		say "missing: $pkgs (run $0 install)"
		exit 1
	fi
	say "$(command -v systemd-analyze), $(command -v systemd-sysusers), /bin/kill: $(version)"
}

case "${1:-}" in
install) cmd_install ;;
status) cmd_status ;;
*)
	echo "usage: $0 install|status" >&2
	exit 2
	;;
esac
