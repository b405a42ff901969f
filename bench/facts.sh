#!/usr/bin/env bash
# bench/facts.sh -- issue 49: scd2.check_facts against the hand-written
# range join, scd2.rekey_facts after late changes against a full pass, and
# a load into a dimension with a maintained fact table against the same
# load with none.
#
#   FACTS=1000000 KEYS=100000 ROUNDS=3 bench/facts.sh          both parts
#   PART=rekey bench/facts.sh                                  the first
#   PART=maintain MFACTS=10000000 MKEYS=1000000 BATCH=200000 MROUNDS=3 bench/facts.sh
#
# Against a running server with scd2 installed (PGHOST, PGPORT, PGUSER; e.g.
# SETTINGS=default bench/cluster.sh start).  Builds, in schema bench_facts:
# a dimension of KEYS customers with 3 versions each (valid from
# 2024-01-01, 2024-05-01, 2024-09-01; surrogate key an identity primary
# key, registered), and a fact table of FACTS sales over 2024, each keyed
# to its customer's version valid at its time, then 1% of the facts keyed
# to a wrong version of their customer.  Times (each ROUNDS times,
# alternating):
#   check_facts  SELECT count(*), sum(facts) FROM scd2.check_facts('f')
#   range_join   the same question by hand: each fact's customer id
#                (which the fact carries) joined to the version valid at
#                its time, the facts whose key differs, grouped the same way
#   rekey_log    after 1% of the customers get a late change that splits
#                their first version (one scd2.apply), scd2.rekey_facts('f')
#                (from the change log, through the fact's index)
#   rekey_full   after another such change, scd2.rekey_facts('f', full =>
#                true) (a scan of the facts)
# and checks that check_facts and the range join find the same facts, and
# prints the wrong facts before and after each re-keying (the log pass
# leaves the planted 1% but for those of moved versions; a full pass
# fixes them all).  (The fact table is registered with maintain => false:
# the re-keying is rekey_facts'.)
#
# PART=maintain builds, in schema bench_maint, a dimension of MKEYS
# customers with 3 versions each and a fact table of MFACTS sales over
# 2024 keyed to them, and a batch of BATCH rows: (100 - LATE_PCT)% new
# versions of distinct customers from 2025-01-01 on (closing their current
# versions, after every fact) and LATE_PCT% (default 1) late changes of
# other customers in February 2024 that split their first version.  Then
# MROUNDS rounds of A (the fact table maintained: the load re-keys the
# facts of the split versions) and B (registered with maintain => false:
# the same load re-keys nothing), A B in odd rounds, B A in even ones, each the same
# load (CALL scd2.apply) timed, then reverted and the dimension vacuumed
# (untimed); medians and the ratio A / B.  After each B load (before its
# revert) scd2.rekey_facts does by hand the re-keying A's load does:
# timed on its own, it is the added cost with less of the machine's noise.  And check_facts over the
# MFACTS facts against the equivalent range join, MROUNDS times each,
# alternating.
set -euo pipefail
FACTS=${FACTS:-1000000}
KEYS=${KEYS:-100000}
ROUNDS=${ROUNDS:-3}
PART=${PART:-all}
MFACTS=${MFACTS:-10000000}
MKEYS=${MKEYS:-1000000}
BATCH=${BATCH:-200000}
LATE_PCT=${LATE_PCT:-1}
MROUNDS=${MROUNDS:-3}
q() { psql -X -q -At -v ON_ERROR_STOP=1 -c "SET search_path = bench_facts, public" -c "$1"; }
t() {   # seconds the statement took
    local s e
    s=$(date +%s.%N); q "$1" >/dev/null; e=$(date +%s.%N)
    echo "$e - $s" | bc
}

setup() {
psql -X -q -v ON_ERROR_STOP=1 <<SQL
SET client_min_messages = warning;
DROP SCHEMA IF EXISTS bench_facts CASCADE;
CREATE SCHEMA bench_facts;
SET search_path = bench_facts, public;
CREATE TABLE d (sk bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, id int NOT NULL, v text,
                valid_from timestamptz NOT NULL, valid_to timestamptz, is_current boolean NOT NULL);
INSERT INTO d (id, v, valid_from, valid_to, is_current)
SELECT k, 'v' || n, s, lead(s) OVER (PARTITION BY k ORDER BY s), n = 3
  FROM generate_series(1, $KEYS) k,
       LATERAL (VALUES (1, timestamptz '2024-01-01 UTC'), (2, '2024-05-01 UTC'), (3, '2024-09-01 UTC')) AS x(n, s)
 ORDER BY k, s;
CREATE TABLE stg (id int, v text, eff timestamptz);
SELECT scd2.register('d', ARRAY['id'], effective_column => 'eff');
CREATE TABLE f (n bigint, cust_id int, cust_sk bigint, sold_at timestamptz, amount numeric);
INSERT INTO f
SELECT g, 1 + (hashint8(g) & 2147483647) % $KEYS, NULL,
       timestamptz '2024-01-01 UTC' + ((hashint8(-g) & 2147483647) % 31536000) * interval '1 second', g % 100
  FROM generate_series(1, $FACTS) g;
UPDATE f SET cust_sk = d.sk FROM d
 WHERE d.id = f.cust_id AND d.valid_from <= f.sold_at AND (d.valid_to IS NULL OR d.valid_to > f.sold_at);
-- 1% keyed to the wrong version of their customer
UPDATE f SET cust_sk = (SELECT w.sk FROM d w WHERE w.id = f.cust_id AND w.sk <> f.cust_sk LIMIT 1) WHERE n % 100 = 0;
SELECT scd2.register_fact('f', 'd', 'cust_sk', 'sold_at', maintain => false);
VACUUM ANALYZE d; VACUUM ANALYZE f;
SQL
}

