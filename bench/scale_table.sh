#!/usr/bin/env bash
# bench/scale_table.sh CSV -- the table bench/RESULTS.md opens with, in
# Markdown, from the CSV bench/scale.sh writes: per shape and dimension
# size, seconds per load and rows per second of scd2, the seeds' MERGE,
# dbt's SQL and the floor (for the as-of shape: scd2.asof, the range join,
# the floor), and the ratios; then the growth table: each shape and
# approach's seconds at every size, and how many times the smallest
# size's time the largest's is.  The last line of a (size, shape, approach)
# counts; a seconds field that is not a number (a load that failed, added
# by hand: "failed: disk full") is printed as it is.
set -euo pipefail
CSV=${1:-$(dirname "$0")/out/scale/scale.csv}
awk -F, '
NR == 1 { next }
{ k = $1 SUBSEP $2; t[k, $4] = $5; r[k, $4] = $6; rows[k] = $3; p[k, $4] = $7
  if (!(k in seen)) { seen[k] = 1; order[++n] = k } }
function h(x) { return x >= 1e6 ? sprintf("%gM", x / 1e6) : x >= 1e3 ? sprintf("%gk", x / 1e3) : x }
function num(k, a) { return ((k, a) in t) && t[k, a] ~ /^[0-9.]+$/ }
function cell(k, a) { return !((k, a) in t) ? "not run" : num(k, a) ? sprintf("%.2f s (%s/s)", t[k, a], h(r[k, a] >= 1000 ? int(r[k, a] / 1000) * 1000 : r[k, a])) : t[k, a] }
function ratio(k, a, b) { return (num(k, a) && num(k, b) && t[k, b] > 0) ? sprintf("%.2f", t[k, a] / t[k, b]) : "" }
END {
    # sizes ascending within each shape, shapes in a fixed order
    split("first 200k 2M asof", shapes, " ")
    print "| shape | dimension rows | rows loaded | scd2 | seeds\x27 MERGE | dbt snapshot SQL | floor | scd2 ÷ floor | dbt ÷ scd2 | seeds ÷ scd2 | scd2 peak memory |"
    print "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    for (s = 1; s <= 3; s++) {
        m = 0
        for (i = 1; i <= n; i++) { split(order[i], f, SUBSEP); if (f[2] == shapes[s]) ks[++m] = f[1] + 0 }
        asort_n(ks, m)
        for (i = 1; i <= m; i++) {
            k = ks[i] SUBSEP shapes[s]
            printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", shapes[s], h(ks[i]), h(rows[k]),
                cell(k, "scd2"), cell(k, "seeds"), cell(k, "dbt"), cell(k, "floor"),
                ratio(k, "scd2", "floor"), ratio(k, "dbt", "scd2"), ratio(k, "seeds", "scd2"),
                ((k, "scd2") in p && p[k, "scd2"] != "") ? p[k, "scd2"] " MB" : ""
        }
        delete ks
    }
    print ""
    print "| as-of lookup | dimension rows | facts | scd2.asof | range join | floor (no lookup) | asof ÷ range | asof ÷ floor | asof peak memory |"
    print "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    m = 0
    for (i = 1; i <= n; i++) { split(order[i], f, SUBSEP); if (f[2] == "asof") ks[++m] = f[1] + 0 }
    asort_n(ks, m)
    for (i = 1; i <= m; i++) {
        k = ks[i] SUBSEP "asof"
        printf "| asof | %s | %s | %s | %s | %s | %s | %s | %s |\n", h(ks[i]), h(rows[k]),
            cell(k, "asof"), cell(k, "range"), cell(k, "floor"), ratio(k, "asof", "range"), ratio(k, "asof", "floor"),
            ((k, "asof") in p && p[k, "asof"] != "") ? p[k, "asof"] " MB" : ""
    }
    delete ks
    growth()
}
# seconds by size for each shape and approach, and largest / smallest
function growth(   i, j, f, nz, sz, hdr, sep, s, a, line, first, last, apps, na, seen_sz, k) {
    nz = 0
    for (i = 1; i <= n; i++) { split(order[i], f, SUBSEP); if (!((f[1] + 0) in seen_sz)) { seen_sz[f[1] + 0] = 1; sz[++nz] = f[1] + 0 } }
    asort_n(sz, nz)
    hdr = "| shape, approach"; sep = "| ---"
    for (i = 1; i <= nz; i++) { hdr = hdr " | " h(sz[i]); sep = sep " | ---:" }
    print ""
    print hdr " | largest ÷ smallest size |"
    print sep " | ---: |"
    split("first 200k 2M asof", shapes, " ")
    for (s = 1; s <= 4; s++) {
        na = split(shapes[s] == "asof" ? "asof range floor" : "scd2 seeds dbt floor", apps, " ")
        for (a = 1; a <= na; a++) {
            line = "| " shapes[s] ", " apps[a]; first = ""; last = ""
            for (i = 1; i <= nz; i++) {
                k = sz[i] SUBSEP shapes[s]
                if (num(k, apps[a])) { line = line sprintf(" | %.2f", t[k, apps[a]]); if (first == "") first = t[k, apps[a]]; last = t[k, apps[a]] }
                else line = line " | " (((k, apps[a]) in t) ? t[k, apps[a]] : "")
            }
            if (first == "") continue
            print line " | " ((first > 0 && last != first) ? sprintf("%.1fx", last / first) : "") " |"
        }
    }
}
function asort_n(a, m,   i, j, x) {
    for (i = 2; i <= m; i++) { x = a[i]; for (j = i - 1; j >= 1 && a[j] > x; j--) a[j + 1] = a[j]; a[j + 1] = x }
}' "$CSV"
