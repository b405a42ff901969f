# bench/lib.sh -- what bench/run.sh and bench/first_load.sh share: the
# verification pass and the plans pass over their approaches.  Sourced;
# the caller defines log, run_one APP VERIFY EXPLAIN (one load, rolled
# back; with VERIFY=1 its last line is the dimension's signature), the
# array APPS and OUT, and passes the function that resets the table an
# approach wrote (called with the approach's name).

# Every approach once, untimed: all must leave the same dimension
# (signature lines equal, bad_is_current=0).  Exits 1 otherwise, unless
# IGNORE_VERIFY=1.
verify_approaches() {
    local reset=$1 app res nsig bad
    log "verification pass"
    : >"$OUT/verify.txt"
    for app in "${APPS[@]}"; do
        res=$(run_one "$app" 1 0 | tail -n 1)
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
