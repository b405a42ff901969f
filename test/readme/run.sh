#!/usr/bin/env bash
# The README runs as written: every ```sql block of README.md is run, in
# order, by psql (ON_ERROR_STOP) in one new database (scd2_readme), each
# block one check, which fails when psql fails or when an output the block
# shows in its comments is not what psql printed.  docs/FACTS.md and
# docs/CDC.md run the same way, each in a database of its own
# (scd2_readme_facts, scd2_readme_cdc) where scd2 is created first.
#
# An output shown in a block is a run of comment lines directly after a
# line that ends a statement (`;`): each line is `-- ` followed by what
# psql prints (aligned, trailing blanks ignored; a line ending in `...`
# matches any line that starts with what comes before the dots), and the
# run must appear as consecutive lines of psql's output or of its messages
# (NOTICE lines).  Prose comments go before a statement, never right after
# one.
#
# Also checks that every table in README.md and docs/*.md is whole (no
# blank line cuts it in two) and has no duplicated row.
#
# Needs a running server (PGHOST, PGPORT, PGUSER: a superuser) with scd2
# installed, as scripts/test_suites.sh starts it.
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
SUITE=readme
# shellcheck source=../integration/lib.sh
source "$root/test/integration/lib.sh"
DBS="scd2_readme scd2_readme_facts scd2_readme_cdc"
work=$(mktemp -d)
trap 'rm -rf "$work"; for d in $DBS; do psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $d" >/dev/null 2>&1; done' EXIT

# run_doc DOC DB [SETUP]: split DOC's sql blocks into $work/block.N.sql (N
# from 1), with their first line numbers in $work/lines, and the outputs
# each shows into $work/block.N.expected (runs separated by a line "\f");
# run them in a new database DB (after the statement SETUP).
run_doc() {
local doc=$1 DB=$2 setup=${3:-}
rm -f "$work"/block.* "$work"/lines "$work"/count "$work"/out.* "$work"/err.* "$work"/all.*
awk -v dir="$work" '
    /^```sql$/ { n++; f = dir "/block." n ".sql"; e = dir "/block." n ".expected";
                 printf "" > f; printf "" > e; print NR + 1 > (dir "/lines");
                 inb = 1; prev_stmt = 0; inrun = 0; next }
    inb && /^```$/ { inb = 0; close(f); close(e); next }
    inb {
        print > f
        if (/^-- ?/ && (prev_stmt || inrun)) {
            if (!inrun) print "\f" > e
            line = $0; sub(/^-- ?/, "", line); print line > e
            inrun = 1; prev_stmt = 0; next
        }
        inrun = 0
        prev_stmt = ($0 ~ /;[ \t]*$/)
    }
    END { print n + 0 > (dir "/count") }' "$root/$doc"
blocks=$(cat "$work/count")
[ "$blocks" -gt 0 ] || { not_ok "$doc has sql blocks"; return; }

q postgres "DROP DATABASE IF EXISTS $DB" >/dev/null 2>&1
q postgres "CREATE DATABASE $DB" >/dev/null || { not_ok "create database $DB"; return; }
if [ -n "$setup" ]; then
    q $DB "$setup" >/dev/null || { not_ok "$doc: $setup"; return; }
fi
for n in $(seq 1 "$blocks"); do
    line=$(sed -n "${n}p" "$work/lines")
    what="$doc's sql block $n (line $line)"
    if ! psql -X -q -v ON_ERROR_STOP=1 -d $DB -f "$work/block.$n.sql" >"$work/out.$n" 2>"$work/err.$n"; then
        not_ok "$what runs" "$(cat "$work/err.$n")"
        continue
    fi
    # psql -f names the file and line before a message
    { cat "$work/out.$n"; sed -E 's/^psql:[^:]*:[0-9]+: //' "$work/err.$n"; } >"$work/all.$n"
    if missing=$(found "$work/block.$n.expected" "$work/all.$n"); then
        ok "$what runs and prints what it shows ($(grep -c $'^\f$' "$work/block.$n.expected") outputs)"
    else
        not_ok "$what prints what it shows" "shown, not printed:
$missing
printed:
$(cat "$work/all.$n")"
    fi
done
}

# found EXPECTED ACTUAL: every run of EXPECTED is consecutive lines of ACTUAL;
# prints the first run that is not.
found() {
    awk '
        function rtrim(s) { sub(/[ \t]+$/, "", s); return s }
        function match_line(want, got) {
            if (want ~ /\.\.\.$/) return index(got, substr(want, 1, length(want) - 3)) == 1
            return want == got
        }
        function check(   i, j, ok) {
            if (nrun == 0) return
            for (i = 1; i + nrun - 1 <= na; i++) {
                ok = 1
                for (j = 1; j <= nrun && ok; j++) ok = match_line(run[j], act[i + j - 1])
                if (ok) { nrun = 0; return }
            }
            for (j = 1; j <= nrun; j++) print run[j]
            bad = 1; nrun = 0
        }
        FNR == NR { act[++na] = rtrim($0); next }
        /^\f$/ { check(); next }
        { run[++nrun] = rtrim($0) }
        END { check(); exit bad }' "$2" "$1"
}

run_doc README.md scd2_readme
run_doc docs/FACTS.md scd2_readme_facts "CREATE EXTENSION scd2"
run_doc docs/CDC.md scd2_readme_cdc "CREATE EXTENSION scd2"

# Tables: a line starting with "|" after a blank line starts a table and
# must be a header (the next line is "| --- |..."); no row twice in one table.
for f in "$root/README.md" "$root"/docs/*.md; do
    name=${f#"$root"/}
    problems=$(awk '
        /^```/ { code = !code; next }
        code { next }
        /^\|/ {
            if (!intable) {
                intable = 1; delete seen; start = NR
                if ((getline nxt) > 0) {
                    if (nxt !~ /^\| *:?-+/) print "line " NR ": a table row after a blank line (a table cut in two, or a header without its separator)"
                    # the separator line is not a row
                } 
                next
            }
            if ($0 in seen) print "line " NR ": duplicates line " seen[$0] " of the table at line " start
            seen[$0] = NR
            next
        }
        { intable = 0 }' "$f")
    if [ -z "$problems" ]; then ok "$name: tables whole, no duplicated rows"; else not_ok "$name: tables whole, no duplicated rows" "$problems"; fi
done

finish
