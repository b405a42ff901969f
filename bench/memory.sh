#!/usr/bin/env bash
# bench/memory.sh -- issue 14: the peak private memory of one big load
# against work_mem.  Runs test/huge_batch/run.sh (HUGE_ROWS staging rows:
# N/4 existing keys, every 10th changed; N/2 new keys; N/8 new keys with two
# rows each, the general timeline path) once per work_mem setting and prints
# the load's peak RssAnon (the backend's private memory; shared_buffers is
# RssShmem and not in it) next to work_mem and the bound the test checks
# (hash_mem + temp_buffers + 32 MB), and the peak of the batch logged by
# surrogate keys that follows (HUGE_LOGGED_ROWS: ROWS/2 by default).
#
#   ROWS=10000000          staging rows (a 10M load takes 3-6 minutes)
#   WORK_MEMS="4MB 64MB"   the settings, passed to the load's session
#   LOAD_MEMORY=-1         scd2.load_memory values to run with (e.g. "-1 0":
#                          the default budget, and each node its own
#                          work_mem as before issue 14)
#   LOG_CONTEXTS=0         every this many seconds, log the backend's memory
#                          contexts to the server log (the profile of
#                          RESULTS.md); SERVER_LOG=path then summarises them
#
# Needs a server where `CREATE EXTENSION scd2` works (PGHOST, PGPORT,
# PGUSER; e.g. bench/cluster.sh start, with DIR and PORT of your own) and
# /proc of its backends readable (same machine, same user or root).
set -u
cd "$(dirname "$0")/.."
ROWS=${ROWS:-10000000}
WORK_MEMS=${WORK_MEMS:-"4MB 64MB"}
LOG_CONTEXTS=${LOG_CONTEXTS:-0}
LOAD_MEMORY=${LOAD_MEMORY:--1}
SERVER_LOG=${SERVER_LOG:-}

# The profile: per dump of the loading backend's contexts, the contexts of
# 1 MB and more (summed by name, xN = N of them) and the grand total.
summarise() {
    awk '
    /logging memory contexts of PID/ { t = substr($2, 1, 8); delete agg; delete cnt; next }
    /level: [0-9]+; / && t != "" {
        s = $0; sub(/.*level: [0-9]+; /, "", s); name = s; sub(/:.*/, "", name)
        tot = s; sub(/^[^:]*: /, "", tot); sub(/ total.*/, "", tot)
        agg[name] += tot; cnt[name]++; next }
    /Grand total/ && t != "" {
        g = $0; sub(/.*Grand total: /, "", g); sub(/ bytes.*/, "", g)
        line = t " total " int(g / 1048576) " MB:"
        for (n in agg) if (agg[n] >= 1048576) line = line " " n " " int(agg[n] / 1048576) (cnt[n] > 1 ? "x" cnt[n] : "")
        print line; t = "" }' "$1"
}

printf '%-12s %-9s %-9s %-11s %-9s %-8s %-21s %s\n' load_memory work_mem hash_mem "peak (MB)" "limit" "load (s)" "peak - hash_mem (MB)" \
    "batch logged by keys: peak (MB)"
for lm in $LOAD_MEMORY; do
for wm in $WORK_MEMS; do
    [ -n "$SERVER_LOG" ] && start=$(wc -l < "$SERVER_LOG")
    out=$(PGOPTIONS="${PGOPTIONS:-} -c scd2.load_memory=$lm" HUGE_WORK_MEM=$wm HUGE_ROWS=$ROWS HUGE_RELOAD=0 HUGE_LOG_CONTEXTS=$LOG_CONTEXTS test/huge_batch/run.sh 2>&1)
    limit=$(sed -n 's/.*: limit \([0-9]*\) MB$/\1/p' <<<"$out")
    hash=$(sed -n 's/.*hash_mem \([0-9]*\) MB.*/\1/p' <<<"$out")
    peak=$(sed -n 's/^# load: .*(RssAnon): \([0-9]*\) MB$/\1/p' <<<"$out")
    logged=$(sed -n 's/^# batch logged by surrogate keys .*(RssAnon): \([0-9]*\) MB$/\1/p' <<<"$out")
    secs=$(sed -n 's/^# load: \([0-9.]*\) s.*/\1/p' <<<"$out")
    printf '%-12s %-9s %-9s %-11s %-9s %-8.1f %-21s %s\n' "$lm" "$wm" "${hash}MB" "$peak" "${limit}MB" "${secs:-0}" \
        "$(( ${peak:-0} - ${hash:-0} ))" "${logged:--}"
    grep -q 'huge_batch: [0-9]* passed, 0 failed' <<<"$out" || { echo "$out" | grep -v '^ok'; }
    if [ -n "$SERVER_LOG" ] && [ "$LOG_CONTEXTS" -gt 0 ]; then
        tail -n +"$(( start + 1 ))" "$SERVER_LOG" > /tmp/scd2_memory_log.$$
        summarise /tmp/scd2_memory_log.$$ | sed 's/^/    /'
        rm -f /tmp/scd2_memory_log.$$
    fi
done
done
