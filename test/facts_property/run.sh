#!/usr/bin/env bash
# scd2 maintained-facts property test (issue 49): random dimension events,
# late and out of order, into an in-order (odd scenarios) or an order-free
# (even) dimension, random facts keyed with scd2.asof as they arrive into a
# maintained fact table, reverts and rewinds; after every step
# scd2.check_facts finds nothing, every fact names a version that holds the
# value an independent model of the events gives its key at its time and
# is valid then, and scd2.rekey_facts has nothing left (driver.sql).
#
# Needs a running server where `CREATE EXTENSION scd2` works (PGHOST,
# PGPORT, PGUSER).  Creates (drops first) the database scd2_facts_property.
#
#   SCENARIOS=200   number of scenarios
#   FIRST=1         the first scenario (each is a function of its number:
#                   FIRST=17 SCENARIOS=1 replays scenario 17)
#
# Prints every failing scenario with its steps, then exactly one line
# `facts_property: N passed, M failed`; exits non-zero on any failure.
set -u
here=$(cd "$(dirname "$0")" && pwd)
SCENARIOS=${SCENARIOS:-200}
FIRST=${FIRST:-1}
DB=scd2_facts_property
case "$SCENARIOS$FIRST" in
    *[!0-9]*) echo "facts_property: SCENARIOS and FIRST must be non-negative integers" >&2
              echo "facts_property: 0 passed, 1 failed"; exit 2 ;;
esac
psql_() { psql -X -q -v ON_ERROR_STOP=1 "$@"; }
setup_fail() {
    echo "facts_property: setup failed: $1" >&2
    echo "facts_property: 0 passed, 1 failed"
    exit 1
}
trap 'psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $DB" >/dev/null 2>&1' EXIT

psql_ -d postgres -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB" \
    -c "ALTER DATABASE $DB SET client_min_messages = warning" || setup_fail "cannot create database $DB"
psql_ -d $DB -c "CREATE EXTENSION scd2" || setup_fail "CREATE EXTENSION scd2"
psql_ -d $DB -f "$here/driver.sql" >/dev/null || setup_fail "loading driver.sql"

start=$(date +%s)
psql_ -d $DB -c "CALL fp_run($FIRST, $SCENARIOS)" || setup_fail "fp_run"
elapsed=$(( $(date +%s) - start ))
failed=$(psql_ -At -d $DB -c "SELECT count(DISTINCT scenario) FROM fp_failures") || setup_fail "reading the failures"
psql_ -At -d $DB -F ' | ' -c "SELECT 'FAIL ' || scenario || ' step ' || coalesce(step::text, '-'), what, diff, 'steps: ' || events
                              FROM fp_failures ORDER BY scenario"
steps=$(psql_ -At -d $DB -c "SELECT count(*) FROM fp_log")
reverts=$(psql_ -At -d $DB -c "SELECT count(*) FILTER (WHERE action LIKE 'revert%') || ' reverts, ' || count(*) FILTER (WHERE action LIKE 'rewind%') || ' rewinds, ' || count(*) FILTER (WHERE action LIKE 'load%') || ' loads' FROM fp_log")
rekeyed=$(psql_ -At -d $DB -c "SELECT coalesce(sum(facts_rekeyed), 0) FROM scd2.audit_log")
echo "facts_property: scenarios $FIRST..$((FIRST + SCENARIOS - 1)), $steps steps ($reverts), $rekeyed facts re-keyed, ${elapsed}s"
echo "facts_property: $((SCENARIOS - failed)) passed, $failed failed"
[ "$failed" -eq 0 ]
