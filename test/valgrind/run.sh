#!/usr/bin/env bash
# scd2 under Valgrind memcheck: runs the pg_regress suite once against a
# cluster whose every backend runs under valgrind, then reports the errors
# whose stack passes through scd2's code (src/*.c, src/*/*.c).
#
# opt-in: valgrind
# Not run by scripts/test.sh unless asked (the suite takes several minutes
# under valgrind): SCD2_OPT_IN=valgrind scripts/test.sh 15 runs it with the
# rest.  Or run it by hand after `make install` (or scripts/test.sh):
#
#   apt-get install -y valgrind
#   bash test/valgrind/run.sh            # prints `valgrind: N passed, M failed`
#   KEEP=1 bash test/valgrind/run.sh     # keep /tmp/scd2-valgrind (logs) afterwards
#   SCAN_ONLY=1 KEEP=1 bash test/valgrind/run.sh   # only re-scan the kept logs
#
# Starts its own cluster on port 55495 in /tmp/scd2-valgrind (so not at the
# same time as test/crash/run.sh).  Suppressions: PostgreSQL's
# src/tools/valgrind.supp (test/valgrind/valgrind.supp).
#
# Limits: Debian's PostgreSQL is not built with USE_VALGRIND, so memcheck
# sees palloc chunks only as parts of malloc'd blocks: reads of
# uninitialised memory, reads and writes past a block, and bad system-call
# arguments are caught; a use after pfree inside a live memory context is
# not.  Leak checking is off (memory contexts free in bulk).

set -u
export SCD2_PORT=${SCD2_VALGRIND_PORT:-$(( ${SCD2_PORT:-55432} + 63 ))}
export SCD2_RUN_DIR=/tmp/scd2-valgrind-$SCD2_PORT
# shellcheck source=../../scripts/lib.sh
source "$(dirname "$0")/../../scripts/lib.sh"
set +e
here=$(cd "$(dirname "$0")" && pwd)
# Run by hand: the server of PG_CONFIG (default: PostgreSQL 15), as
# scripts/test_suites.sh would pass it.
if [ -z "${PG_BIN:-}" ]; then
    pg_select "${PG_CONFIG:-15}" || { echo "valgrind: 0 passed, 1 failed"; exit 1; }
fi
command -v valgrind >/dev/null || { echo "valgrind: not installed (apt-get install -y valgrind)" >&2; echo "valgrind: 0 passed, 1 failed"; exit 2; }

passed=0 failed=0
started=$SECONDS
if [ "${SCAN_ONLY:-0}" != 1 ]; then

# initdb and a normal start/stop through lib.sh, then the postmaster again
# under valgrind (children traced: every backend is checked).
cluster_start "shared_buffers = 128MB
max_connections = 20
autovacuum = off
jit = off
shared_preload_libraries = 'pg_cron'
cron.database_name = 'postgres'" || { echo "valgrind: 0 passed, 1 failed"; exit 1; }
as_owner "$PG_BIN/pg_ctl" -D "$SCD2_RUN_DIR/data" -w stop >/dev/null
cp "$here/valgrind.supp" "$SCD2_RUN_DIR/valgrind.supp"
chmod a+r "$SCD2_RUN_DIR/valgrind.supp"
as_owner valgrind --quiet --trace-children=yes --track-origins=yes --read-var-info=no \
    --leak-check=no --num-callers=40 --error-limit=no \
    --suppressions="$SCD2_RUN_DIR/valgrind.supp" \
    --log-file="$SCD2_RUN_DIR/valgrind.%p.log" \
    "$PG_BIN/postgres" -D "$SCD2_RUN_DIR/data" >"$SCD2_RUN_DIR/log" 2>&1 &
for _ in $(seq 1 240); do
    "$PG_BIN/pg_isready" -q && break
    sleep 0.5
done
"$PG_BIN/pg_isready" -q || { echo "the server did not start under valgrind"; tail "$SCD2_RUN_DIR/log"; cluster_stop quiet; echo "valgrind: 0 passed, 1 failed"; exit 1; }
echo "# server up under valgrind after $((SECONDS - started)) s"

# The regression suite, as scripts/test.sh runs it.
out=$SCD2_RUN_DIR/regress.out
make -C "$SCD2_ROOT" -s PG_CONFIG="$PG_BIN/pg_config" installcheck-regress >"$out" 2>&1
grep -E '^(test|ok|not ok) ' "$out"
if grep -q 'All [0-9]* tests passed' "$out" || ! grep -qE '\.\.\. +FAILED' "$out"; then
    passed=$((passed + 1)); echo "ok - the regression suite passes under valgrind"
else
    failed=$((failed + 1)); echo "FAILED - the regression suite under valgrind (see build/regress/regression.diffs)"
fi
echo "# suite done after $((SECONDS - started)) s"

as_owner "$PG_BIN/pg_ctl" -D "$SCD2_RUN_DIR/data" -m fast -w stop >/dev/null 2>&1
sleep 1
fi

# Errors: every valgrind error record ("==pid== <kind>" up to a blank
# "==pid== " line); those with a frame in scd2's code ("(driver.c:123)" for
# a file of src/ or its folders, or "scd2.so" without debug information) are ours.
export OURS_RE="scd2\\.so|\\(($(cd "$SCD2_ROOT/src" && ls *.c */*.c | sed 's#.*/##; s/\.c$//' | paste -sd'|'))\\.c:[0-9]+\\)"
report=$SCD2_RUN_DIR/scd2-errors.txt
: >"$report"
total=0 ours=0
for f in "$SCD2_RUN_DIR"/valgrind.*.log; do
    [ -s "$f" ] || continue
    awk -v file="$(basename "$f")" '
        BEGIN { re = ENVIRON["OURS_RE"] }
        /^==[0-9]+== [A-Z].*/ && !inrec { inrec = 1; rec = ""; }
        inrec { rec = rec $0 "\n"; }
        inrec && /^==[0-9]+== *$/ {
            inrec = 0; n++;
            if (rec ~ re) { print "--- " file; printf "%s", rec; m++ }
        }
        END { printf "%d %d\n", n, m > "/dev/stderr" }' "$f" >>"$report" 2>"$SCD2_RUN_DIR/counts"
    read -r n m <"$SCD2_RUN_DIR/counts"
    total=$((total + n)); ours=$((ours + m))
done
echo "# valgrind error records: $total in all, $ours through scd2's code"
if [ "$ours" = 0 ]; then
    passed=$((passed + 1)); echo "ok - no valgrind error in scd2's code"
else
    failed=$((failed + 1)); echo "FAILED - $ours valgrind error(s) in scd2's code; by kind and first scd2 frame:"
    awk 'BEGIN { re = ENVIRON["OURS_RE"] } /^==[0-9]+== [A-Z]/ { kind = $0; sub(/^==[0-9]+== /, "", kind); done = 0 }
         !done && $0 ~ re { site = $0; sub(/^.*: /, "", site); print kind " | " site; done = 1 }' "$report" \
        | sort | uniq -c | sort -rn
    echo "# full records: $report (KEEP=1 keeps it)"
fi
if [ "$total" -gt "$ours" ]; then
    echo "# other error records (PostgreSQL or libraries), first one:"
    grep -h -m1 -A25 '^==[0-9]*== [A-Z]' "$SCD2_RUN_DIR"/valgrind.*.log | head -30
fi
echo "# took $((SECONDS - started)) s"
[ "${KEEP:-0}" = 1 ] && echo "# kept $SCD2_RUN_DIR" || cluster_stop quiet
echo "valgrind: $passed passed, $failed failed"
[ "$failed" = 0 ]
