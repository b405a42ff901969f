#!/usr/bin/env bash
# scripts/pg_source.sh MAJOR -- build a PostgreSQL major version that Debian 12
# has no binary package for (18) from Debian's own source package, into a
# private prefix, and print that prefix's bin directory on stdout.
#
#   PG_SOURCE_CACHE   where builds are kept and reused (default
#                     /var/cache/scd2/postgresql); one prefix per exact
#                     upstream version, so a build of the same version is
#                     reused and a newer Debian upload is built anew
#
# The source comes from a deb-src entry for Debian's unstable suite on the
# mirror this machine's apt sources already use (read at run time: no host
# name is written into the repository).  Exit status 3 means the source could
# not be fetched (the mirror lists a version whose files are not there, or
# lists none): callers report that leg SKIPPED.  Any other failure is 1.
set -euo pipefail

major=${1:?usage: pg_source.sh MAJOR}
cache=${PG_SOURCE_CACHE:-/var/cache/scd2/postgresql}
log() { printf '==> [pg%s] %s\n' "$major" "$*" >&2; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

# shellcheck source=debian.sh
source "$(dirname "$0")/debian.sh"

ensure_deb_src() {
    local list=/etc/apt/sources.list.d/scd2-deb-src-unstable.sources mirror
    if [ ! -f "$list" ]; then
        mirror=$(debian_mirror | head -1)
        if [ -z "$mirror" ]; then
            log "SKIPPED: no Debian mirror found in this machine's apt sources"
            exit 3
        fi
        log "adding a deb-src entry for Debian unstable on $mirror"
        as_root tee "$list" >/dev/null <<SRC
Types: deb-src
URIs: $mirror
Suites: unstable
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
        as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
    fi
}

ensure_build_deps() {
    local pkgs="bison flex gcc make dpkg-dev pkg-config libreadline-dev zlib1g-dev libicu-dev libssl-dev" missing="" p
    for p in $pkgs; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep "install ok installed" >/dev/null || missing="$missing $p"
    done
    if [ -n "$missing" ]; then
        log "installing build dependencies:$missing"
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
    fi
}

ensure_deb_src
ver=$(apt-cache showsrc "postgresql-$major" 2>/dev/null | awk '/^Version:/ {print $2}' | sort -V | tail -1)
if [ -z "$ver" ]; then
    log "SKIPPED: the mirror lists no source package postgresql-$major"
    exit 3
fi
upstream=${ver%%-*}; upstream=${upstream#*:}
prefix=$cache/$upstream
if [ -x "$prefix/bin/pg_config" ] && [ -f "$prefix/.complete" ]; then
    log "reusing PostgreSQL $upstream in $prefix"
    echo "$prefix/bin"
    exit 0
fi

ensure_build_deps
work=$cache/src-$upstream
as_root rm -rf "$work"
as_root mkdir -p "$work"
as_root chown "$(id -u)" "$work" "$cache"
cd "$work"
log "fetching source package postgresql-$major $ver"
if ! apt-get source -qq "postgresql-$major=$ver" >apt-source.log 2>&1; then
    tail -5 apt-source.log >&2
    log "SKIPPED: the source of postgresql-$major $ver could not be fetched from the mirror"
    exit 3
fi
src=$(find . -maxdepth 1 -type d -name "postgresql-$major-*" | head -1)
[ -n "$src" ] || src=$(find . -maxdepth 1 -type d -name "postgresql-*" | head -1)
cd "$src"
start=$(date +%s)
log "configuring PostgreSQL $upstream into $prefix"
./configure --prefix="$prefix" --with-icu --with-openssl --without-llvm \
    --disable-nls >configure.log 2>&1 || { tail -20 configure.log >&2; exit 1; }
log "building (make -j$(nproc)), 6-8 minutes on 2 cores"
make -s -j"$(nproc)" world-bin >make.log 2>&1 || { tail -30 make.log >&2; exit 1; }
as_root make -s install-world-bin >install.log 2>&1 || { tail -30 install.log >&2; exit 1; }
# pg_isolation_regress and isolationtester, for PGXS's installcheck of specs.
as_root make -s -C src/test/isolation install >>install.log 2>&1 || { tail -30 install.log >&2; exit 1; }
as_root touch "$prefix/.complete"
log "built PostgreSQL $upstream in $(( $(date +%s) - start )) s"
cd "$cache" && as_root rm -rf "$work"
echo "$prefix/bin"
