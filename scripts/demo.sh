#!/usr/bin/env bash
# The scd2 demo: builds and installs the extension, starts a throwaway
# cluster, loads a customer dimension through several batches (changes,
# NULLs, several changes of one key, a late change, a delete), runs an
# as-of fact load, and prints the history and the audit log.
#
#   scripts/demo.sh                     on PostgreSQL 15 (Debian 12's package)
#   scripts/demo.sh 18                  on another major version (see test.sh)
#   scripts/demo.sh /path/to/pg_config  on your own server's build
# Its own port (55433 unless SCD2_PORT is set), set before lib.sh takes the
# test suites' default (55432): the demo and a test run do not collide.
SCD2_PORT=${SCD2_PORT:-55433}
source "$(dirname "$0")/lib.sh"
[ $# -eq 0 ] || pg_select "$1"
SCD2_RUN_DIR=/tmp/scd2-demo-$SCD2_PORT

ensure_deps
build_install
cluster_start
trap cluster_stop EXIT

psql -X -q -v ON_ERROR_STOP=1 -d postgres -f "$SCD2_ROOT/scripts/demo.sql"
