# test/integration/lib.sh -- shared by the integration scripts (sourced).
#
# Needs a running server reached through the libpq variables (PGHOST,
# PGPORT, PGUSER) as a superuser, with scd2 installed; PG_BIN (optional)
# names the server's bin directory.  Each script sets SUITE, counts its
# checks with expect/ok/not_ok and ends with `finish`, which prints
#   <suite>: N passed, M failed
# and exits non-zero when a check failed.

set -u
PG_BIN=${PG_BIN:-$(pg_config --bindir)}
export PATH="$PG_BIN:$PATH"
PASS=0
FAIL=0

ok() {
    PASS=$((PASS + 1))
    echo "ok $((PASS + FAIL)) - $1"
}

not_ok() {
    FAIL=$((FAIL + 1))
    echo "not ok $((PASS + FAIL)) - $1"
    [ -z "${2:-}" ] || printf '%s\n' "$2" | sed 's/^/#   /'
}

# expect DESCRIPTION EXPECTED ACTUAL
expect() {
    if [ "$2" = "$3" ]; then ok "$1"; else not_ok "$1" "expected: $2
got:      $3"; fi
}

# One query's result, unaligned, no headers: q DB SQL
q() {
    local db=$1; shift
    psql -X -q -At -v ON_ERROR_STOP=1 -d "$db" -c "$*"
}

# A script on stdin, stopping at the first error: sql DB [psql options]
sql() {
    local db=$1; shift
    psql -X -q -v ON_ERROR_STOP=1 -d "$db" "$@"
}

# A script that skips checks sets SKIP (counted as skipped, never passed).
finish() {
    if [ "${SKIP:-0}" -gt 0 ]; then
        echo "$SUITE: $PASS passed, $FAIL failed, $SKIP skipped"
    else
        echo "$SUITE: $PASS passed, $FAIL failed"
    fi
    [ "$FAIL" = 0 ]
    exit
}
