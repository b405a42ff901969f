#!/usr/bin/env bash
# Benchmark (not a test): scd2.asof against the two SQL ways of finding the
# version of a key valid at an instant.
#
#   PGHOST=... PGPORT=... PGUSER=... [PGDATABASE=...] bench/asof/run.sh [10k|1m|all]
#
# 10k runs only the incremental load (INCR facts), 1m only the bulk load
# (BULK facts), all (the default) both.  The issue-14 figures are measured
# at PostgreSQL's default settings (bench/cluster.sh with SETTINGS=default).
#
# Needs a running server where the scd2 extension is installed and created in
# PGDATABASE (default: postgres).  Builds schema scd2_bench: a dimension of
# KEYS business keys with VERSIONS versions each (registered with
# scd2.register, so it has the as-of index), and two fact sets: INCR facts
# (incremental load) and BULK facts (bulk load), with random keys and instants
# (about 8% before the key's first version, so the lookup finds nothing).
# Then it times, alternating the approaches, ROUNDS rounds of the fact load
# INSERT INTO fact SELECT f.key, f.ts, <surrogate key> FROM facts f ... with
#
#   asof     scd2.asof('scd2_bench.dim', f.ts, f.key)
#   range    LEFT JOIN dim d ON d.id = f.key AND f.ts >= d.valid_from
#                             AND (d.valid_to IS NULL OR f.ts < d.valid_to)
#   lateral  LEFT JOIN LATERAL (SELECT sk, valid_to FROM dim
#              WHERE id = f.key AND valid_from <= f.ts
#              ORDER BY valid_from DESC LIMIT 1) x
#              ON x.valid_to IS NULL OR f.ts < x.valid_to
#   floor    the same INSERT with no lookup at all (NULL surrogate keys):
#            what any lookup is measured against
#
# (the planner chooses the plans, with the server's settings; INSERT ...
# SELECT never runs in parallel on PostgreSQL 15), checks that the three
# lookups write the same count and sum of surrogate keys, and prints the
# median time of each and the ratios asof/range, asof/lateral and
# asof/floor (below 1 means asof is faster).  scd2.asof runs with its
# defaults: it probes the index, and switches to its in-memory map of the
# dimension (bulk mode) as README describes (scd2.asof_bulk_threshold,
# scd2.asof_map_memory).  APPROACHES="asof floor" runs only those.
#
# Each load size is run against two states of the facts table, as a fact
# load meets it:
#   fresh     just loaded (CREATE TABLE + INSERT, as after a COPY), never
#             analyzed or vacuumed (autovacuum disabled on it): the planner
#             has no statistics on the facts
#   analyzed  VACUUM ANALYZEd
# Same rows in both.  KEEP=1 keeps the schema afterwards; SKIP_SETUP=1
# reuses it.
set -euo pipefail

KEYS=${KEYS:-1000000}
VERSIONS=${VERSIONS:-3}
INCR=${INCR:-10000}
BULK=${BULK:-1000000}
ROUNDS=${ROUNDS:-3}
SCENARIO=${1:-all}
export PGDATABASE=${PGDATABASE:-postgres}
case $SCENARIO in
  10k) LOADS=(facts_incr_fresh facts_incr) ;;
  1m)  LOADS=(facts_bulk_fresh facts_bulk) ;;
  all) LOADS=(facts_incr_fresh facts_incr facts_bulk_fresh facts_bulk) ;;
  *) echo "usage: $0 [10k|1m|all]" >&2; exit 2 ;;
esac

PSQL=(psql -X -q -v ON_ERROR_STOP=1 -At)

if [ "${SKIP_SETUP:-0}" != 1 ]; then
  echo "setup: $KEYS keys x $VERSIONS versions, $INCR + $BULK facts ..." >&2
  "${PSQL[@]}" <<SQL
SET client_min_messages = warning;
DROP SCHEMA IF EXISTS scd2_bench CASCADE;
CREATE SCHEMA scd2_bench;
CREATE TABLE scd2_bench.dim (
    sk         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id         int NOT NULL,
    name       text,
    valid_from timestamptz NOT NULL,
    valid_to   timestamptz,
    is_current boolean NOT NULL DEFAULT true);
