#!/usr/bin/env bash
# bench/run.sh -- side-by-side benchmark of one SCD2 load (issue 5):
#   scd2   CALL scd2.apply('stg', 'dim', effective_at => ...)
#   seeds  the seeds' staged-union MERGE (row_hash, NULL merge key)
#   dbt    the SQL a dbt snapshot (check strategy, check_cols='all') runs
#   floor  the unavoidable reads and writes alone, classification precomputed
#
# Connection: the usual libpq environment (PGHOST, PGPORT, PGUSER,
# PGDATABASE). The server needs scd2 installed unless SKIP_SCD2=1.
#
# Parameters (environment):
#   KEYS=1000000 BATCH=200000 CHANGED=0.10 NEW=0.05 DELETED=0 VERSIONS=1
#   LAYOUT=key          key | load: physical order of the history (gen.sql)
#   ROUNDS=3            timed rounds; the approaches alternate order each round
#   SKIP_SCD2=0         1: leave approach 1 out (extension not installed)
#   APPROACHES="scd2 seeds dbt floor"   (also: scd2_merge, scd2.merge with
#                       its change feed, on the same dimension; scd2_nolog,
#                       scd2.apply with SET scd2.change_log = off -- the
#                       load without its change log; scd2_untracked,
#                       scd2.apply with SET track_activities = off -- the
#                       load without its progress reports)
#   NO_OVERLAP=0        1: also scd2_no_overlap, scd2.apply on a copy of the
#                       dimension registered with no_overlap => true (an
#                       exclusion constraint; needs btree_gist)
#   GEN=1               0: reuse the data of the previous run if its
#                       parameters match (bench_params)
#   VERIFY=1            0: skip the verification pass
#   CHECKPOINT=0        1: CHECKPOINT after every run too, so every load pays
#                       the full-page images of its first touch of each page
#                       (0: after the warm-up no checkpoint happens during
#                       the run, the loads write no full-page images)
#   SETTLE=1            after each run's VACUUM, write the dirty OS page
#                       cache out (sync) before the next timed run, so no
#                       load pays for the previous one's writeback (the
#                       server must be on this machine; 0: no sync)
#   EXPLAIN=0           1: also log every statement's plan with auto_explain
#                       (ANALYZE, BUFFERS, nested statements) to
#                       $OUT/explain-<approach>.txt (untimed, rolled back)
#   WARMUP=1            0: no untimed warm-up run of each approach (at 100M
#                       rows a run takes minutes; the verification run
#                       then warms the caches)
#   MEMORY=0            1: also sample each load's peak private memory
#                       (RssAnon; the server on this machine) into the
#                       summary and $OUT/peaks.txt
#   OUT=bench/out/<tag> where the CSV, summary and plans go
#   SCALING_CSV=        if set, one line per approach is appended to it
#
# Every load runs in its own transaction that is rolled back:
#   BEGIN; t0 := clock_timestamp(); <approach>; t := clock_timestamp() - t0; ROLLBACK;
# and the table it wrote is VACUUM (ANALYZE)d (and with CHECKPOINT=1 a
# checkpoint taken) after
# each run (outside the timing), so every run starts from the same state.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
KEYS=${KEYS:-1000000}
BATCH=${BATCH:-200000}
CHANGED=${CHANGED:-0.10}
NEW=${NEW:-0.05}
DELETED=${DELETED:-0}
VERSIONS=${VERSIONS:-1}
LAYOUT=${LAYOUT:-key}
ROUNDS=${ROUNDS:-3}
SKIP_SCD2=${SKIP_SCD2:-0}
GEN=${GEN:-1}
VERIFY=${VERIFY:-1}
EXPLAIN=${EXPLAIN:-0}
CHECKPOINT=${CHECKPOINT:-0}
SETTLE=${SETTLE:-1}
WARMUP=${WARMUP:-1}
EFF='2026-11-30 12:00:00+00'       # the load's effective_at
EFF_TS='2026-11-30 12:00:00'       # the same instant as dbt's timestamp without time zone (UTC)
TAG=${TAG:-k${KEYS}_b${BATCH}_v${VERSIONS}_c${CHANGED}_n${NEW}_d${DELETED}$([ "$LAYOUT" = key ] || echo "_$LAYOUT")}
OUT=${OUT:-$HERE/out/$TAG}
mkdir -p "$OUT"

NO_OVERLAP=${NO_OVERLAP:-0}
if [ -z "${APPROACHES:-}" ]; then
    APPROACHES="scd2 seeds dbt floor"
    [ "$NO_OVERLAP" = 1 ] && APPROACHES="scd2 scd2_no_overlap seeds dbt floor"
