#!/usr/bin/env bash
# bench/scale.sh -- the published benchmark (issue 51): one command per
# dimension size.
#
#   KEYS=100000000 SETTINGS=default DIR=/tmp/scalepg PORT=56400 bench/scale.sh
#
# For a dimension of KEYS business keys (one version each, so KEYS rows) it
# measures four shapes, each beside its floor, dbt's snapshot SQL and the
# seeds' staged-union MERGE, and verifies that every approach leaves the
# same dimension:
#
#   first  the first load of KEYS rows into an empty dimension
#          (bench/first_load.sh; the floor: a sorted insert into a table
#          without indexes, the three indexes built afterwards)
#   200k   a 200,000-row batch, keys spread across the dimension: 85%
#          unchanged, 10% changed, 5% new (bench/run.sh)
#   2M     a 2,000,000-row batch, the same shares (on 1M keys: every key
#          once, 20% changed, the rest new -- bench/gen.sql clamps)
#   asof   FACTS fact rows (10M) keyed by the version valid at their time:
#          scd2.asof, the range join (the SQL a user writes), and the floor
#          (the same insert with no lookup); about 8% of the facts fall
#          before their key's first version and find nothing
#
# and appends one line per shape and approach to $CSV
# (bench/out/scale/scale.csv): keys,shape,rows,approach,seconds,
# rows_per_s,peak_mb,runs,date.  bench/plot_scale.sh draws it.
#
# Parameters (environment; the libpq ones, PGHOST, PGPORT, PGUSER, or
# SETTINGS/DIR/PORT to start the benchmark's own throwaway cluster with
# bench/cluster.sh, as bench/scaling.sh does):
#   KEYS=1000000      dimension size
#   SHAPES="first 200k 2M asof"
#   FACTS=10000000    facts of the as-of shape
#   ROUNDS            timed rounds per shape; default 3 up to 10M keys. Above,
#                     0: each approach runs once, its verification run is the
#                     measurement (a 100M-row load takes minutes, and the
#                     rollback's VACUUM as long again)
#   BATCH_ROUNDS="200k:3 2M:1"  with ROUNDS=0, the rounds of scd2 and the
#                     floor per batch all the same (after a warm-up run): the
#                     two read the same keys' pages, so the first of a
#                     single cold pair would pay for the second's cache
#   SPLIT=20000000    above this many keys the copies of the dimension are
#                     built one at a time (dim, then dim_seed, then dim_dbt:
#                     at 100M keys the three together, about 65 GB, do not
#                     fit this machine's disk); each group's approaches then
#                     alternate only among themselves, and the groups'
#                     verification signatures are compared here
#   FIRST_APPROACHES  default "scd2 seeds dbt floor"; above SPLIT "scd2 dbt
#                     floor": the seeds' MERGE inserts in staging order, so
#                     every one of its 100M index insertions is a random
#                     page of an index larger than shared_buffers (see
#                     RESULTS.md for its growth from 1M to 10M)
#   CSV=bench/out/scale/scale.csv
#   GEN_DIM=1         0: keep the dim of an earlier run (its size unchecked)
#   GEN_COPIES=1      0: keep dim_seed / dim_dbt when they are the copies a
#                     group needs (to resume a run)
#   ONLY_GROUPS       the approach groups to run, ";" between them, e.g.
#                     "seeds:seed;dbt:dbt" or "scd2 dbt floor:dbt"
#                     (approaches:copies; default all)
# Peak private memory (RssAnon) of every load is sampled (MEMORY=1): the
# server must run on this machine.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench/lib.sh
. "$HERE/lib.sh"
start_own_cluster
KEYS=${KEYS:-1000000}
SHAPES=${SHAPES:-"first 200k 2M asof"}
FACTS=${FACTS:-10000000}
SPLIT=${SPLIT:-20000000}
if [ "$KEYS" -gt 10000000 ]; then ROUNDS=${ROUNDS:-0}; else ROUNDS=${ROUNDS:-3}; fi
WARMUP=1; [ "$ROUNDS" = 0 ] && WARMUP=0
BATCH_ROUNDS=${BATCH_ROUNDS:-"200k:3 2M:1"}
if [ "$KEYS" -gt "$SPLIT" ]; then
    FIRST_APPROACHES=${FIRST_APPROACHES:-"scd2 dbt floor"}
    GROUPS_=("scd2 floor:" "seeds:seed" "dbt:dbt")
else
    FIRST_APPROACHES=${FIRST_APPROACHES:-"scd2 seeds dbt floor"}
    GROUPS_=("scd2 seeds dbt floor:seed dbt")