-- Version v of key k starts at 2020-01-01 + (v-1) years + a per-key offset
-- of up to 200 days; each version ends where the next starts, the last is
-- current.  Inserted in load order (all keys' first versions, then the
-- second ...), as successive loads would.
INSERT INTO scd2_bench.dim (id, name, valid_from, valid_to, is_current)
SELECT k, 'name ' || k || '/' || v,
       timestamptz '2020-01-01 00:00+00' + (v - 1) * interval '1 year' + (hashint4(k) & 255) % 200 * interval '1 day',
       CASE WHEN v < $VERSIONS THEN
           timestamptz '2020-01-01 00:00+00' + v * interval '1 year' + (hashint4(k) & 255) % 200 * interval '1 day' END,
       v = $VERSIONS
  FROM generate_series(1, $VERSIONS) v, generate_series(1, $KEYS) k;
SELECT scd2.register('scd2_bench.dim', ARRAY['id']);
VACUUM ANALYZE scd2_bench.dim;

CREATE FUNCTION scd2_bench.facts(n int) RETURNS TABLE (key int, ts timestamptz)
LANGUAGE sql AS \$\$
    SELECT 1 + (random() * ($KEYS - 1))::int,
           timestamptz '2020-01-01 00:00+00' + random() * ($VERSIONS * interval '1 year')
      FROM generate_series(1, n)
\$\$;
SELECT setseed(0.42);
CREATE TABLE scd2_bench.facts_incr AS SELECT * FROM scd2_bench.facts($INCR);
CREATE TABLE scd2_bench.facts_bulk AS SELECT * FROM scd2_bench.facts($BULK);
VACUUM ANALYZE scd2_bench.facts_incr, scd2_bench.facts_bulk;
-- the same rows, freshly loaded: no statistics, no visibility map
CREATE TABLE scd2_bench.facts_incr_fresh (key int, ts timestamptz) WITH (autovacuum_enabled = off);
INSERT INTO scd2_bench.facts_incr_fresh SELECT * FROM scd2_bench.facts_incr;
CREATE TABLE scd2_bench.facts_bulk_fresh (key int, ts timestamptz) WITH (autovacuum_enabled = off);
INSERT INTO scd2_bench.facts_bulk_fresh SELECT * FROM scd2_bench.facts_bulk;

-- The fact table the loads write (no indexes: the lookups are what differ).
CREATE TABLE scd2_bench.fact (key int, ts timestamptz, sk bigint);

-- Wall time of one load into the emptied fact table, in milliseconds, and
-- what it wrote (count and sum of the surrogate keys found).
CREATE FUNCTION scd2_bench.timed(q text, OUT ms numeric, OUT result text)
LANGUAGE plpgsql AS \$\$
DECLARE t0 timestamptz;
BEGIN
    TRUNCATE scd2_bench.fact;
    t0 := clock_timestamp();
    EXECUTE q;
    ms := round(extract(epoch FROM clock_timestamp() - t0)::numeric * 1000, 1);
    SELECT pg_catalog.count(sk) || ' ' || coalesce(pg_catalog.sum(sk), 0) INTO result FROM scd2_bench.fact;
END
\$\$;
SQL
fi

query() {  # approach facts-table
  local f="scd2_bench.$2"
  case $1 in
    asof)    echo "INSERT INTO scd2_bench.fact SELECT f.key, f.ts, scd2.asof('scd2_bench.dim', f.ts, f.key) FROM $f f" ;;
    range)   echo "INSERT INTO scd2_bench.fact SELECT f.key, f.ts, d.sk FROM $f f LEFT JOIN scd2_bench.dim d ON d.id = f.key AND f.ts >= d.valid_from AND (d.valid_to IS NULL OR f.ts < d.valid_to)" ;;
    floor)   echo "INSERT INTO scd2_bench.fact SELECT f.key, f.ts, NULL::bigint FROM $f f" ;;
    lateral) echo "INSERT INTO scd2_bench.fact SELECT f.key, f.ts, x.sk FROM $f f LEFT JOIN LATERAL (SELECT d.sk, d.valid_to FROM scd2_bench.dim d WHERE d.id = f.key AND d.valid_from <= f.ts ORDER BY d.valid_from DESC LIMIT 1) x ON x.valid_to IS NULL OR f.ts < x.valid_to" ;;
  esac
}

