#!/usr/bin/env bash
# scd2 on a Citus cluster: a coordinator and two workers on loopback.
#
# Runs only where the citus extension is installed for the PostgreSQL under
# test ($(pg_config --sharedir)/extension/citus.control); elsewhere it
# prints SKIPPED and `citus: 0 passed, 0 failed, 1 skipped` (never a pass).
# Citus has no Debian package: docs/CITUS.md says how to build it.
#
# Starts its OWN three servers (shared_preload_libraries = citus), each with
# its data directory under /tmp/scd2-citus-PORT and a private socket
# directory there, listening on 127.0.0.1 only:
#   coordinator  SCD2_CITUS_PORT      (default: SCD2_PORT + 20, 55452)
#   workers      SCD2_CITUS_PORT + 1, SCD2_CITUS_PORT + 2
# creates database scd2_citus with the citus and scd2 extensions on every
# node, adds the workers (and registers the coordinator), then runs every
# check file test/citus/sql/*.sql with pg_regress --use-existing against the
# coordinator, comparing with test/citus/expected/*.out (diffs in
# build/citus/regression.diffs).  A check is added by dropping a .sql file
# and its .out there; each file is one test, runs in its own schema and
# cleans up after itself (the files run in name order in one database).
# The cluster is removed at the end (SCD2_CITUS_KEEP=1 keeps it running);
# SCD2_CITUS_CONF adds postgresql.conf lines to every node (e.g.
# "shared_buffers = 1GB" for bench/citus.sh).
# Needs scd2 installed into that PostgreSQL (scripts/test_suites.sh does it).
#
# Prints `citus: N passed, M failed[, K skipped]`; exits non-zero on failure.

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../../scripts/lib.sh
source "$here/../../scripts/lib.sh"
set +e
SUITE=citus

if [ -z "${PG_BIN:-}" ]; then
    pg_select "${PG_CONFIG:-$(command -v pg_config)}" || { echo "$SUITE: 0 passed, 1 failed"; exit 1; }
fi
PG_CONFIG=${PG_CONFIG:-$PG_BIN/pg_config}

if [ ! -f "$("$PG_CONFIG" --sharedir)/extension/citus.control" ]; then
    echo "SKIPPED: the citus extension is not installed for PostgreSQL $("$PG_CONFIG" --version | sed 's/^PostgreSQL //') ($PG_CONFIG)"
    echo "$SUITE: 0 passed, 0 failed, 1 skipped"
    exit 0
fi

BASE=${SCD2_CITUS_PORT:-$(( SCD2_PORT + 20 ))}
DIR=/tmp/scd2-citus-$BASE
DB=scd2_citus
PORTS="$BASE $((BASE + 1)) $((BASE + 2))"
OUT=$SCD2_ROOT/build/citus
PG_REGRESS=$(dirname "$("$PG_CONFIG" --pgxs)")/../test/regress/pg_regress

stop_all() {
    local p
    for p in $PORTS; do
        [ -f "$DIR/$p/postmaster.pid" ] && as_owner "$PG_BIN/pg_ctl" -D "$DIR/$p" -m fast -w stop >/dev/null 2>&1
    done
    rm -rf "$DIR"
}
broken() {
    echo "citus: cluster setup failed: $1"
    for p in $PORTS; do [ -f "$DIR/$p.log" ] && tail -5 "$DIR/$p.log"; done
    [ "${SCD2_CITUS_KEEP:-}" = 1 ] || stop_all
    echo "$SUITE: 0 passed, 1 failed"
    exit 1
}
# psql against node PORT: on PORT SQL...
on() {
    local p=$1; shift
    "$PG_BIN/psql" -X -q -At -v ON_ERROR_STOP=1 -h "$DIR" -p "$p" -U postgres -d "$DB" "$@"
}

started=$SECONDS
stop_all
mkdir -p "$DIR"
[ "$(id -u)" = 0 ] && chown postgres "$DIR"
for p in $PORTS; do
    as_owner "$PG_BIN/initdb" -D "$DIR/$p" -A trust -U postgres --no-sync >/dev/null || broken "initdb $p"
    cat >>"$DIR/$p/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
unix_socket_directories = '$DIR'
port = $p
shared_preload_libraries = 'citus'
max_prepared_transactions = 100
fsync = off
shared_buffers = 256MB
work_mem = 64MB
maintenance_work_mem = 256MB
max_wal_size = 4GB
citus.shard_count = 4
${SCD2_CITUS_CONF:-}
CONF
    as_owner "$PG_BIN/pg_ctl" -D "$DIR/$p" -l "$DIR/$p.log" -w start >/dev/null || broken "start $p"
done
for p in $PORTS; do
    "$PG_BIN/psql" -X -q -h "$DIR" -p "$p" -U postgres -d postgres -c "CREATE DATABASE $DB" >/dev/null || broken "create database on $p"
    on "$p" -c "SET client_min_messages = warning" -c "CREATE EXTENSION citus" -c "CREATE EXTENSION scd2" \
        >/dev/null || broken "extensions on $p"
done
on "$BASE" -c "SELECT citus_set_coordinator_host('127.0.0.1', $BASE)" >/dev/null || broken "coordinator host"
for p in $(( BASE + 1 )) $(( BASE + 2 )); do
    on "$BASE" -c "SELECT citus_add_node('127.0.0.1', $p)" >/dev/null || broken "adding worker $p"
done
workers=$(on "$BASE" -c "SELECT count(*) FROM pg_dist_node WHERE noderole = 'primary' AND groupid <> 0")
[ "$workers" = 2 ] || broken "expected 2 workers in pg_dist_node, found $workers"
echo "# Citus $(on "$BASE" -c "SELECT extversion FROM pg_extension WHERE extname = 'citus'") on $("$PG_CONFIG" --version), coordinator $BASE, workers $((BASE + 1)) $((BASE + 2))"

rm -rf "$OUT"
mkdir -p "$OUT"
tests=$(cd "$here/sql" && ls ./*.sql 2>/dev/null | sed 's|^\./||; s|\.sql$||' | sort)
out=$OUT/pg_regress.log
# PGOPTIONS reach the coordinator's sessions only; the files set what they
# need themselves.
# From test/citus itself: pg_regress 16+ looks for expected/NAME.out in the
# current directory first (its --expecteddir defaults to "."), and the
# repository root's expected/ holds the main suite's files.
# shellcheck disable=SC2086
(cd "$here" && "$PG_REGRESS" --use-existing --dbname="$DB" --host="$DIR" --port="$BASE" --user=postgres \
    --inputdir="$here" --outputdir="$OUT" --bindir="$PG_BIN" $tests) >"$out" 2>&1
rc=$?
cat "$out"
# pg_regress before 16: "test x ... ok" / "... FAILED"; from 16 on (TAP).
passed=$(grep -cE '\.\.\. +ok|^ok [0-9]+ ' "$out")
failed=$(grep -cE '\.\.\. +FAILED|^not ok [0-9]+ ' "$out")
if [ "$rc" != 0 ] && [ "$failed" = 0 ]; then failed=1; fi
[ "$failed" = 0 ] || echo "# diffs: $OUT/regression.diffs"
if [ "${SCD2_CITUS_KEEP:-}" = 1 ]; then
    echo "# cluster kept: psql -h $DIR -p $BASE -U postgres -d $DB"
else
    stop_all
fi
echo "# $((SECONDS - started))s"
echo "$SUITE: $passed passed, $failed failed"
[ "$failed" = 0 ]
