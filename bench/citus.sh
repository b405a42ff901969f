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
#   GEN=1       0: keep the data of a previous run; batch: keep the
#               dimension, build a new batch of BATCH rows (bench/gen.sql
#               part=batch) on both sides
#   FACTS=0     > 0: also the as-of lookup of FACTS facts (fact_stg: fid,
#               customer_id, ts; distributed and co-located with dim on
#               Citus), ROUNDS times each, alternating: scd2.asof against
#               the half-open range join, each INSERT ... SELECT into a fact
#               table (co-located on Citus), on both sides
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
# before it classifies, load_citus.c).  Every load's metrics must agree,
# and one more load of each (rolled back) must leave the same dimension:
# a signature of every row but its surrogate key (count and a sum of row
# hashes, computed on the shards) compared across the three.
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
FACTS=${FACTS:-0}
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
elif [ "$GEN" = batch ]; then
    for dsn in "$SINGLE_DSN" "$CITUS_DSN"; do
        log "generating batch=$BATCH on $dsn"
        on "$dsn" -c "SET client_min_messages = warning" -c "DROP TABLE IF EXISTS stg_coloc" >/dev/null
        on "$dsn" -v keys="$KEYS" -v versions=1 -v layout=key -v batch="$BATCH" -v changed="$CHANGED" \
            -v new="$NEW" -v deleted=0 -v use_scd2=1 -v no_overlap=0 -v part=batch -f "$HERE/gen.sql" >/dev/null
    done
    on "$CITUS_DSN" >/dev/null <<SQL
SET client_min_messages = warning;
CREATE TABLE stg_coloc (LIKE stg);
SELECT create_distributed_table('stg_coloc', 'customer_id', colocate_with => 'dim');
INSERT INTO stg_coloc SELECT * FROM stg;
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

# One more load of each, rolled back: the dimension it leaves, as "count
# hash-sum" of every row without its surrogate key (summed on the shards).
signature() {
    on "$(dsn_of "$1")" -F' ' <<SQL | tail -n 1
SET client_min_messages = warning;
BEGIN;
CALL scd2.apply('$(stg_of "$1")', 'dim', effective_at => '$EFF') \g /dev/null
SELECT count(*), sum(('x' || left(md5((to_jsonb(d) - 'customer_sk')::text), 15))::bit(60)::bigint) FROM dim d;
ROLLBACK;
SQL
}
for app in "${APPS[@]}"; do
    sig=$(signature "$app"); reset_dim "$app"
    echo "0,verify_$app,0,$sig" >>"$OUT/times.csv"
    log "verify $(printf '%-12s' "$app") rows and hash-sum: $sig"
done

# The as-of lookup (FACTS > 0): the facts keyed by scd2.asof and by the
# range join, into a fact table, on both sides.
if [ "$FACTS" -gt 0 ]; then
    for side in single citus; do
        dsn=$(dsn_of "$side")
        log "generating $FACTS facts on $side"
        on "$dsn" >/dev/null <<SQL
SET client_min_messages = warning;
DROP TABLE IF EXISTS fact_stg, fact_out;
CREATE TABLE fact_stg (fid bigint, customer_id bigint, ts timestamptz);
CREATE TABLE fact_out (fid bigint, customer_sk bigint);
$( [ "$side" = citus ] && echo "SELECT create_distributed_table('fact_stg', 'customer_id', colocate_with => 'dim');
SELECT create_distributed_table('fact_out', 'fid');" )
INSERT INTO fact_stg SELECT g, 1 + (hashint8(g) & 2147483647) % $KEYS,
       timestamptz '2020-01-01 UTC' + ((hashint8(-g) & 2147483647) % 200000000) * interval '1 second'
  FROM generate_series(1, $FACTS) g;
VACUUM ANALYZE fact_stg;
SQL
    done
    asof_one() {   # side how: "seconds keyed"
        local join="LEFT JOIN dim d ON d.customer_id = f.customer_id AND d.valid_from <= f.ts AND (d.valid_to IS NULL OR f.ts < d.valid_to)"
        local sel
        case $2 in
            asof) sel="SELECT f.fid, scd2.asof('dim', f.ts, f.customer_id) FROM fact_stg f" ;;
            range) sel="SELECT f.fid, d.customer_sk FROM fact_stg f $join" ;;
        esac
        on "$(dsn_of "$1")" -F' ' <<SQL | tail -n 1
SET client_min_messages = warning;
TRUNCATE fact_out;
SELECT clock_timestamp() AS t0 \gset
INSERT INTO fact_out $sel;
SELECT round(extract(epoch FROM clock_timestamp() - :'t0'::timestamptz), 4),
       (SELECT count(customer_sk) || '/' || count(*) || ':' || sum(customer_sk) FROM fact_out);
SQL
    }
    for ((r = 1; r <= ROUNDS; r++)); do
        order=(single:asof single:range citus:asof citus:range)
        [ $((r % 2)) = 0 ] && order=(citus:range citus:asof single:range single:asof)
        for x in "${order[@]}"; do
            read -r s k <<<"$(asof_one "${x%%:*}" "${x##*:}")"
            echo "$r,asof_${x%%:*}_${x##*:},$s,keyed=$k" >>"$OUT/times.csv"
            log "round $r  asof $(printf '%-14s' "$x") $s s  keyed $k"
        done
    done
fi

# shellcheck source=bench/lib.sh
. "$HERE/lib.sh"
median() { median_times "$OUT/times.csv" "$1" | cut -d' ' -f1; }
ref=$(median single)
nmetrics=$(grep -E ',(single|citus_local|citus_coloc),' "$OUT/times.csv" | cut -d, -f4 | sort -u | wc -l)
nsigs=$({ grep ',verify_' "$OUT/times.csv" || true; } | cut -d, -f4 | sort -u | wc -l)
nkeyed=$({ grep ',asof_' "$OUT/times.csv" || true; } | cut -d, -f4 | sort -u | wc -l)
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
    if [ "$nsigs" = 1 ]; then
        echo "every load leaves the same dimension (rows, hash-sum): $(grep ',verify_single,' "$OUT/times.csv" | cut -d, -f4)"
    else
        echo "THE DIMENSIONS DIFFER after the loads (see times.csv)"
    fi
    if [ "$FACTS" -gt 0 ]; then
        for x in single_asof single_range citus_asof citus_range; do
            m=$(median "asof_$x")
            printf '%-18s %10s %9s %s\n' "asof_$x" "$m" "$(awk -v a="$m" -v b="$(median asof_single_range)" 'BEGIN { printf "%.2f", a / b }')" \
                "$(grep ",asof_$x," "$OUT/times.csv" | cut -d, -f3 | paste -sd' ')"
        done
        echo "(as-of: x single is against the single node's range join)"
        if [ "$nkeyed" = 1 ]; then echo "every lookup keyed the same facts: $(grep ',asof_single_range,' "$OUT/times.csv" | head -1 | cut -d, -f4)"
        else echo "THE LOOKUPS KEYED DIFFERENT FACTS (see times.csv)"; fi
    fi
} | tee "$OUT/summary.txt"
[ "$nmetrics" = 1 ] && [ "$nsigs" = 1 ] && { [ "$FACTS" = 0 ] || [ "$nkeyed" = 1 ]; }