read -ra APPROACHES <<< "${APPROACHES:-asof range lateral floor}"
NA=${#APPROACHES[@]}

echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
"${PSQL[@]}" -c "LOAD 'scd2'" -c "SELECT 'settings: ' || string_agg(name || '=' || current_setting(name), ', ' ORDER BY name) FROM pg_settings WHERE name IN ('shared_buffers', 'work_mem', 'hash_mem_multiplier', 'scd2.asof_bulk_threshold', 'scd2.asof_map_memory', 'max_parallel_workers_per_gather', 'jit')" >&2

for load in "${LOADS[@]}"; do   # plans, once, for the record
  for a in "${APPROACHES[@]}"; do
    echo "--- plan: $a / $load" >&2
    "${PSQL[@]}" -c "EXPLAIN $(query $a $load)" | sed 's/^/    /' >&2
  done
done

# All timings in ONE session: a new backend pays a page fault for every
# shared buffer it touches first (5-15 us each), which would dominate the
# small load.  One untimed warm-up run of each statement, then ROUNDS rounds,
# the order of the approaches rotated each round.
script=("SET client_min_messages = warning;")
script+=("CREATE TEMP TABLE t (load text, approach text, round int, ms numeric, result text);")
# a checkpoint (when allowed) before each load's rounds, so that writing out
# the setup's or the previous load's dirty pages does not land in the timings
checkpoint='DO $c$ BEGIN EXECUTE $$CHECKPOINT$$; EXCEPTION WHEN insufficient_privilege THEN NULL; END $c$;'
for load in "${LOADS[@]}"; do
  script+=("$checkpoint")
  for a in "${APPROACHES[@]}"; do
    script+=("SELECT * FROM scd2_bench.timed(\$q\$$(query $a $load)\$q\$);")
  done
  for r in $(seq 1 "$ROUNDS"); do
    for i in $(seq 0 $(( NA - 1 ))); do
      a=${APPROACHES[$(( (i + r) % NA ))]}
      script+=("INSERT INTO t SELECT '$load', '$a', $r, * FROM scd2_bench.timed(\$q\$$(query $a $load)\$q\$);")
    done
  done
done
script+=('\o' "SELECT load, approach, round, ms, result FROM t ORDER BY load, round;")

declare -A times results
while IFS='|' read -r load a r ms res; do
  echo "round $r $load $a: $ms ms ($res)" >&2
  times[$load/$a]="${times[$load/$a]:-} $ms"
  [ "$a" = floor ] && continue   # writes no surrogate keys
  if [ -n "${results[$load]:-}" ] && [ "${results[$load]}" != "$res" ]; then
    echo "MISMATCH on $load: $a returned '$res', expected '${results[$load]}'" >&2; exit 1
  fi
  results[$load]=$res
done < <(printf '%s\n' "${script[@]}" | "${PSQL[@]}" -o /dev/null)

median() { tr ' ' '\n' | grep -v '^$' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

echo
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "scd2.asof benchmark: $KEYS keys x $VERSIONS versions; medians of $ROUNDS rounds (ms)"
printf '%-10s %-9s %10s %10s %10s %10s %11s %13s %11s\n' facts table asof range lateral floor asof/range asof/lateral asof/floor
for load in "${LOADS[@]}"; do
  ma=$(echo "${times[$load/asof]:-}" | median)
  mr=$(echo "${times[$load/range]:-}" | median)
  ml=$(echo "${times[$load/lateral]:-}" | median)
  mf=$(echo "${times[$load/floor]:-}" | median)
  case $load in facts_incr*) n=$INCR ;; *) n=$BULK ;; esac
  case $load in *_fresh) st=fresh ;; *) st=analyzed ;; esac
  printf '%-10s %-9s %10s %10s %10s %10s %10sx %12sx %10sx\n' "$n" "$st" "$ma" "$mr" "$ml" "$mf" \
    "$(echo "scale=2; $ma / $mr" | bc)" "$(echo "scale=2; $ma / $ml" | bc)" "$(echo "scale=2; $ma / $mf" | bc)"
done
for load in "${LOADS[@]}"; do
  echo "  $load: ${results[$load]} (count, sum of surrogate keys; identical for all approaches)"
done

if [ "${KEEP:-0}" != 1 ]; then
  "${PSQL[@]}" -c "SET client_min_messages = warning; DROP SCHEMA scd2_bench CASCADE"
fi
