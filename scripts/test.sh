#!/usr/bin/env bash
# Runs the whole edgecount test suite on a fresh machine: installs and starts
# the services the tests need (reusing any already running), runs go vet and
# go test -race over every package, and stops what it started.
#
# Most tests start their parts in-process (NATS JetStream, the embedded
# store). The rest need real servers on 127.0.0.1: nats-server built from
# its Go module (scripts/nats.sh), Debian's redis-server (scripts/redis.sh)
# and Cassandra 5.0 from Maven Central on Java 17 (scripts/cassandra.sh),
# plus a second Cassandra cluster with one node per data centre (dc1 on
# 127.0.0.11, dc2 on 127.0.0.12, password authentication, optional client
# TLS: scripts/cassandra-cluster.sh) for store/cassandra's multi-DC tests,
# which find it through EDGECOUNT_CASSANDRA_CLUSTER (its contact points)
# and EDGECOUNT_CASSANDRA_CLUSTER_DIR (its state dir: TLS files, pids).
# Under CI=true a test that cannot reach its server fails instead of
# skipping.
#
# The run is a set of lanes: commands that run side by side, each with its
# log in .cache/test/LANE.log, each started once the lanes it waits for
# have ended (see the plan at the end of this file). Installs, service
# starts and compilation overlap, and the long test packages, which mostly
# wait (on timeouts, restarts, fault schedules), run side by side. Two
# shared servers order the lanes:
#   - e2e's cassandra-pause tests freeze the single node (SIGSTOP), so they
#     run after every other lane that uses it;
#   - store/cassandra's TestClusterDCDown stops a data centre of the
#     cluster, so the other users of the cluster (the other TestCluster*
#     tests, e2e's regional tests) run after it.
# Vet runs on the race build ("go vet -race"), so that one compilation
# serves vet and the tests; packages with files that depend on the race
# build tag are vetted without -race too. The compilation that runs beside
# the long lanes is niced, and the unit lane, which computes, runs after
# the e2e lanes. A lane's log is printed when it ends; any
# failed lane fails the run, and a lane that needs a failed one is not
# run. The run ends with a table of every lane's wall and CPU seconds.
#
# Environment: CI=true (make missing services fail tests), the services'
# EDGECOUNT_* addresses (defaults below), and EDGECOUNT_TEST_LOGS (the log
# directory, default .cache/test).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"

((BASH_VERSINFO[0] > 5 || (BASH_VERSINFO[0] == 5 && BASH_VERSINFO[1] >= 1))) ||
	{ echo "test.sh: needs bash 5.1 or later (wait -n -p), not $BASH_VERSION" >&2; exit 2; }

logs=${EDGECOUNT_TEST_LOGS:-$PWD/.cache/test}
rm -rf "$logs"
mkdir -p "$logs"
# Each background lane gets a process group of its own, so that an
# interrupted run can stop a lane with everything it started.
set -m

export EDGECOUNT_CASSANDRA_CLUSTER_AUTH=${EDGECOUNT_CASSANDRA_CLUSTER_AUTH:-password}
export EDGECOUNT_CASSANDRA_CLUSTER=${EDGECOUNT_CASSANDRA_CLUSTER:-$(./scripts/cassandra-cluster.sh hosts)}
export EDGECOUNT_CASSANDRA_CLUSTER_DIR=${EDGECOUNT_CASSANDRA_CLUSTER_DIR:-$PWD/.cache/cassandra-cluster}
export EDGECOUNT_NATS=${EDGECOUNT_NATS:-127.0.0.1:4222}
export EDGECOUNT_REDIS=${EDGECOUNT_REDIS:-127.0.0.1:6379}
export EDGECOUNT_CASSANDRA=${EDGECOUNT_CASSANDRA:-127.0.0.1:9042}

# ---- the lanes' steps ------------------------------------------------------

# The services this run started, one name a line; cleanup stops them.
started_file=$logs/started-services

