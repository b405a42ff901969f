#!/usr/bin/env bash
# scd2 integration tests: where users run it.
#   pg_cron.sh       scheduled CALL scd2.apply / scd2.apply_all under pg_cron
#   dump_restore.sh  pg_dump -Fc / pg_restore of registered dimensions
# (dbt, with real dbt runs of the post-hook example: test/dbt/run.sh)
# Needs a running server (PGHOST, PGPORT, PGUSER: a superuser) with scd2
# installed and pg_cron preloaded (cron.database_name = 'postgres'), as
# scripts/test.sh starts it.  pg_cron.sh waits for the scheduler (up to a
# minute with pg_cron 1.4), so it runs in the background while the others
# run; the scripts use separate databases.  Prints every script's output,
# then one line `integration: N passed, M failed`.

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../../scripts/results.sh
source "$here/../../scripts/results.sh"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

started=$SECONDS
"$here/pg_cron.sh" >"$out/pg_cron" 2>&1 &
cron_pid=$!
"$here/dump_restore.sh" >"$out/dump_restore" 2>&1
wait "$cron_pid"

passed=0 failed=0 skipped=0
for t in pg_cron dump_restore; do
    echo "== $t"
    cat "$out/$t"
    line=$(result_line "$out/$t")
    if [ -z "$line" ]; then
        echo "$t: no result line (the script broke)"
        failed=$((failed + 1))
        continue
    fi
    read -r p f s <<<"$(result_counts "$line")"
    skipped=$((skipped + s))
    passed=$((passed + p))
    failed=$((failed + f))
done
echo "# $((SECONDS - started))s"
echo "integration: $passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ]
