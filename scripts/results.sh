# scripts/results.sh -- sourced by the test runners (scripts/test.sh,
# scripts/test_suites.sh, test/integration/run.sh): their closing lines
#   name: N passed, M failed[, K skipped]
# read in one place.  Sets no shell options.

# result_line FILE [NAME_REGEX]: the last closing line in FILE (of a suite
# whose name matches NAME_REGEX, default any), or nothing.
result_line() {
    grep -E "^${2:-[a-z_0-9]+}: [0-9]+ passed, [0-9]+ failed(, [0-9]+ skipped)?\$" "$1" | tail -1
}

# result_counts LINE: "P F S" of a closing line (S is 0 when it has none).
result_counts() {
    local p f s
    read -r p f s < <(sed -E 's/^[^:]*: ([0-9]+) passed, ([0-9]+) failed(, ([0-9]+) skipped)?$/\1 \2 \4/' <<<"$1")
    echo "$p $f ${s:-0}"
}