# compile_env: the environment of the lanes that only compile: the
# compiler's garbage collector runs half as often (GOGC=200), which takes
# about a fifth off the compilation's CPU for a tenth more memory. Never the
# tests' (GOGC changes what they measure) nor a server's.
compile_env=(GOGC=200)

# bring_up NAME [ENV...]: install (with ENV) and start scripts/NAME.sh's
# service unless it is already answering; remember to stop it if this run
# started it.
bring_up() {
	if "./scripts/$1.sh" status >/dev/null 2>&1; then
		echo "== $1: already running, reused"
		return
	fi
	env "${@:2}" "./scripts/$1.sh" install
	echo "$1" >>"$started_file"
	"./scripts/$1.sh" start
}

# install_packages: Redis (started), Chromium (the dashboard's browser
# tests) and systemd's offline tools (e2e's checks of deploy/systemd;
# nothing to start), one after the other: each takes apt's lock.
install_packages() {
	bring_up redis
	./scripts/chromium.sh install
	./scripts/systemd.sh install
}

# install_cassandra: fetch the Cassandra jars unless both the single node
# and the cluster already answer (then nothing here needs them).
install_cassandra() {
	if ./scripts/cassandra.sh status >/dev/null 2>&1 && ./scripts/cassandra-cluster.sh status >/dev/null 2>&1; then
		echo "== cassandra: the single node and the cluster already run; nothing to install"
		return
	fi
	./scripts/cassandra.sh install
}

# start_cassandra: the single node on 127.0.0.1, reused when it answers.
start_cassandra() {
	if ./scripts/cassandra.sh status >/dev/null 2>&1; then
		echo "== cassandra: already running, reused"
		return
	fi
	echo cassandra >>"$started_file"
	./scripts/cassandra.sh start
}

# start_cluster: the two-DC cluster (its nodes one after another, each
# start printed), reused when it answers.
start_cluster() {
	if ./scripts/cassandra-cluster.sh status >/dev/null 2>&1; then
		echo "== cassandra-cluster: already running, reused"
		return
	fi
	echo cassandra-cluster >>"$started_file"
	./scripts/cassandra-cluster.sh up
}

# race_tagged_packages: the packages whose files depend on the race build
# tag (a file one build ignores that the other does not), which a vet of
# the race build alone does not cover whole.
race_tagged_packages() {
	local f='{{.ImportPath}} {{.IgnoredGoFiles}}'
	comm -3 <(go list -f "$f" ./... | sort) <(go list -race -f "$f" ./... | sort) |
		awk '{print $1}' | sort -u
}

# The packages of the long lanes (their tests mostly wait), and of the
# race binaries e2e builds: vetted first, so that their compilation is done
# once, before the several lanes that share it start.
long_packages=(./e2e/ ./natsjs/ ./store/cassandra/ ./cmd/edge-agent/ ./cmd/index-migrate/ ./cmd/rollup/)

# vet_long, vet_all: go vet of the race build, which compiles every
# package and test dependency as the race tests need them: the long lanes'
# packages first, then every package (niced: it runs beside the long
# lanes), so that the unit lane finds them built.
vet_long() { env "${compile_env[@]}" go vet -race "${long_packages[@]}"; }
vet_all() { env "${compile_env[@]}" nice -n 10 go vet -race ./...; }

# build: the non-race build of edge-agent and rollup, which tests and
# deploy/regions/local.sh build for themselves (built once here rather than
# by several tests at once; nats-server is scripts/nats.sh's), and go vet
# of the race-tagged packages as the non-race build sees them.
build() {
	env "${compile_env[@]}" go build ./cmd/edge-agent ./cmd/rollup
	local pkgs
	pkgs=$(race_tagged_packages)
	if [[ -n $pkgs ]]; then
		echo "== go vet (non-race) of the race-tagged packages:" $pkgs
		# shellcheck disable=SC2086
		env "${compile_env[@]}" go vet $pkgs
	fi
}

