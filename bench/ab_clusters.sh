#!/usr/bin/env bash
# bench/ab_clusters.sh -- the same benchmark against two installations of
# scd2, each with its own library AND SQL objects, interleaved: for a change
# whose library cannot run with the other's objects (a new version's SQL
# calls C functions the older library lacks), where bench/ab_library.sh
# cannot swap libraries under one set of objects.
#
#   A_PG=/path/a/bin B_PG=/path/b/bin A_PORT=55521 B_PORT=55522 bench/ab_clusters.sh
#
# A_PG and B_PG are the bin directories of two PostgreSQL installations of
# the same version, each with its scd2 installed; each gets a cluster of its
# own at PostgreSQL's default settings (bench/cluster.sh, SETTINGS=default),
# in /tmp/benchpg-a and /tmp/benchpg-b.  The data is bench/run.sh's,
# generated once in each (KEYS, BATCH, ... as for run.sh), then each round
# runs one timed scd2 round of bench/run.sh in A and in B (the order
# alternates each round).  Prints every time, the medians and the median of
# the per-round ratios B/A.
#   AB_ROUNDS=7   rounds
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
: "${A_PG:?A_PG: bin directory of installation A}" "${B_PG:?B_PG: bin directory of installation B}"
A_PORT=${A_PORT:-55521}
B_PORT=${B_PORT:-55522}
AB_ROUNDS=${AB_ROUNDS:-7}
log() { printf '%s %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

cluster() {   # cluster a|b start|stop
    local bin port
    if [ "$1" = a ]; then bin=$A_PG port=$A_PORT; else bin=$B_PG port=$B_PORT; fi
    PATH="$bin:$PATH" DIR=/tmp/benchpg-$1 PORT=$port SETTINGS=default "$HERE/cluster.sh" "$2" >/dev/null
}
run() {       # run a|b GEN -> seconds of one timed scd2 round
    local bin port
    if [ "$1" = a ]; then bin=$A_PG port=$A_PORT; else bin=$B_PG port=$B_PORT; fi
    PATH="$bin:$PATH" PGHOST=/tmp/benchpg-$1 PGPORT=$port PGUSER=postgres PGDATABASE=postgres \
        APPROACHES=scd2 ROUNDS=1 VERIFY=0 GEN=$2 OUT=$(mktemp -d) "$HERE/run.sh" 2>/dev/null |
        awk '$1 == "scd2" { print $2 }'
}

cluster a start; cluster b start
trap 'cluster a stop; cluster b stop' EXIT
log "generating the data in A and in B"
run a 1 >/dev/null; run b 1 >/dev/null
a=(); b=(); ratios=()
for r in $(seq 1 "$AB_ROUNDS"); do
    if [ $((r % 2)) = 1 ]; then ta=$(run a 0); tb=$(run b 0)
    else tb=$(run b 0); ta=$(run a 0); fi
    log "round $r: A ${ta}s B ${tb}s"
    a+=("$ta"); b+=("$tb"); ratios+=("$(awk -v x="$tb" -v y="$ta" 'BEGIN { printf "%.3f", x / y }')")
done
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
echo "ab_clusters: A $A_PG: $(printf '%s ' "${a[@]}")s, median $(median "${a[@]}") s"
echo "ab_clusters: B $B_PG: $(printf '%s ' "${b[@]}")s, median $(median "${b[@]}") s"
echo "ab_clusters: median of per-round ratios B/A $(median "${ratios[@]}")"
