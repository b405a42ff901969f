#!/usr/bin/env bash
# bench/cdc.sh -- issue 50: what a change stream costs.
#
# EVENTS change events over KEYS keys (default 1,000,000 over 100,000): a
# CDC stream where each event carries its commit instant and an LSN-like
# sequence; PAIRS of the events are a second change of a key in the same
# instant as its first (an insert and an update in one transaction), and
# PARTIAL of them leave `city` NULL ("unchanged", ignore_null_updates).
# Loaded side by side in one run on the same data:
#   stream_in_order   registered with sequence_column and
#                     ignore_null_updates; the events in BATCHES batches in
#                     instant order
#   stream_shuffled   the same registration; the same events in BATCHES
#                     random batches
#   plain_in_order    an order-free dimension without a sequence or partial
#                     updates (the default since 0.5): the same events, each
#                     pair's second event a microsecond later, every event
#                     whole (city as the fold gives it), in BATCHES batches
#                     in order
# Prints each load's time, each approach's total, the ratios to
# plain_in_order, whether the two streams give the same dimension, and the
# memory (scd2.arrival_memory_size) per event.
#
# Connection: the usual libpq environment; the server needs scd2 installed.
#   KEYS=100000 EVENTS=1000000 BATCHES=10 PAIRS=0.05 PARTIAL=0.10
set -euo pipefail
KEYS=${KEYS:-100000}
EVENTS=${EVENTS:-1000000}
BATCHES=${BATCHES:-10}
PAIRS=${PAIRS:-0.05}
PARTIAL=${PARTIAL:-0.10}
PSQL=(psql -X -q -At -v ON_ERROR_STOP=1)
export TZ=UTC PGTZ=UTC
log() { printf '%s %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

log "generating: keys=$KEYS events=$EVENTS pairs=$PAIRS partial=$PARTIAL batches=$BATCHES"
"${PSQL[@]}" <<SQL
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS scd2;
DROP TABLE IF EXISTS cdc_ev, cdc_plain, cdc_stg, cdc_stream_in_order, cdc_stream_shuffled, cdc_plain_in_order;
SELECT setseed(0.42);
-- event n: key, instant (one second apart, a pair's second event at its
-- first one's instant), sequence n, values; the shuffled batch bt
CREATE TABLE cdc_ev AS
SELECT n, k, t, n AS lsn,
       CASE WHEN random() < $PARTIAL THEN NULL ELSE 'city ' || (n % 997) END AS city,
       'tier ' || (n % 5) AS tier, false AS del,
       1 + floor(random() * $BATCHES)::int AS bt
  FROM (SELECT n, 1 + (hashint4(n) & 2147483647) % $KEYS AS k,
               timestamptz '2026-01-01' + n * interval '1 second' AS t
          FROM generate_series(1, ($EVENTS * (1 - $PAIRS))::int) n) e;
INSERT INTO cdc_ev
SELECT ($EVENTS * (1 - $PAIRS))::int + row_number() OVER (), e.k, e.t, ($EVENTS * (1 - $PAIRS))::int + row_number() OVER (),
       'moved ' || e.n, e.tier, false, 1 + floor(random() * $BATCHES)::int
  FROM cdc_ev e WHERE e.n % (1 / $PAIRS)::int = 0 LIMIT ($EVENTS * $PAIRS)::int;
-- the in-order batches: by instant
ALTER TABLE cdc_ev ADD COLUMN bo int;
UPDATE cdc_ev e SET bo = o.bo FROM (SELECT n, ntile($BATCHES) OVER (ORDER BY t, lsn) AS bo FROM cdc_ev) o WHERE o.n = e.n;
CREATE INDEX ON cdc_ev (bo);
CREATE INDEX ON cdc_ev (bt);
CREATE TABLE cdc_stg (k int, city text, tier text, t timestamptz, lsn bigint, del boolean);
CREATE TABLE cdc_stream_in_order (sk bigint GENERATED ALWAYS AS IDENTITY, k int NOT NULL, city text, tier text,
                                  valid_from timestamptz NOT NULL, valid_to timestamptz);
CREATE TABLE cdc_stream_shuffled (LIKE cdc_stream_in_order INCLUDING ALL);
CREATE TABLE cdc_plain_in_order (LIKE cdc_stream_in_order INCLUDING ALL);
SELECT count(scd2.register(d, ARRAY['k'], tracked => ARRAY['city', 'tier'], effective_column => 't',
                           delete_column => 'del', sequence_column => 'lsn', ignore_null_updates => ARRAY['city']))
  FROM unnest(ARRAY['cdc_stream_in_order', 'cdc_stream_shuffled']::regclass[]) d;
SELECT scd2.register('cdc_plain_in_order', ARRAY['k'], tracked => ARRAY['city', 'tier'], effective_column => 't',
                     delete_column => 'del') IS NOT NULL;
CREATE INDEX ON cdc_ev (k, t, lsn);
-- the plain events: a pair's second event a microsecond later; city as
-- the fold gives it (a partial event's city from the key's last event with one)
CREATE TABLE cdc_plain AS
SELECT e.k, COALESCE(e.city, (SELECT p.city FROM cdc_ev p WHERE p.k = e.k AND p.city IS NOT NULL
                                 AND (p.t, p.lsn) < (e.t, e.lsn) ORDER BY p.t DESC, p.lsn DESC LIMIT 1)) AS city,
       e.tier, e.t + CASE WHEN e.lsn > ($EVENTS * (1 - $PAIRS))::int THEN interval '1 microsecond' ELSE interval '0' END AS t,
       e.lsn, e.del, e.bo
  FROM cdc_ev e;
CREATE INDEX ON cdc_plain (bo);
VACUUM ANALYZE cdc_ev, cdc_plain;
SELECT count(*), count(*) FILTER (WHERE city IS NULL), count(DISTINCT k) FROM cdc_ev;
SQL

load() {  # load DIM SOURCE COLUMN BATCH -> seconds
    "${PSQL[@]}" <<SQL | tail -1
SET client_min_messages = warning;
TRUNCATE cdc_stg;
INSERT INTO cdc_stg SELECT k, city, tier, t, lsn, del FROM $2 WHERE $3 = $4;
ANALYZE cdc_stg;
SELECT extract(epoch FROM clock_timestamp()) AS t0 \gset
CALL scd2.apply('cdc_stg', '$1');
SELECT round((extract(epoch FROM clock_timestamp()) - :t0)::numeric, 3);
SQL
}

declare -A total
for a in stream_in_order stream_shuffled plain_in_order; do total[$a]=0; done
for b in $(seq 1 "$BATCHES"); do
    # alternate the order of the approaches each batch
    if [ $((b % 2)) = 1 ]; then order="stream_in_order stream_shuffled plain_in_order"
    else order="plain_in_order stream_shuffled stream_in_order"; fi
    for a in $order; do
        case $a in
            stream_in_order) s=$(load cdc_stream_in_order cdc_ev bo "$b") ;;
            stream_shuffled) s=$(load cdc_stream_shuffled cdc_ev bt "$b") ;;
            plain_in_order)  s=$(load cdc_plain_in_order cdc_plain bo "$b") ;;
        esac
        total[$a]=$(echo "${total[$a]} + $s" | bc)
        log "batch $b $a ${s}s"
    done
