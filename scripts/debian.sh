# scripts/debian.sh -- sourced by scripts/pg_source.sh and scripts/chroot.sh:
# what they read from this machine's apt sources.  Sets no shell options.

# The mirror of the machine's Debian suite, from deb822 or one-line sources
# (read at run time: no host name is written into the repository).
debian_mirror() {
    local f
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        awk 'BEGIN{RS=""; IGNORECASE=1}
             /(^|\n)Types:[^\n]*deb/ && /(^|\n)Suites:[^\n]*(bookworm|stable|trixie|sid|unstable)/ &&
             !/(^|\n)Suites:[^\n]*-security/ {
                 if (match($0, /(^|\n)URIs:[ \t]*[^ \t\n]+/)) {
                     s = substr($0, RSTART, RLENGTH); sub(/.*URIs:[ \t]*/, "", s); print s; exit
                 }
             }' "$f"
    done
    [ -f /etc/apt/sources.list ] &&
        awk '$1 == "deb" && $0 !~ /security/ { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) { print $i; exit } }' \
            /etc/apt/sources.list
    return 0
}
