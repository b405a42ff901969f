# bench/lib.sh -- what bench/run.sh, bench/first_load.sh and bench/scale.sh
# share: the verification pass and the plans pass over their approaches,
# the median of a times.csv, the throwaway cluster's start (also
# bench/scaling.sh) and gnuplot (bench/plot.sh, bench/plot_scale.sh).
# Sourced;
# the caller defines log, run_one APP VERIFY EXPLAIN (one load, rolled
# back; with VERIFY=1 its last line is the dimension's signature), the
# array APPS and OUT, and passes the function that resets the table an
# approach wrote (called with the approach's name).

# Every approach once: all must leave the same dimension (signature lines
# equal, bad_is_current=0).  The runs' times go to $OUT/verify_times.csv
# as round 0 (with ROUNDS=0 they are the measurement: at 100M rows a run
# takes minutes).  Exits 1 otherwise, unless
# IGNORE_VERIFY=1.
verify_approaches() {
    local reset=$1 app res nsig bad
    log "verification pass"
    : >"$OUT/verify.txt"
    echo "round,approach,seconds" >"$OUT/verify_times.csv"
    for app in "${APPS[@]}"; do
        out=$(run_one "$app" 1 0)
        res=$(tail -n 1 <<<"$out")
        echo "0,$app,$(head -n 1 <<<"$out")" >>"$OUT/verify_times.csv"
        log "verify $(printf '%-6s' "$app") $(head -n 1 <<<"$out") s"
        printf '%-6s\t%s\n' "$app" "$res" >>"$OUT/verify.txt"
        "$reset" "$app"
    done
    cat "$OUT/verify.txt" >&2
    nsig=$(cut -f2- "$OUT/verify.txt" | sed 's/ bad_is_current=0//' | sort -u | wc -l)
    bad=$(grep -vc 'bad_is_current=0' "$OUT/verify.txt" || true)
    if [ "$nsig" != 1 ] || [ "$bad" != 0 ]; then
        log "VERIFICATION FAILED: the approaches do not produce the same dimension"
        echo "VERIFICATION FAILED" >>"$OUT/verify.txt"
        [ "${IGNORE_VERIFY:-0}" = 1 ] || exit 1
    else
        log "verification ok: all approaches produce the same rows"
    fi
}

# Every approach once more with auto_explain, into $OUT/explain-APP.txt.
explain_approaches() {
    local reset=$1 app
    for app in "${APPS[@]}"; do
        log "explain $app"
        run_one "$app" 0 1 >"$OUT/explain-$app.txt" 2>&1 || true
        "$reset" "$app"
    done
}

# Peak private memory of each load (MEMORY=1): run_one sends
# backend_pid_sql APP first, which appends "APP PID" to $OUT/pids.txt; a
# sampler reads the newest PID's RssAnon (what the backend allocated
# itself; shared_buffers is RssShmem and not in it) every 0.2 s, as
# bench/memory.sh's test does, and writes "PID peak_kB" lines to
# $OUT/peaks.txt when stopped.  Needs the server on this machine and its
# /proc/PID/status readable (same user or root).
memory_sampler_start() {
    [ "${MEMORY:-0}" = 1 ] || return 0
    : >"$OUT/pids.txt"
    (
        declare -A peak
        trap 'for p in "${!peak[@]}"; do echo "$p ${peak[$p]}"; done >"$OUT/peaks.txt"; exit 0' TERM
        while :; do
            pid=$(tail -n 1 "$OUT/pids.txt" | cut -d' ' -f2)
            if [ -n "$pid" ]; then
                kb=$(awk '/^RssAnon:/ { print $2 }' "/proc/$pid/status" 2>/dev/null || true)
                if [ -n "$kb" ] && [ "$kb" -gt "${peak[$pid]:-0}" ]; then peak[$pid]=$kb; fi
            fi
            sleep 0.2
        done
    ) &
    MEMORY_SAMPLER=$!
}
memory_sampler_stop() {
    [ -n "${MEMORY_SAMPLER:-}" ] || return 0
    kill -TERM "$MEMORY_SAMPLER"; wait "$MEMORY_SAMPLER" 2>/dev/null || true
    MEMORY_SAMPLER=
}
backend_pid_sql() {   # APP
    [ "${MEMORY:-0}" = 1 ] || return 0
    echo "SELECT '$1 ' || pg_backend_pid() \\g |cat >>$OUT/pids.txt"
}
# The largest peak of APP's loads in MB (empty without MEMORY=1).
peak_mb() {   # APP
    [ -s "$OUT/peaks.txt" ] || return 0
    awk -v app="$1" 'NR == FNR { if ($1 == app) want[$2] = 1; next }
                     ($1 in want) && $2 > m { m = $2 }
                     END { if (m) printf "%d\n", m / 1024 }' "$OUT/pids.txt" "$OUT/peaks.txt"
}

# The median of the seconds (third field) of APP's lines in a times.csv
# (round,approach,seconds,...), and how many there were: "median n"; an
# empty line when there are none.
median_times() {   # times.csv app
    grep ",$2," "$1" | cut -d, -f3 | sort -g |
        awk '{ a[NR] = $1 } END { if (NR == 0) print ""; else if (NR % 2) print a[(NR + 1) / 2] " " NR; else printf "%.4f %d\n", (a[NR / 2] + a[NR / 2 + 1]) / 2, NR }'
}

# With SETTINGS set: start the benchmark's own throwaway cluster
# (bench/cluster.sh, its DIR and PORT), point libpq at it and stop it when
# the script exits.  HERE is the bench directory.
start_own_cluster() {
    [ -n "${SETTINGS:-}" ] || return 0
    eval "$(SETTINGS=$SETTINGS "$HERE/cluster.sh" start)"
    export PGHOST PGPORT PGUSER
    trap 'SETTINGS=$SETTINGS "$HERE/cluster.sh" stop' EXIT
}

# gnuplot, installed when missing and this is root on Debian; else false
# (the caller says so and leaves the CSV unplotted).
have_gnuplot() {
    command -v gnuplot >/dev/null && return 0
    [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null || return 1
    apt-get install -y gnuplot-nox >/dev/null
}
