#!/usr/bin/env bash
# scd2 under pg_cron: scheduled CALLs run at top level, so a load commits
# on its own and a failed one leaves a committed error row in the audit log.
#
# Needs a server with shared_preload_libraries = 'pg_cron' and
# cron.database_name = 'postgres' (scripts/test.sh starts one).  In the
# postgres database it creates the extensions if missing, a schema
# scd2_cron_test with six dimensions, and five jobs run once:
#   scd2-test-apply       CALL scd2.apply(stg_a, dim_a)        succeeds
#   scd2-test-apply-fail  CALL scd2.apply(stg_d, dim_d)        NULL key: fails
#   scd2-test-apply-all   CALL scd2.apply_all()                dim_b loads,
#                                                              dim_c fails
#   scd2-test-do          a DO block calling scd2.apply        dim_e loads
#   scd2-test-procedure   CALL nightly(): two loads of dim_f   both load,
#                         with a COMMIT between them           committed apart
# then waits for their first runs in cron.job_run_details (up to a minute
# with pg_cron 1.4, whose schedules are cron expressions; a few seconds
# with 1.5+, which takes '2 seconds'), checks the dimensions and the audit
# rows, unschedules the jobs and removes what it created.
#
# pg_cron connects to the server with libpq (cron.host, default localhost;
# unless cron.use_background_workers is on).  When PGHOST is a socket
# directory the jobs are pointed at it (cron.job.nodename), so this works
# on a cluster that listens on a private socket only.

here=$(cd "$(dirname "$0")" && pwd)
SUITE=pg_cron
# shellcheck source=lib.sh
source "$here/lib.sh"
DB=postgres
S=scd2_cron_test
WAIT=${WAIT:-150}

# pg_cron is a Debian package for PostgreSQL 15 only: elsewhere this
# suite cannot run, and says so (counted as skipped, never as passed).
if [ "$(q $DB "SELECT count(*) FROM pg_available_extensions WHERE name = 'pg_cron'")" = 0 ]; then
    echo "SKIPPED: pg_cron is not installed for $(q $DB "SELECT split_part(version(), ' ', 2)")"
    echo "$SUITE: 0 passed, 0 failed, 1 skipped"
    exit 0
fi

preload=$(q $DB "SHOW shared_preload_libraries")
cron_db=$(q $DB "SELECT current_setting('cron.database_name', true)")
if [[ $preload != *pg_cron* ]] || [ "$cron_db" != "$DB" ]; then
    not_ok "pg_cron is preloaded with cron.database_name = '$DB'" \
           "shared_preload_libraries = '$preload', cron.database_name = '$cron_db'"
    finish
fi
ok "pg_cron is preloaded with cron.database_name = '$DB'"

had_cron=$(q $DB "SELECT count(*) FROM pg_extension WHERE extname = 'pg_cron'")
had_scd2=$(q $DB "SELECT count(*) FROM pg_extension WHERE extname = 'scd2'")
had_scd2_schema=$(q $DB "SELECT count(*) FROM pg_namespace WHERE nspname = 'scd2'")

cleanup() {
    q $DB "SELECT cron.unschedule(jobid) FROM cron.job WHERE jobname LIKE 'scd2-test-%'" >/dev/null 2>&1
    sql $DB -c "SET client_min_messages = warning" -c "DROP SCHEMA IF EXISTS $S CASCADE" >/dev/null 2>&1
    # (0.5: the extension holds the history of the test's loads)
    [ "$had_scd2" != 0 ] || sql $DB -c "SET scd2.allow_drop_with_history = on" -c "DROP EXTENSION IF EXISTS scd2" >/dev/null 2>&1
    [ "$had_scd2_schema" != 0 ] || sql $DB -c "DROP SCHEMA IF EXISTS scd2" >/dev/null 2>&1
    [ "$had_cron" != 0 ] || sql $DB -c "DROP EXTENSION IF EXISTS pg_cron" >/dev/null 2>&1
}
trap cleanup EXIT

