#!/usr/bin/env bash
# Runs every scd2 test on a fresh Debian 12 machine: installs what it needs,
# builds with warnings as errors, starts a throwaway cluster, runs the
# pg_regress suites, the isolation specs, the property test and the
# integration/crash scripts, and prints one summary line.
source "$(dirname "$0")/lib.sh"

ensure_deps
build_install
cluster_start "shared_preload_libraries = 'pg_cron'
cron.database_name = 'postgres'"
trap cluster_stop EXIT

passed=0 failed=0
run_suite() {
    local name=$1; shift
    log "suite: $name"
    if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); log "FAILED: $name"; fi
}

run_suite regress make -C "$SCD2_ROOT" -s PG_CONFIG="$PG_BIN/pg_config" installcheck-regress
run_suite isolation make -C "$SCD2_ROOT" -s PG_CONFIG="$PG_BIN/pg_config" installcheck-isolation
for t in "$SCD2_ROOT"/test/*/run.sh; do
    [ -x "$t" ] || continue
    run_suite "$(basename "$(dirname "$t")")" "$t"
done

echo "suites: $passed passed, $failed failed"
[ "$failed" = 0 ]
