# scripts/lib.sh -- shared by demo.sh, test.sh and .ci/run.
#
# pg_select TARGET  choose the PostgreSQL to build and test against and set
#                 PG_BIN, PG_CONFIG and PG_MAJOR: TARGET is a major version
#                 (15: Debian 12's packages; a version Debian 12 has no
#                 package for, e.g. 18: built from Debian's source package by
#                 scripts/pg_source.sh, exit status 3 when the source cannot
#                 be fetched) or the path of a pg_config (your own server)
# ensure_deps     install the Debian packages scd2 needs (when missing)
# build_install   build the extension (warnings are errors) in build/pgNN
#                 and install it
# cluster_start   initdb + start a throwaway cluster on a private socket
#                 directory and port; exports PGHOST, PGPORT, PGUSER
# cluster_stop    stop it and remove it
#
# Without pg_select, PG_CONFIG (a path) or PG_MAJOR (default 15) from the
# environment chooses the server.
#
# initdb and postgres refuse to run as root: as root they run as the
# postgres user on directories it owns; as another user, as that user.

set -euo pipefail

SCD2_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SCD2_PORT=${SCD2_PORT:-55432}

# The cluster's directory follows the port, also when SCD2_PORT is set
# after this file is sourced (SCD2_RUN_DIR, when set, wins).
scd2_run_dir() {
    SCD2_RUN_DIR=${SCD2_RUN_DIR:-/tmp/scd2-cluster-$SCD2_PORT}
}

log() { printf '==> %s\n' "$*" >&2; }

as_root() {
    if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

# Packages: the compiler, and for a Debian-packaged server the server and
# its development files (PGXS, pg_regress, pg_isolation_regress), contrib
# (citext, btree_gist) and pg_cron for the scheduler test where Debian has
# it for that version.
SCD2_BUILD_PACKAGES="make gcc"

# The Debian packages of major version $1 that exist on this machine's
# mirror (apt-cache needs an updated list: refreshed once when empty).
debian_server_packages() {
    local major=$1 p out=""
    if ! apt-cache show "postgresql-$major" >/dev/null 2>&1; then
        as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    fi
    apt-cache show "postgresql-$major" >/dev/null 2>&1 || return 1
    for p in "postgresql-$major" "postgresql-server-dev-$major" "postgresql-contrib-$major" "postgresql-$major-cron"; do
        # A purely virtual package (postgresql-contrib-15 on Debian 12,
        # -17 on Debian 13: contrib is in the server package) is left out.
        # grep reads to the end (no -q): under pipefail an early exit would
        # kill apt-cache with SIGPIPE and fail the test.
        apt-cache show "$p" 2>/dev/null | grep '^Version:' >/dev/null && out="$out $p"
    done
    echo "$out"
}

install_missing() {
    local missing="" p
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep "install ok installed" >/dev/null || missing="$missing $p"
    done
    if [ -n "$missing" ]; then
        log "installing:$missing"
        as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
        # shellcheck disable=SC2086
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
    fi
}

# The Debian release whose binary packages have PostgreSQL $1, for the
# versions Debian 12 has none of (16 ships in no Debian release): the 17
# and 18 legs and packages are run and built in a chroot of it
# (scripts/chroot.sh).
chroot_suite() {
    case $1 in
        17) echo trixie ;;
        18) echo sid ;;
        *) return 1 ;;
    esac
}

# pg_select 15 | pg_select 18 | pg_select /path/to/pg_config
pg_select() {
    local target=$1 pkgs bin
    case "$target" in
        */*)
            [ -x "$target" ] || { log "no pg_config at $target"; return 1; }
            PG_CONFIG=$target ;;
        *[!0-9]*|"")
            log "not a PostgreSQL major version or pg_config path: $target"; return 1 ;;
        *)
            if pkgs=$(debian_server_packages "$target"); then
                # Debian 12's contrib for 15 is postgresql-contrib.
                [ "$target" = 15 ] && pkgs="$pkgs postgresql-contrib"
                # shellcheck disable=SC2086
                install_missing $pkgs
                PG_CONFIG=/usr/lib/postgresql/$target/bin/pg_config
            elif [ -x "/usr/lib/postgresql/$target/bin/pg_config" ]; then
                PG_CONFIG=/usr/lib/postgresql/$target/bin/pg_config
            else
                bin=$("$SCD2_ROOT/scripts/pg_source.sh" "$target") || return $?
                PG_CONFIG=$bin/pg_config
            fi ;;
    esac
    PG_BIN=$("$PG_CONFIG" --bindir)
    PG_MAJOR=$("$PG_CONFIG" --version | sed -E 's/^PostgreSQL ([0-9]+).*/\1/')
    export PG_CONFIG PG_BIN PG_MAJOR
}

# True when pg_cron is installed for the selected server.
have_pg_cron() {
    [ -f "$("$PG_CONFIG" --pkglibdir)/pg_cron.so" ]
}

ensure_deps() {
    # shellcheck disable=SC2086
    install_missing $SCD2_BUILD_PACKAGES
    if [ -z "${PG_CONFIG:-}" ]; then
        pg_select "${PG_MAJOR:-15}"
    elif [ -z "${PG_BIN:-}" ]; then
        pg_select "$PG_CONFIG"
    fi
    # The cluster runs as postgres when we are root; a server built from
    # source has no package that creates that user.
    if [ "$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; then
        useradd --system --home-dir /var/lib/postgresql --shell /bin/bash postgres
    fi
}

# Each server version builds in a directory of its own, build/pgNN (out of
# tree, as Debian's pg_buildext does): no object of one version is left
# where a plain `make` for another would take it as up to date.
build_install() {
    local dir="$SCD2_ROOT/build/pg$PG_MAJOR"
    local mk=(make -C "$dir" -f "$SCD2_ROOT/Makefile" -s PG_CONFIG="$PG_CONFIG" COPT="-Werror")
    log "building scd2 in build/pg$PG_MAJOR"
    # Objects of an in-tree build (a plain `make`) would be found through
    # VPATH and linked into this version's build: remove them first.
    if compgen -G "$SCD2_ROOT/src/*.o" >/dev/null || compgen -G "$SCD2_ROOT/src/*/*.o" >/dev/null ||
        [ -e "$SCD2_ROOT/scd2.so" ]; then
        log "removing the objects of an in-tree build (src/**/*.o, *.bc, scd2.so)"
        rm -f "$SCD2_ROOT"/src/*.o "$SCD2_ROOT"/src/*.bc "$SCD2_ROOT"/src/*/*.o "$SCD2_ROOT"/src/*/*.bc \
            "$SCD2_ROOT/scd2.so"
    fi
    mkdir -p "$dir"
    "${mk[@]}" clean >/dev/null
    "${mk[@]}"
    log "installing scd2"
    as_root "${mk[@]}" install >/dev/null
}

# Run a server binary as the cluster's owner.
as_owner() {
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

cluster_start() {
    local extra_conf=${1:-}
    scd2_run_dir
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
    scd2_run_dir
    if [ -f "$SCD2_RUN_DIR/data/postmaster.pid" ]; then
        as_owner "$PG_BIN/pg_ctl" -D "$SCD2_RUN_DIR/data" -m immediate -w stop >/dev/null 2>&1 || true
    fi
    rm -rf "$SCD2_RUN_DIR"
    [ "${1:-}" = quiet ] || log "cluster stopped"
}