CHECK="SELECT count(*), sum(facts) FROM scd2.check_facts('f')"
RANGE="SELECT count(*), sum(c) FROM (SELECT f.cust_sk, f.sold_at, e.sk, count(*) AS c FROM f
         LEFT JOIN d e ON e.id = f.cust_id AND e.valid_from <= f.sold_at AND (e.valid_to IS NULL OR e.valid_to > f.sold_at)
        WHERE f.cust_sk IS DISTINCT FROM e.sk GROUP BY 1, 2, 3) x"

median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

maintain_part() {
qm() { psql -X -q -At -v ON_ERROR_STOP=1 -c "SET search_path = bench_maint, public" -c "SET client_min_messages = warning" -c "$1"; }
tm() { local s e; s=$(date +%s.%N); qm "$1" >/dev/null; e=$(date +%s.%N); echo "$e - $s" | bc; }
local late=$((BATCH * LATE_PCT / 100))
echo "# maintain: facts=$MFACTS keys=$MKEYS batch=$BATCH (late $late) rounds=$MROUNDS $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg)"
psql -X -q -v ON_ERROR_STOP=1 <<SQL
SET client_min_messages = warning;
DROP SCHEMA IF EXISTS bench_maint CASCADE;
CREATE SCHEMA bench_maint;
SET search_path = bench_maint, public;
CREATE TABLE d (sk bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, id int NOT NULL, v text,
                valid_from timestamptz NOT NULL, valid_to timestamptz, is_current boolean NOT NULL);
INSERT INTO d (id, v, valid_from, valid_to, is_current)
SELECT k, 'v' || n, s, lead(s) OVER (PARTITION BY k ORDER BY s), n = 3
  FROM generate_series(1, $MKEYS) k,
       LATERAL (VALUES (1, timestamptz '2024-01-01 UTC'), (2, '2024-05-01 UTC'), (3, '2024-09-01 UTC')) AS x(n, s)
 ORDER BY k, s;
CREATE TABLE stg (id int, v text, eff timestamptz);
SELECT scd2.register('d', ARRAY['id'], effective_column => 'eff');
-- the facts, keyed as they are inserted (version n of customer k is sk 3(k - 1) + n)
CREATE TABLE f (n bigint, cust_id int, cust_sk bigint, sold_at timestamptz, amount numeric);
INSERT INTO f
SELECT g, c, 3 * (c - 1) + CASE WHEN t < '2024-05-01 UTC' THEN 1 WHEN t < '2024-09-01 UTC' THEN 2 ELSE 3 END, t, g % 100
  FROM generate_series(1, $MFACTS) g,
       LATERAL (SELECT 1 + (hashint8(g) & 2147483647) % $MKEYS AS c,
                       timestamptz '2024-01-01 UTC' + ((hashint8(-g) & 2147483647) % 31536000) * interval '1 second' AS t) x;
SELECT scd2.register_fact('f', 'd', 'cust_sk', 'sold_at');
-- the batch: late changes of the first customers, new versions of the next ones
INSERT INTO stg SELECT k, 'late', timestamptz '2024-02-01 UTC' + (k % 28) * interval '1 day' FROM generate_series(1, $late) k;
INSERT INTO stg SELECT k, 'new', timestamptz '2025-01-01 UTC' + (k % 100) * interval '1 hour'
  FROM generate_series($late + 1, $BATCH) k;
VACUUM ANALYZE d; VACUUM ANALYZE f; VACUUM ANALYZE stg;
SQL
[ "$(qm "SELECT count(*) FROM scd2.check_facts('f')")" = 0 ] || { echo "the facts are not keyed right"; exit 1; }
local a b ra rb
: >"${TMPDIR:-/tmp}/facts_ma.$$"; : >"${TMPDIR:-/tmp}/facts_mb.$$"
for r in $(seq 1 "$MROUNDS"); do
    # A first in odd rounds, B first in even ones: neither always follows the other's clean-up
    order="A B"; [ $((r % 2)) = 0 ] && order="B A"
    for mode in $order; do
        if [ $mode = A ]; then qm "SELECT scd2.register_fact('f', 'd', 'cust_sk', 'sold_at')" >/dev/null
        else qm "SELECT scd2.register_fact('f', 'd', 'cust_sk', 'sold_at', maintain => false)" >/dev/null; fi
        s=$(tm "CALL scd2.apply('stg', 'd')")
        k=$(qm "SELECT facts_rekeyed FROM scd2.audit_log ORDER BY run_id DESC LIMIT 1")
        w=$(qm "SELECT count(*) FROM scd2.check_facts('f')")
        echo "round $r $mode: load ${s}s, facts re-keyed $k, facts keyed wrongly after it $w"
        echo "$s" >>"${TMPDIR:-/tmp}/facts_m$(echo $mode | tr AB ab).$$"
        if [ $mode = B ]; then
            # the same re-keying, by hand after B's load: what A's load adds
            x=$(tm "SELECT scd2.rekey_facts('f')")
            echo "round $r B: rekey_facts after it ${x}s"
            echo "$x" >>"${TMPDIR:-/tmp}/facts_mr.$$"
        fi
        qm "SELECT scd2.revert((SELECT max(run_id) FROM scd2.audit_log WHERE status = 'success'))" >/dev/null
        [ $mode = A ] || qm "SELECT scd2.rekey_facts('f')" >/dev/null   # back with the history
        qm "VACUUM d" >/dev/null; qm "VACUUM f" >/dev/null
    done
done
a=$(median <"${TMPDIR:-/tmp}/facts_ma.$$"); b=$(median <"${TMPDIR:-/tmp}/facts_mb.$$")
x=$(median <"${TMPDIR:-/tmp}/facts_mr.$$")
rm -f "${TMPDIR:-/tmp}/facts_ma.$$" "${TMPDIR:-/tmp}/facts_mb.$$" "${TMPDIR:-/tmp}/facts_mr.$$"
echo "load median: maintained (A) ${a}s, none maintained (B) ${b}s, A/B $(echo "scale=3; $a / $b" | bc)"
echo "rekey_facts after B's load, median ${x}s: (B + it) / B $(echo "scale=3; ($b + $x) / $b" | bc)"
local cf rj
cf=$(qm "SELECT count(*), sum(facts) FROM scd2.check_facts('f')")
rj=$(qm "SELECT count(*), sum(c) FROM (SELECT f.cust_sk, f.sold_at, e.sk, count(*) AS c FROM f
          LEFT JOIN d e ON e.id = f.cust_id AND e.valid_from <= f.sold_at AND (e.valid_to IS NULL OR e.valid_to > f.sold_at)
         WHERE f.cust_sk IS DISTINCT FROM e.sk GROUP BY 1, 2, 3) x")
echo "check_facts over $MFACTS facts finds $cf, the range join $rj"
for r in $(seq 1 "$MROUNDS"); do
    if [ $((r % 2)) = 1 ]; then c=$(tm "$CHECK"); j=$(tm "$RANGE"); else j=$(tm "$RANGE"); c=$(tm "$CHECK"); fi
    echo "check round $r: check_facts ${c}s range_join ${j}s"
done
qm "DROP SCHEMA bench_maint CASCADE"
}

