#!/usr/bin/env bash
# The docs hold, checked two ways, each with a self-test that plants a fault
# in a scratch copy and checks it is caught (a checker that cannot fail is no
# check):
#
#   links      every relative link of README.md and docs/*.md leads to a file
#              that exists, and every #anchor to a heading of its file, named
#              as GitHub names it: the heading's text (a link in it counts as
#              its text) lowercased, every character but letters, digits,
#              spaces, `-` and `_` dropped, each space a `-`, and a repeated
#              heading's anchor followed by -1, -2, ...  Links inside code
#              (fenced blocks, `spans`) are not links.
#   reference  docs/REFERENCE.md has an entry -- a heading naming it as
#              scd2.NAME -- for every public function and procedure (pg_proc
#              in schema scd2, a name not starting with `_`), every table and
#              view (pg_class in scd2) and every setting (pg_settings, scd2.*,
#              after LOAD 'scd2') of a fresh CREATE EXTENSION scd2.
#   troubleshooting  docs/OPERATIONS.md's troubleshooting table has one row
#              per error message (the first `code` of a row's first cell).
#
# Needs a running server (PGHOST, PGPORT, PGUSER: a superuser) with scd2
# installed, as scripts/test_suites.sh starts it.  Prints
#   docs: N passed, M failed
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
SUITE=docs
# shellcheck source=../integration/lib.sh
source "$root/test/integration/lib.sh"
DB=scd2_docs
work=$(mktemp -d)
trap 'rm -rf "$work"; psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $DB" >/dev/null 2>&1' EXIT

