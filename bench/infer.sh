#!/usr/bin/env bash
# bench/infer.sh -- issue 49: scd2.infer_members for a batch of facts with
# 1% unknown keys, against the bulk scd2.asof of the same batch.
#
#   FACTS=1000000 KEYS=1000000 ROUNDS=5 bench/infer.sh
#
# Against a running server with scd2 installed (PGHOST, PGPORT, PGUSER; e.g.
# SETTINGS=default bench/cluster.sh start).  Builds, in schema bench_infer:
# a dimension of KEYS customers, one current version each (surrogate key an
# identity primary key, a flag column registered as inferred_column), and a
# staging batch of FACTS sales over 2024: 99% name a known customer, 1% one
# of FACTS/200 customers the dimension does not have (two facts each, on
# average).  Times, ROUNDS times each, alternating which goes first:
#   infer  SELECT scd2.infer_members('f', 'd', 'sold_at'), in a transaction
#          rolled back after it (each round infers the same members)
#   asof   SELECT count(scd2.asof('d', sold_at, id)) FROM f: the
#          lookup that keys the same batch (past scd2.asof_bulk_threshold
#          calls it answers from its bulk map)
# and prints the medians and infer / asof.  The target (issue 49) is a
# ratio of at most 1: inferring the batch's members costs no more than
# keying it.
set -euo pipefail
FACTS=${FACTS:-1000000}
KEYS=${KEYS:-1000000}
ROUNDS=${ROUNDS:-5}
q() { psql -X -q -At -v ON_ERROR_STOP=1 -c "SET search_path = bench_infer, public" "$@"; }
t() {   # seconds the statements took (one session)
    local s e
    s=$(date +%s.%N); q "$@" >/dev/null; e=$(date +%s.%N)
    echo "$e - $s" | bc
}
median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

psql -X -q -v ON_ERROR_STOP=1 <<SQL
SET client_min_messages = warning;
DROP SCHEMA IF EXISTS bench_infer CASCADE;
CREATE SCHEMA bench_infer;
SET search_path = bench_infer, public;
CREATE TABLE d (sk bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, id int NOT NULL, city text DEFAULT 'unknown',
                valid_from timestamptz NOT NULL, valid_to timestamptz, is_current boolean NOT NULL DEFAULT true,
                is_inferred boolean NOT NULL DEFAULT false);
INSERT INTO d (id, city, valid_from) SELECT k, 'c' || k, '2023-01-01 UTC' FROM generate_series(1, $KEYS) k;
SELECT scd2.register('d', ARRAY['id'], inferred_column => 'is_inferred');
CREATE TABLE f (n bigint, id int, sold_at timestamptz, amount numeric);
INSERT INTO f
SELECT g, CASE WHEN g % 100 = 0 THEN $KEYS + 1 + (hashint8(g) & 2147483647) % GREATEST($FACTS / 200, 1)
               ELSE 1 + (hashint8(g) & 2147483647) % $KEYS END,
       timestamptz '2024-01-01 UTC' + ((hashint8(-g) & 2147483647) % 31536000) * interval '1 second', g % 100
  FROM generate_series(1, $FACTS) g;
VACUUM ANALYZE d; VACUUM ANALYZE f;
SQL

INFER=(-c "BEGIN" -c "SELECT scd2.infer_members('f', 'd', 'sold_at')" -c "ROLLBACK")
ASOF=(-c "SELECT count(scd2.asof('d', sold_at, id)) FROM f")
echo "# facts=$FACTS keys=$KEYS rounds=$ROUNDS $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# the batch: $(q -c "SELECT count(DISTINCT id) FILTER (WHERE id > $KEYS) || ' unknown keys in ' || count(*) FILTER (WHERE id > $KEYS) || ' facts' FROM f")"
echo "# infer_members infers $(q -c "BEGIN" -c "SELECT scd2.infer_members('f', 'd', 'sold_at')" -c "ROLLBACK" | head -1)"
: >/tmp/bench_infer.$$.i; : >/tmp/bench_infer.$$.a
for r in $(seq 1 "$ROUNDS"); do
    if [ $((r % 2)) = 1 ]; then i=$(t "${INFER[@]}"); a=$(t "${ASOF[@]}")
    else a=$(t "${ASOF[@]}"); i=$(t "${INFER[@]}"); fi
    echo "$i" >>/tmp/bench_infer.$$.i; echo "$a" >>/tmp/bench_infer.$$.a
    echo "round $r: infer_members ${i}s asof ${a}s"
done
mi=$(median </tmp/bench_infer.$$.i); ma=$(median </tmp/bench_infer.$$.a)
rm -f /tmp/bench_infer.$$.i /tmp/bench_infer.$$.a
echo "median: infer_members ${mi}s asof ${ma}s ratio $(echo "scale=2; $mi / $ma" | bc)"
q -c "DROP SCHEMA bench_infer CASCADE"
