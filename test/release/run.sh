#!/usr/bin/env bash
# leg: release
# The release: scripts/test.sh runs it as a leg of its own (`release`), not
# once per server version.
#   - the versions agree (scripts/check_versions.sh), and a disagreement is
#     caught;
#   - `make dist` makes dist/scd2-VERSION.zip, a PGXN archive with the
#     control file, the install scripts, the sources, META.json and the
#     README and no build output, and the extension builds from it;
#   - scripts/package.sh builds postgresql-15-scd2, -17- and -18- into dist/,
#     and each installs with `apt-get install ./dist/...deb` into a clean
#     cluster of its version, passes CREATE EXTENSION scd2 and a smoke load,
#     and is removed (test/release/package_smoke.sh: 15 on this machine, 17
#     and 18 in the chroot of the Debian release they were built in);
#   - each package depends on postgresql-NN with no version of the build
#     machine: at most the floor postgresql-common names for modules built
#     against its headers (test/release/package_depends.sh, which must also
#     catch a planted minor-release dependency).
# Prints `release: N passed, M failed, K skipped`.  Needs root for the
# packages (SKIPPED otherwise).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source=../../scripts/lib.sh
source "$root/scripts/lib.sh"
set +e
passed=0 failed=0 skipped=0
pass() { echo "ok - $1"; passed=$((passed + 1)); }
fail() { echo "not ok - $1"; failed=$((failed + 1)); }
skip() { echo "SKIPPED: $1"; skipped=$((skipped + 1)); }
check() { if [ "$2" = "$3" ]; then pass "$1"; else fail "$1"; echo "#   expected: $2"; echo "#   got:      $3"; fi; }
# Count a script's TAP lines.
tap() {
    local line
    while IFS= read -r line; do
        echo "$line"
        case $line in
            "ok - "*) passed=$((passed + 1)) ;;
            "not ok - "*) failed=$((failed + 1)) ;;
        esac
    done
}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# ------------------------------------------------------------ the versions
[ "$(id -u)" != 0 ] || install_missing python3
if out=$("$root/scripts/check_versions.sh" 2>&1); then pass "versions agree"; else fail "versions agree"; fi
echo "$out" | sed 's/^/# /'
version=$(echo "$out" | sed -n 's/^versions agree: //p')
# A copy whose dbt package says another version, and one whose META.json does.
for f in scd2.control META.json CHANGELOG.md dbt/dbt_project.yml debian/changelog; do
    mkdir -p "$work/v/$(dirname "$f")"; cp "$root/$f" "$work/v/$f"
done
mkdir -p "$work/v/sql" && cp "$root"/sql/scd2--*.sql "$work/v/sql/"
cp -r "$work/v" "$work/meta"
sed -i -E "s/^version: .*/version: '9.9.9'/" "$work/v/dbt/dbt_project.yml"
out=$("$root/scripts/check_versions.sh" "$work/v" 2>&1)
check "a dbt package version that disagrees fails the check" "1 dbt/dbt_project.yml" \
    "$? $(echo "$out" | grep -o 'dbt/dbt_project.yml(' | tr -d '(')"
sed -i -E '0,/"version": "[^"]*"/s//"version": "0.1.0"/' "$work/meta/META.json"
out=$("$root/scripts/check_versions.sh" "$work/meta" 2>&1)
check "a META.json version that disagrees fails the check" "1 META.json" \
    "$? $(echo "$out" | grep -o 'META.json(version' | sed 's/(version//')"

# ------------------------------------------------------------- make dist
pg_select 15 >/dev/null
zip=$root/dist/scd2-$version.zip
if ! git -C "$root" rev-parse --git-dir >/dev/null 2>&1; then
    skip "make dist: $root is not a git checkout"
