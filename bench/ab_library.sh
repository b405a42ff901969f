#!/usr/bin/env bash
# bench/ab_library.sh -- the same benchmark against two builds of the
# library, interleaved: before/after a change of the load path (issue 24
# measured the default in-order path with it).
#
#   LIB_A=/path/a/scd2.so LIB_B=/path/b/scd2.so bench/ab_library.sh
#
# Each round installs A, runs `bench/run.sh` for one timed round (its own
# warm-up first), installs B, does the same (the order alternates each
# round); a new backend loads the library file installed at that moment,
# so nothing restarts. The SQL objects stay those installed (both libraries
# must load with them; B, the newer, registers the data). Data: bench/run.sh's, generated once (GEN=0 after
# the first run; KEYS, BATCH, ... as for run.sh). Prints every time, the
# medians and the median of the per-round ratios B/A. The library that was
# installed before is put back at the end.
#   AB_ROUNDS=5   rounds
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
: "${LIB_A:?LIB_A: the first scd2.so}" "${LIB_B:?LIB_B: the second scd2.so}"
AB_ROUNDS=${AB_ROUNDS:-5}
PKGLIB=$(pg_config --pkglibdir)
SAVED=$(mktemp)
cp "$PKGLIB/scd2.so" "$SAVED"
# A library file is replaced by a rename, never overwritten in place: a
# backend that has the old file mapped would crash.
install_lib() { install -m 755 "$1" "$PKGLIB/scd2.so.ab_library" && mv "$PKGLIB/scd2.so.ab_library" "$PKGLIB/scd2.so"; }
trap 'install_lib "$SAVED"; rm -f "$SAVED"' EXIT
log() { printf '%s %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

one() {   # library -> seconds of bench/run.sh's one timed scd2 round
    install_lib "$1"
    APPROACHES=scd2 ROUNDS=1 VERIFY=0 GEN=${gen:-0} OUT=$(mktemp -d) "$HERE/run.sh" 2>/dev/null |
        awk '$1 == "scd2" { print $2 }'
}

# generates the data (and warms the cache) with B: register, which gen.sql
# calls, must match the installed SQL objects (the newer library's)
gen=1 one "$LIB_B" >/dev/null
a=(); b=(); ratios=()
for r in $(seq 1 "$AB_ROUNDS"); do
    if [ $((r % 2)) = 1 ]; then ta=$(one "$LIB_A"); tb=$(one "$LIB_B")
    else tb=$(one "$LIB_B"); ta=$(one "$LIB_A"); fi
    log "round $r: A ${ta}s B ${tb}s"
    a+=("$ta"); b+=("$tb"); ratios+=("$(awk -v x="$tb" -v y="$ta" 'BEGIN { printf "%.3f", x / y }')")
done
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
echo "ab_library: A $LIB_A: $(printf '%s ' "${a[@]}")s, median $(median "${a[@]}") s"
echo "ab_library: B $LIB_B: $(printf '%s ' "${b[@]}")s, median $(median "${b[@]}") s"
echo "ab_library: median of per-round ratios B/A $(median "${ratios[@]}")"
