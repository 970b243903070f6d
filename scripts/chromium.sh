#!/usr/bin/env bash
# Installs and reports on the headless Chromium that the dashboard test
# (go test ./dashboard/) drives with chromedp.
#
#   scripts/chromium.sh install   install Debian's chromium package (only when
#                                 no chromium is on PATH or at
#                                 $EDGECOUNT_CHROMIUM); idempotent
#   scripts/chromium.sh status    say which chromium the test would use and its
#                                 version; exit 1 when there is none
#
# The test finds the browser at $EDGECOUNT_CHROMIUM, else the first of
# chromium, chromium-browser, google-chrome on PATH. Under CI=true a missing
# browser fails the test; otherwise it is skipped naming this script.
# There is nothing to start or stop: each test run starts its own browser.
set -euo pipefail
# shellcheck source=service-lib.sh
. "$(dirname "$0")/service-lib.sh"

SERVICE=chromium

# browser: prints the browser the test would use; fails when there is none.
browser() {
	if [[ -n ${EDGECOUNT_CHROMIUM:-} ]]; then
		[[ -x $EDGECOUNT_CHROMIUM ]] && { echo "$EDGECOUNT_CHROMIUM"; return; }
		return 1
	fi
	local b
	for b in chromium chromium-browser google-chrome; do
		if command -v "$b" >/dev/null; then
			command -v "$b"
			return
		fi
	done
	return 1
}

version() { "$1" --headless --no-sandbox --version 2>/dev/null || "$1" --version 2>/dev/null || echo "unknown version"; }

cmd_install() {
	local b
	if b=$(browser); then
		say "already installed: $b, $(version "$b")"
		return
	fi
	command -v apt-get >/dev/null || die "no chromium on PATH and there is no apt-get; install Chromium by hand or set EDGECOUNT_CHROMIUM"
	local t0
	t0=$(now_ns)
	apt_install chromium
	b=$(browser) || die "chromium still not on PATH after apt-get install"
	say "installed $b, $(version "$b") in $(elapsed "$t0")s"
}

cmd_status() {
	local b
	if b=$(browser); then
		say "$b, $(version "$b")"
	else
		say "not installed (run $0 install)"
		exit 1
	fi
}

case "${1:-}" in
install) cmd_install ;;
status) cmd_status ;;
*)
	echo "usage: $0 install|status" >&2
	exit 2
	;;
esac