# anchors FILE: the anchor of every heading of FILE, one a line.
anchors() {
    awk '
        /^[ \t]*(```|~~~)/ { code = !code; next }
        code { next }
        /^#+[ \t]/ {
            h = $0
            sub(/^#+[ \t]+/, "", h); sub(/[ \t]+#+[ \t]*$/, "", h)
            # a link in a heading counts as its text
            while (match(h, /\[[^]]*\]\([^)]*\)/)) {
                t = substr(h, RSTART + 1, RLENGTH - 1); sub(/\]\(.*$/, "", t)
                h = substr(h, 1, RSTART - 1) t substr(h, RSTART + RLENGTH)
            }
            h = tolower(h)
            # letters outside ASCII do not occur in these headings; their
            # punctuation (an em dash) is dropped as GitHub drops it
            gsub(/[^a-z0-9 _-]/, "", h)
            gsub(/ /, "-", h)
            if (h in seen) { print h "-" seen[h]; seen[h]++ } else { print h; seen[h] = 1 }
        }' "$1"
}

# links FILE: "LINE<TAB>TARGET" for every link of FILE that is not a URL.
links() {
    awk '
        /^[ \t]*(```|~~~)/ { code = !code; next }
        code { next }
        {
            line = $0
            gsub(/`[^`]*`/, "", line)
            if (match(line, /^[ \t]*\[[^]]+\]:[ \t]+[^ \t]+/)) {   # [label]: target
                t = substr(line, RSTART, RLENGTH); sub(/^[^]]*\]:[ \t]+/, "", t)
                if (t !~ /^[a-zA-Z][a-zA-Z0-9+.-]*:/) print FNR "\t" t
                next
            }
            while (match(line, /\]\([^) \t]+/)) {
                t = substr(line, RSTART + 2, RLENGTH - 2)
                line = substr(line, RSTART + RLENGTH)
                if (t ~ /^[a-zA-Z][a-zA-Z0-9+.-]*:/) continue      # https:, mailto:
                print FNR "\t" t
            }
        }' "$1"
}

# check_links ROOT FILE...: prints "FILE:LINE: TARGET: what is wrong" for
# every link of the FILEs (relative to ROOT) that does not resolve.
check_links() {
    local top=$1 f line target path anchor dest; shift
    for f in "$@"; do
        while IFS=$'\t' read -r line target; do
            path=${target%%#*}
            anchor=
            [ "$path" = "$target" ] || anchor=${target#*#}
            if [ -z "$path" ]; then dest=$top/$f; else dest=$(dirname "$top/$f")/$path; fi
            if [ ! -e "$dest" ]; then
                echo "$f:$line: $target: no such file"
            elif [ -n "$anchor" ]; then
                if [ -d "$dest" ] || ! anchors "$dest" | grep -qxF -- "$anchor"; then
                    echo "$f:$line: $target: no heading with that anchor"
                fi
            fi
        done < <(links "$top/$f")
    done
}

# missing_reference REFERENCE NAMES: the names of the file NAMES (one a
# line, scd2.NAME) that no heading of REFERENCE names.
missing_reference() {
    awk '
        FNR == NR { if (/^#+[ \t]/) heads = heads "\n" $0; next }
        {
            name = $0; s = heads; found = 0
            while (!found && (i = index(s, name)) > 0) {
                before = substr(s, i - 1, 1); after = substr(s, i + length(name), 1)
                found = before !~ /[a-zA-Z0-9_.]/ && after !~ /[a-zA-Z0-9_]/
                s = substr(s, i + length(name))
            }
            if (!found) print name
        }' "$1" "$2"
}

# repeated_errors FILE: the messages of FILE's troubleshooting table (the
# first `code` span of a row's first cell) that have more than one row.
repeated_errors() {
    awk '
        /^## / { t = ($0 ~ /^## Troubleshooting/); next }
        t && /^\| `/ {
            m = $0; sub(/^\| `/, "", m); sub(/`.*$/, "", m)
            if (m in seen) print m; seen[m] = 1
        }' "$1" | sort -u
}

docs=(README.md)
for f in "$root"/docs/*.md; do docs+=("docs/$(basename "$f")"); done

# ---------------------------------------------------------------- links
# The rules, on planted files: what resolves, and each way a link breaks.
mkdir -p "$work/rules/docs"
cat >"$work/rules/README.md" <<'MD'
# scd2 — a title
## Install
## Install
## `scd2.apply` (a procedure), and [a link](docs/b.md)
[ok](docs/b.md) [ok](docs/b.md#the-setting-scd2allow_large_close) [ok](#scd2--a-title)
[ok](#install-1) [ok](#scd2apply-a-procedure-and-a-link) [ok](https://example.com/x.md)
`[code](nowhere.md)`
[bad](docs/c.md) [bad](#install-2) [bad](docs/b.md#nope) [bad](#Install)
[label]: docs/nope.md
```
[code](nowhere.md)
```
MD
printf '# b\n## The setting `scd2.allow_large_close`\n' >"$work/rules/docs/b.md"
got=$(check_links "$work/rules" README.md docs/b.md)
expect "the link checker resolves files and GitHub's anchors, and catches each broken kind" \
"README.md:8: docs/c.md: no such file
README.md:8: #install-2: no heading with that anchor
README.md:8: docs/b.md#nope: no heading with that anchor
README.md:8: #Install: no heading with that anchor
README.md:9: docs/nope.md: no such file" "$got"

real=$(check_links "$root" "${docs[@]}")
n=0; for f in "${docs[@]}"; do n=$((n + $(links "$root/$f" | wc -l))); done
if [ -z "$real" ]; then ok "every relative link and anchor of README.md and docs/*.md resolves ($n links)"
else not_ok "every relative link and anchor of README.md and docs/*.md resolves ($n links)" "$real"; fi

# A scratch copy of the docs with one link broken: that link is caught, and
# nothing else changes.
mkdir -p "$work/copy"
for f in "$root"/* "$root"/.[!.]*; do [ -e "$f" ] && ln -s "$f" "$work/copy/$(basename "$f")"; done
rm "$work/copy/README.md" "$work/copy/docs"
cp "$root/README.md" "$work/copy/README.md"
cp -r "$root/docs" "$work/copy/docs"
echo 'Planted: [a link](SECURITY.md#no-such-section).' >>"$work/copy/docs/OPERATIONS.md"
planted="docs/OPERATIONS.md:$(wc -l <"$work/copy/docs/OPERATIONS.md"): SECURITY.md#no-such-section: no heading with that anchor"
expect "a link broken in a scratch copy of the docs is caught" \
    "$(printf '%s\n%s\n' "$real" "$planted" | sed '/^$/d' | sort)" \
    "$(check_links "$work/copy" "${docs[@]}" | sort)"

# ------------------------------------------------------------ reference
q postgres "DROP DATABASE IF EXISTS $DB" >/dev/null 2>&1
q postgres "CREATE DATABASE $DB" >/dev/null && q $DB "CREATE EXTENSION scd2" >/dev/null ||
    { not_ok "a fresh CREATE EXTENSION scd2"; finish; }
# Settings are defined when the library is loaded: LOAD in the same session.
psql -X -q -At -v ON_ERROR_STOP=1 -d $DB -c "LOAD 'scd2'" -c "
    SELECT 'scd2.' || proname FROM pg_proc
     WHERE pronamespace = 'scd2'::regnamespace AND proname !~ '^_'
    UNION
    SELECT 'scd2.' || relname FROM pg_class
     WHERE relnamespace = 'scd2'::regnamespace AND relkind IN ('r', 'p', 'v', 'm', 'f')
    UNION
    SELECT name FROM pg_settings WHERE name LIKE 'scd2.%'
    ORDER BY 1" >"$work/names" 2>"$work/names.err"
kinds=$(q $DB "LOAD 'scd2'; SELECT (SELECT count(*) FROM pg_proc WHERE pronamespace = 'scd2'::regnamespace AND proname !~ '^_')
    || ' ' || (SELECT count(*) FROM pg_class WHERE relnamespace = 'scd2'::regnamespace AND relkind IN ('r', 'p', 'v', 'm', 'f'))
    || ' ' || (SELECT count(*) FROM pg_settings WHERE name LIKE 'scd2.%')" 2>&1)
read -r nproc nrel nset <<<"$kinds"
# Each kind present: an empty catalog query would pass anything.
if [ "${nproc:-0}" -gt 0 ] && [ "${nrel:-0}" -gt 0 ] && [ "${nset:-0}" -gt 0 ]; then
    ok "the catalogs list scd2's functions and procedures ($nproc), tables and views ($nrel) and settings ($nset)"
else
    not_ok "the catalogs list scd2's functions, tables and settings" "$kinds $(cat "$work/names.err")"
fi

missing=$(missing_reference "$root/docs/REFERENCE.md" "$work/names")
if [ -z "$missing" ]; then
    ok "docs/REFERENCE.md has an entry for each of the $(wc -l <"$work/names") public names of a fresh CREATE EXTENSION scd2"
else
    not_ok "docs/REFERENCE.md has an entry for each public name of a fresh CREATE EXTENSION scd2" "no heading names:
$missing"
fi

# A scratch REFERENCE.md without one entry's heading, and a name it never
# had, are both caught, and nothing else changes.
grep -v '^#.*`scd2\.audit_log`' "$root/docs/REFERENCE.md" >"$work/REFERENCE.md"
{ cat "$work/names"; echo scd2.no_such_function; } >"$work/names.planted"
expect "a name without a heading in a scratch copy of REFERENCE.md is caught" \
    "$(printf '%s\nscd2.audit_log\nscd2.no_such_function\n' "$missing" | sed '/^$/d' | sort)" \
    "$(missing_reference "$work/REFERENCE.md" "$work/names.planted" | sort)"
expect "a name only inside a longer one is no entry (scd2.apply in scd2.apply_all)" "scd2.apply" \
    "$(missing_reference <(echo '### `scd2.apply_all`') <(echo scd2.apply))"

# ------------------------------------------------------ troubleshooting
got=$(repeated_errors "$root/docs/OPERATIONS.md")
n=$(awk '/^## /{t=($0 ~ /^## Troubleshooting/);next} t && /^\| `/' "$root/docs/OPERATIONS.md" | wc -l)
if [ "$n" -gt 0 ] && [ -z "$got" ]; then ok "docs/OPERATIONS.md's troubleshooting table: one row per error ($n rows)"
else not_ok "docs/OPERATIONS.md's troubleshooting table: one row per error ($n rows)" "more than one row: $got"; fi
# A row repeated in a scratch copy is caught.
awk '{ print } /^## Troubleshooting/ { t = 1 } t && /^\| `dimension d is being loaded/ { print; t = 0 }' \
    "$root/docs/OPERATIONS.md" >"$work/OPERATIONS.md"
expect "a second row of one error in a scratch copy of OPERATIONS.md is caught" \
    "dimension d is being loaded by another session" "$(repeated_errors "$work/OPERATIONS.md")"

finish
