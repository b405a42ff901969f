#!/usr/bin/env bash
# bench/plans/run.sh -- plan robustness (issue 26): every load timed with
# the dimension and the staging table never analyzed and analyzed, and
# against the floor, interleaved in one run on the same tables.
#
# Shapes: dimensions of KEYS keys (first loaded by scd2: gen.sql), an int
# key or a composite (int, text) key (KEYTYPES), batches of 100 rows, 1%
# and 10% of the keys (10% changed, 5% new, the rest unchanged).  Per
# shape and round, three loads in rotating order, each in a transaction
# that is rolled back, then VACUUM of the dimension (untimed):
#   never     CALL scd2.apply with neither table analyzed: inside the
#             load's transaction, before the clock starts, the tables'
#             pg_statistic rows are deleted and the staging table's
#             pg_class row is put back to never vacuumed or analyzed
#             (reltuples -1, relpages 0; the dimension keeps the reltuples
#             its first load's index build gave it, relallvisible 0); the
#             rollback brings them back.  Superuser.
#   analyzed  CALL scd2.apply after ANALYZE of both
#   floor     the reads and writes no load can avoid, classification
#             precomputed (as bench/approaches/floor.sql): probe and fetch
#             the current row of every staging key, close the changed rows,
#             insert the new versions (analyzed; no change log)
# A verification pass first: the three leave the same current rows.
#
# Environment: KEYS="1000 20000 200000 1000000" KEYTYPES="int comp"
#   ROUNDS=3 GEN=1 (0: reuse the tables) VERIFY=1 OUT=bench/out/plans
#   (GEN=0 VERIFY=0 ROUNDS=0: the summary of OUT's times.csv again)
#   SMALL=5000 SMALL_REPS=5: batches of SMALL rows or fewer are loaded
#   SMALL_REPS times per round (median), their loads take 20-100 ms
#   and scatter by tens of ms on a busy machine
#   TIMEOUT=    seconds: a load that takes longer is cancelled and counted
#               as taking TIMEOUT (">" in times.csv, "≥" in the summary)
# Connection: the libpq environment (PGHOST, PGPORT, PGUSER), a superuser,
# scd2 installed; PostgreSQL's default settings for the results
# (SETTINGS=default bench/cluster.sh start).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
KEYS=${KEYS:-1000 20000 200000 1000000}
KEYTYPES=${KEYTYPES:-int comp}
ROUNDS=${ROUNDS:-3}
GEN=${GEN:-1}
VERIFY=${VERIFY:-1}
SMALL=${SMALL:-5000}
SMALL_REPS=${SMALL_REPS:-5}
TIMEOUT=${TIMEOUT:-}
OUT=${OUT:-$HERE/../out/plans}
EFF="2026-02-01 00:00:00+00"
APPS=(never analyzed floor)
mkdir -p "$OUT"
log() { printf '==> %s\n' "$*" >&2; }
export PGOPTIONS="${PGOPTIONS:-} -c client_min_messages=warning"
PSQL=(psql -X -q -v ON_ERROR_STOP=1 -At)
# with TIMEOUT a cancelled load's error must not end the session
RUN=("${PSQL[@]}")
[ -z "$TIMEOUT" ] || RUN=(psql -X -q -At)

batches_of() {			# 100, 1%, 10% of $1 keys, distinct, ascending
    printf '%s\n' 100 $(( $1 / 100 )) $(( $1 / 10 )) | awk '$1 > 0' | sort -n -u | tr '\n' ' '
}
keycols_of() { [ "$1" = int ] && echo "id" || echo "sku, region"; }

