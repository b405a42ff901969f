#!/usr/bin/env bash
# scd2 huge-batch test: one load of HUGE_ROWS staging rows must complete,
# with exact metrics, and with the loading backend's private memory bounded
# (work tables, sorts and hashes spill to disk; nothing grows with the
# batch).  The hostile-input tests are pg_regress files
# (sql-tests/identifiers.sql, sql-tests/load_errors.sql).
#
# Needs a running server where `CREATE EXTENSION scd2` works, reached
# through PGHOST/PGPORT/PGUSER; creates (drops first) database scd2_huge_batch.
#
#   HUGE_ROWS=200000    staging rows (rounded down to a multiple of 40).
#                       The batch: N/4 existing keys (every 10th changed),
#                       N/2 new keys, N/8 new keys with two rows each
#                       (the timeline path).  10000000 was run by hand.
#   HUGE_MAX_MB         limit on the backend's peak private memory (RssAnon,
#                       sampled from /proc every 0.2 s; skipped when /proc of
#                       the backend is not readable).  Default: the load's
#                       bound, hash_mem (work_mem * hash_mem_multiplier, i.e.
#                       2 x work_mem by default: every statement of a load
#                       shares it, src/load/memory.c) + temp_buffers (the
#                       work tables' buffers) + 32 MB (the backend itself:
#                       catalog caches, plans, libraries), with the
#                       session's settings
#   HUGE_WORK_MEM=1MB   the test's work_mem (every session of it): small, so
#                       that even the default batch outgrows every sort and
#                       hash ('' keeps the server's or PGOPTIONS' setting).
#                       At 200k rows the constant dominates (14 MB measured,
#                       limit 42 MB: it catches growth per row); the run that
#                       tells a per-node work_mem from a shared one is
#                       HUGE_ROWS=1000000 HUGE_WORK_MEM=16MB (limit 72 MB:
#                       43 MB measured, 81 MB before issue 14)
#   HUGE_RELOAD=1       then load the same batch again (it must write nothing)
#   HUGE_LOGGED_ROWS    then a batch logged by surrogate keys (every row it
#                       writes from the fast path: load/batch_log.c), its
#                       memory checked against the same limit: this many new
#                       keys and every 10th existing key changed, one row
#                       each.  Default N/2 (at 200k: 110k rows written, two
#                       chunks of the change log); 0: none.  The run of
#                       docs/PERFORMANCE.md: HUGE_ROWS=120000
#                       HUGE_LOGGED_ROWS=1900000 HUGE_WORK_MEM=
#                       HUGE_RELOAD=0 at the server's default settings
#                       (1,906,000 rows written)
#   HUGE_LOG_CONTEXTS=0 every this many seconds, log the loading backend's
#                       memory contexts to the server log
#                       (pg_log_backend_memory_contexts; 0: never)
#
# Prints `huge_batch: N passed, M failed`; exits non-zero on failure.

set -u
N=${HUGE_ROWS:-200000}
MAX_MB=${HUGE_MAX_MB:-0}
LOG_EVERY=${HUGE_LOG_CONTEXTS:-0}
RELOAD=${HUGE_RELOAD:-1}
WORK_MEM=${HUGE_WORK_MEM-1MB}
case "$WORK_MEM" in *[!0-9a-zA-Z]*) echo "huge_batch: HUGE_WORK_MEM must be a size such as 4MB" >&2
                                   echo "huge_batch: 0 passed, 1 failed"; exit 2 ;; esac