if [ "$PART" = maintain ] || [ "$PART" = all ]; then
    maintain_part
    [ "$PART" = all ] || exit 0
fi

echo "# facts=$FACTS keys=$KEYS rounds=$ROUNDS $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg)"
setup
a=$(q "$CHECK"); b=$(q "$RANGE")
echo "check_facts finds $a, the range join $b"
[ "$a" = "$b" ] || { echo "MISMATCH"; exit 1; }
for r in $(seq 1 "$ROUNDS"); do
    if [ $((r % 2)) = 1 ]; then
        c=$(t "$CHECK"); j=$(t "$RANGE")
    else
        j=$(t "$RANGE"); c=$(t "$CHECK")
    fi
    echo "round $r: check_facts ${c}s range_join ${j}s"
done
# each round a late change of another 1% of the customers (ids = round
# mod 100) splits their first version; log and full alternate
for r in $(seq 1 $((2 * ROUNDS))); do
    q "TRUNCATE stg; INSERT INTO stg SELECT k, 'late$r', timestamptz '2024-02-01 UTC' + $r * interval '1 day'
         FROM generate_series($r, $KEYS, 100) k; CALL scd2.apply('stg', 'd')" >/dev/null
    before=$(q "SELECT sum(facts) FROM scd2.check_facts('f')")
    if [ $((r % 2)) = 1 ]; then mode=log; s=$(t "SELECT scd2.rekey_facts('f')")
    else mode=full; s=$(t "SELECT scd2.rekey_facts('f', full => true)"); fi
    after=$(q "SELECT coalesce(sum(facts), 0) FROM scd2.check_facts('f')")
    echo "rekey_$mode round $r: ${s}s, wrong facts before $before, after $after"
done
q "DROP SCHEMA bench_facts CASCADE"
