#!/usr/bin/env bash
# Runs every scd2 test on a fresh Debian 12 machine, on every PostgreSQL
# version CI covers, and prints one closing line:
#   tests: N passed, M failed, K skipped
#
#   scripts/test.sh                     every leg: PostgreSQL 15 (Debian 12's
#                                       package), 17 (Debian 13's package, in
#                                       a chroot), 18 (Debian unstable's
#                                       package, in a chroot; built from
#                                       Debian's source package where no
#                                       chroot can be had) and `release` (the
#                                       versions, make dist, the .deb packages)
#   scripts/test.sh 17                  one leg, or several: 15 18 release
#   scripts/test.sh /path/to/pg_config  your own server's build (16, ...)
#   PG_CONFIG=/path/to/pg_config scripts/test.sh    the same
#
# Each version gets its own build (build/pgNN), install and throwaway
# cluster (scripts/test_suites.sh) and its own line `pgNN: ...` with its
# wall time.  A version Debian 12 has no package of but another Debian
# release has (17: trixie, 18: unstable; chroot_suite in lib.sh) runs in a
# chroot of that release (scripts/chroot.sh, made once and reused), with
# this repository bind-mounted.  A version whose server cannot be had (no
# chroot possible and 18's source package not on the mirror) is reported
# SKIPPED and counted as skipped, never as passed; any failure on any leg
# fails the run.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=results.sh
source "$here/results.sh"

if [ $# -gt 0 ]; then
    targets=("$@")
elif [ -n "${PG_CONFIG:-}" ]; then
    targets=("$PG_CONFIG")
else
    targets=(15 17 18 release)
fi

# Run every suite of version $2 inside the chroot of Debian release $1
# (exit status 3 when the chroot cannot be had: the leg is SKIPPED).
run_in_chroot() {
    local suite=$1 major=$2 rc=0
    # The optional packages (contrib, pg_cron) are installed inside by
    # test_suites.sh where the release has them.
    # shellcheck disable=SC2086
    "$here/chroot.sh" ensure "$suite" $SCD2_BUILD_PACKAGES "postgresql-$major" \
        "postgresql-server-dev-$major" >/dev/null || rc=$?
    # A chroot that cannot be made (a mirror's bad day, an uninstallable
    # package in unstable) sends the leg to its other means, as no chroot does.
    if [ "$rc" != 0 ]; then
        log "the $suite chroot with postgresql-$major could not be made (exit $rc)"
        return 3
    fi
    log "PostgreSQL $major: every suite inside the $suite chroot"
    "$here/chroot.sh" run "$suite" env SCD2_PORT="$SCD2_PORT" SCD2_OPT_IN="${SCD2_OPT_IN:-}" \
        PG_MAJOR="$major" /scd2/scripts/test_suites.sh
}

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
        [ "$target" != release ] || exec "$here/../test/release/run.sh"
        # A version Debian 12 has no package of runs in a chroot of the
        # release that has one; where no chroot can be had (not root), 18
        # falls back to the source build (pg_select, scripts/pg_source.sh).
        # 18's tests run on the source build: unstable's Python (3.14) cannot
        # install the pinned dbt, so its chroot serves the 18 package only.
        if [ "$target" != 18 ] && suite=$(chroot_suite "$target") &&
            ! debian_server_packages "$target" >/dev/null 2>&1; then
            run_in_chroot "$suite" "$target"
            crc=$?
            [ "$crc" = 3 ] || exit "$crc"
            log "no $suite chroot here: PostgreSQL $target by other means"
        fi
        pg_select "$target"
        prc=$?
        [ "$prc" = 0 ] || exit $((prc == 3 ? 3 : 1))
        exec "$here/test_suites.sh"
    ) 2>&1 | tee "$out"
    rc=${PIPESTATUS[0]}
    secs=$((SECONDS - started))
    line=$(result_line "$out" '(pg[0-9]+|release)')
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
