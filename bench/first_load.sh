#!/usr/bin/env bash
# bench/first_load.sh -- the first load into an empty dimension, side by
# side (issue 14):
#   scd2   CALL scd2.apply('stg', 'dim', ...) into the empty registered dimension
#   scd2_nolog  the same with SET LOCAL scd2.change_log = off (optional:
#          APPROACHES="scd2 scd2_nolog dbt floor"), what the change log costs
#   dbt    the first run of a dbt snapshot: CREATE TABLE AS, no indexes
#   floor  INSERT of the rows sorted by key into a table without indexes,
#          then the primary key, the current-row index and the as-of index
#          built afterwards
# on the same ROWS staging rows (one per key, random key order), in
# alternating rounds; verifies that the three leave the same dimension and
# prints medians and ratios (to the floor and to dbt).
#
# Connection: the usual libpq environment (PGHOST, PGPORT, PGUSER); the
# benchmark uses its own database DB (created when missing).  The server
# needs scd2 installed unless SKIP_SCD2=1.
#
# Parameters (environment):
#   ROWS=1000000 ROUNDS=3 DB=bench_first
#   GEN=1        0: reuse the data of the previous run if ROWS matches
#   VERIFY=1     0: skip the verification pass
#   EXPLAIN=0    1: also log every statement's plan with auto_explain to
#                $OUT/explain-<approach>.txt (untimed, rolled back)
#   SETTLE=1     sync after each run's VACUUM (0: no sync)
#   APPROACHES="scd2 dbt floor"  (also seeds: the seeds' MERGE into an
#                empty dim_seed; scd2_nolog)
#   WARMUP=1     0: no untimed warm-up run (the verification run warms)
#   MEMORY=0     1: also sample each load's peak private memory (RssAnon)
#   OUT=bench/out/first_<ROWS>
#
# Every load runs in a transaction that is rolled back:
#   BEGIN; t0 := clock_timestamp(); <approach>; t := clock_timestamp() - t0; ROLLBACK;
# then the dimension is vacuumed (outside the timing).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROWS=${ROWS:-1000000}
ROUNDS=${ROUNDS:-3}
DB=${DB:-bench_first}
GEN=${GEN:-1}
VERIFY=${VERIFY:-1}
EXPLAIN=${EXPLAIN:-0}
SETTLE=${SETTLE:-1}
WARMUP=${WARMUP:-1}
SKIP_SCD2=${SKIP_SCD2:-0}
APPROACHES=${APPROACHES:-"scd2 dbt floor"}
[ "$SKIP_SCD2" = 1 ] && APPROACHES=$(echo "$APPROACHES" | tr ' ' '\n' | grep -v '^scd2' | tr '\n' ' ')
read -r -a APPS <<<"$APPROACHES"
EFF='2026-11-30 12:00:00+00'
EFF_TS='2026-11-30 12:00:00'
OUT=${OUT:-$HERE/out/first_$ROWS}
mkdir -p "$OUT"
export TZ=UTC PGTZ=UTC

log() { printf '%s %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
# shellcheck source=bench/lib.sh
. "$HERE/lib.sh"

if [ "$(psql -X -At -d postgres -c "SELECT count(*) FROM pg_database WHERE datname = '$DB'")" = 0 ]; then
    psql -X -q -d postgres -c "CREATE DATABASE $DB" >/dev/null
fi
export PGDATABASE=$DB
PSQL=(psql -X -q -At -v ON_ERROR_STOP=1 -v "eff=$EFF" -v "eff_ts=$EFF_TS")

USE_SCD2=0
if [ "$SKIP_SCD2" != 1 ]; then
    "${PSQL[@]}" -c 'CREATE EXTENSION IF NOT EXISTS scd2' >/dev/null
    USE_SCD2=1
fi
have=$("${PSQL[@]}" -c "SELECT rows FROM bench_params" 2>/dev/null || true)
if [ "$GEN" = 1 ] || [ "$have" != "$ROWS" ]; then
    log "generating: rows=$ROWS"
    t=$(date +%s)
    "${PSQL[@]}" -v rows="$ROWS" -v use_scd2="$USE_SCD2" -f "$HERE/first/gen.sql" >/dev/null
    log "generated in $(( $(date +%s) - t )) s"
fi

run_one() {   # approach verify(0/1) explain(0/1)
    local app=$1 verify=$2 explain=$3
    {
        echo "SET client_min_messages = warning;"
        backend_pid_sql "$app"
        if [ "$explain" = 1 ]; then
            echo "LOAD 'auto_explain';"
            echo "SET auto_explain.log_min_duration = 0;"
            echo "SET auto_explain.log_analyze = on;"
            echo "SET auto_explain.log_buffers = on;"
            echo "SET auto_explain.log_timing = on;"
            echo "SET auto_explain.log_nested_statements = on;"
            echo "SET client_min_messages = log;"
            echo "SET log_statement_stats = off;"
        fi
        echo "BEGIN;"
        echo "SELECT clock_timestamp() AS t0 \\gset"
        echo "\\i $HERE/first/$app.sql"
        echo "SELECT round(extract(epoch FROM clock_timestamp() - :'t0'::timestamptz), 4);"
        if [ "$verify" = 1 ]; then
            echo "SET client_min_messages = warning;"
            case $app in
                dbt) echo "\\i $HERE/approaches/verify_dbtshape.sql" ;;
                floor) echo "\\set tbl dim_floor"; echo "\\i $HERE/approaches/verify_scd2shape.sql" ;;
                seeds) echo "\\set tbl dim_seed"; echo "\\i $HERE/approaches/verify_scd2shape.sql" ;;
                *) echo "\\set tbl dim"; echo "\\i $HERE/approaches/verify_scd2shape.sql" ;;
            esac
        fi
        echo "ROLLBACK;"
    } | "${PSQL[@]}" -f -
}

