#!/usr/bin/env bash
# scripts/chroot.sh -- a Debian release in a chroot, for the PostgreSQL
# versions and packages Debian 12 has no binary package of (17: Debian 13
# "trixie" ships postgresql-17).
#
#   scripts/chroot.sh ensure SUITE [PACKAGE...]
#       make the chroot of SUITE (debootstrap --variant=minbase from the
#       mirror this machine's apt sources use) with PACKAGEs installed, or
#       reuse it; prints its directory
#   scripts/chroot.sh run SUITE COMMAND [ARG...]
#       run COMMAND inside it as root, with this repository bind-mounted at
#       /scd2, /proc, /dev, /dev/pts and a private /dev/shm mounted, and the
#       host's CA bundle, pip and proxy settings
#
#   SCD2_CHROOT_CACHE   where chroots are kept (default /var/cache/scd2/chroot,
#                       one directory per suite)
#
# Every mount is made in a private mount namespace (unshare --mount) and
# unmounted when COMMAND ends; the namespace dies with the process, so not
# even a killed run leaves a mount behind.  Needs root (chroot, mount).
# Exit status 3: the chroot cannot be had here (not root, no mirror in the
# apt sources, debootstrap or apt failed): callers report that leg SKIPPED.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
SCD2_ROOT=$(cd "$here/.." && pwd)
cache=${SCD2_CHROOT_CACHE:-/var/cache/scd2/chroot}
log() { printf '==> [chroot] %s\n' "$*" >&2; }
skip() { log "SKIPPED: $*"; exit 3; }

# shellcheck source=debian.sh
source "$here/debian.sh"

# The mounts of one run, inside the private namespace (unshare calls the
# script again with `mounted`).
mounted() {
    local dir=$1; shift
    mount -t proc proc "$dir/proc"
    mount --bind /dev "$dir/dev"
    mount -t tmpfs -o mode=1777 shm "$dir/dev/shm"
    mount --bind /dev/pts "$dir/dev/pts"
    mkdir -p "$dir/scd2"
    mount --bind "$SCD2_ROOT" "$dir/scd2"
    # shellcheck disable=SC2064  # expanded now: $dir is local
    trap "umount '$dir/scd2' '$dir/dev/pts' '$dir/dev/shm' '$dir/dev' '$dir/proc'" EXIT
    # The network as the host sees it (PyPI for the dbt suite): its name
    # servers, its pip settings, its proxy and pip environment, and its CA
    # bundle as a file of its own (not over /etc/ssl/certs, which the
    # chroot's ca-certificates package writes).
    cp /etc/resolv.conf "$dir/etc/resolv.conf" 2>/dev/null || true
    if [ -f /etc/pip.conf ]; then cp /etc/pip.conf "$dir/etc/pip.conf"; fi
    local rc=0 net_env=()
    mapfile -t net_env < <(env | grep -E '^(https?_proxy|HTTPS?_PROXY|no_proxy|NO_PROXY|PIP_[A-Z_]+)=' | grep -v '^PIP_CERT=' || true)
    if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
        cp /etc/ssl/certs/ca-certificates.crt "$dir/etc/scd2-host-ca.crt"
        net_env+=(PIP_CERT=/etc/scd2-host-ca.crt SSL_CERT_FILE=/etc/scd2-host-ca.crt REQUESTS_CA_BUNDLE=/etc/scd2-host-ca.crt)
        [ ! -f "$dir/etc/pip.conf" ] || sed -i 's|^cert *=.*|cert = /etc/scd2-host-ca.crt|' "$dir/etc/pip.conf"
    fi
    chroot "$dir" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM="${TERM:-dumb}" \
        PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "${net_env[@]}" "$@" || rc=$?
    return $rc
}

in_chroot() {
    local dir=$1; shift
    unshare --mount --propagation private -- "$0" mounted "$dir" "$@"
}

# debootstrap SUITE into DIR.new, then rename: a half-made chroot is never
# taken for a finished one.
bootstrap() {
    local suite=$1 dir=$2 mirror start
    mirror=$(debian_mirror | head -1)
    [ -n "$mirror" ] || skip "no Debian mirror in this machine's apt sources"
    command -v debootstrap >/dev/null ||
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null ||
        skip "debootstrap cannot be installed"
    rm -rf "$dir.new"
    mkdir -p "$cache"
    start=$SECONDS
    log "debootstrap --variant=minbase $suite from $mirror into $dir"
    if ! unshare --mount --propagation private -- \
        debootstrap --variant=minbase "$suite" "$dir.new" "$mirror" >"$cache/$suite.debootstrap.log" 2>&1; then
        tail -5 "$cache/$suite.debootstrap.log" >&2
        rm -rf "$dir.new"
        skip "debootstrap of $suite failed (log: $cache/$suite.debootstrap.log)"
    fi
    # unstable's Release file is valid for a week only; a mirror that is a
    # dated snapshot (or a machine whose clock runs ahead) would make every
    # apt-get update of this throwaway chroot fail on it.
    echo 'Acquire::Check-Valid-Until "false";' >"$dir.new/etc/apt/apt.conf.d/99scd2-snapshot"
    # No service starts inside the chroot (the tests start their own
    # clusters): the server packages' own clusters are made, not run.
    printf '#!/bin/sh\nexit 101\n' >"$dir.new/usr/sbin/policy-rc.d"
    chmod +x "$dir.new/usr/sbin/policy-rc.d"
    mv "$dir.new" "$dir"
    log "debootstrap took $((SECONDS - start)) s"
}

# Install the PACKAGEs the chroot does not have yet.
install_packages() {
    local dir=$1; shift
    local missing="" p start
    for p in "$@"; do
        grep -qx "$p" "$dir/.scd2-packages" 2>/dev/null || missing="$missing $p"
    done
    [ -n "$missing" ] || return 0
    start=$SECONDS
    log "installing in the chroot:$missing"
    # One retry after `dpkg --configure -a`: a postinst of unstable's
    # packages fails now and then on the first pass.
    local apt="DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing"
    if ! in_chroot "$dir" sh -c "apt-get update -qq && { $apt || { dpkg --configure -a; $apt; }; } && apt-get clean" \
        >"$cache/$(basename "$dir").apt.log" 2>&1; then
        tail -20 "$cache/$(basename "$dir").apt.log" >&2
        skip "apt-get install$missing failed in the chroot (log: $cache/$(basename "$dir").apt.log)"
    fi
    printf '%s\n' $missing >>"$dir/.scd2-packages"
    log "installing took $((SECONDS - start)) s"
}

ensure() {
    local suite=$1; shift
    local dir=$cache/$suite
    [ "$(id -u)" = 0 ] || skip "a chroot needs root"
    mkdir -p "$cache"
    # One run at a time makes or changes a chroot.
    exec 9>"$cache/$suite.lock"
    flock 9
    [ -d "$dir" ] || bootstrap "$suite" "$dir"
    install_packages "$dir" "$@"
    exec 9>&-
    echo "$dir"
}

cmd=${1:?usage: chroot.sh ensure SUITE [PACKAGE...] | run SUITE COMMAND...}
shift
case "$cmd" in
    ensure) ensure "$@" ;;
    run)
        suite=${1:?suite}; shift
        [ -d "$cache/$suite" ] || skip "no chroot of $suite (scripts/chroot.sh ensure $suite)"
        in_chroot "$cache/$suite" "$@" ;;
    mounted) mounted "$@" ;;
    *) echo "chroot.sh: unknown command $cmd" >&2; exit 2 ;;
esac