# The SQL of one load of approach $1 on dimension $2, staging $3 (key
# columns $4); with $5 = 1 it ends with the dimension's signature.
load_sql() {
    local app=$1 dim=$2 stg=$3 keys=$4 sig=$5 on=""
    local c
    for c in ${keys//,/ }; do on="${on:+$on AND }d.$c = s.$c"; done
    echo "BEGIN;"
    if [ "$app" = never ]; then
        cat <<SQL
DELETE FROM pg_statistic WHERE starelid IN ('$dim'::regclass, '$stg'::regclass);
UPDATE pg_class SET reltuples = -1, relpages = 0, relallvisible = 0 WHERE oid = '$stg'::regclass;
UPDATE pg_class SET relallvisible = 0 WHERE oid = '$dim'::regclass;
SQL
    fi
    # the catalog changes above invalidated the tables' cache entries: build
    # them again (in every state) so the clock measures the load alone
    echo "EXPLAIN SELECT * FROM $stg s JOIN $dim d ON $on \\g /dev/null"
    if [ -n "$TIMEOUT" ]; then
        # a cancelled load keeps this value (its transaction is aborted)
        echo "\\set t '>$TIMEOUT'"
        echo "SET LOCAL statement_timeout = '${TIMEOUT}s';"
    fi
    echo "SELECT clock_timestamp() AS t0 \\gset"
    if [ "$app" = floor ]; then
        cat <<SQL
SET LOCAL enable_hashjoin = off;
SET LOCAL enable_mergejoin = off;
SELECT count(d.is_current) FROM $stg s JOIN $dim d ON $on AND d.valid_to IS NULL \\g /dev/null
UPDATE $dim d SET valid_to = '$EFF', is_current = false FROM ${stg}_close s WHERE $on AND d.valid_to IS NULL;
INSERT INTO $dim ($keys, price, color, descr, valid_from, valid_to, is_current)
SELECT $keys, price, color, descr, '$EFF', NULL, true FROM ${stg}_new;
SQL
    else
        echo "CALL scd2.apply('$stg', '$dim', effective_at => '$EFF') \\g /dev/null"
    fi
    echo "SELECT extract(epoch FROM clock_timestamp() - :'t0'::timestamptz) AS t \\gset"
    if [ "$sig" = 1 ]; then
        echo "SELECT count(*) FILTER (WHERE valid_to IS NULL) || ' current; ' || count(*) || ' rows; '
       || count(*) FILTER (WHERE valid_from = '$EFF') || ' opened; ' || count(*) FILTER (WHERE valid_to = '$EFF') || ' closed; '
       || sum(hashtext(concat_ws('|', $keys, price, color, descr, valid_to IS NULL))) AS sig FROM $dim \\gset"
    else
        echo "\\set sig ''"
    fi
    echo "ROLLBACK;"
    echo "VACUUM $dim;"
}

# shapes: keys keytype batch
SHAPES=()
for k in $KEYS; do
    for kt in $KEYTYPES; do
        for b in $(batches_of "$k"); do SHAPES+=("$k $kt $b"); done
    done
done

if [ "$GEN" = 1 ]; then
    for k in $KEYS; do
        for kt in $KEYTYPES; do
            log "generating p_${kt}_$k (batches $(batches_of "$k"))"
            "${PSQL[@]}" -v keys="$k" -v keytype="$kt" -v batches="$(batches_of "$k" | sed 's/ $//')" \
                -f "$HERE/gen.sql"
        done
    done
fi

# one psql per shape and round: an untimed warm-up load (the session's
# caches), then REPS times the loads of APPS in the order given (batches
# of SMALL rows or fewer: SMALL_REPS times, their ~30 ms scatter)
run_shape() {
    local k=$1 kt=$2 b=$3 round=$4 sig=$5; shift 5
    local dim="p_${kt}_$k" stg="p_${kt}_${k}_s$b" keys app rep reps=1
    keys=$(keycols_of "$kt")
    [ "$sig" = 0 ] && [ "$b" -le "$SMALL" ] && reps=$SMALL_REPS
    {
        load_sql analyzed "$dim" "$stg" "$keys" 0
        for rep in $(seq 1 "$reps"); do
            for app in "$@"; do
                load_sql "$app" "$dim" "$stg" "$keys" "$sig"
                echo "\\echo $k,$kt,$b,$app,$round,:t,:'sig'"
            done
        done
    } | "${RUN[@]}" | grep -v '^VACUUM$' || { log "failed: $k $kt $b"; exit 1; }
}

if [ "$VERIFY" = 1 ]; then
    log "verification pass"
    : >"$OUT/verify.txt"
    for s in "${SHAPES[@]}"; do
        # shellcheck disable=SC2086
        run_shape $s 0 1 "${APPS[@]}" >>"$OUT/verify.txt"
    done
    bad=$(cut -d, -f1-3,7 "$OUT/verify.txt" | sort -u | cut -d, -f1-3 | uniq -d | tr '\n' ' ')
    if [ -n "$bad" ]; then log "VERIFICATION FAILED for: $bad (see $OUT/verify.txt)"; exit 1; fi
    log "verification ok: the three approaches leave the same rows in every shape"
fi

[ "$ROUNDS" = 0 ] || echo "keys,keytype,batch,approach,round,seconds" >"$OUT/times.csv"
for round in $(seq 1 "$ROUNDS"); do
    log "round $round of $ROUNDS"
    i=0
    for s in "${SHAPES[@]}"; do
        # rotate the order of the approaches by round and shape
        r=$(( (round + i) % 3 )); i=$(( i + 1 ))
        order=("${APPS[@]:$r}" "${APPS[@]:0:$r}")
        # shellcheck disable=SC2086
        run_shape $s "$round" 0 "${order[@]}" | cut -d, -f1-6 >>"$OUT/times.csv"
    done
done

# medians, and medians of per-round ratios
"${PSQL[@]}" -P footer=off -F ' | ' <<SQL | tee "$OUT/summary.txt"
CREATE TEMP TABLE t0 (keys int, keytype text, batch int, approach text, round int, seconds text);
\\copy t0 FROM '$OUT/times.csv' WITH (FORMAT csv, HEADER)
CREATE TEMP VIEW t AS SELECT keys, keytype, batch, approach, round, ltrim(seconds, '>')::float8 AS seconds,
       seconds LIKE '>%' AS cancelled FROM t0;
CREATE TEMP VIEW cancelled AS SELECT keys, keytype, batch, approach FROM t WHERE cancelled GROUP BY 1, 2, 3, 4;
CREATE TEMP VIEW r AS
SELECT keys, keytype, batch, round,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY seconds) FILTER (WHERE approach = 'never') AS never,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY seconds) FILTER (WHERE approach = 'analyzed') AS analyzed,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY seconds) FILTER (WHERE approach = 'floor') AS floor
  FROM t GROUP BY 1, 2, 3, 4;
