#!/usr/bin/env bash
# scd2 property test: random load scenarios checked against an independent
# reference model (test/property/model.sql, a procedural PL/pgSQL reading of
# docs/SEMANTICS.md).
#
# Needs a running server where `CREATE EXTENSION scd2` works, reached through
# the usual libpq variables (PGHOST, PGPORT, PGUSER).  Creates (drops first)
# the database scd2_property.
#
#   SCENARIOS=200     number of scenarios
#   SEED=20240601     base seed (printed; every scenario derives its own)
#   ONLY=17           run only scenario 17 of SEED (to replay a failure)
#   MODEL_ONLY=1      no extension: the "engine" is the model again (checks
#                     the generator and the comparison, trivially equal)
#   CHECK_AUDIT=0     do not compare the scd2.audit_log row's metrics
#   VERBOSE=1         print a line for every passing scenario too
#   NINST=24 MAX_KEYS=8 MAX_BATCHES=6
#                     generator knobs: instants on the time axis (fewer:
#                     more ties and conflicts), largest key space, most
#                     batches per scenario (at least 3 when >= 3)
#
# Runs model_selftest.sql (hand-checked model cases) first.  Prints every
# failing scenario with a replayable script, then exactly one line
# `property: N passed, M failed`; exits non-zero on any failure.

set -u

here=$(cd "$(dirname "$0")" && pwd)
SCENARIOS=${SCENARIOS:-200}
SEED=${SEED:-20240601}
MODEL_ONLY=${MODEL_ONLY:-0}
CHECK_AUDIT=${CHECK_AUDIT:-1}
VERBOSE=${VERBOSE:-0}
ONLY=${ONLY:-}
DB=scd2_property

case "$SCENARIOS$SEED${ONLY:-0}" in
    *[!0-9]*) echo "property: SCENARIOS, SEED and ONLY must be non-negative integers" >&2
              echo "property: 0 passed, 1 failed"; exit 2 ;;
esac

export PGOPTIONS="${PGOPTIONS:-} -c scd2_prop.ninst=${NINST:-24} -c scd2_prop.max_keys=${MAX_KEYS:-8} -c scd2_prop.max_batches=${MAX_BATCHES:-6}"
mo=false; [ "$MODEL_ONLY" = 1 ] && mo=true
ca=true;  [ "$CHECK_AUDIT" = 0 ] && ca=false
psql_() { psql -X -q -v ON_ERROR_STOP=1 "$@"; }

setup_fail() {
    echo "property: setup failed: $1" >&2
    echo "property: 0 passed, 1 failed"
    exit 1
}

if [ -n "$ONLY" ]; then first=$ONLY; last=$ONLY; else first=1; last=$SCENARIOS; fi
total=$((last - first + 1))
echo "property: seed $SEED, scenarios $first..$last, $([ "$mo" = true ] && echo 'model only (no engine)' || echo 'engine vs model')"

psql_ -d postgres -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB" \
    -c "ALTER DATABASE $DB SET timezone = 'UTC'" -c "ALTER DATABASE $DB SET client_min_messages = warning" \
    || setup_fail "cannot create database $DB"
if [ "$mo" = false ]; then
    psql_ -d $DB -c "CREATE EXTENSION scd2" || setup_fail "CREATE EXTENSION scd2"
fi
psql_ -d $DB -f "$here/model.sql" >/dev/null || setup_fail "loading model.sql"
psql_ -d $DB -f "$here/harness.sql" >/dev/null || setup_fail "loading harness.sql"

# The model's own hand-checked cases.
if ! out=$(psql_ -d $DB -At -f "$here/model_selftest.sql" 2>&1); then
    printf '%s\n' "$out" | grep -v '^$'
    echo "property: model selftest failed" >&2
    echo "property: 0 passed, 1 failed"
    exit 1
fi
printf '%s\n' "$out" | grep -c '^selftest ok' | sed 's/^/property: model selftest: /; s/$/ cases passed/'

# The scenarios, in one session; if the backend dies (a crash in the engine),
# the scenario that was running is counted as failed and the rest resume.
results=$(mktemp)
errors=$(mktemp)
trap 'rm -f "$results" "$errors"' EXIT
start=$(date +%s)
next=$first
while [ "$next" -le "$last" ]; do
    for ((k = next; k <= last; k++)); do
        echo "SELECT scd2_prop.run_scenario($SEED, $k, $mo, $ca);"
    done | psql -X -q -At -d $DB >>"$results" 2>>"$errors"
    done_upto=$(grep -Eo '^(PASS|FAIL) [0-9]+' "$results" | awk '{print $2}' | sort -n | tail -1)
    done_upto=${done_upto:-$((next - 1))}
    if [ "$done_upto" -lt "$last" ] && ! grep -Eq "^(PASS|FAIL) $((done_upto + 1))( |:)" "$results"; then
        # psql stopped early: the server went away during scenario done_upto+1
        crashed=$((done_upto + 1))
        echo "FAIL $crashed: seed $SEED: no result (the server connection was lost; replay with ONLY=$crashed SEED=$SEED)" >>"$results"
        for _ in $(seq 60); do
            psql -X -q -d $DB -c 'SELECT 1' >/dev/null 2>&1 && break
            sleep 1
        done
        next=$((crashed + 1))
    else
        break
    fi
done
elapsed=$(( $(date +%s) - start ))

passed=$(grep -c '^PASS ' "$results")
failed=$((total - passed))

# Failure reports, then any SQL errors raised outside a scenario's own handling.
awk '/^FAIL /{p=1} /^PASS /{p=0} p' "$results"
if [ -s "$errors" ]; then
    echo "---- psql errors:"
    cat "$errors"
fi
[ "$VERBOSE" = 1 ] && grep '^PASS ' "$results"
grep '^PASS ' "$results" | awk '
    { for (i = 3; i <= NF; i++) { split($i, kv, "="); v[kv[1]] += kv[2] }
      if ($3 == "mode=snapshot") s++ }
    END { printf "property: %d batches (%d failing in both as expected), %d staged rows, %d snapshot scenarios\n",
                 v["batches"], v["failing_batches"], v["staged_rows"], s }'
echo "property: ${elapsed}s"
echo "property: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