if ! sql $DB -o /dev/null <<SQL
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pg_cron;
CREATE EXTENSION IF NOT EXISTS scd2;
SELECT cron.unschedule(jobid) FROM cron.job WHERE jobname LIKE 'scd2-test-%';
DROP SCHEMA IF EXISTS $S CASCADE;
CREATE SCHEMA $S;
CREATE TABLE $S.stg_a (id int, city text);
CREATE TABLE $S.stg_b (id int, city text);
CREATE TABLE $S.stg_c (id int, city text);
CREATE TABLE $S.stg_d (id int, city text);
SELECT scd2.create_dimension('$S.dim_a', '$S.stg_a', ARRAY['id']);
SELECT scd2.create_dimension('$S.dim_b', '$S.stg_b', ARRAY['id']);
SELECT scd2.create_dimension('$S.dim_c', '$S.stg_c', ARRAY['id']);
SELECT scd2.create_dimension('$S.dim_d', '$S.stg_d', ARRAY['id']);
-- dim_a and dim_d are loaded by their own jobs: no default staging table,
-- so apply_all skips them.
SELECT scd2.register('$S.dim_a', ARRAY['id']);
SELECT scd2.register('$S.dim_d', ARRAY['id']);
INSERT INTO $S.stg_a VALUES (1, 'Oslo'), (2, 'Rome');
INSERT INTO $S.stg_b VALUES (1, 'Lima'), (2, 'Quito'), (3, 'Cusco');
INSERT INTO $S.stg_c VALUES (1, 'Bern'), (NULL, 'nowhere');
INSERT INTO $S.stg_d VALUES (NULL, 'nowhere');
-- issue 48: scd2.apply as written, from PL/pgSQL under pg_cron
CREATE TABLE $S.stg_e (id int, city text);
CREATE TABLE $S.stg_f (id int, city text);
SELECT scd2.create_dimension('$S.dim_e', '$S.stg_e', ARRAY['id']);
SELECT scd2.create_dimension('$S.dim_f', '$S.stg_f', ARRAY['id']);
SELECT scd2.register('$S.dim_e', ARRAY['id']);
SELECT scd2.register('$S.dim_f', ARRAY['id']);
INSERT INTO $S.stg_e VALUES (1, 'Kyiv'), (2, 'Lviv');
INSERT INTO $S.stg_f VALUES (1, 'Riga');
CREATE PROCEDURE $S.nightly() LANGUAGE plpgsql AS \$\$
BEGIN
    CALL scd2.apply('$S.stg_f', '$S.dim_f', '2024-01-01 00:00+00');
    COMMIT;
    UPDATE $S.stg_f SET city = 'Tartu';
    CALL scd2.apply('$S.stg_f', '$S.dim_f', '2024-02-01 00:00+00');
END \$\$;
SQL
then
    not_ok "setup"
    finish
fi

version=$(q $DB "SELECT extversion FROM pg_extension WHERE extname = 'pg_cron'")
# Interval schedules ('2 seconds') came with pg_cron 1.5.
if [ "$(printf '%s\n' 1.5 "${version%%-*}" | sort -V | head -1)" = 1.5 ]; then
    schedule='2 seconds'
else
    schedule='* * * * *'
fi
echo "# pg_cron $version, schedule '$schedule'"