reset_after() {   # vacuum what the rolled-back load left behind
    # (1GB: every dead row of a 100M-row load in one pass over the indexes)
    "${PSQL[@]}" -c "SET maintenance_work_mem = '1GB'" -c "VACUUM (ANALYZE) dim" >/dev/null
    if [ "$SETTLE" = 1 ]; then sync; fi
}

memory_sampler_start
trap memory_sampler_stop EXIT
if [ "$VERIFY" = 1 ]; then verify_approaches reset_after; fi

if [ "$EXPLAIN" = 1 ]; then explain_approaches reset_after; fi

if [ "$WARMUP" = 1 ]; then
    log "warm-up"
    "${PSQL[@]}" -c CHECKPOINT >/dev/null
    for app in "${APPS[@]}"; do run_one "$app" 0 0 >/dev/null; reset_after; done
fi

echo "round,approach,seconds" >"$OUT/times.csv"
# ROUNDS=0: the verification run is the measurement (one run each)
[ "$ROUNDS" = 0 ] && [ -s "$OUT/verify_times.csv" ] && cp "$OUT/verify_times.csv" "$OUT/times.csv"
n=${#APPS[@]}
for ((r = 1; r <= ROUNDS; r++)); do
    for ((i = 0; i < n; i++)); do
        app=${APPS[$(( (i + r - 1) % n ))]}
        s=$(run_one "$app" 0 0 | tail -n 1)
        echo "$r,$app,$s" >>"$OUT/times.csv"
        log "round $r  $(printf '%-6s' "$app") $s s"
        reset_after
    done
done

memory_sampler_stop
median() { median_times "$OUT/times.csv" "$1" | cut -d' ' -f1; }
{
    echo "# first load: rows=$ROWS rounds=$ROUNDS ($(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, shared_buffers=$("${PSQL[@]}" -c 'SHOW shared_buffers') work_mem=$("${PSQL[@]}" -c 'SHOW work_mem') maintenance_work_mem=$("${PSQL[@]}" -c 'SHOW maintenance_work_mem'))"
    printf '%-8s %10s %s\n' approach median_s all_rounds_s
    for app in "${APPS[@]}"; do
        printf '%-8s %10s %s%s\n' "$app" "$(median "$app")" "$(grep ",$app," "$OUT/times.csv" | cut -d, -f3 | paste -sd' ')" \
            "$([ -z "$(peak_mb "$app")" ] || echo "  peak $(peak_mb "$app") MB")"
    done
    # ratios of two approaches within one round (steadier on a machine
    # whose speed drifts), median over the rounds
    awk -F, 'NR > 1 { t[$1 "," $2] = $3; rounds[$1] = 1; apps[$2] = 1 }
        function median(a, n,   i, j, x) {
            for (i = 2; i <= n; i++) { x = a[i]; for (j = i - 1; j >= 1 && a[j] > x; j--) a[j + 1] = a[j]; a[j + 1] = x }
            return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
        function ratio(x, y,   r, n) {
            n = 0; delete v
            for (r in rounds) if (t[r "," x] > 0 && t[r "," y] > 0) v[++n] = t[r "," x] / t[r "," y]
            return n ? sprintf(" %s/%s=%.2f", x, y, median(v, n)) : ""
        }
        END {
            line = "median of per-round ratios:"
            if ("scd2" in apps && "floor" in apps) line = line ratio("scd2", "floor")
            if ("scd2" in apps && "dbt" in apps) line = line ratio("scd2", "dbt")
            if ("scd2_nolog" in apps && "floor" in apps) line = line ratio("scd2_nolog", "floor")
            if ("scd2_nolog" in apps && "dbt" in apps) line = line ratio("scd2_nolog", "dbt")
            if ("floor" in apps && "dbt" in apps) line = line ratio("floor", "dbt")
            print line
        }' "$OUT/times.csv"
} | tee "$OUT/summary.txt"
