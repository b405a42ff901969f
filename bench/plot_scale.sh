#!/usr/bin/env bash
# bench/plot_scale.sh CSV PNG -- plots the CSV bench/scale.sh writes: one
# panel per shape (first load, 200k batch, 2M batch, as-of lookup), seconds
# against the dimension's size, log-log, one line per approach.  When a
# size was measured more than once, its last line counts.
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
# keys,shape,rows,approach,seconds,rows_per_s,peak_mb,runs,date
color() {   # one colour per approach in every panel (asof is scd2's)
    case $1 in scd2|asof) echo '#9400d3' ;; seeds) echo '#009e73' ;; dbt) echo '#56b4e9' ;;
               floor) echo '#e69f00' ;; *) echo '#d55e00' ;; esac
}
panel() {   # shape title: the gnuplot commands of one panel
    local shape=$1 title=$2 plots="" a
    for a in scd2 seeds dbt floor asof range; do
        awk -F, -v s="$shape" -v a="$a" 'NR > 1 && $2 == s && $4 == a { t[$1] = $5 }
            END { for (k in t) print k, t[k] }' "$CSV" | sort -n >"$TMP/$shape-$a.dat"
        [ -s "$TMP/$shape-$a.dat" ] &&
            plots="$plots '$TMP/$shape-$a.dat' using 1:2 with linespoints lw 2 pt 7 lc rgb '$(color "$a")' title '$a',"
    done
    echo "set title '$title'"
    if [ -n "$plots" ]; then echo "plot ${plots%,}"; else echo "set key off; plot NaN"; fi
}
gnuplot <<EOF
set terminal pngcairo size 1400,1000 noenhanced font 'sans,11'
set output '$PNG'
set multiplot layout 2,2 title 'scd2 scaling: seconds per load against the dimension size (PostgreSQL defaults, 2 cores)'
set logscale xy
set format x '%.0s%c'
set xlabel 'dimension rows'
set ylabel 'seconds'
set grid
set key top left
$(panel first 'first load (as many rows as the dimension)')
$(panel 200k '200k batch (10% changed, 5% new)')
$(panel 2M '2M batch (10% changed, 5% new)')
$(panel asof '10M facts keyed as of their time')
unset multiplot
EOF
echo "wrote $PNG"
