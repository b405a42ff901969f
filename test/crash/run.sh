#!/usr/bin/env bash
# scd2 crash test: kill -9 the server while a load's MERGE is writing, then
# check after crash recovery that the dimension is exactly what it was
# before the load and that no success row was logged; then load again.
#
# Starts its OWN cluster (it kills the postmaster): port SCD2_CRASH_PORT
# (default: the main cluster's port + 63, 55495), directory
# /tmp/scd2-crash-PORT, fsync = on; removes it at the end.
# Needs the extension installed (scripts/test.sh does that).
#
#   CRASH_KEYS=300000   dimension size; the batch changes every key, so the
#                       MERGE closes and inserts CRASH_KEYS rows each
#
# Prints one line `crash: N passed, M failed`; exits non-zero on failure.

set -u
export SCD2_PORT=${SCD2_CRASH_PORT:-$(( ${SCD2_PORT:-55432} + 63 ))}
export SCD2_RUN_DIR=/tmp/scd2-crash-$SCD2_PORT
# shellcheck source=../../scripts/lib.sh
source "$(dirname "$0")/../../scripts/lib.sh"
set +e

KEYS=${CRASH_KEYS:-300000}
case "$KEYS" in ''|*[!0-9]*) echo "crash: CRASH_KEYS must be a number" >&2; echo "crash: 0 passed, 1 failed"; exit 2 ;; esac
passed=0 failed=0
ok()   { passed=$((passed + 1)); echo "ok - $*"; }
fail() { failed=$((failed + 1)); echo "FAILED - $*"; }
check() {  # check "what" expected actual
    if [ "$2" = "$3" ]; then ok "$1"; else fail "$1: expected [$2], got [$3]"; fi
}
finish() {
    cluster_stop quiet
    echo "crash: $passed passed, $failed failed"
    [ "$failed" = 0 ]
    exit
}
trap 'fail "interrupted"; finish' INT TERM

started=$SECONDS
cluster_start "fsync = on
synchronous_commit = on
full_page_writes = on" || { fail "cluster start"; finish; }
# The PG* variables now point at the crash cluster (lib.sh exported them).
q() { "$PG_BIN/psql" -X -q -At -v ON_ERROR_STOP=1 -d postgres "$@"; }

fsync_now=$(q -c "SHOW fsync")
check "the crash cluster runs with fsync = on" on "$fsync_now"

q >/dev/null <<SQL || { fail "setup"; finish; }
SET client_min_messages = warning;
CREATE EXTENSION scd2;
CREATE EXTENSION amcheck;
CREATE TABLE stg (id int, name text, city text, tier int);
INSERT INTO stg SELECT g, 'name ' || g, 'city ' || (g % 1000), g % 7 FROM generate_series(1, $KEYS) g;
SELECT scd2.create_dimension('dim', 'stg', ARRAY['id']);
CALL scd2.apply('stg', 'dim', '2024-01-01 00:00+00');
-- The batch: every key moves city, so the MERGE closes $KEYS rows and
-- inserts $KEYS new versions.
UPDATE stg SET city = 'moved ' || id;
VACUUM ANALYZE stg;
VACUUM ANALYZE dim;
CHECKPOINT;
SQL

content_md5() {
    q -c "SELECT md5(string_agg(d::text, E'\n' ORDER BY d.sk)) || ' ' || count(*) FROM dim d"
}
before=$(content_md5)
size_before=$(q -c "SELECT pg_relation_size('dim')")
audit_before=$(q -c "SELECT count(*) FROM scd2.audit_log WHERE dimension = 'public.dim'")
echo "# before the load: $KEYS keys, md5+rows $before, $((SECONDS - started)) s"

# The load, in the background.
"$PG_BIN/psql" -X -q -d postgres -c "CALL scd2.apply('stg', 'dim', '2024-02-01 00:00+00')" \
    >"$SCD2_RUN_DIR/load.out" 2>&1 &
loader=$!