[ -z "$WORK_MEM" ] || export PGOPTIONS="${PGOPTIONS:-} -c work_mem=$WORK_MEM"
LOGGED=${HUGE_LOGGED_ROWS:-$(( ${N//[!0-9]/} / 2 ))}
case "$N$MAX_MB$LOG_EVERY$RELOAD$LOGGED" in ''|*[!0-9]*) echo "huge_batch: HUGE_ROWS, HUGE_MAX_MB, HUGE_RELOAD, HUGE_LOGGED_ROWS and HUGE_LOG_CONTEXTS must be numbers" >&2
                                 echo "huge_batch: 0 passed, 1 failed"; exit 2 ;; esac
N=$(( N / 40 * 40 ))
[ "$N" -ge 40 ] || N=40
PSQL=${PG_BIN:+$PG_BIN/}psql
DB=scd2_huge_batch
passed=0 failed=0
ok()   { passed=$((passed + 1)); echo "ok - $*"; }
fail() { failed=$((failed + 1)); echo "FAILED - $*"; }
check() { if [ "$2" = "$3" ]; then ok "$1"; else fail "$1: expected [$2], got [$3]"; fi; }
q() { "$PSQL" -X -q -At -v ON_ERROR_STOP=1 -d "$DB" "$@"; }

"$PSQL" -X -q -d postgres -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB" >/dev/null 2>&1 \
    || { fail "creating database $DB"; echo "huge_batch: $passed passed, $failed failed"; exit 1; }

# The bound, from the settings the load runs with (kB).
read -r wm_kb hash_kb tb_kb <<EOF_SETTINGS
$("$PSQL" -X -q -At -F' ' -d postgres -c "SELECT w.setting::bigint, (w.setting::bigint * h.setting::float8)::bigint, t.setting::bigint * 8
    FROM pg_settings w, pg_settings h, pg_settings t
   WHERE w.name = 'work_mem' AND h.name = 'hash_mem_multiplier' AND t.name = 'temp_buffers'")
EOF_SETTINGS
case "${wm_kb:-x}${hash_kb:-x}${tb_kb:-x}" in *[!0-9]*) fail "reading work_mem, hash_mem_multiplier, temp_buffers"
    echo "huge_batch: $passed passed, $failed failed"; exit 1 ;; esac
[ "$MAX_MB" -gt 0 ] || MAX_MB=$(( hash_kb / 1024 + tb_kb / 1024 + 32 ))
echo "# work_mem $(( wm_kb / 1024 )) MB, hash_mem $(( hash_kb / 1024 )) MB, temp_buffers $(( tb_kb / 1024 )) MB: limit $MAX_MB MB"

t0=$(date +%s.%N)
q >/dev/null <<SQL || fail "setup"
SET client_min_messages = warning;
CREATE EXTENSION scd2;
CREATE TABLE stg (id bigint, name text, city text, amount numeric, eff timestamptz);
INSERT INTO stg SELECT g, 'name ' || g, 'city ' || (g % 997), g % 1000, '2024-01-01 00:00+00'
  FROM generate_series(1, $N / 4) g;
SELECT scd2.create_dimension('dim', 'stg', ARRAY['id'], effective_column => 'eff');
CALL scd2.apply('stg', 'dim');
TRUNCATE stg;
INSERT INTO stg SELECT g, 'name ' || g, CASE WHEN g % 10 = 0 THEN 'moved ' ELSE 'city ' END || (g % 997),
                       g % 1000, '2024-02-01 00:00+00'
  FROM generate_series(1, $N / 4) g;
INSERT INTO stg SELECT g, 'name ' || g, 'city ' || (g % 997), g % 1000, '2024-02-01 00:00+00'
  FROM generate_series($N / 4 + 1, 3 * $N / 4) g;
INSERT INTO stg SELECT g, 'name ' || g, CASE WHEN s = 1 THEN 'later ' ELSE 'city ' END || (g % 997), g % 1000,
                       '2024-02-01 00:00+00'::timestamptz + s * interval '1 day'
  FROM generate_series(3 * $N / 4 + 1, 7 * $N / 8) g, generate_series(0, 1) s
 ORDER BY random();
ANALYZE stg;
ANALYZE dim;
SQL
t1=$(date +%s.%N)
echo "# setup: $N staging rows, $(( N / 4 )) existing keys, $(echo "$t1 - $t0" | bc) s"

# One load of stg into dim, in the background, its backend found by
# application_name: its peak private memory into peak (kB; readable=1 when
# /proc showed it), its time into secs.
measured_load() {
    local lpid pid="" samples=0 kb t
    t=$(date +%s.%N)
    PGAPPNAME=scd2_huge_batch_load "$PSQL" -X -q -At -d "$DB" \
        -c "SET client_min_messages = warning" -c "CALL scd2.apply('stg', 'dim')" >/tmp/scd2_huge_batch_load.$$ 2>&1 &
    lpid=$!
    peak=0 readable=0
    while kill -0 "$lpid" 2>/dev/null; do
        [ -n "$pid" ] || pid=$(q -c "SELECT pid FROM pg_stat_activity WHERE application_name = 'scd2_huge_batch_load'")
        if [ -n "$pid" ] && [ -r "/proc/$pid/status" ]; then
            kb=$(awk '/^RssAnon:/ {print $2}' "/proc/$pid/status" 2>/dev/null)
            if [ -n "$kb" ]; then readable=1; [ "$kb" -gt "$peak" ] && peak=$kb; fi
        fi
        samples=$((samples + 1))
        if [ -n "$pid" ] && [ "$LOG_EVERY" -gt 0 ] && [ $(( samples % (LOG_EVERY * 5) )) = 0 ]; then
            q -c "SELECT pg_log_backend_memory_contexts($pid)" >/dev/null 2>&1
        fi
        sleep 0.2
    done
    wait "$lpid" || echo "# loader: $(cat /tmp/scd2_huge_batch_load.$$)"
    rm -f /tmp/scd2_huge_batch_load.$$
    secs=$(echo "$(date +%s.%N) - $t" | bc)
}

# The peak memory of the load just made against the limit.
check_memory() {
    if [ "$readable" = 1 ]; then
        [ "$peak" -le $(( MAX_MB * 1024 )) ] && ok "$1: peak backend memory $(( peak / 1024 )) MB <= $MAX_MB MB" \
            || fail "$1: peak backend memory $(( peak / 1024 )) MB > $MAX_MB MB"
    else
        echo "# /proc of the loading backend not readable: memory not checked"
    fi
}

measured_load
echo "# load: $secs s, peak backend private memory (RssAnon): $(( peak / 1024 )) MB"

status=$(q -c "SELECT status FROM scd2.audit_log ORDER BY run_id DESC LIMIT 1")
check "the load of $N rows succeeded" success "$status"
check_memory "the load of $N rows"
check "metrics: source, inserted, new versions, closed, unchanged" \
    "$N $(( N / 2 + N / 8 )) $(( N / 40 + N / 8 )) $(( N / 40 )) $(( N / 4 - N / 40 ))" \
    "$(q -F' ' -c "SELECT source_rows, inserted, new_versions, closed, unchanged FROM scd2.audit_log ORDER BY run_id DESC LIMIT 1")"
check "rows, current rows" "$(( N / 4 + N / 40 + N / 2 + N / 4 )) $(( N / 4 + N / 2 + N / 8 ))" \
    "$(q -F' ' -c "SELECT count(*), count(*) FILTER (WHERE is_current) FROM dim")"
check "no key has two current rows; versions of a key chain without gaps" 0 \
    "$(q -c "SELECT count(*) FROM (SELECT valid_to, lead(valid_from) OVER w AS next_from,
                                          count(*) FILTER (WHERE is_current) OVER (PARTITION BY id) AS cur
                                     FROM dim WINDOW w AS (PARTITION BY id ORDER BY valid_from)) x
              WHERE cur <> 1 OR valid_to IS DISTINCT FROM next_from")"
check "the work tables are gone" 0 "$(q -c "SELECT count(*) FROM pg_class WHERE relname LIKE 'scd2\_%' AND relpersistence = 't'")"
# Idempotent at scale: the same batch again writes nothing.
if [ "$RELOAD" != 0 ]; then
    t3=$(date +%s.%N)
    q -c "SET client_min_messages = warning; CALL scd2.apply('stg', 'dim')" >/dev/null || fail "the second load"
    echo "# reload: $(echo "$(date +%s.%N) - $t3" | bc) s"
    check "reloading the same batch writes nothing" "0 0 0" \
        "$(q -F' ' -c "SELECT inserted, new_versions, closed FROM scd2.audit_log ORDER BY run_id DESC LIMIT 1")"
fi

# A batch logged by surrogate keys (issue 51): its change log is written in
# chunks of 65,536 rows, built one at a time -- the backend's memory does not
# grow with it (one row of the whole batch's arrays took about 45 bytes per
# written row).  LOGGED new keys after every key so far, and every 10th of
# the first N/4 keys changed, in order, one staging row each.
if [ "$LOGGED" -gt 0 ]; then
    changed=$(( N / 40 ))
    written=$(( LOGGED + 2 * changed ))
    q >/dev/null <<SQL || fail "setup of the batch logged by surrogate keys"
TRUNCATE stg;
INSERT INTO stg SELECT g, 'name ' || g, 'third ' || (g % 997), g % 1000, '2024-03-01 00:00+00'
  FROM generate_series(10, $N / 4, 10) g;
INSERT INTO stg SELECT g, 'name ' || g, 'city ' || (g % 997), g % 1000, '2024-03-01 00:00+00'
  FROM generate_series($N + 1, $N + $LOGGED) g;
ANALYZE stg;
SQL
    measured_load
    echo "# batch logged by surrogate keys ($written rows written): $secs s, peak backend private memory (RssAnon): $(( peak / 1024 )) MB"
    check "the batch logged by surrogate keys succeeded, metrics: inserted, new versions, closed" \
        "success $LOGGED $changed $changed" \
        "$(q -F' ' -c "SELECT status, inserted, new_versions, closed FROM scd2.audit_log ORDER BY run_id DESC LIMIT 1")"
    check_memory "the batch logged by surrogate keys"
    run=$(q -c "SELECT max(run_id) FROM scd2.audit_log")
    check "its change log: chunks of 65,536 rows, numbered from 0, no row-by-row log" \
        "$(( (written + 65535) / 65536 )) $written 0 $(( (written + 65535) / 65536 - 1 )) 0" \
        "$(q -F' ' -c "SELECT count(*), sum(cardinality(surrogate_keys)), min(chunk), max(chunk),
                              (SELECT count(*) FROM scd2.change_log WHERE run_id = $run)
                         FROM scd2.change_log_batches WHERE run_id = $run")"
    check "its change feed: every row written, each its row's surrogate key" "$written 0" \
        "$(q -F' ' -c "SELECT count(*), count(*) FILTER (WHERE NOT EXISTS (
                                 SELECT FROM dim d WHERE d.sk = c.surrogate_key AND d.id = (c.business_key ->> 'id')::bigint
                                                     AND d.valid_from = c.valid_from))
                         FROM scd2.changes($run) c")"
fi

"$PSQL" -X -q -d postgres -c "DROP DATABASE IF EXISTS $DB" >/dev/null 2>&1
echo "huge_batch: $passed passed, $failed failed"
[ "$failed" = 0 ]
