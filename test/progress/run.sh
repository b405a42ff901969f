#!/usr/bin/env bash
# scd2 progress test (issues 48 and 52): a long load's progress, sampled from
# another session, moves within its phases, and the load stays findable by
# its statement.
#
# One load of PROGRESS_ROWS staging rows, every one a change of an existing
# key (PROGRESS_ROWS closes and as many new versions), by CALL scd2.apply.
# A second session samples scd2.load_progress every 10 ms while the load
# runs and, each time, whether `query LIKE 'CALL scd2.apply%'` finds the
# loading session in pg_stat_activity.  Checked:
#   - the classification shows at least three distinct staging-row counts,
#     the write at least three distinct change counts;
#   - within a phase the counts never go down nor past their totals;
#   - every sample found the load by its statement;
#   - after the load scd2.load_progress has no row.
# (What a failed, cancelled or caught load leaves: isolation/specs/load_progress.spec.)
#
# Needs a running server where `CREATE EXTENSION scd2` works, reached
# through PGHOST/PGPORT/PGUSER; creates (drops first) database scd2_progress.
#
#   PROGRESS_ROWS=100000   keys in the dimension and rows in the batch
#
# Prints `progress: N passed, M failed`; exits non-zero on failure.

set -u
N=${PROGRESS_ROWS:-100000}
case "$N" in ''|*[!0-9]*) echo "progress: PROGRESS_ROWS must be a number" >&2
                          echo "progress: 0 passed, 1 failed"; exit 2 ;; esac
PSQL=${PG_BIN:+$PG_BIN/}psql
DB=scd2_progress
passed=0 failed=0
ok()   { passed=$((passed + 1)); echo "ok - $*"; }
fail() { failed=$((failed + 1)); echo "FAILED - $*"; }
check() { if [ "$2" = "$3" ]; then ok "$1"; else fail "$1: expected [$2], got [$3]"; fi; }
at_least() { if [ "${3:-0}" -ge "$2" ] 2>/dev/null; then ok "$1 ($3)"; else fail "$1: expected at least $2, got [$3]"; fi; }
q() { "$PSQL" -X -q -At -v ON_ERROR_STOP=1 -d "$DB" "$@"; }
finish() { echo "progress: $passed passed, $failed failed"; [ "$failed" = 0 ]; exit $?; }

"$PSQL" -X -q -d postgres -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB" >/dev/null 2>&1 \
    || { fail "creating database $DB"; finish; }

q >/dev/null <<SQL || { fail "setup"; finish; }
SET client_min_messages = warning;
CREATE EXTENSION scd2;
CREATE TABLE stg (id bigint, name text, city text);
INSERT INTO stg SELECT g, 'name ' || g, 'city ' || (g % 997) FROM generate_series(1, $N) g;
SELECT scd2.create_dimension('dim', 'stg', ARRAY['id']);
CALL scd2.apply('stg', 'dim', '2024-01-01 00:00+00');
UPDATE stg SET city = city || ' (moved)';
ANALYZE stg;
ANALYZE dim;
-- what another session sees of a running load, until it ends (at most max_s)
CREATE TABLE samples (n serial, phase text, rows_done bigint, rows_total bigint,
                      changes_done bigint, changes_total bigint, found_by_statement boolean);
CREATE PROCEDURE sample(max_s float8) LANGUAGE plpgsql AS \$\$
DECLARE
    seen boolean := false;
    t0 timestamptz := clock_timestamp();
    r record;
BEGIN
    LOOP
        PERFORM pg_stat_clear_snapshot();
        SELECT p.phase, p.rows_done, p.rows_total, p.changes_done, p.changes_total,
               EXISTS (SELECT FROM pg_stat_activity a
                        WHERE a.pid = p.pid AND a.query LIKE 'CALL scd2.apply%') AS found
          INTO r
          FROM scd2.load_progress p
         WHERE p.datname = current_database() AND p.pid <> pg_backend_pid();
        IF FOUND THEN
            seen := true;
            INSERT INTO samples (phase, rows_done, rows_total, changes_done, changes_total, found_by_statement)
            VALUES (r.phase, r.rows_done, r.rows_total, r.changes_done, r.changes_total, r.found);
        ELSIF seen THEN
            EXIT;
        END IF;
        EXIT WHEN clock_timestamp() - t0 > make_interval(secs => max_s);
        PERFORM pg_sleep(0.01);
    END LOOP;
END \$\$;
SQL

# the sampler first, then the load (application_name tells them apart)
q -c "CALL sample(600)" >/dev/null 2>&1 &
sampler=$!
sleep 0.5
t0=$(date +%s.%N)
PGAPPNAME=scd2_progress_loader q -c "CALL scd2.apply('stg', 'dim', '2024-02-01 00:00+00')" >/dev/null \
    && ok "the load ran ($(echo "$(date +%s.%N) - $t0" | bc | cut -c1-5) s)" || fail "the load"
wait "$sampler" && ok "the sampler ran" || fail "the sampler"

echo "# samples per phase (distinct staging-row counts, distinct change counts):"
q -F' ' -c "SELECT phase, count(*), count(DISTINCT rows_done), count(DISTINCT changes_done)
              FROM samples GROUP BY phase ORDER BY min(n)" | sed 's/^/#   /'
at_least "classifying: distinct staging-row counts" 3 \
    "$(q -c "SELECT count(DISTINCT rows_done) FROM samples WHERE phase = 'classifying'")"
at_least "writing dimension: distinct change counts" 3 \
    "$(q -c "SELECT count(DISTINCT changes_done) FROM samples WHERE phase = 'writing dimension'")"
check "counts never go down within a phase" 0 \
    "$(q -c "SELECT count(*) FROM (SELECT phase, rows_done, changes_done,
                                          lag(rows_done) OVER w AS prev_rows, lag(changes_done) OVER w AS prev_changes
                                     FROM samples WINDOW w AS (PARTITION BY phase ORDER BY n)) s
              WHERE rows_done < prev_rows OR changes_done < prev_changes")"
check "counts never pass their totals" 0 \
    "$(q -c "SELECT count(*) FROM samples WHERE rows_done > rows_total OR changes_done > changes_total")"
check "every sample found the load by its statement" 0 \
    "$(q -c "SELECT count(*) FROM samples WHERE NOT found_by_statement")"
at_least "samples taken" 6 "$(q -c "SELECT count(*) FROM samples")"

check "no load in scd2.load_progress after the load" 0 \
    "$(q -c "SELECT count(*) FROM scd2.load_progress WHERE datname = current_database()")"
check "the load's metrics: every row a new version" "$N $N $N" \
    "$(q -F' ' -c "SELECT source_rows, new_versions, closed FROM scd2.audit_log WHERE status = 'success' ORDER BY run_id DESC LIMIT 1")"
finish
