#!/usr/bin/env bash
# bench/schema_change.sh -- what a load that changes the dimension's shape
# costs (issue 28, register's on_schema_change), side by side on one
# dimension of ROWS rows (KEYS keys, ROWS / KEYS versions each):
#
#   plain          CALL scd2.apply of BATCH unchanged staging rows, no schema
#                  change: the baseline
#   add_column     the staging table has a new text column: the load adds it
#                  (append_new_columns) and fills the BATCH current versions
#                  in place
#   varchar_wider  name varchar(20) -> varchar(40) (sync_all_columns)
#   varchar_text   name varchar(20) -> text
#   numeric_wider  price numeric(10,2) -> numeric(14,2)
#   timestamptz    seen timestamp -> timestamptz (TimeZone UTC)
#   int_bigint     qty integer -> bigint (a payload column)
#   key_bigint     id integer -> bigint (the business key: in every index)
#
# and, for each change, the same ALTER TABLE written by hand (alter_*), no
# load.  Each run is in a transaction that is rolled back (then VACUUM, as
# the other benchmarks do); it reports the seconds and whether the table was
# rewritten (its relfilenode changed).  ROUNDS rounds in rotating order;
# medians, and each load's ratio to plain.
#
# Connection: the usual libpq environment (PGHOST, PGPORT, PGUSER); its own
# database DB (created when missing); scd2 installed in the server.
#   KEYS=500000 ROWS=1000000 BATCH=10000 ROUNDS=3 DB=bench_schema GEN=1
#   OUT=bench/out/schema_<ROWS>
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
KEYS=${KEYS:-500000}
ROWS=${ROWS:-1000000}
BATCH=${BATCH:-10000}
ROUNDS=${ROUNDS:-3}
DB=${DB:-bench_schema}
GEN=${GEN:-1}
OUT=${OUT:-$HERE/out/schema_$ROWS}
mkdir -p "$OUT"
export TZ=UTC PGTZ=UTC
log() { printf '%s %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

if [ "$(psql -X -At -d postgres -c "SELECT count(*) FROM pg_database WHERE datname = '$DB'")" = 0 ]; then
    psql -X -q -d postgres -c "CREATE DATABASE $DB" >/dev/null
fi
export PGDATABASE=$DB
PSQL=(psql -X -q -At -v ON_ERROR_STOP=1)

# change name|staging column list (the batch's types)|the ALTER by hand
CHANGES=(
    "plain|id, name, price, seen, qty|"
    "add_column|id, name, price, seen, qty, name::text AS region|ALTER TABLE dim ADD COLUMN region text"
    "varchar_wider|id, name::varchar(40) AS name, price, seen, qty|ALTER TABLE dim ALTER COLUMN name TYPE varchar(40)"
    "varchar_text|id, name::text AS name, price, seen, qty|ALTER TABLE dim ALTER COLUMN name TYPE text"
    "numeric_wider|id, name, price::numeric(14,2) AS price, seen, qty|ALTER TABLE dim ALTER COLUMN price TYPE numeric(14,2)"
    "timestamptz|id, name, price, seen::timestamptz AS seen, qty|ALTER TABLE dim ALTER COLUMN seen TYPE timestamptz"
    "int_bigint|id, name, price, seen, qty::bigint AS qty|ALTER TABLE dim ALTER COLUMN qty TYPE bigint"
    "key_bigint|id::bigint AS id, name, price, seen, qty|ALTER TABLE dim ALTER COLUMN id TYPE bigint"
)

if [ "$GEN" = 1 ]; then
    log "building a dimension of $ROWS rows ($KEYS keys)"
    "${PSQL[@]}" -v keys="$KEYS" -v rows="$ROWS" -v batch="$BATCH" <<'SQL'
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS scd2;
DROP TABLE IF EXISTS dim, batch CASCADE;
CREATE TABLE dim (sk bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, id int NOT NULL,
                  name varchar(20), price numeric(10,2), seen timestamp, qty int,
                  valid_from timestamptz NOT NULL, valid_to timestamptz, is_current boolean NOT NULL DEFAULT true);
-- versions of a key side by side; the last one current
INSERT INTO dim (id, name, price, seen, qty, valid_from, valid_to, is_current)
SELECT k, 'name ' || k || '/' || v, (k % 1000) + v / 100.0, timestamp '2020-01-01' + k * interval '1 minute',
       k % 97 + v, timestamptz '2020-01-01' + v * interval '30 days',
       CASE WHEN v < :rows / :keys THEN timestamptz '2020-01-01' + (v + 1) * interval '30 days' END,
       v = :rows / :keys
  FROM generate_series(1, :keys) k, generate_series(1, :rows / :keys) v
 ORDER BY k, v;
SELECT scd2.register('dim', ARRAY['id'], on_schema_change => 'sync_all_columns');
-- the batch: BATCH random keys, as their current versions are
CREATE TABLE batch AS SELECT id, name, price, seen, qty FROM dim WHERE is_current ORDER BY random() LIMIT :batch;
VACUUM ANALYZE dim;
VACUUM ANALYZE batch;
SQL
fi

# one staging table per change
for c in "${CHANGES[@]}"; do
    IFS='|' read -r name cols alter <<<"$c"
    "${PSQL[@]}" -c "SET client_min_messages = warning" -c "DROP TABLE IF EXISTS stg_$name" \
        -c "CREATE TABLE stg_$name AS SELECT $cols FROM batch" -c "ANALYZE stg_$name" >/dev/null
done

# run KIND NAME: seconds and whether the heap was rewritten
run() {
    local kind=$1 name=$2 n cols alter stmt
    for c in "${CHANGES[@]}"; do
        IFS='|' read -r n cols alter <<<"$c"
        [ "$n" = "$name" ] && break
    done
    if [ "$kind" = load ]; then
        stmt="CALL scd2.apply('stg_$name', 'dim', '2026-12-01')"
    else
        [ -n "$alter" ] || return 0
        stmt=$alter
    fi
    "${PSQL[@]}" <<SQL
SET client_min_messages = warning;
BEGIN;
SELECT pg_relation_filenode('dim') AS f0, clock_timestamp() AS t0 \gset
$stmt \g /dev/null
SELECT '$kind,$name,' || round(extract(epoch FROM clock_timestamp() - :'t0')::numeric, 3) || ','
       || (pg_relation_filenode('dim') <> :f0)
       || ',' || (SELECT coalesce(max(filled_in_place), 0) FROM scd2.audit_log WHERE txid = pg_current_xact_id());
ROLLBACK;
VACUUM dim;
SQL
}

csv=$OUT/runs.csv
echo "kind,change,seconds,rewritten,filled" >"$csv"
names=()
for c in "${CHANGES[@]}"; do names+=("${c%%|*}"); done
for r in $(seq 1 "$ROUNDS"); do
    log "round $r"
    n=${#names[@]}
    for i in $(seq 0 $((n - 1))); do
        name=${names[$(( (i + r) % n ))]}
        run load "$name" >>"$csv"
        run alter "$name" >>"$csv"
    done
done

log "results ($csv)"
"${PSQL[@]}" <<SQL
CREATE TEMP TABLE r (kind text, change text, seconds numeric, rewritten boolean, filled bigint);
\copy r FROM '$csv' CSV HEADER
WITH m AS (
  SELECT kind, change, percentile_cont(0.5) WITHIN GROUP (ORDER BY seconds) AS s,
         bool_or(rewritten) AS rewritten, max(filled) AS filled
    FROM r GROUP BY kind, change)
SELECT format('| %s | %s | %s s | %s | %s | %s |', l.change, CASE WHEN a.rewritten OR l.rewritten THEN 'yes' ELSE 'no' END,
              round(l.s::numeric, 3), round((l.s / p.s)::numeric, 2),
              coalesce(round(a.s::numeric, 3) || ' s', '-'), l.filled)
  FROM m l JOIN m p ON p.kind = 'load' AND p.change = 'plain'
  LEFT JOIN m a ON a.kind = 'alter' AND a.change = l.change
 WHERE l.kind = 'load' ORDER BY l.s;
SQL
