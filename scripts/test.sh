#!/usr/bin/env bash
# Runs every scd2 test on a fresh Debian 12 machine: installs what it needs,
# builds with warnings as errors, starts a throwaway cluster, runs the
# pg_regress suites, the isolation specs and every test/*/run.sh script
# (property, integration, crash), and prints one closing line:
#   tests: N passed, M failed
source "$(dirname "$0")/lib.sh"

ensure_deps
build_install
cluster_start "shared_preload_libraries = 'pg_cron'
cron.database_name = 'postgres'
cron.host = '$SCD2_RUN_DIR'"
trap cluster_stop EXIT

passed=0 failed=0 broken=""
LOGDIR=$(mktemp -d)

# Run one suite; count its tests from what it prints: pg_regress lines
# ("test x ... ok" / "... FAILED"), or a script's "N passed, M failed".
run_suite() {
    local name=$1; shift
    local out="$LOGDIR/$name.log" rc=0 p f
    log "suite: $name"
    "$@" >"$out" 2>&1 || rc=$?
    cat "$out"
    p=$(grep -cE '^(test |ok |     )?.*\.\.\. +ok' "$out" || true)
    f=$(grep -cE '\.\.\. +FAILED' "$out" || true)
    if grep -qE '^[a-z_]+: [0-9]+ passed, [0-9]+ failed' "$out"; then
        p=$(grep -E '^[a-z_]+: [0-9]+ passed, [0-9]+ failed' "$out" | tail -1 | sed -E 's/.*: ([0-9]+) passed.*/\1/')
        f=$(grep -E '^[a-z_]+: [0-9]+ passed, [0-9]+ failed' "$out" | tail -1 | sed -E 's/.* ([0-9]+) failed.*/\1/')
    fi
    if [ "$rc" != 0 ] && [ "$f" = 0 ]; then f=1; fi
    passed=$((passed + p)); failed=$((failed + f))
    [ "$rc" = 0 ] || broken="$broken $name"
}

export PG_BIN SCD2_ROOT
run_suite regress make -C "$SCD2_ROOT" -s PG_CONFIG="$PG_BIN/pg_config" installcheck-regress
run_suite isolation make -C "$SCD2_ROOT" -s PG_CONFIG="$PG_BIN/pg_config" installcheck-isolation
for t in "$SCD2_ROOT"/test/*/run.sh; do
    [ -x "$t" ] || continue
    run_suite "$(basename "$(dirname "$t")")" "$t"
done

[ -z "$broken" ] || log "failed suites:$broken (diffs: build/regress/regression.diffs, build/isolation/regression.diffs)"
echo "tests: $passed passed, $failed failed"
[ "$failed" = 0 ] && [ -z "$broken" ]
