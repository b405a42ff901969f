# scripts/lib.sh -- shared by demo.sh, test.sh and .ci/run.
#
# ensure_deps     install the Debian packages scd2 needs (when missing)
# build_install   build the extension (warnings are errors) and install it
# cluster_start   initdb + start a throwaway cluster on a private socket
#                 directory and port; exports PGHOST, PGPORT, PGUSER
# cluster_stop    stop it and remove it
#
# initdb and postgres refuse to run as root: as root they run as the
# postgres user on directories it owns; as another user, as that user.

set -euo pipefail

SCD2_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PG_MAJOR=${PG_MAJOR:-15}
PG_BIN=/usr/lib/postgresql/$PG_MAJOR/bin
SCD2_PORT=${SCD2_PORT:-55432}
SCD2_RUN_DIR=${SCD2_RUN_DIR:-/tmp/scd2-cluster-$SCD2_PORT}

log() { printf '==> %s\n' "$*" >&2; }

as_root() {
    if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

# Packages: the server and its development files (PGXS, pg_regress,
# pg_isolation_regress), pg_cron for the scheduler test, gnuplot for plots.
SCD2_PACKAGES="postgresql-$PG_MAJOR postgresql-server-dev-$PG_MAJOR postgresql-contrib postgresql-$PG_MAJOR-cron make gcc"

ensure_deps() {
    local missing=""
    for p in $SCD2_PACKAGES; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
    done
    if [ -n "$missing" ]; then
        log "installing:$missing"
        as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
        # shellcheck disable=SC2086
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
    fi
}

build_install() {
    log "building scd2"
    make -C "$SCD2_ROOT" -s PG_CONFIG="$PG_BIN/pg_config" COPT="-Werror" clean >/dev/null
    make -C "$SCD2_ROOT" -s PG_CONFIG="$PG_BIN/pg_config" COPT="-Werror"
    log "installing scd2"
    as_root make -C "$SCD2_ROOT" -s PG_CONFIG="$PG_BIN/pg_config" install >/dev/null
}

# Run a server binary as the cluster's owner.
as_owner() {
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

cluster_start() {
    local extra_conf=${1:-}
    cluster_stop quiet
    mkdir -p "$SCD2_RUN_DIR"
    [ "$(id -u)" = 0 ] && chown postgres "$SCD2_RUN_DIR"
    log "starting a throwaway cluster in $SCD2_RUN_DIR (port $SCD2_PORT)"
    as_owner "$PG_BIN/initdb" -D "$SCD2_RUN_DIR/data" -A trust -U postgres --no-sync >/dev/null
    cat >>"$SCD2_RUN_DIR/data/postgresql.conf" <<CONF
listen_addresses = ''
unix_socket_directories = '$SCD2_RUN_DIR'
port = $SCD2_PORT
fsync = off
shared_buffers = 512MB
work_mem = 64MB
maintenance_work_mem = 512MB
max_wal_size = 4GB
$extra_conf
CONF
    as_owner "$PG_BIN/pg_ctl" -D "$SCD2_RUN_DIR/data" -l "$SCD2_RUN_DIR/log" -w start >/dev/null
    export PGHOST=$SCD2_RUN_DIR PGPORT=$SCD2_PORT PGUSER=postgres
}

cluster_stop() {
    if [ -f "$SCD2_RUN_DIR/data/postmaster.pid" ]; then
        as_owner "$PG_BIN/pg_ctl" -D "$SCD2_RUN_DIR/data" -m immediate -w stop >/dev/null 2>&1 || true
    fi
    rm -rf "$SCD2_RUN_DIR"
    [ "${1:-}" = quiet ] || log "cluster stopped"
}
