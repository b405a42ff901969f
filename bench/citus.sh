#!/usr/bin/env bash
# bench/citus.sh -- one scd2 load on a single PostgreSQL vs the same load on
# a Citus cluster with the dimension distributed by its business key
# (issue 16), side by side, against servers that are already running.
#
#   CITUS_DSN="host=/tmp/scd2-citus-57100 port=57100 user=postgres dbname=scd2_citus" \
#   SINGLE_DSN="host=/tmp/scd2-citus-57100 port=57100 user=postgres dbname=scd2_bench_single" \
#   bench/citus.sh
#
#   CITUS_DSN   a Citus coordinator's database with its workers added and scd2
#               installed on every node -- e.g. the cluster test/citus/run.sh
#               leaves running with SCD2_CITUS_KEEP=1 (database scd2_citus)
#   SINGLE_DSN  a database of one PostgreSQL with scd2 available; it may be a
#               database of the coordinator's server without the citus
#               extension (same binaries, same settings: a fair pair), and is
#               created when missing
#   KEYS=1000000 BATCH=200000 CHANGED=0.10 NEW=0.05   bench/gen.sql's data
#   SHARDS=32   shards of the distributed dimension (Citus's default count)
#   ROUNDS=3    timed rounds; the three loads alternate order each round
#   GEN=1       0: keep the data of a previous run
#   OUT=bench/out/citus-k<KEYS>_b<BATCH>
#
# The loads (each in a transaction that is rolled back, the dimension
# vacuumed after, as bench/run.sh does):
#   single       CALL scd2.apply('stg', 'dim') on SINGLE_DSN
#   citus_local  the same on CITUS_DSN: dim distributed by customer_id,
#                staging a local table of the coordinator
#   citus_coloc  staging distributed by customer_id, co-located with dim
# and, untimed in the loads, the image read alone on both (the versions of
# the staged keys copied into a temporary table: what a Citus load reads
# before it classifies, load_citus.c).  Every load's metrics must agree.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
: "${CITUS_DSN:?set CITUS_DSN (see the header)}"
: "${SINGLE_DSN:?set SINGLE_DSN (see the header)}"
KEYS=${KEYS:-1000000}
BATCH=${BATCH:-200000}
CHANGED=${CHANGED:-0.10}
NEW=${NEW:-0.05}
SHARDS=${SHARDS:-32}
ROUNDS=${ROUNDS:-3}
GEN=${GEN:-1}
OUT=${OUT:-$HERE/out/citus-k${KEYS}_b${BATCH}}
EFF='2026-11-30 12:00:00+00'
mkdir -p "$OUT"
export TZ=UTC PGTZ=UTC

log() { printf '%s %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
on() { local dsn=$1; shift; psql -X -q -At -v ON_ERROR_STOP=1 -d "$dsn" "$@"; }
dsn_of() { case $1 in single) echo "$SINGLE_DSN" ;; *) echo "$CITUS_DSN" ;; esac; }
stg_of() { case $1 in citus_coloc) echo stg_coloc ;; *) echo stg ;; esac; }

# SINGLE_DSN's database, when it does not exist yet
single_db=$(sed -nE 's/.*dbname=([^ ]+).*/\1/p' <<<"$SINGLE_DSN")
if [ -n "$single_db" ] && ! on "$SINGLE_DSN" -c "SELECT 1" >/dev/null 2>&1; then
    on "${SINGLE_DSN/dbname=$single_db/dbname=postgres}" -c "CREATE DATABASE $single_db"
fi
[ "$(on "$CITUS_DSN" -c "SELECT count(*) FROM pg_dist_node WHERE groupid <> 0 AND isactive")" -ge 1 ] ||
    { echo "CITUS_DSN has no active worker" >&2; exit 1; }
[ "$(on "$SINGLE_DSN" -c "SELECT count(*) FROM pg_extension WHERE extname = 'citus'")" = 0 ] ||
    { echo "SINGLE_DSN has the citus extension: give a plain database" >&2; exit 1; }

if [ "$GEN" = 1 ]; then
    for dsn in "$SINGLE_DSN" "$CITUS_DSN"; do
        log "generating keys=$KEYS batch=$BATCH on $dsn"
        on "$dsn" -c "SET client_min_messages = warning" -c "DROP TABLE IF EXISTS stg_coloc" \
            -c "CREATE EXTENSION IF NOT EXISTS scd2" >/dev/null
        on "$dsn" -v keys="$KEYS" -v versions=1 -v layout=key -v batch="$BATCH" -v changed="$CHANGED" \
            -v new="$NEW" -v deleted=0 -v use_scd2=1 -v no_overlap=0 -f "$HERE/gen.sql" >/dev/null
    done
    log "distributing dim ($SHARDS shards) and a co-located copy of stg"
    on "$CITUS_DSN" >/dev/null <<SQL