done
echo "approach          total_s  ratio_to_plain"
for a in stream_in_order stream_shuffled plain_in_order; do
    printf '%-17s %7s  %s\n' "$a" "${total[$a]}" "$(echo "scale=3; ${total[$a]} / ${total[plain_in_order]}" | bc)"
done
"${PSQL[@]}" <<SQL
SELECT 'same dimension (in order vs shuffled): ' ||
       NOT EXISTS ((SELECT k, city, tier, valid_from, valid_to FROM cdc_stream_in_order
                    EXCEPT SELECT k, city, tier, valid_from, valid_to FROM cdc_stream_shuffled)
                   UNION ALL (SELECT k, city, tier, valid_from, valid_to FROM cdc_stream_shuffled
                    EXCEPT SELECT k, city, tier, valid_from, valid_to FROM cdc_stream_in_order));
SELECT format('%-17s versions %s, memory: %s events, %s bytes, %s bytes per event', d,
              (SELECT count(*) FROM ONLY cdc_stream_in_order), s.remembered, s.bytes,
              round(s.bytes::numeric / GREATEST(s.remembered, 1), 1))
  FROM unnest(ARRAY['cdc_stream_in_order', 'cdc_stream_shuffled', 'cdc_plain_in_order']::regclass[]) d,
       LATERAL scd2.arrival_memory_size(d) s;
SELECT 'memory indexes (all dimensions): ' || pg_size_pretty(pg_indexes_size('scd2.arrival_memory'));
SQL