# The MERGE is running once scd2.load_progress shows the load writing the
# dimension and its backend holds ROW EXCLUSIVE on it (the statements
# before the MERGE only read it).
merging=0
for _ in $(seq 1 600); do
    n=$(q -c "SELECT count(*) FROM pg_locks l JOIN scd2.load_progress p USING (pid)
               WHERE l.relation = 'dim'::regclass AND l.mode = 'RowExclusiveLock' AND l.granted
                 AND p.dimension = 'dim'::regclass AND p.phase = 'writing dimension'" 2>/dev/null)
    if [ "${n:-0}" -gt 0 ]; then merging=1; break; fi
    kill -0 "$loader" 2>/dev/null || break
    sleep 0.05
done
# Let the MERGE write for a moment, then kill the postmaster and every
# backend with SIGKILL (no shutdown, no checkpoint).
sleep 0.5
size_at_kill=$(q -c "SELECT pg_relation_size('dim')")
pm=$(head -1 "$SCD2_RUN_DIR/data/postmaster.pid" 2>/dev/null)
still_loading=0
kill -0 "$loader" 2>/dev/null && still_loading=1
check "the MERGE was running when the server was killed" "1 1" "$merging $still_loading"
echo "# dimension heap: $size_before bytes before the load, $size_at_kill when killed"
[ "${size_at_kill:-0}" -gt "${size_before:-0}" ] && ok "the MERGE had written new versions when killed" \
    || fail "the MERGE had not written anything yet (size $size_before -> $size_at_kill)"
if [ -n "$pm" ]; then
    children=$(ps -o pid= --ppid "$pm" 2>/dev/null)
    kill -9 "$pm" $children 2>/dev/null
fi
wait "$loader" 2>/dev/null
echo "# load client said: $(tr '\n' ' ' <"$SCD2_RUN_DIR/load.out" | cut -c1-200)"
for _ in $(seq 1 100); do
    [ -z "$(ps -o pid= --ppid "$pm" 2>/dev/null)" ] && ! kill -0 "$pm" 2>/dev/null && break
    sleep 0.1
done

# Crash recovery.
as_owner "$PG_BIN/pg_ctl" -D "$SCD2_RUN_DIR/data" -l "$SCD2_RUN_DIR/log" -w start >/dev/null \
    || { fail "restart after the crash"; tail -20 "$SCD2_RUN_DIR/log"; finish; }
grep -q "database system was interrupted\|was not properly shut down" "$SCD2_RUN_DIR/log" \
    && ok "the server ran crash recovery" || fail "no crash recovery in the server log"

after=$(content_md5)
check "the dimension is exactly as before the load (md5 of the ordered rows)" "$before" "$after"
audit_after=$(q -c "SELECT count(*) FROM scd2.audit_log WHERE dimension = 'public.dim'")
check "no audit row was added by the killed load" "$audit_before" "$audit_after"
check "no success row for the killed load" 0 \
    "$(q -c "SELECT count(*) FROM scd2.audit_log WHERE dimension = 'public.dim' AND effective_at = '2024-02-01 00:00+00'")"
check "every index of the dimension agrees with the heap (amcheck, heapallindexed)" "$(q -c "SELECT count(*) FROM pg_index WHERE indrelid = 'dim'::regclass")" \
    "$(q -c "SELECT count(*) FROM (SELECT bt_index_check(indexrelid, true) FROM pg_index WHERE indrelid = 'dim'::regclass) x")"
check "one current row per key (through the current-row index)" 0 \
    "$(q -c "SET enable_seqscan = off; SELECT count(*) FROM (SELECT id FROM dim WHERE valid_to IS NULL GROUP BY id HAVING count(*) <> 1) x")"

# Load again: the whole batch applies.
q -c "SET client_min_messages = warning; CALL scd2.apply('stg', 'dim', '2024-02-01 00:00+00')" >/dev/null \
    || fail "the load after recovery"
check "after the reload: rows, current rows, moved current rows" "$((2 * KEYS)) $KEYS $KEYS" \
    "$(q -F' ' -c "SELECT count(*), count(*) FILTER (WHERE is_current), count(*) FILTER (WHERE is_current AND city LIKE 'moved%') FROM dim")"
check "after the reload: one success row with the exact metrics" "success|$KEYS|0|$KEYS|$KEYS" \
    "$(q -c "SELECT status, source_rows, inserted, new_versions, closed FROM scd2.audit_log
              WHERE dimension = 'public.dim' AND effective_at = '2024-02-01 00:00+00'")"
check "after the reload: no key has two current rows, no version overlaps" 0 \
    "$(q -c "SELECT count(*) FROM (SELECT id, valid_from, valid_to,
                                          lead(valid_from) OVER (PARTITION BY id ORDER BY valid_from) AS next_from
                                     FROM dim) x
              WHERE (next_from IS NULL AND valid_to IS NOT NULL) OR (next_from IS NOT NULL AND valid_to IS DISTINCT FROM next_from)")"
echo "# took $((SECONDS - started)) s"
finish
