#!/usr/bin/env bash
# bench/plot.sh CSV PNG -- plots the scaling CSV written by scaling.sh:
# left, median seconds against batch size (1 version per key, log-log);
# right, median seconds at 1 vs 10 versions per key (the depth batch).
set -euo pipefail
CSV=$1
PNG=$2
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"
if ! have_gnuplot; then
    echo "gnuplot is missing (apt-get install gnuplot-nox); CSV is $CSV" >&2
    exit 0
fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
APPS="scd2 seeds dbt floor"
# keys,versions,batch,unchanged,changed,new,deleted,approach,median_s,ratio
for a in $APPS; do
    awk -F, -v a="$a" 'NR > 1 && $2 == 1 && $8 == a { print $3, $9 }' "$CSV" | sort -n >"$TMP/batch-$a.dat"
done
depth_batch=$(awk -F, 'NR > 1 && $2 > 1 { print $3; exit }' "$CSV")
{
    printf 'approach'
    for v in $(awk -F, -v b="$depth_batch" 'NR > 1 && $3 == b { print $2 }' "$CSV" | sort -nu); do printf ' v%s' "$v"; done
    echo
    for a in $APPS; do
        line=$a
        have=0
        for v in $(awk -F, -v b="$depth_batch" 'NR > 1 && $3 == b { print $2 }' "$CSV" | sort -nu); do
            m=$(awk -F, -v a="$a" -v v="$v" -v b="$depth_batch" 'NR > 1 && $8 == a && $2 == v && $3 == b { print $9 }' "$CSV" | tail -n 1)
            [ -n "$m" ] && have=1
            line="$line ${m:-0}"
        done
        [ "$have" = 1 ] && echo "$line"
    done
} >"$TMP/depth.dat"
plots=""
for a in $APPS; do
    [ -s "$TMP/batch-$a.dat" ] && plots="$plots '$TMP/batch-$a.dat' using 1:2 with linespoints lw 2 title '$a',"
done
ncols=$(head -1 "$TMP/depth.dat" | wc -w)
depthplot=""
for ((c = 2; c <= ncols; c++)); do
    depthplot="$depthplot '$TMP/depth.dat' using $c:xtic(1) title columnheader($c),"
done
gnuplot <<EOF
set terminal pngcairo size 1400,560 noenhanced font 'sans,11'
set output '$PNG'
set multiplot layout 1,2 title 'scd2 benchmark: one SCD2 load, median seconds (1M keys, 10% changed, 5% new)'
set title 'batch size (1 version per key)'
set logscale xy
set xlabel 'staging rows'
set ylabel 'seconds'
set grid
set key top left
plot ${plots%,}
unset logscale
set title 'history depth (batch ${depth_batch:-?})'
set xlabel 'approach'
set style data histogram
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set yrange [0:*]
set key top left
plot ${depthplot%,}
unset multiplot
EOF