fi
SDIR=$HERE/out/scale
CSV=${CSV:-$SDIR/scale.csv}
mkdir -p "$SDIR"
[ -s "$CSV" ] || echo "keys,shape,rows,approach,seconds,rows_per_s,peak_mb,runs,date" >"$CSV"
export TZ=UTC PGTZ=UTC MEMORY=1 WARMUP ROUNDS
log() { printf '%s %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
DATE=$(date -u +%Y-%m-%d)
PSQL=(psql -X -q -At -v ON_ERROR_STOP=1)

log "scale: keys=$KEYS shapes='$SHAPES' rounds=$ROUNDS; $(nproc) cores, $(free -g | awk '/^Mem:/ { print $2 }') GiB;" \
    "disk $(df -h "${DIR:-/}" | awk 'NR == 2 { print $4 " free of " $2 }'); load $(cut -d' ' -f1-3 /proc/loadavg)"
"${PSQL[@]}" -c "SELECT 'server ' || version()" -c "SELECT string_agg(name || '=' || current_setting(name), ' ' ORDER BY name) FROM pg_settings WHERE name IN ('shared_buffers', 'work_mem', 'maintenance_work_mem', 'max_wal_size', 'huge_pages', 'max_parallel_workers_per_gather')" >&2

record() {   # shape rows out-dir approaches...
    local shape=$1 rows=$2 out=$3 app m n; shift 3
    for app in "$@"; do
        read -r m n <<<"$(median_times "$out/times.csv" "$app")"
        [ -n "$m" ] || continue
        echo "$KEYS,$shape,$rows,$app,$m,$(awk -v r="$rows" -v s="$m" 'BEGIN { printf "%d", r / s }'),$(OUT=$out peak_mb "$app"),$n,$DATE" >>"$CSV"
    done
}
# --- the first load -------------------------------------------------------------
if [[ " $SHAPES " == *" first "* ]]; then
    t=$(date +%s)
    out=$SDIR/k${KEYS}_first
    ROWS=$KEYS APPROACHES=$FIRST_APPROACHES OUT=$out "$HERE/first_load.sh" >&2
    record first "$KEYS" "$out" $FIRST_APPROACHES
    psql -X -q -d postgres -c "DROP DATABASE IF EXISTS bench_first" >/dev/null   # its staging and dimension
    log "first load: $(( $(date +%s) - t )) s in all"
fi

# --- the batches ----------------------------------------------------------------
batch_rows() { case $1 in 200k) echo 200000 ;; 2M) echo 2000000 ;; *) echo "$1" ;; esac; }
BATCHES=()
for s in $SHAPES; do case $s in first|asof) ;; *) BATCHES+=("$s") ;; esac; done
gen() {   # gen.sql part, extra psql arguments
    local part=$1 t; shift
    t=$(date +%s)
    "${PSQL[@]}" -v keys="$KEYS" -v versions=1 -v layout=key -v changed=0.10 -v new=0.05 -v deleted=0 \
        -v use_scd2=1 -v no_overlap=0 -v part="$part" "$@" -f "$HERE/gen.sql" >/dev/null
    log "gen.sql part=$part $*: $(( $(date +%s) - t )) s"
}
if [ ${#BATCHES[@]} -gt 0 ] || [[ " $SHAPES " == *" asof "* ]]; then
    "${PSQL[@]}" -c 'CREATE EXTENSION IF NOT EXISTS scd2' >/dev/null
    if [ "${GEN_DIM:-1}" = 1 ]; then gen dim; fi
    log "dimension: $("${PSQL[@]}" -c "SELECT pg_size_pretty(pg_total_relation_size('dim')) || ' (heap ' || pg_size_pretty(pg_relation_size('dim')) || ')'")"
fi
if [ ${#BATCHES[@]} -gt 0 ]; then
    [ -n "${ONLY_GROUPS:-}" ] && IFS=";" read -r -a GROUPS_ <<<"$ONLY_GROUPS"
    for g in "${GROUPS_[@]}"; do
        apps=${g%%:*} copies=${g#*:}
        if [ -n "$copies" ]; then
            have=$("${PSQL[@]}" -c "SELECT string_agg(t, ' ') FROM unnest(ARRAY['seed', 'dbt']) t WHERE to_regclass('dim_' || t) IS NOT NULL")
            if [ "${GEN_COPIES:-1}" = 1 ] || [ "$have" != "$copies" ]; then gen copies -v copies="$copies"; fi
        fi
        # the batch there is already (if any) first: one generation fewer
        cur=$("${PSQL[@]}" -c "SELECT batch FROM bench_params" 2>/dev/null || true)
        order=()
        for b in "${BATCHES[@]}"; do [ "$(batch_rows "$b")" = "$cur" ] && order=("$b"); done
        for b in "${BATCHES[@]}"; do [ "$(batch_rows "$b")" = "$cur" ] || order+=("$b"); done
        for b in "${order[@]}"; do
            rows=$(batch_rows "$b")
            [ "$rows" = "$("${PSQL[@]}" -c "SELECT batch FROM bench_params" 2>/dev/null || true)" ] || gen batch -v batch="$rows"
            out=$SDIR/k${KEYS}_${b}_$(tr ' ' '_' <<<"$apps")
            r=$ROUNDS
            if [ "$ROUNDS" = 0 ] && [[ " $apps " == *" scd2 "* ]]; then
                # scd2 and its floor read the same keys' pages: a cold first
                # run would favour the second, so they get a warm-up and
                # alternating rounds (BATCH_ROUNDS) even at this size
                r=$(tr ' ' '\n' <<<"$BATCH_ROUNDS" | sed -n "s/^$b://p")
                r=${r:-0}
            fi
            w=0; [ "$r" -gt 0 ] && w=1
            KEYS=$KEYS BATCH=$rows VERSIONS=1 GEN=0 APPROACHES=$apps OUT=$out ROUNDS=$r WARMUP=$w "$HERE/run.sh" >&2
            # shellcheck disable=SC2086
            record "$b" "$rows" "$out" $apps
            cut -f2- "$out/verify.txt" | sed 's/ bad_is_current=0//' | sed "s/^/$b /" >>"$SDIR/k${KEYS}_signatures.txt"
        done
    done
    "${PSQL[@]}" -c "DROP TABLE IF EXISTS dim_seed, dim_dbt" >/dev/null
    # every group must have left the same dimension, batch by batch
    for b in "${BATCHES[@]}"; do
        n=$(grep -c "^$b " "$SDIR/k${KEYS}_signatures.txt" | tail -1)
        u=$(grep "^$b " "$SDIR/k${KEYS}_signatures.txt" | sort -u | wc -l)
        if [ "$u" != 1 ]; then log "VERIFICATION FAILED: $b: the approaches do not leave the same dimension"; exit 1; fi
        log "$b: all $n approaches leave the same dimension ($(grep -m1 "^$b " "$SDIR/k${KEYS}_signatures.txt" | cut -d' ' -f2-5))"
    done
    rm -f "$SDIR/k${KEYS}_signatures.txt"
fi

# --- the as-of lookup -----------------------------------------------------------
if [[ " $SHAPES " == *" asof "* ]]; then
    out=$SDIR/k${KEYS}_asof
    mkdir -p "$out"
    OUT=$out
    t=$(date +%s)
    "${PSQL[@]}" <<SQL
SET client_min_messages = warning;
DROP TABLE IF EXISTS scale_facts, scale_fact_out;
SELECT setseed(0.51);
-- random keys, instants from mid-2019 (before every key's first version,
-- 2020-01-01) to late 2026
CREATE TABLE scale_facts AS
SELECT 1 + (random() * ($KEYS - 1))::bigint AS customer_id,
       timestamptz '2019-06-01 00:00+00' + random() * interval '2700 days' AS ts
  FROM generate_series(1, $FACTS);
CREATE TABLE scale_fact_out (customer_id bigint, ts timestamptz, customer_sk bigint);
VACUUM (ANALYZE) scale_facts, dim;
CHECKPOINT;
SQL
    log "facts generated: $(( $(date +%s) - t )) s"
    query() {
        case $1 in
            asof)  echo "INSERT INTO scale_fact_out SELECT f.customer_id, f.ts, scd2.asof('dim', f.ts, f.customer_id) FROM scale_facts f" ;;
            range) echo "INSERT INTO scale_fact_out SELECT f.customer_id, f.ts, d.customer_sk FROM scale_facts f LEFT JOIN dim d ON d.customer_id = f.customer_id AND f.ts >= d.valid_from AND (d.valid_to IS NULL OR f.ts < d.valid_to)" ;;
            floor) echo "INSERT INTO scale_fact_out SELECT f.customer_id, f.ts, NULL::bigint FROM scale_facts f" ;;
        esac
    }
    asof_one() {   # approach: seconds, then count and sum of the keys found
        { backend_pid_sql "$1"
          echo "TRUNCATE scale_fact_out;"
          echo "SELECT clock_timestamp() AS t0 \\gset"
          query "$1"; echo ";"
          echo "SELECT round(extract(epoch FROM clock_timestamp() - :'t0'::timestamptz), 4);"
          echo "SELECT count(customer_sk) || ' ' || coalesce(sum(customer_sk), 0) FROM scale_fact_out;"
        } | "${PSQL[@]}" -f -
    }
    memory_sampler_start
    AAPPS=(asof range floor)
    echo "round,approach,seconds" >"$out/times.csv"
    want=
    last=$ROUNDS; [ "$ROUNDS" = 0 ] && last=1
    for ((r = 1; r <= last; r++)); do
        for ((i = 0; i < 3; i++)); do
            a=${AAPPS[$(( (i + r - 1) % 3 ))]}
            res=$(asof_one "$a")
            s=$(head -n 1 <<<"$res"); sig=$(tail -n 1 <<<"$res")
            echo "$r,$a,$s" >>"$out/times.csv"
            log "asof round $r $(printf '%-6s' "$a") $s s ($sig)"
            if [ "$a" != floor ]; then
                if [ -n "$want" ] && [ "$want" != "$sig" ]; then
                    log "VERIFICATION FAILED: $a found '$sig', expected '$want'"; exit 1
                fi
                want=$sig
            fi
        done
    done
    memory_sampler_stop
    log "asof: asof and range find the same versions ($want: count and sum of surrogate keys)"
    record asof "$FACTS" "$out" "${AAPPS[@]}"
    "${PSQL[@]}" -c "DROP TABLE scale_facts, scale_fact_out" >/dev/null
fi

echo "keys=$KEYS:"
grep "^$KEYS," "$CSV" | column -t -s,