SET client_min_messages = warning;
-- a distributed table's unique indexes must contain the distribution column
ALTER TABLE dim DROP CONSTRAINT dim_pkey, ADD PRIMARY KEY (customer_id, customer_sk);
SELECT create_distributed_table('dim', 'customer_id', shard_count => $SHARDS);
CREATE TABLE stg_coloc (LIKE stg);
SELECT create_distributed_table('stg_coloc', 'customer_id', colocate_with => 'dim');
INSERT INTO stg_coloc SELECT * FROM stg;
VACUUM ANALYZE dim;
VACUUM ANALYZE stg_coloc;
SQL
fi
COMPOSITION=$(on "$SINGLE_DSN" -F' ' -c "SELECT 'keys='||keys||' batch='||batch||' unchanged='||unchanged||' changed='||changed||' new='||new FROM bench_params")
CITUS=$(on "$CITUS_DSN" -F' ' -c "SELECT 'Citus '||extversion||', '||(SELECT count(*) FROM pg_dist_node WHERE groupid <> 0)||' workers' FROM pg_extension WHERE extname = 'citus'")
log "batch: $COMPOSITION; $CITUS"

# One load in a rolled-back transaction: "seconds metrics"
run_one() {
    local app=$1
    on "$(dsn_of "$app")" -F' ' <<SQL | tail -n 1
SET client_min_messages = warning;
BEGIN;
SELECT clock_timestamp() AS t0 \gset
CALL scd2.apply('$(stg_of "$app")', 'dim', effective_at => '$EFF') \g /dev/null
SELECT round(extract(epoch FROM clock_timestamp() - :'t0'::timestamptz), 4),
       'inserted=' || inserted || ';new_versions=' || new_versions || ';closed=' || closed || ';unchanged=' || unchanged
FROM scd2.audit_log ORDER BY run_id DESC LIMIT 1;
ROLLBACK;
SQL
}
# The image read alone (rolled back): "seconds rows"
image_read() {
    on "$(dsn_of "$1")" -F' ' <<SQL | tail -n 1
SET client_min_messages = warning;
BEGIN;
CREATE TEMP TABLE img (LIKE dim);
SELECT clock_timestamp() AS t0 \gset
INSERT INTO img SELECT d.* FROM dim d WHERE (d.customer_id) IN (SELECT s.customer_id FROM stg s);
SELECT round(extract(epoch FROM clock_timestamp() - :'t0'::timestamptz), 4), (SELECT count(*) FROM img);
ROLLBACK;
SQL
}
reset_dim() { on "$(dsn_of "$1")" -c "VACUUM (ANALYZE) dim" >/dev/null; }

APPS=(single citus_local citus_coloc)
log "warm-up"
for app in "${APPS[@]}"; do run_one "$app" >/dev/null; reset_dim "$app"; done

echo "round,approach,seconds,metrics" >"$OUT/times.csv"
for ((r = 1; r <= ROUNDS; r++)); do
    for ((i = 0; i < 3; i++)); do
        app=${APPS[$(( (i + r - 1) % 3 ))]}
        read -r s m <<<"$(run_one "$app")"
        echo "$r,$app,$s,$m" >>"$OUT/times.csv"
        log "round $r  $(printf '%-12s' "$app") $s s  $m"
        reset_dim "$app"
    done
    for side in single citus_local; do
        read -r s n <<<"$(image_read "$side")"
        echo "$r,image_$side,$s,rows=$n" >>"$OUT/times.csv"
    done
done

median() { grep ",$1," "$OUT/times.csv" | cut -d, -f3 | sort -g |
           awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR + 1) / 2]; else printf "%.4f\n", (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
ref=$(median single)
nmetrics=$(grep -E ',(single|citus_local|citus_coloc),' "$OUT/times.csv" | cut -d, -f4 | sort -u | wc -l)
{
    echo "# $COMPOSITION; $CITUS; shards=$SHARDS rounds=$ROUNDS ($(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores)"
    printf '%-18s %10s %9s %s\n' load median_s x_single all_rounds_s
    for app in single citus_local citus_coloc image_single image_citus_local; do
        m=$(median "$app")
        printf '%-18s %10s %9s %s\n' "$app" "$m" "$(awk -v a="$m" -v b="$ref" 'BEGIN { printf "%.2f", a / b }')" \
            "$(grep ",$app," "$OUT/times.csv" | cut -d, -f3 | paste -sd' ')"
    done
    if [ "$nmetrics" = 1 ]; then
        echo "metrics identical in every load: $(grep ',single,' "$OUT/times.csv" | head -1 | cut -d, -f4)"
    else
        echo "METRICS DIFFER between the loads (see times.csv)"
    fi
} | tee "$OUT/summary.txt"
[ "$nmetrics" = 1 ]
