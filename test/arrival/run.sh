#!/usr/bin/env bash
# scd2 arrival-order property test (issue 24): for an order-free dimension
# (register(..., order_free => true)) the same change events give the same
# dimension whatever their batching and arrival order.  Every scenario's
# events are loaded in effective-time order, one batch per instant, into one
# dimension, and shuffled into random batches of 1-4 into another; both
# must equal the dimension the event set defines (an independent procedural
# model in driver.sql) in business columns and validity.  Scenarios: 1-3
# keys, 10 days, values NULL, '', '~', 'x', deletes, same-instant upsert +
# delete, exact duplicates, keys that come back (driver.sql).
#
# Then the change-stream property (issue 50, stream.sql): events with
# sequences, several events of a key at one instant, partial updates (NULL
# = unchanged), deletes, returning keys and a Type 1 column, in order and
# shuffled into random batches, against a model of the fold.
#
# Needs a running server where `CREATE EXTENSION scd2` works (PGHOST,
# PGPORT, PGUSER).  Creates (drops first) the database scd2_arrival.
#
#   SCENARIOS=1000   number of scenarios
#   FIRST=1          the first scenario (each is a function of its number:
#                    FIRST=17 SCENARIOS=1 replays scenario 17)
#   GROUP=50         scenarios loaded together per round (disjoint keys)
#   STREAM_SCENARIOS=1000  number of change-stream scenarios (same FIRST, GROUP)
#
# Prints every failing scenario with its events, a line per property, then
# exactly one line `arrival: N passed, M failed` (both properties'
# scenarios); exits non-zero on any failure.
set -u
here=$(cd "$(dirname "$0")" && pwd)
SCENARIOS=${SCENARIOS:-1000}
FIRST=${FIRST:-1}
GROUP=${GROUP:-50}
STREAM_SCENARIOS=${STREAM_SCENARIOS:-1000}
DB=scd2_arrival
case "$SCENARIOS$FIRST$GROUP$STREAM_SCENARIOS" in
    *[!0-9]*) echo "arrival: SCENARIOS, STREAM_SCENARIOS, FIRST and GROUP must be non-negative integers" >&2
              echo "arrival: 0 passed, 1 failed"; exit 2 ;;
esac
psql_() { psql -X -q -v ON_ERROR_STOP=1 "$@"; }
setup_fail() {
    echo "arrival: setup failed: $1" >&2
    echo "arrival: 0 passed, 1 failed"
    exit 1
}

psql_ -d postgres -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB" \
    -c "ALTER DATABASE $DB SET client_min_messages = warning" || setup_fail "cannot create database $DB"
psql_ -d $DB -c "CREATE EXTENSION scd2" || setup_fail "CREATE EXTENSION scd2"
psql_ -d $DB -f "$here/driver.sql" >/dev/null || setup_fail "loading driver.sql"

start=$(date +%s)
psql_ -d $DB -c "CALL arrival_run($FIRST, $SCENARIOS, $GROUP)" || setup_fail "arrival_run"
elapsed=$(( $(date +%s) - start ))
failed=$(psql_ -At -d $DB -c "SELECT count(DISTINCT scenario) FROM arrival_failures") || setup_fail "reading the failures"
psql_ -At -d $DB -F ' | ' -c "SELECT 'FAIL ' || scenario, diff, 'events (k, a, b, eff, del): ' || events
                              FROM arrival_failures ORDER BY scenario"
loads=$(psql_ -At -d $DB -c "SELECT count(*) FROM scd2.audit_log WHERE status = 'success'")
echo "arrival: scenarios $FIRST..$((FIRST + SCENARIOS - 1)), $loads loads, ${elapsed}s"
echo "arrival (order-free): $((SCENARIOS - failed)) of $SCENARIOS passed"

# the change-stream property, in a database of its own
SDB=scd2_arrival_stream
psql_ -d postgres -c "DROP DATABASE IF EXISTS $SDB" -c "CREATE DATABASE $SDB" \
    -c "ALTER DATABASE $SDB SET client_min_messages = warning" || setup_fail "cannot create database $SDB"
psql_ -d $SDB -c "CREATE EXTENSION scd2" || setup_fail "CREATE EXTENSION scd2 ($SDB)"
psql_ -d $SDB -f "$here/stream.sql" >/dev/null || setup_fail "loading stream.sql"
start=$(date +%s)
psql_ -d $SDB -c "CALL stream_run($FIRST, $STREAM_SCENARIOS, $GROUP)" || setup_fail "stream_run"
elapsed=$(( $(date +%s) - start ))
sfailed=$(psql_ -At -d $SDB -c "SELECT count(DISTINCT scenario) FROM stream_failures") || setup_fail "reading the stream failures"
psql_ -At -d $SDB -F ' | ' -c "SELECT 'FAIL stream ' || scenario, diff, 'events (k, a, b, y, eff, lsn, del): ' || events
                               FROM stream_failures ORDER BY scenario"
sloads=$(psql_ -At -d $SDB -c "SELECT count(*) FROM scd2.audit_log WHERE status = 'success'")
echo "stream: scenarios $FIRST..$((FIRST + STREAM_SCENARIOS - 1)), $sloads loads, ${elapsed}s"
echo "arrival (change streams): $((STREAM_SCENARIOS - sfailed)) of $STREAM_SCENARIOS passed"
echo "arrival: $((SCENARIOS + STREAM_SCENARIOS - failed - sfailed)) passed, $((failed + sfailed)) failed"
[ "$failed" -eq 0 ] && [ "$sfailed" -eq 0 ]