\\echo '| keys | key | batch | never analyzed (s) | analyzed (s) | floor (s) | never ÷ analyzed | never ÷ floor | analyzed ÷ floor |'
\\echo '| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |'
SELECT '', keys, keytype, batch,
       CASE WHEN EXISTS (SELECT FROM cancelled c WHERE (c.keys, c.keytype, c.batch, c.approach) = (r.keys, r.keytype, r.batch, 'never'))
            THEN '≥ ' ELSE '' END || round(percentile_cont(0.5) WITHIN GROUP (ORDER BY never)::numeric, 4),
       round(percentile_cont(0.5) WITHIN GROUP (ORDER BY analyzed)::numeric, 4),
       round(percentile_cont(0.5) WITHIN GROUP (ORDER BY floor)::numeric, 4),
       round(percentile_cont(0.5) WITHIN GROUP (ORDER BY never / analyzed)::numeric, 2),
       round(percentile_cont(0.5) WITHIN GROUP (ORDER BY never / floor)::numeric, 2),
       round(percentile_cont(0.5) WITHIN GROUP (ORDER BY analyzed / floor)::numeric, 2) || ' |'
  FROM r GROUP BY keys, keytype, batch ORDER BY keys, keytype DESC, batch;
\\echo
SELECT 'worst never ÷ analyzed: ' || round(max(m)::numeric, 2) || ' (' || (array_agg(s ORDER BY m DESC))[1] || ')'
  FROM (SELECT keys || ' keys ' || keytype || ' batch ' || batch AS s,
               percentile_cont(0.5) WITHIN GROUP (ORDER BY never / analyzed) AS m FROM r GROUP BY keys, keytype, batch) x;
SELECT 'worst never ÷ floor: ' || round(max(m)::numeric, 2) || ' (' || (array_agg(s ORDER BY m DESC))[1] || ')'
  FROM (SELECT keys || ' keys ' || keytype || ' batch ' || batch AS s,
               percentile_cont(0.5) WITHIN GROUP (ORDER BY never / floor) AS m FROM r GROUP BY keys, keytype, batch) x;
SQL