# go_test ARGS...: go test -race of a lane, uncached. Its own vet (a subset
# of go vet's checks) is off: the vet lanes ran them all on the same build.
go_test() { go test -race -vet=off -count=1 -timeout 20m "$@"; }

# The packages some lane below runs on its own; every other package runs in
# the unit lane.
own_lane_packages='/(natsjs|store/cassandra|e2e|cmd/edge-agent|cmd/index-migrate)$'

# unit_tests: every package without a lane of its own. Both commands run;
# either failing fails the lane.
unit_tests() {
	local rc=0
	# shellcheck disable=SC2046
	go_test $(go list ./... | grep -Ev "$own_lane_packages") || rc=$?
	# The race detector changes allocation sizes, so the test that compares
	# a summary's Bytes with the heap it really took only runs without -race.
	go test -vet=off -count=1 -run 'TestBytesIsWhatIsAllocated' ./topk/ || rc=$?
	return "$rc"
}

# store/cassandra's tests in three lanes: the ones on the single node, and
# two on the two-DC cluster: TestClusterDCDown, which stops a data centre,
# and then the other cluster tests (TestCluster*), beside e2e's regional
# lane.
cluster_tests='^TestCluster'
dc_down_test='^TestClusterDCDown$'
# The single node's lane also runs G11's benchmark once, so that it cannot
# rot unseen (it once bound one value fewer than its statement took).
smoke_benchmarks='^BenchmarkReactionWrite$'

# e2e's tests in three lanes: the ones that freeze the single node, the
# regional ones on the cluster (the fault rows region-cut, hub-kill and
# nemesis, TestThreeRegions and TestLinearizableReactions; the nemesis freezes the cluster's nodes,
# so the lane runs after the cluster's other users), and the rest. A fault row or test added later runs in
# the rest unless named here.
e2e_pause='^(TestCassandraPauseGives503ThenConverges|TestTogglesAcrossCassandraPause)$|^TestFault$/^cassandra-pause$'
e2e_regional='^TestThreeRegions$|^TestLinearizableReactions$|^TestFault$/^(region-cut|hub-kill|nemesis)$'

# tools_module: the tools/ module (its own go.mod), when there is one.
tools_module() {
	if [[ ! -f tools/go.mod ]]; then
		echo "== no tools/go.mod; nothing to do"
		return
	fi
	(cd tools && go vet ./... && go test -race -count=1 ./...)
}

# ---- the scheduler ---------------------------------------------------------

declare -A lane_cmd lane_needs lane_after lane_state lane_began lane_ended lane_of_pid
lanes=()
run_began=$EPOCHREALTIME

