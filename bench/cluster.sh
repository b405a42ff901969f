#!/usr/bin/env bash
# bench/cluster.sh -- the throwaway PostgreSQL 15 cluster the benchmark
# results in RESULTS.md were measured on.
#
#   bench/cluster.sh start      initdb (first time) and start
#   bench/cluster.sh stop
#
# Environment:
#   DIR=/tmp/benchpg        data directory is $DIR/data, socket directory $DIR
#   PORT=55493
#   SHARED_BUFFERS=8GB      big enough for every table of the 10-versions run
#                           (dim, dim_seed and dim_dbt: ~6.3 GB)
#   SETTINGS=tuned          tuned: the settings below and in pg_ctl's line;
#                           default: PostgreSQL's defaults for everything
#                           but the port and socket (shared_buffers 128MB,
#                           work_mem 4MB, huge_pages try; SHARED_BUFFERS
#                           and HUGE are then ignored)
#   HUGE=on                 huge_pages=on|off.  on: vm.nr_hugepages is raised
#                           to what the server asks for (needs root); this is
#                           PostgreSQL's advice for a large shared_buffers,
#                           and without it every load's fresh backend pays
#                           a page fault per 4 kB of shared memory it touches
#                           for the first time (RESULTS.md has both).
#
# Run as root (initdb and postgres run as the postgres user) or as postgres
# with HUGE=off.  Then: export PGHOST=$DIR PGPORT=$PORT PGUSER=postgres.
set -euo pipefail
DIR=${DIR:-/tmp/benchpg}
PORT=${PORT:-55493}
SHARED_BUFFERS=${SHARED_BUFFERS:-8GB}
HUGE=${HUGE:-on}
SETTINGS=${SETTINGS:-tuned}
case $SETTINGS in tuned|default) ;; *) echo "SETTINGS must be tuned or default" >&2; exit 2 ;; esac
[ "$SETTINGS" = tuned ] || HUGE=default
BIN=$(pg_config --bindir)

as_postgres() {
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

case ${1:-} in
start)
    mkdir -p "$DIR"
    [ "$(id -u)" = 0 ] && chown postgres: "$DIR"
    if [ ! -s "$DIR/data/PG_VERSION" ]; then
        as_postgres "$BIN/initdb" -D "$DIR/data" -A trust -U postgres >/dev/null
    fi
    if [ "$HUGE" = on ]; then
        pages=$(as_postgres "$BIN/postgres" -D "$DIR/data" -c shared_buffers="$SHARED_BUFFERS" \
                    -C shared_memory_size_in_huge_pages)
        have=$(cat /proc/sys/vm/nr_hugepages)
        if [ "$have" -lt "$pages" ]; then
            [ "$(id -u)" = 0 ] || { echo "HUGE=on needs vm.nr_hugepages >= $pages (have $have): run as root" >&2; exit 1; }
            sysctl -q -w vm.nr_hugepages=$(( pages + 50 ))
        fi
    fi
    opts="-p $PORT -k $DIR"
    if [ "$SETTINGS" = tuned ]; then
        opts="$opts -c shared_buffers=$SHARED_BUFFERS -c huge_pages=$HUGE -c work_mem=64MB \
            -c maintenance_work_mem=1GB -c max_wal_size=8GB -c checkpoint_timeout=30min"
    fi
    as_postgres "$BIN/pg_ctl" -D "$DIR/data" -l "$DIR/log" -w -o "$opts" start >/dev/null
    echo "export PGHOST=$DIR PGPORT=$PORT PGUSER=postgres"
    ;;
stop)
    as_postgres "$BIN/pg_ctl" -D "$DIR/data" -m fast stop >/dev/null
    ;;
*)
    echo "usage: $0 start|stop" >&2
    exit 2
    ;;
esac
