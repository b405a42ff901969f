#!/usr/bin/env bash
# Runs every scd2 test on a fresh Debian 12 machine, on every PostgreSQL
# version CI covers, and prints one closing line:
#   tests: N passed, M failed, K skipped
#
#   scripts/test.sh                     PostgreSQL 15 (Debian 12's package)
#                                       and 18 (built from Debian's source
#                                       package, reused once built)
#   scripts/test.sh 15                  one version, or several: 15 18
#   scripts/test.sh /path/to/pg_config  your own server's build (16, 17, ...)
#   PG_CONFIG=/path/to/pg_config scripts/test.sh    the same
#
# Each version gets its own build, install and throwaway cluster
# (scripts/test_suites.sh) and its own line `pgNN: ...` with its wall time.
# A version whose server cannot be had (18's source package not on the
# mirror) is reported SKIPPED and counted as skipped, never as passed; any
# failure on any version fails the run.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=results.sh
source "$here/results.sh"

if [ $# -gt 0 ]; then
    targets=("$@")
elif [ -n "${PG_CONFIG:-}" ]; then
    targets=("$PG_CONFIG")
else
    targets=(15 18)
fi

passed=0 failed=0 skipped=0 summary=""
for target in "${targets[@]}"; do
    started=$SECONDS
    out=$(mktemp)
    rc=0
    # One version in a clean environment of its own choosing.
    (
        unset PG_BIN PG_MAJOR
        # shellcheck source=lib.sh
        source "$here/lib.sh"
        set +e
        pg_select "$target"
        prc=$?
        [ "$prc" = 0 ] || exit $((prc == 3 ? 3 : 1))
        exec "$here/test_suites.sh"
    ) 2>&1 | tee "$out"
    rc=${PIPESTATUS[0]}
    secs=$((SECONDS - started))
    line=$(result_line "$out" 'pg[0-9]+')
    rm -f "$out"
    if [ "$rc" = 3 ]; then
        echo "=================================================================="
        echo "SKIPPED: PostgreSQL $target -- its server could not be had here (see above)"
        echo "=================================================================="
        skipped=$((skipped + 1))
        summary="$summary
  $target: SKIPPED (${secs}s)"
        continue
    fi
    if [ -z "$line" ]; then
        failed=$((failed + 1))
        summary="$summary
  $target: broke before its closing line (exit $rc, ${secs}s)"
        continue
    fi
    read -r p f s <<<"$(result_counts "$line")"
    [ "$rc" = 0 ] || [ "$f" != 0 ] || f=1
    passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
    summary="$summary
  $line (wall time ${secs}s)"
done

echo "per version:$summary"
echo "tests: $passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ]