else
    install_missing unzip
    rm -f "$zip"
    if make -s -C "$root" PG_CONFIG="$PG_CONFIG" dist >"$work/dist.log" 2>&1 && [ -f "$zip" ]; then
        pass "make dist makes dist/scd2-$version.zip ($(du -k "$zip" | cut -f1) kB)"
    else
        fail "make dist"; sed 's/^/# /' "$work/dist.log"
    fi
    unzip -Z1 "$zip" >"$work/list" 2>/dev/null
    want="scd2.control META.json README.md LICENSE Makefile $(git -C "$root" ls-files 'sql/scd2--*.sql' 'src/*.c' 'src/*.h' | tr '\n' ' ')"
    missing=""
    for f in $want; do grep -qx "scd2-$version/$f" "$work/list" || missing="$missing $f"; done
    check "the archive holds the control file, META.json, README.md, every install script and source" "" "$missing"
    check "the archive holds no build output" "" \
        "$(grep -E '\.(o|so|bc|deb|zip)$|/(build|dist|results)/' "$work/list" | head -5 | tr '\n' ' ')"
    check "everything in the archive is under scd2-$version/" "" "$(grep -v "^scd2-$version/" "$work/list" | head -3)"
    (cd "$work" && unzip -q "$zip")
    if make -C "$work/scd2-$version" -s PG_CONFIG="$PG_CONFIG" COPT=-Werror >"$work/build.log" 2>&1 &&
       [ -f "$work/scd2-$version/scd2.so" ]; then
        pass "the extension builds from the archive (PostgreSQL $PG_MAJOR)"
    else
        fail "the extension builds from the archive"; tail -20 "$work/build.log" | sed 's/^/# /'
    fi
fi

# ------------------------------------------------------------ the packages
# The dependency check, on planted packages: pg_buildext's forms pass, a
# dependency on the build machine's minor release and a missing floor fail.
plant() {   # plant NAME DEPENDS: a package whose Depends is DEPENDS
    mkdir -p "$work/plant/$1/DEBIAN"
    printf 'Package: postgresql-15-scd2\nVersion: 0.0-1\nArchitecture: all\nMaintainer: test <test@localhost>\nDepends: %s\nDescription: planted\n' \
        "$2" >"$work/plant/$1/DEBIAN/control"
    dpkg-deb --root-owner-group -b "$work/plant/$1" "$work/plant/$1.deb" >/dev/null 2>&1
}
echo "15 15.20" >"$work/minor_versions"
plant floor "postgresql-15 (>> 15.20), libc6 (>= 2.34)"
plant built "postgresql-15 (>= 15.20-0+deb12u1), libc6 (>= 2.34)"
plant bare "postgresql-15, libc6 (>= 2.34)"
verdict() { "$here/package_depends.sh" "$@" | head -1 | sed -E 's/^(ok|not ok) - .*/\1/'; }
check "the dependency check passes pg_buildext's forms and catches a minor release of the build machine or a missing floor" \
    "ok/not ok/not ok/ok" \
    "$(verdict 15 "$work/plant/floor.deb" "$work/minor_versions")/$(verdict 15 "$work/plant/built.deb" "$work/minor_versions")/$(verdict 15 "$work/plant/bare.deb" "$work/minor_versions")/$(verdict 15 "$work/plant/bare.deb" -)"

arch=$(dpkg --print-architecture)
deb_version=$(sed -n '1s/^scd2 (\([^)]*\)).*/\1/p' "$root/debian/changelog")
if [ "$(id -u)" != 0 ]; then
    skip "the Debian packages: building and installing them needs root"
else
    for major in 15 17 18; do
        deb=dist/postgresql-$major-scd2_${deb_version}_$arch.deb
        rm -f "$root/$deb"
        rc=0
        "$root/scripts/package.sh" "$major" >"$work/package-$major.log" 2>&1 || rc=$?
        if [ "$rc" = 3 ]; then
            skip "postgresql-$major-scd2: its build environment cannot be had here"
            tail -3 "$work/package-$major.log" | sed 's/^/# /'
            continue
        elif [ "$rc" != 0 ] || [ ! -f "$root/$deb" ]; then
            fail "scripts/package.sh $major builds $deb"
            tail -30 "$work/package-$major.log" | sed 's/^/# /'
            continue
        fi
        pass "scripts/package.sh $major builds $deb ($(du -k "$root/$deb" | cut -f1) kB)"
        # Where it was built: here, or the chroot of its Debian release.
        if [ -x "/usr/lib/postgresql/$major/bin/pg_config" ] || ! suite=$(chroot_suite "$major"); then
            tap < <("$here/package_depends.sh" "$major" "$root/$deb" /etc/postgresql-common/minor_versions)
            tap < <("$here/package_smoke.sh" "$major" "$root/$deb")
        else
            tap < <("$root/scripts/chroot.sh" run "$suite" /scd2/test/release/package_depends.sh \
                "$major" "/scd2/$deb" /etc/postgresql-common/minor_versions)
            tap < <("$root/scripts/chroot.sh" run "$suite" env SCD2_PORT="$SCD2_PORT" \
                /scd2/test/release/package_smoke.sh "$major" "/scd2/$deb")
        fi
    done
fi

echo "release: $passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ]