fi
if [ "$SKIP_SCD2" = 1 ]; then
    APPROACHES=$(echo "$APPROACHES" | tr ' ' '\n' | grep -v '^scd2' | tr '\n' ' ')
    NO_OVERLAP=0
fi
HAS_DELETED=$(awk -v d="$DELETED" 'BEGIN { print (d > 0) ? "true" : "false" }')
if [ "$HAS_DELETED" = true ]; then
    # A dbt check snapshot has no incremental delete marker (hard deletes
    # mean "missing from a full snapshot"), so it is left out.
    APPROACHES=$(echo "$APPROACHES" | tr ' ' '\n' | grep -vx dbt | tr '\n' ' ')
fi
read -r -a APPS <<<"$APPROACHES"

PSQL=(psql -X -q -At -v ON_ERROR_STOP=1 -v "eff=$EFF" -v "eff_ts=$EFF_TS" -v "has_deleted=$HAS_DELETED")
export TZ=UTC PGTZ=UTC

log() { printf '%s %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
# shellcheck source=bench/lib.sh
. "$HERE/lib.sh"

# --- setup --------------------------------------------------------------------
USE_SCD2=0
if [ "$SKIP_SCD2" != 1 ]; then
    "${PSQL[@]}" -c 'CREATE EXTENSION IF NOT EXISTS scd2' >/dev/null
    USE_SCD2=1
elif [ "$("${PSQL[@]}" -c "SELECT count(*) FROM pg_extension WHERE extname = 'scd2'")" = 1 ]; then
    USE_SCD2=1
fi

want="$KEYS|$VERSIONS|$BATCH|$LAYOUT|$NO_OVERLAP"
have=$("${PSQL[@]}" -c "SELECT keys || '|' || versions || '|' || batch || '|' || layout || '|' || no_overlap FROM bench_params" 2>/dev/null || true)
if [ "$GEN" = 1 ] || [ "$have" != "$want" ]; then
    log "generating: keys=$KEYS versions=$VERSIONS layout=$LAYOUT batch=$BATCH changed=$CHANGED new=$NEW deleted=$DELETED"
    t=$(date +%s)
    "${PSQL[@]}" -v keys="$KEYS" -v versions="$VERSIONS" -v layout="$LAYOUT" -v batch="$BATCH" \
        -v changed="$CHANGED" -v new="$NEW" -v deleted="$DELETED" -v use_scd2="$USE_SCD2" \
        -v no_overlap="$NO_OVERLAP" \
        -f "$HERE/gen.sql" >/dev/null
    log "generated in $(( $(date +%s) - t )) s"
fi
COMPOSITION=$("${PSQL[@]}" -F' ' -c "SELECT 'keys='||keys||' versions='||versions||' layout='||layout||' batch='||batch||' unchanged='||unchanged||' changed='||changed||' new='||new||' deleted='||deleted FROM bench_params")
log "batch: $COMPOSITION"

table_of() {
    case $1 in
        scd2|scd2_merge|scd2_nolog|scd2_untracked|floor) echo dim ;;
        scd2_no_overlap) echo dim_nov ;;
        seeds) echo dim_seed ;;
        dbt) echo dim_dbt ;;
    esac
}

# One load in a rolled-back transaction; prints the seconds, then (VERIFY)
# the verification signature.
run_one() {   # approach verify(0/1) explain(0/1)
    local app=$1 verify=$2 explain=$3 tbl
    tbl=$(table_of "$app")
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
            echo "SET auto_explain.log_verbose = on;"
            echo "SET client_min_messages = log;"
        fi
        echo "BEGIN;"
        echo "SELECT clock_timestamp() AS t0 \\gset"
        echo "\\i $HERE/approaches/$app.sql"
        echo "SELECT round(extract(epoch FROM clock_timestamp() - :'t0'::timestamptz), 4);"
        if [ "$verify" = 1 ]; then
            echo "SET client_min_messages = warning;"
            if [ "$app" = dbt ]; then
                echo "\\i $HERE/approaches/verify_dbtshape.sql"
            else
                echo "\\set tbl $tbl"
                echo "\\i $HERE/approaches/verify_scd2shape.sql"
            fi
        fi
        echo "ROLLBACK;"
    } | "${PSQL[@]}" -f -
}

reset_table() {   # vacuum what the rolled-back load left behind
    if [ "$CHECKPOINT" = 1 ]; then
        "${PSQL[@]}" -c "VACUUM (ANALYZE) $(table_of "$1")" -c "CHECKPOINT" >/dev/null
    else
        "${PSQL[@]}" -c "VACUUM (ANALYZE) $(table_of "$1")" >/dev/null
    fi
    # Vacuuming a 10M-row table dirties gigabytes that the kernel writes
    # back over the next seconds -- during the next approach's timed run.
    if [ "$SETTLE" = 1 ]; then sync; fi
}