# lane NAME NEEDS AFTER COMMAND...: declare a lane that runs COMMAND once
# every lane in NEEDS (comma-separated, or -) has succeeded and every lane
# in AFTER has ended, however. A lane whose NEEDS failed is not run.
lane() {
	local name=$1 needs=$2 after=$3
	shift 3
	[[ $needs != - ]] || needs=""
	[[ $after != - ]] || after=""
	lane_needs[$name]=${needs//,/ }
	lane_after[$name]=${after//,/ }
	lane_cmd[$name]=$(printf '%q ' "$@")
	lane_state[$name]=waiting
	lanes+=("$name")
}

# secs FROM [TO]: whole seconds between two EPOCHREALTIME readings (TO:
# now), rounded. (A reading has six decimals, after a point or a comma.)
secs() {
	local from=${1//[.,]/} to=${2:-$EPOCHREALTIME}
	to=${to//[.,]/}
	echo $(((10#$to - 10#$from + 500000) / 1000000))
}

# cpu NAME: the CPU seconds (user and system) the lane's processes took,
# from the lane shell's "times" (its waited-for children: go, the tests and
# the processes they run; not the servers a lane starts).
cpu() {
	[[ -f $logs/$1.times ]] || { echo -; return; }
	awk 'NR == 2 {
		n = 0
		for (i = 1; i <= 2; i++) { split($i, t, /[ms]/); n += t[1] * 60 + t[2] }
		printf "%d\n", n + 0.5
	}' "$logs/$1.times"
}

# ready NAME: whether NAME may start now; marks it skipped when a lane it
# needs failed or was skipped.
ready() {
	local d
	for d in ${lane_needs[$1]}; do
		case ${lane_state[$d]} in
		ok) ;;
		failed | skipped)
			lane_state[$1]=skipped
			lane_began[$1]=$EPOCHREALTIME
			lane_ended[$1]=$EPOCHREALTIME
			echo "== lane $1: not run, it needs $d, which ${lane_state[$d]}"
			return 1
			;;
		*) return 1 ;;
		esac
	done
	for d in ${lane_after[$1]}; do
		case ${lane_state[$d]} in
		ok | failed | skipped) ;;
		*) return 1 ;;
		esac
	done
}

start_lane() {
	local name=$1
	lane_began[$name]=$EPOCHREALTIME
	lane_state[$name]=running
	echo "== lane $name: started at $(secs "$run_began")s"
	(
		# (Expanded now: an errexit unwinds the function's locals first.)
		# shellcheck disable=SC2064
		trap "times >$(printf %q "$logs/$name.times")" EXIT
		eval "${lane_cmd[$name]}"
	) </dev/null >"$logs/$name.log" 2>&1 &
	lane_of_pid[$!]=$name
}

# end_lane PID STATUS: record the lane's end and print its log.
end_lane() {
	local name=${lane_of_pid[$1]} took
	lane_ended[$name]=$EPOCHREALTIME
	took=$(secs "${lane_began[$name]}" "${lane_ended[$name]}")
	if (($2 == 0)); then
		lane_state[$name]=ok
		echo "== lane $name: ok in ${took}s; its log:"
	else
		lane_state[$name]=failed
		echo "== lane $name: FAILED (exit $2) in ${took}s; its log ($logs/$name.log):"
	fi
	sed 's/^/    /' "$logs/$name.log"
	echo "== end of lane $name"
}

# check_plan: every lane waits only for lanes the plan declares.
check_plan() {
	local name d
	for name in "${lanes[@]}"; do
		for d in ${lane_needs[$name]} ${lane_after[$name]}; do
			[[ -v lane_state[$d] ]] || { echo "test.sh: lane $name waits for $d, which is no lane" >&2; exit 2; }
		done
	done
}

# run_lanes: start every lane when it is ready, until all have ended.
run_lanes() {
	local name pid rc running
	check_plan
	while :; do
		running=0
		for name in "${lanes[@]}"; do
			if [[ ${lane_state[$name]} == waiting ]] && ready "$name"; then
				start_lane "$name"
			fi
			[[ ${lane_state[$name]} != running ]] || running=$((running + 1))
		done
		((running > 0)) || return 0
		if wait -n -p pid; then rc=0; else rc=$?; fi
		end_lane "$pid" "$rc"
	done
}

# report: the timing table, then whether the run passed.
report() {
	local name failed=() skipped=() began ended
	echo
	echo "== timing: wall seconds since the start of the run, and each lane's CPU seconds"
	printf '%-24s %6s %6s %8s %6s  %s\n' lane start end seconds cpu result
	for name in "${lanes[@]}"; do
		if [[ -v lane_ended[$name] ]]; then
			began=${lane_began[$name]} ended=${lane_ended[$name]}
			printf '%-24s %6s %6s %8s %6s  %s\n' "$name" "$(secs "$run_began" "$began")" "$(secs "$run_began" "$ended")" \
				"$(secs "$began" "$ended")" "$(cpu "$name")" "${lane_state[$name]}"
		else
			printf '%-24s %6s %6s %8s %6s  %s\n' "$name" - - - - "${lane_state[$name]}"
		fi
		case ${lane_state[$name]} in
		ok) ;;
		failed) failed+=("$name") ;;
		*) skipped+=("$name") ;; # skipped, or waiting on a cycle in the plan
		esac
	done
	printf '%-24s %6s %6s %8s\n' total 0 "$(secs "$run_began")" "$(secs "$run_began")"
	echo "== load average at the end (1, 5, 15 min): $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs"
	if ((${#failed[@]} + ${#skipped[@]})); then
		echo "== FAILED lanes: ${failed[*]:-none}; not run: ${skipped[*]:-none} (logs above, and in $logs/)"
		return 1
	fi
	echo "== all lanes passed"
}

# cleanup: stop lanes still running (an interrupted run) and the services
# this run started.
cleanup() {
	local pid s
	for pid in "${!lane_of_pid[@]}"; do
		[[ ${lane_state[${lane_of_pid[$pid]}]} != running ]] || kill -TERM -- "-$pid" 2>/dev/null || true
	done
	[[ -f $started_file ]] || return 0
	for s in $(tac "$started_file"); do
		if [[ $s == cassandra-cluster ]]; then
			./scripts/cassandra-cluster.sh down || true
		else
			"./scripts/$s.sh" stop || true
		fi
	done
}
trap cleanup EXIT

# ---- the plan --------------------------------------------------------------
# A lane starts once its NEEDS have succeeded and its AFTER lanes have
# ended. Services are needs; compilation is an order only (a vet finding
# fails the run, and the tests still run and report).
#
# First the setup: downloads, installs, service starts and the compilation
# the long lanes need, side by side. Then two streams of test lanes, with
# the rest of the compilation niced beside them:
#   - e2e, one lane at a time: the rest, the regional tests, the
#     cassandra-pause tests;
#   - the other packages, two lanes at the most at a time: the cluster
#     tests (TestClusterDCDown first, alone), natsjs, the single node's
#     users, then the unit lane.
# Most tests have deadlines of seconds (handovers, shutdowns, request
# timeouts, rates), set for a machine that runs two packages at a time: on
# two cores, more lanes at once made them miss those deadlines.
#    NAME                     NEEDS                       AFTER                     COMMAND
lane modules                  -                           -                         go mod download
lane packages                 -                           -                         install_packages
lane cassandra-install        -                           -                         install_cassandra
lane cassandra                cassandra-install           -                         start_cassandra
lane cassandra-cluster        cassandra-install           -                         start_cluster
lane nats                     modules                     -                         bring_up nats "${compile_env[@]}"
lane vet-long                 modules                     -                         vet_long
lane build                    modules                     nats                      build
lane vet                      modules                     vet-long                  vet_all

lane e2e                      packages,nats,cassandra     vet-long                  go_test -skip "$e2e_pause|$e2e_regional" ./e2e/
lane e2e-regional             packages,cassandra-cluster  vet-long,build,e2e,cassandra-dc-down,cassandra-cluster-users \
	go_test -run "$e2e_regional" ./e2e/
lane e2e-cassandra-pause      packages,nats,cassandra     e2e-regional,cassandra-node-users,edge-agent \
	go_test -run "$e2e_pause" ./e2e/

lane cassandra-dc-down        cassandra-cluster           vet-long                  go_test -run "$dc_down_test" ./store/cassandra/
lane cassandra-cluster-users  cassandra-cluster           cassandra-dc-down         go_test -run "$cluster_tests" -skip "$dc_down_test" ./store/cassandra/
lane natsjs                   modules                     cassandra-dc-down         go_test ./natsjs/
lane cassandra-node-users     cassandra                   natsjs                    go_test -skip "$cluster_tests" -bench "$smoke_benchmarks" -benchtime 1x ./store/cassandra/
lane edge-agent               cassandra                   build,natsjs              go_test ./cmd/edge-agent/ ./cmd/index-migrate/
lane unit                     packages                    vet,cassandra-node-users,edge-agent \
	unit_tests
lane tools                    modules                     unit                      tools_module

run_lanes
report
