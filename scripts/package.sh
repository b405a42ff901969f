#!/usr/bin/env bash
# scripts/package.sh [MAJOR...] -- build the Debian packages
# postgresql-MAJOR-scd2 into dist/ (default: 15 17 18), the way PostgreSQL's
# apt repository builds extensions: dpkg-buildpackage on debian/, whose
# rules run debhelper's pgxs build system (pg_buildext, one out-of-tree
# build per version of debian/pgversions that is installed).
#
#   15  on this machine (Debian 12's postgresql-server-dev-15)
#   17  in a Debian 13 (trixie) chroot, where postgresql-17 is a package
#   18  in a Debian unstable (sid) chroot, where postgresql-18 is a package
#       (the source build scripts/pg_source.sh makes lives in a private
#       prefix no package owns: a package built against it would install
#       into that prefix and depend on a postgresql-18 package no apt
#       source of Debian 12 has)
# (chroot_suite in lib.sh says which release.)
#
# Each package is built from a copy of the working tree (build/deb/pgNN)
# and lands in dist/postgresql-NN-scd2_VERSION_ARCH.deb.  Prints the
# packages it made; exit status 3 when a version's build environment
# cannot be had here (no chroot possible), 1 on a failed build.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
source "$here/lib.sh"

deb_version=$(sed -n '1s/^scd2 (\([^)]*\)).*/\1/p' "$SCD2_ROOT/debian/changelog")
upstream=${deb_version%-*}
BUILD_PACKAGES="build-essential dpkg-dev debhelper postgresql-server-dev-all"

# A copy of the working tree without build output or git metadata (an
# in-tree object would be taken by pg_buildext's out-of-tree build).
stage_source() {
    local major=$1 dir="$SCD2_ROOT/build/deb/pg$1"
    rm -rf "$dir"
    mkdir -p "$dir/scd2-$upstream"
    tar -C "$SCD2_ROOT" --exclude=./build --exclude=./dist --exclude=./.git \
        --exclude='*.o' --exclude='*.bc' --exclude='*.so' -cf - . |
        tar -C "$dir/scd2-$upstream" -xf -
}

# dpkg-buildpackage in the staged copy for version $1, on this system
# (the host, or inside a chroot with the repository at $SCD2_ROOT).
build_here() {
    local major=$1 dir="$SCD2_ROOT/build/deb/pg$1"
    # shellcheck disable=SC2086
    install_missing $SCD2_BUILD_PACKAGES $BUILD_PACKAGES "postgresql-server-dev-$major"
    log "dpkg-buildpackage for PostgreSQL $major"
    # PG_UPDATECONTROL: debian/control lists the packages of the versions
    # being built (pg_buildext checkcontrol regenerates it from control.in).
    if ! (cd "$dir/scd2-$upstream" &&
          PG_SUPPORTED_VERSIONS=$major PG_UPDATECONTROL=yes \
              dpkg-buildpackage -b -us -uc >"$dir/build.log" 2>&1); then
        tail -30 "$dir/build.log" >&2
        return 1
    fi
}

build_version() {
    local major=$1 suite rc=0 deb
    deb="postgresql-$major-scd2_${deb_version}_$(dpkg --print-architecture).deb"
    stage_source "$major"
    if [ -x "/usr/lib/postgresql/$major/bin/pg_config" ] || debian_server_packages "$major" >/dev/null 2>&1; then
        build_here "$major"
    elif suite=$(chroot_suite "$major"); then
        # shellcheck disable=SC2086
        "$here/chroot.sh" ensure "$suite" $SCD2_BUILD_PACKAGES $BUILD_PACKAGES "postgresql-$major" \
            "postgresql-server-dev-$major" >/dev/null || rc=$?
        [ "$rc" = 0 ] || return "$rc"
        "$here/chroot.sh" run "$suite" /scd2/scripts/package.sh --here "$major" || return 1
    else
        log "no Debian release here has a postgresql-$major package"
        return 3
    fi
    mkdir -p "$SCD2_ROOT/dist"
    mv "$SCD2_ROOT/build/deb/pg$major/$deb" "$SCD2_ROOT/dist/$deb"
    echo "dist/$deb"
}

if [ "${1:-}" = --here ]; then
    build_here "$2"
    exit
fi
[ "$(id -u)" = 0 ] || { log "building packages needs root (apt-get, chroot)"; exit 3; }
majors=("$@")
[ $# -gt 0 ] || majors=(15 17 18)
status=0
for major in "${majors[@]}"; do
    rc=0
    build_version "$major" || rc=$?
    [ "$rc" = 0 ] || { log "postgresql-$major-scd2: not built (exit $rc)"; [ "$status" = 1 ] || status=$rc; }
done
exit "$status"