memory_sampler_start
trap memory_sampler_stop EXIT

# --- verification pass ------------------------------------------------------------
if [ "$VERIFY" = 1 ]; then verify_approaches reset_table; fi

# --- plans ----------------------------------------------------------------------------
if [ "$EXPLAIN" = 1 ]; then explain_approaches reset_table; fi

# --- timed rounds ------------------------------------------------------------------
# Warm-up: one untimed run of each approach so every table starts cached.
if [ "$WARMUP" = 1 ]; then
    log "warm-up"
    "${PSQL[@]}" -c CHECKPOINT >/dev/null
    for app in "${APPS[@]}"; do run_one "$app" 0 0 >/dev/null; reset_table "$app"; done
fi

echo "round,approach,seconds" >"$OUT/times.csv"
# ROUNDS=0: the verification run is the measurement (one run each)
[ "$ROUNDS" = 0 ] && [ -s "$OUT/verify_times.csv" ] && cp "$OUT/verify_times.csv" "$OUT/times.csv"
n=${#APPS[@]}
for ((r = 1; r <= ROUNDS; r++)); do
    order=()
    for ((i = 0; i < n; i++)); do order+=("${APPS[$(( (i + r - 1) % n ))]}"); done
    for app in "${order[@]}"; do
        s=$(run_one "$app" 0 0 | tail -n 1)
        echo "$r,$app,$s" >>"$OUT/times.csv"
        log "round $r  $(printf '%-6s' "$app") $s s"
        reset_table "$app"
    done
done

# --- summary ---------------------------------------------------------------------
memory_sampler_stop
median() { median_times "$OUT/times.csv" "$1" | cut -d' ' -f1; }
# the reference of the ratios: scd2, else the floor, else the first approach
ref=${APPS[0]}
for app in floor scd2; do
    if printf '%s\n' "${APPS[@]}" | grep -qx "$app"; then ref=$app; fi
done
refm=$(median "$ref")
{
    echo "# $COMPOSITION rounds=$ROUNDS checkpoint_each_run=$CHECKPOINT settle=$SETTLE ($(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores)"
    printf '%-8s %10s %12s %s\n' approach median_s "x_$ref" all_rounds_s
    for app in "${APPS[@]}"; do
        m=$(median "$app")
        all=$(grep ",$app," "$OUT/times.csv" | cut -d, -f3 | paste -sd' ')
        printf '%-8s %10s %12s %s%s\n' "$app" "$m" "$(awk -v a="$m" -v b="$refm" 'BEGIN { printf "%.2f", a / b }')" "$all" \
            "$([ -z "$(peak_mb "$app")" ] || echo "  peak $(peak_mb "$app") MB")"
    done
    # The machine's speed drifts (a shared virtual host): the ratio of two
    # approaches within one round, where they ran seconds apart, is steadier
    # than the ratio of medians taken over the whole run.
    awk -F, -v ref="$ref" 'NR > 1 { t[$1 "," $2] = $3; rounds[$1] = 1; apps[$2] = 1 }
        function median(a, n,   i, j, x) {
            for (i = 2; i <= n; i++) { x = a[i]; for (j = i - 1; j >= 1 && a[j] > x; j--) a[j + 1] = a[j]; a[j + 1] = x }
            return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
        END {
            line = "median of per-round ratios:"
            for (app in apps) {
                if (app == ref) continue
                n = 0
                for (r in rounds) if (t[r "," app] > 0 && t[r "," ref] > 0) v[++n] = t[r "," app] / t[r "," ref]
                if (n) line = line sprintf(" %s/%s=%.2f", app, ref, median(v, n))
            }
            print line
        }' "$OUT/times.csv"
} | tee "$OUT/summary.txt"

if [ -n "${SCALING_CSV:-}" ]; then
    [ -s "$SCALING_CSV" ] || echo "keys,versions,batch,unchanged,changed,new,deleted,approach,median_s,ratio_to_$ref" >"$SCALING_CSV"
    comp=$("${PSQL[@]}" -c "SELECT keys||','||versions||','||batch||','||unchanged||','||changed||','||new||','||deleted FROM bench_params")
    for app in "${APPS[@]}"; do
        m=$(median "$app")
        echo "$comp,$app,$m,$(awk -v a="$m" -v b="$refm" 'BEGIN { printf "%.3f", a / b }')" >>"$SCALING_CSV"
    done
fi
