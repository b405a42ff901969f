#!/usr/bin/env bash
# bench/scaling.sh -- scaling runs of the side-by-side benchmark:
#   batch 20k / 200k / 2M against KEYS (1M) keys with 1 version per key, and
#   history depth 1 vs 10 versions per key at a 200k batch.
# Writes bench/out/scaling/scaling.csv and bench/out/scaling/scaling.png
# (gnuplot; installed with apt-get when missing and running as root).
# Same environment as run.sh (PGHOST, PGPORT, PGUSER, SKIP_SCD2, ROUNDS,
# CHANGED, NEW, DELETED, CHECKPOINT, APPROACHES); BATCHES and DEPTHS
# override the sets (DEPTHS="" leaves the depth runs out).
#   SETTINGS=default|tuned  first start the benchmark's throwaway cluster
#                           (cluster.sh, with its DIR and PORT) with these
#                           settings, run against it and stop it at the
#                           end; default is PostgreSQL's defaults
#                           (shared_buffers 128MB, work_mem 4MB), e.g.
#     SETTINGS=default DIR=/tmp/benchpg PORT=55493 bench/scaling.sh
#   PLOT=1                  0: no plot (CSV only)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench/lib.sh
. "$HERE/lib.sh"
start_own_cluster
KEYS=${KEYS:-1000000}
BATCHES=${BATCHES:-"20000 200000 2000000"}
DEPTHS=${DEPTHS-"1 10"}
DEPTH_BATCH=${DEPTH_BATCH:-200000}
SDIR=${SDIR:-$HERE/out/scaling}
mkdir -p "$SDIR"
CSV=$SDIR/scaling.csv
[ "${APPEND:-0}" = 1 ] || rm -f "$CSV"

for b in $BATCHES; do
    KEYS=$KEYS BATCH=$b VERSIONS=1 SCALING_CSV=$CSV "$HERE/run.sh"
done
for v in $DEPTHS; do
    [ "$v" = 1 ] && [[ " $BATCHES " == *" $DEPTH_BATCH "* ]] && continue   # already measured
    KEYS=$KEYS BATCH=$DEPTH_BATCH VERSIONS=$v SCALING_CSV=$CSV "$HERE/run.sh"
done

if [ "${PLOT:-1}" = 1 ]; then
    "$HERE/plot.sh" "$CSV" "$SDIR/scaling.png"
    echo "wrote $CSV and $SDIR/scaling.png"
else
    echo "wrote $CSV"
fi
