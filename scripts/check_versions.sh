#!/usr/bin/env bash
# scripts/check_versions.sh [ROOT] -- the release's version, said in six
# places, must agree (exit status 1 and the disagreeing files when not):
#   scd2.control       default_version = 'X.Y'   (the extension version)
#   sql/scd2--X.Y.sql  the full install script of that version exists
#   META.json          "version" and provides.scd2.version X.Y.Z, with
#                      X.Y that of the control file; provides.scd2.file
#                      the install script (PGXN)
#   CHANGELOG.md       its first "## " heading is X.Y (or "X.Y (unreleased)")
#   dbt/dbt_project.yml  version 'X.Y.Z' (the dbt package)
#   debian/changelog   the first entry is X.Y.Z-N (the Debian packages)
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root"

control=$(sed -nE "s/^default_version *= *'([^']*)'.*/\1/p" scd2.control)
read -r meta meta_provides meta_file < <(python3 -c '
import json, sys
m = json.load(open("META.json"))
p = m["provides"]["scd2"]
print(m["version"], p["version"], p["file"])')
changelog=$(sed -nE 's/^## ([0-9][^ ]*)( \(unreleased\))?$/\1/p' CHANGELOG.md | head -1)
dbt=$(sed -nE "s/^version: *['\"]?([^'\"]*)['\"]? *(#.*)?$/\1/p" dbt/dbt_project.yml)
debian=$(sed -nE '1s/^scd2 \(([^)-]*)-[^)]*\).*/\1/p' debian/changelog)

echo "scd2.control default_version: $control"
echo "META.json version: $meta (provides: $meta_provides, $meta_file)"
echo "CHANGELOG.md first heading: $changelog"
echo "dbt/dbt_project.yml version: $dbt"
echo "debian/changelog version: $debian"

bad=""
[ -n "$control" ] || bad="$bad scd2.control(no default_version)"
[ -f "sql/scd2--$control.sql" ] || bad="$bad sql/scd2--$control.sql(missing)"
[ "${meta%.*}" = "$control" ] || bad="$bad META.json(version $meta)"
[ "$meta_provides" = "$meta" ] || bad="$bad META.json(provides.scd2.version $meta_provides)"
[ "$meta_file" = "sql/scd2--$control.sql" ] || bad="$bad META.json(provides.scd2.file $meta_file)"
[ "$changelog" = "$control" ] || bad="$bad CHANGELOG.md(## $changelog)"
[ "$dbt" = "$meta" ] || bad="$bad dbt/dbt_project.yml(version $dbt)"
[ "$debian" = "$meta" ] || bad="$bad debian/changelog($debian)"
if [ -n "$bad" ]; then
    echo "versions disagree with scd2.control's $control / META.json's $meta:$bad" >&2
    exit 1
fi
echo "versions agree: $meta"
