#!/usr/bin/env bash
# Measures edgecount's Cassandra data model at scale (docs/data-model.md):
# fills a keyspace of its own (edgecount_dm_bench) with hot items of 10^5
# and 10^6 live reactions (plus 10 % as many undone, i.e. tombstones) in the
# bucketed and the legacy by-content index and one user with 10^5 rows,
# flushes it, times the recount, reads partition sizes and tombstones per
# read with nodetool, and drops the keyspace.
#
#   scripts/measure-index.sh [OUT]    report to OUT (default docs/data-model-measured.txt)
#
# Environment: EDGECOUNT_CASSANDRA (127.0.0.1:9042), EDGECOUNT_CASSANDRA_JMX
# (7199), EDGECOUNT_SCALE_SIZES (100000,1000000), EDGECOUNT_SCALE_USER
# (100000), EDGECOUNT_CASSANDRA_DIR (the jars, default <repo>/.cache/cassandra,
# as scripts/cassandra.sh), JAVA17. The Go side runs pinned to CPU 0 when
# taskset exists; pin the node with EDGECOUNT_CASSANDRA_CPUS=1 when starting
# it. Needs about 1 GB of disk for the default sizes.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-$repo/docs/data-model-measured.txt}"
cache="${EDGECOUNT_CASSANDRA_DIR:-$repo/.cache/cassandra}"
[[ -d "$cache/lib" ]] || cache=/work/main/.cache/cassandra
java="${JAVA17:-/usr/lib/jvm/java-17-openjdk-amd64/bin/java}"
jmx="${EDGECOUNT_CASSANDRA_JMX:-7199}"
ks=edgecount_dm_bench
export EDGECOUNT_CASSANDRA="${EDGECOUNT_CASSANDRA:-127.0.0.1:9042}"
pin=()
command -v taskset >/dev/null && pin=(taskset -c 0)

opts=()
while read -r line; do
	[[ -z "$line" || "$line" == \#* ]] && continue
	# shellcheck disable=SC2206 # "--add-exports X" is two arguments
	opts+=($line)
done <"$repo/scripts/cassandra/jvm17.options"
nodetool() {
	"$java" "${opts[@]}" -cp "$cache/lib/*" org.apache.cassandra.tools.NodeTool -h 127.0.0.1 -p "$jmx" "$@" 2>&1 |
		grep -v 'DEBUG\|^WARN\|^SLF4J' || true
}
phase() {
	EDGECOUNT_SCALE_PHASE=$1 "${pin[@]}" go test -count=1 -run '^TestScale$' -v -timeout 90m ./store/cassandra/ 2>&1 |
		grep -E "RESULT|filled|FAIL|ok|scale_test"
}
cd "$repo"
trap 'phase drop >/dev/null' EXIT
{
	echo "# scripts/measure-index.sh, $(date -u +%FT%TZ), $(nproc) cores, load: $(uptime | sed 's/.*load average: //')"
	echo "# sizes ${EDGECOUNT_SCALE_SIZES:-100000,1000000}, heavy user ${EDGECOUNT_SCALE_USER:-100000} rows"
	echo "## fill"
	phase drop >/dev/null
	phase fill
	nodetool flush "$ks"
	echo "## recount (after a flush: reads from sstables)"
	phase read
	echo "## load after the reads: $(uptime | sed 's/.*load average: //')"
	for table in user_likes_by_bucket user_likes_by_content user_likes; do
		echo "## nodetool tablestats $ks.$table"
		nodetool tablestats "$ks.$table" | grep -E 'Table:|SSTable count|Space used \(live\)|Number of partitions|Compacted partition|tombstones per slice|live cells per slice|Memtable cell count'
		echo "## nodetool tablehistograms $ks $table"
		nodetool tablehistograms "$ks" "$table"
	done
} | tee "$out"
