#!/usr/bin/env bash
# scd2 revert property test: random reverts after random hand edits,
# re-registrations, later loads and loads committed by another session
# during the revert's transaction (READ COMMITTED or REPEATABLE READ);
# the result is the exact expected state, or a refusal that wrote
# nothing (test/revert/revert.sql says what each case expects).
#
# Needs a running server where `CREATE EXTENSION scd2` works, reached through
# the usual libpq variables (PGHOST, PGPORT, PGUSER: a superuser, which
# dblink needs to connect back without a password).  Creates (drops first)
# the database scd2_revert_property.  Without the dblink extension the
# concurrent loads are left out (and said so).
#
#   SCENARIOS=60  SEED=20240601  ONLY=17 (replay one scenario)
#
# Prints every failing scenario, then exactly one line
# `revert: N passed, M failed`; exits non-zero on any failure.

set -u

here=$(cd "$(dirname "$0")" && pwd)
SCENARIOS=${SCENARIOS:-60}
SEED=${SEED:-20240601}
ONLY=${ONLY:-}
DB=scd2_revert_property

case "$SCENARIOS$SEED${ONLY:-0}" in
    *[!0-9]*) echo "revert: SCENARIOS, SEED and ONLY must be non-negative integers" >&2
              echo "revert: 0 passed, 1 failed"; exit 2 ;;
esac
if [ -n "$ONLY" ]; then first=$ONLY; last=$ONLY; else first=1; last=$SCENARIOS; fi
total=$((last - first + 1))

psql_() { psql -X -q -v ON_ERROR_STOP=1 "$@"; }
setup_fail() {
    echo "revert: setup failed: $1" >&2
    echo "revert: 0 passed, 1 failed"
    exit 1
}

psql_ -d postgres -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB" \
    -c "ALTER DATABASE $DB SET timezone = 'UTC'" -c "ALTER DATABASE $DB SET client_min_messages = warning" \
    || setup_fail "cannot create database $DB"
trap 'psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $DB" >/dev/null 2>&1' EXIT
psql_ -d $DB -c "CREATE EXTENSION scd2" || setup_fail "CREATE EXTENSION scd2"
dblink=true
if ! psql_ -d $DB -c "CREATE EXTENSION dblink" 2>/dev/null; then
    dblink=false
    echo "revert: dblink is not installed: concurrent loads SKIPPED"
fi
psql_ -d $DB -f "$here/revert.sql" >/dev/null || setup_fail "loading revert.sql"

# dblink connects back from the server: give it where this server is
conninfo="dbname=$DB port=${PGPORT:-5432} user=${PGUSER:-$(id -un)}"
[ -n "${PGHOST:-}" ] && conninfo="host=$PGHOST $conninfo"

echo "revert: seed $SEED, scenarios $first..$last"
start=$(date +%s)
results=$(mktemp)
trap 'rm -f "$results"; psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $DB" >/dev/null 2>&1' EXIT
for ((k = first; k <= last; k++)); do
    cat <<SQL
SELECT scd2_rp.prepare($SEED, $k, $dblink);
SELECT iso FROM scd2_rp.scenario WHERE n = $k \gset
BEGIN ISOLATION LEVEL :iso;
SELECT count(*) > 0 FROM scd2_rp.scenario;
SELECT scd2_rp.attempt($k, '$conninfo');
COMMIT;
SELECT scd2_rp.verdict($SEED, $k);
SQL
done | psql -X -q -At -v ON_ERROR_STOP=0 -d $DB 2>&1 | grep -E '^(PASS|FAIL|ERROR|psql)' >"$results"
elapsed=$(( $(date +%s) - start ))

passed=$(grep -c '^PASS ' "$results")
failed=$((total - passed))
grep -v '^PASS ' "$results"
grep '^PASS ' "$results" | awk '{ r[$3]++; c[$4]++ }
    END { printf "revert: %d reverted, %d refused; %d with a concurrent load\n", r["reverted"], r["refused"], c["concurrent"] }'
echo "revert: ${elapsed}s"
if [ "$dblink" = true ]; then
    echo "revert: $passed passed, $failed failed"
else
    echo "revert: $passed passed, $failed failed, 1 skipped"
fi
[ "$failed" -eq 0 ]