start=$(q $DB "SELECT now()")
schedule_job() {
    q $DB "SELECT cron.schedule('$1', '$schedule', \$\$$2\$\$)"
}
job_apply=$(schedule_job scd2-test-apply "CALL scd2.apply('$S.stg_a', '$S.dim_a')")
job_fail=$(schedule_job scd2-test-apply-fail "CALL scd2.apply('$S.stg_d', '$S.dim_d')")
job_all=$(schedule_job scd2-test-apply-all "CALL scd2.apply_all()")
job_do=$(schedule_job scd2-test-do "DO \$do\$ BEGIN CALL scd2.apply('$S.stg_e', '$S.dim_e'); END \$do\$;")
job_proc=$(schedule_job scd2-test-procedure "CALL $S.nightly()")
jobs="$job_apply,$job_fail,$job_all,$job_do,$job_proc"
if [[ ${PGHOST:-} == /* ]]; then
    q $DB "UPDATE cron.job SET nodename = '$PGHOST' WHERE jobid IN ($jobs)" >/dev/null
fi
expect "five jobs scheduled" 5 "$(q $DB "SELECT count(*) FROM cron.job WHERE jobid IN ($jobs) AND active")"

# First run of a job (by id): status|return_message.
first_run() {
    q $DB "SELECT status || '|' || coalesce(return_message, '')
             FROM cron.job_run_details
            WHERE jobid = $1 AND start_time >= '$start' AND status IN ('succeeded', 'failed')
            ORDER BY runid LIMIT 1"
}

waited=0
while :; do
    finished=$(q $DB "SELECT count(DISTINCT jobid) FROM cron.job_run_details
                       WHERE jobid IN ($jobs) AND start_time >= '$start'
                         AND status IN ('succeeded', 'failed')")
    [ "$finished" = 5 ] && break
    [ "$waited" -ge "$WAIT" ] && break
    sleep 1
    waited=$((waited + 1))
done
echo "# waited ${waited}s for the first runs"
q $DB "SELECT cron.unschedule(jobid) FROM cron.job WHERE jobid IN ($jobs)" >/dev/null
expect "every job ran within ${WAIT}s" 5 "$finished"
expect "jobs unscheduled" 0 "$(q $DB "SELECT count(*) FROM cron.job WHERE jobid IN ($jobs)")"

# CALL scd2.apply: loaded and committed, with its audit row.
run=$(first_run $job_apply)
expect "CALL scd2.apply job succeeded" "succeeded" "${run%%|*}"
expect "dim_a loaded by the job" "1 Oslo 1,2 Rome 1" \
    "$(q $DB "SELECT string_agg(id || ' ' || city || ' ' || is_current::int, ',' ORDER BY id) FROM $S.dim_a")"
expect "dim_a audit row" "success 2 2 postgres" \
    "$(q $DB "SELECT status || ' ' || source_rows || ' ' || inserted || ' ' || username
                FROM scd2.audit_log WHERE dimension = '$S.dim_a' ORDER BY run_id LIMIT 1")"

# A failing CALL scd2.apply: the job fails, the error row is committed
# (the procedure runs at top level under pg_cron: non-atomic).
run=$(first_run $job_fail)
echo "# scd2-test-apply-fail: $run" | head -3
expect "failing CALL scd2.apply job is reported failed" "failed" "${run%%|*}"
case $run in
    *"NULL business key"*) ok "its message names the problem" ;;
    *) not_ok "its message names the problem" "$run" ;;
esac
expect "the failed scheduled load left a committed error row" "error|staging table $S.stg_d has a NULL business key" \
    "$(q $DB "SELECT status || '|' || message FROM scd2.audit_log WHERE dimension = '$S.dim_d' ORDER BY run_id LIMIT 1")"
expect "dim_d is untouched" 0 "$(q $DB "SELECT count(*) FROM $S.dim_d")"

# CALL scd2.apply_all: dim_b loads and stays committed although dim_c
# fails; the job is reported failed, naming dim_c.
run=$(first_run $job_all)
echo "# scd2-test-apply-all: $run" | head -3
expect "CALL scd2.apply_all job with a failing dimension is reported failed" "failed" "${run%%|*}"
case $run in
    *"dimensions failed to load"*"$S.dim_c"*) ok "its message names the failed dimension" ;;
    *) not_ok "its message names the failed dimension" "$run" ;;
esac
expect "dim_b loaded by apply_all" "3 3" \
    "$(q $DB "SELECT count(*) || ' ' || count(*) FILTER (WHERE is_current) FROM $S.dim_b")"
expect "dim_b audit row" "success 3" \
    "$(q $DB "SELECT status || ' ' || inserted FROM scd2.audit_log WHERE dimension = '$S.dim_b' ORDER BY run_id LIMIT 1")"
expect "dim_c error row" "error" \
    "$(q $DB "SELECT status FROM scd2.audit_log WHERE dimension = '$S.dim_c' ORDER BY run_id LIMIT 1")"
expect "dim_c is untouched" 0 "$(q $DB "SELECT count(*) FROM $S.dim_c")"

# issue 48: a DO block calling scd2.apply as written (no variable).
run=$(first_run $job_do)
expect "DO block job succeeded" "succeeded" "${run%%|*}"
expect "dim_e loaded by the DO block" "1 Kyiv 1,2 Lviv 1" \
    "$(q $DB "SELECT string_agg(id || ' ' || city || ' ' || is_current::int, ',' ORDER BY id) FROM $S.dim_e")"
expect "dim_e audit row" "success 2 2" \
    "$(q $DB "SELECT status || ' ' || source_rows || ' ' || inserted FROM scd2.audit_log WHERE dimension = '$S.dim_e' ORDER BY run_id LIMIT 1")"

# A procedure with a COMMIT between two loads: both loaded, in two
# transactions (its first run's two audit rows: with pg_cron 1.4 a job may
# run again before it is unscheduled, and that run's loads conflict).
run=$(first_run $job_proc)
expect "procedure job succeeded" "succeeded" "${run%%|*}"
expect "dim_f has both loads' versions" "1 Riga 2024-01-01 0,1 Tartu 2024-02-01 1" \
    "$(q $DB "SELECT string_agg(id || ' ' || city || ' ' || (valid_from AT TIME ZONE 'UTC')::date || ' ' || is_current::int, ',' ORDER BY valid_from) FROM $S.dim_f")"
expect "dim_f audit rows, one per load, committed apart" "success 1 1 0,success 1 0 1|2" \
    "$(q $DB "SELECT string_agg(status || ' ' || source_rows || ' ' || inserted || ' ' || new_versions, ',' ORDER BY run_id)
                       || '|' || count(DISTINCT txid)
                  FROM (SELECT * FROM scd2.audit_log WHERE dimension = '$S.dim_f' ORDER BY run_id LIMIT 2) a")"
finish
