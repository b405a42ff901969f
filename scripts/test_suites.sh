#!/usr/bin/env bash
# Runs every scd2 suite against ONE PostgreSQL (PG_CONFIG, or PG_MAJOR,
# default 15): builds with warnings as errors, installs, starts a throwaway
# cluster, runs the pg_regress suites, the isolation specs and every
# test/*/run.sh script (property, integration, crash, ...), and prints one
# closing line:
#   pgNN: N passed, M failed, K skipped
# scripts/test.sh calls it once per version; it can be run alone.
source "$(dirname "$0")/lib.sh"
# shellcheck source=results.sh
source "$(dirname "$0")/results.sh"

ensure_deps
log "PostgreSQL $("$PG_CONFIG" --version | sed 's/^PostgreSQL //') ($PG_CONFIG)"
build_install
scd2_run_dir
if have_pg_cron; then
    cluster_start "shared_preload_libraries = 'pg_cron'
cron.database_name = 'postgres'
cron.host = '$SCD2_RUN_DIR'"
else
    cluster_start
fi
trap cluster_stop EXIT

passed=0 failed=0 skipped=0 broken=""
LOGDIR=$(mktemp -d)

# Run one suite; count its tests from what it prints: pg_regress's lines
# for each test, or a script's closing "N passed, M failed[, K skipped]".
run_suite() {
    local name=$1; shift
    local out="$LOGDIR/$name.log" rc=0 p f s=0 line
    log "suite: $name"
    "$@" >"$out" 2>&1 || rc=$?
    cat "$out"
    # pg_regress before 16: "test x ... ok" / "... FAILED"; from 16 on (TAP):
    # "ok 3 - x" / "not ok 3 - x".
    p=$(grep -cE '\.\.\. +ok|^ok [0-9]+ ' "$out" || true)
    f=$(grep -cE '\.\.\. +FAILED|^not ok [0-9]+ ' "$out" || true)
    line=$(result_line "$out" || true)
    [ -z "$line" ] || read -r p f s <<<"$(result_counts "$line")"
    if [ "$rc" != 0 ] && [ "$f" = 0 ]; then f=1; fi
    passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
    [ "$rc" = 0 ] || broken="$broken $name"
}

export PG_BIN PG_CONFIG SCD2_ROOT
run_suite regress make -C "$SCD2_ROOT" -s PG_CONFIG="$PG_CONFIG" installcheck-regress
run_suite isolation make -C "$SCD2_ROOT" -s PG_CONFIG="$PG_CONFIG" installcheck-isolation
for t in "$SCD2_ROOT"/test/*/run.sh; do
    name=$(basename "$(dirname "$t")")
    # Opt-in suites (valgrind) carry a line "# opt-in: NAME" and run only
    # when SCD2_OPT_IN names them (SCD2_OPT_IN="valgrind").
    # A suite with a line "# leg: NAME" is a leg of scripts/test.sh of its
    # own (the packages), not one run per version.
    if grep -q '^# leg:' "$t"; then continue; fi
    if grep -q '^# opt-in:' "$t"; then
        case " ${SCD2_OPT_IN:-} " in *" $name "*) ;; *) log "suite: $name (opt-in, not requested)"; continue ;; esac
    fi
    run_suite "$name" "$t"
done

[ -z "$broken" ] || log "failed suites:$broken (diffs: build/regress/regression.diffs, build/isolation/regression.diffs)"
echo "pg$PG_MAJOR: $passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ] && [ -z "$broken" ]
