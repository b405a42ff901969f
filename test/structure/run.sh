#!/usr/bin/env bash
# scd2 structure test: src/'s folders keep their levels, and its files form
# no circle.
#
# structure.awk reads src/*.[ch] and src/*/*.[ch] (POSIX awk, nothing to
# install, no server needed) and reports
#   levels              a file that calls a function of, or includes a
#                       header of, a folder above its own or beside it
#                       (LEVELS below, as docs/ARCHITECTURE.md draws them:
#                       each folder over the ones after it; "a|b" share a
#                       level and may not use each other); src/*.c is above
#                       every folder, src/*.h below every folder; a folder
#                       on no level is a finding too
#   include-cycles      a cycle of #include "..." between src/ files
#   call-cycles         a cycle of calls between src/ files: a function
#                       defined in a.c and referenced from b.c makes the
#                       edge b.c -> a.c; a file calling itself is no edge
#   single-use-exports  a function declared extern in a header but used in
#                       one file only (it should be static)
#   duplicate-bodies    one function body in two files, or one exported
#                       name defined twice
# Each is one test, failing with its findings printed (a cycle as the
# files it passes through and the function of each edge).  Two more tests
# plant what each check must find -- a circle in scratch files, and a call
# and an include from a lower folder up -- and check that the checker sees
# them, so the test cannot pass by finding nothing.
#
# Prints `structure: N passed, M failed`; exits non-zero on any failure.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
passed=0 failed=0

check() {					# check NAME: the findings of that check
    local name=$1 n
    n=$(sed -n "s/^check $name: \\([0-9]*\\) findings\$/\\1/p" "$work/report")
    if [ -z "$n" ]; then
        echo "FAILED $name: the checker printed no result"; failed=$((failed + 1))
    elif [ "$n" = 0 ]; then
        echo "ok     $name"; passed=$((passed + 1))
    else
        echo "FAILED $name: $n findings"; failed=$((failed + 1))
        grep -E "^$2 " "$work/report" | sort | sed 's/^/    /'
    fi
}

# The folders of src/, highest first (docs/ARCHITECTURE.md, "Levels").
LEVELS="load history asof catalog common|citus"

awk -v levels="$LEVELS" -f "$here/structure.awk" "$root"/src/*.c "$root"/src/*/*.c "$root"/src/*.h \
    "$root"/src/*/*.h >"$work/report" 2>&1 ||
    { cat "$work/report"; echo "structure: 0 passed, 1 failed"; exit 1; }
check levels level
check include-cycles include-cycle
check call-cycles call-cycle
check single-use-exports single-use
check duplicates duplicate

# The checker itself: a.c calls b.c, which calls back; a.h and b.h include
# each other; c.c copies a body of a.c; b.h exports b_two, which only b.c
# uses.
mkdir -p "$work/planted"
cat >"$work/planted/a.h" <<'EOF'
#include "b.h"
extern int a_one(int x);
EOF
cat >"$work/planted/b.h" <<'EOF'
#include "a.h"
extern int b_one(int x);
extern int b_two(int x);
EOF
cat >"$work/planted/a.c" <<'EOF'
/* b_one( in a comment is no call */
int
a_one(int x)
{
	return b_one(x) + 1 + x * 2 + x * 3 + x * 4 + x * 5 + x * 6 + x * 7 + x * 8 + x * 9 + x * 10 + x * 11 + x * 12 + x * 13 + x * 14 + x * 15 + x * 16;
}
EOF
cat >"$work/planted/b.c" <<'EOF'
int
b_two(int x)
{
	return x;
}

int
b_one(int x)
{
	return x > 0 ? a_one(b_two(x) - 1) : 0;
}
EOF
cat >"$work/planted/c.c" <<'EOF'
static int
c_copy(int x)
{
	return b_one(x) + 1 + x * 2 + x * 3 + x * 4 + x * 5 + x * 6 + x * 7 + x * 8 + x * 9 + x * 10 + x * 11 + x * 12 + x * 13 + x * 14 + x * 15 + x * 16;
}
EOF
awk -f "$here/structure.awk" "$work"/planted/*.c "$work"/planted/*.h >"$work/planted.out" 2>&1
want="include-cycle  a.h -> b.h -> a.h
call-cycle  a.c -> b.c (b_one) -> a.c (a_one)
single-use  b_two (b.h): used only in b.c
duplicate  a_one (a.c) and c_copy (c.c): the same body"
miss=""
while IFS= read -r line; do
    grep -Fqx "$line" "$work/planted.out" || miss="$miss
    missing: $line"
done <<<"$want"
grep -q '^single-use  a_one' "$work/planted.out" && miss="$miss
    unexpected: a single-use report of a_one, which two files use"
if [ -z "$miss" ]; then
    echo "ok     planted-circle"; passed=$((passed + 1))
else
    echo "FAILED planted-circle: the checker missed what was planted$miss"
    sed 's/^/    got: /' "$work/planted.out"
    failed=$((failed + 1))
fi

# The levels: a file of common/ calls a function of load/ and includes its
# header, a file of citus/ calls one of common/ (beside it), and a folder
# is on no level; load/ calling down into common/ is no finding.
mkdir -p "$work/levels/src/load" "$work/levels/src/common" "$work/levels/src/citus" "$work/levels/src/attic"
cat >"$work/levels/src/load/steps.h" <<'EOF'
extern int load_step(int x);
EOF
cat >"$work/levels/src/load/driver.c" <<'EOF'
int
load_step(int x)
{
	return common_helper(x) + 1;
}
EOF
cat >"$work/levels/src/common/helper.c" <<'EOF'
#include "load/steps.h"
int
common_helper(int x)
{
	return x > 100 ? load_step(x - 100) : x;
}
EOF
cat >"$work/levels/src/citus/shards.c" <<'EOF'
int
citus_shard(int x)
{
	return common_helper(x) * 2;
}
EOF
cat >"$work/levels/src/attic/old.c" <<'EOF'
int
attic_old(int x)
{
	return x;
}
EOF
awk -v levels="$LEVELS" -f "$here/structure.awk" "$work"/levels/src/*/*.c "$work"/levels/src/*/*.h \
    >"$work/levels.out" 2>&1
want="level  common/helper.c calls load_step of load/driver.c, a folder above it
level  common/helper.c includes load/steps.h, a folder above it
level  citus/shards.c calls common_helper of common/helper.c, a folder beside it
level  folder attic/ is on no level
check levels: 4 findings"
miss=""
while IFS= read -r line; do
    grep -Fqx "$line" "$work/levels.out" || miss="$miss
    missing: $line"
done <<<"$want"
if [ -z "$miss" ]; then
    echo "ok     planted-upward-call"; passed=$((passed + 1))
else
    echo "FAILED planted-upward-call: the checker missed what was planted$miss"
    sed 's/^/    got: /' "$work/levels.out"
    failed=$((failed + 1))
fi

echo "structure: $passed passed, $failed failed"
[ "$failed" = 0 ]
