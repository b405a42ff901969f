#!/usr/bin/env bash
# test/release/package_depends.sh MAJOR DEB MINOR_VERSIONS -- prints one TAP
# line (`ok - ...` / `not ok - ...`): the package DEB depends on its server,
# postgresql-MAJOR, with no version taken from the machine it was built on.
#
# pg_buildext writes that dependency: `postgresql-MAJOR` alone, or, where
# postgresql-common names a floor for MAJOR in its minor_versions file
# (Debian 12's postgresql-common 248+deb12u2 and later:
# /etc/postgresql-common/minor_versions, "15 15.20"), `postgresql-MAJOR (>>
# FLOOR)`: a module built against those headers calls server functions that
# older minor releases lack (15.20's heap_datum_check), so it installs on
# every minor release from the floor on, whatever minor release the build
# machine runs.  MINOR_VERSIONS is that file on the system DEB was built on
# ("-" or a missing file: no floor).  Needs dpkg-deb.
set -uo pipefail
major=${1:?major}; deb=${2:?deb}; minor_versions=${3:?minor_versions file or -}
floor=""
if [ "$minor_versions" != - ] && [ -f "$minor_versions" ]; then
    floor=$(awk -v v="$major" '$1 == v { print $2; exit }' "$minor_versions")
fi
want="postgresql-$major${floor:+ (>> $floor)}"
got=$(dpkg-deb -f "$deb" Depends 2>&1 | tr ',' '\n' | sed 's/^ *//; s/ *$//' |
      grep -E "^postgresql-$major( |\$)" | tr '\n' ' ' | sed 's/ $//')
what="$major: depends on $want${floor:+ (the floor of postgresql-common)}, on no minor release of the build machine"
if [ "$got" = "$want" ]; then
    echo "ok - $what"
else
    echo "not ok - $what"
    echo "#   expected: $want"
    echo "#   got:      $got (Depends: $(dpkg-deb -f "$deb" Depends 2>&1))"
fi
