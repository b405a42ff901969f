# test/structure/structure.awk -- the shape of src/, read from the sources
# (run.sh runs it as: awk -f structure.awk src/*.c src/*.h).  POSIX awk
# (Debian's mawk is enough): no parser, the PostgreSQL coding style is
# relied on -- a function's definition has its name at the start of a line
# at file scope, its return type (and "static") on the line before.
#
# Prints one line per finding, tagged with the check it fails:
#   include-cycle  A.h -> B.h -> A.h            (#include "..." edges)
#   call-cycle     a.c -> b.c (f) -> a.c (g)    (a function defined in b.c
#                                                referenced from a.c makes
#                                                the edge a.c -> b.c)
#   single-use     f (x.h): used only in x.c     (exported, not shared)
#   duplicate      f and g: the same body in a.c and b.c
# and one summary line per check: "check NAME: N findings".  With -v edges=1
# also every call edge between files: "edge  a.c -> b.c (one function)".
#
# What counts as a reference: any identifier in a .c file's code (comments
# and string literals stripped) that names a function defined, not static,
# in another .c file -- a call, or a function pointer handed on.  A header
# contributes its #include edges and its extern declarations; a static
# inline function in a header is its includers' own code.

function strip(line,    out, i, c, n, d) {
	# comments and literals out of one line; incomment carries /* ... */
	out = ""
	n = length(line)
	for (i = 1; i <= n; i++) {
		c = substr(line, i, 1)
		d = substr(line, i, 2)
		if (incomment) {
			if (d == "*/") { incomment = 0; i++ }
			continue
		}
		if (d == "/*") { incomment = 1; i++; out = out " "; continue }
		if (d == "//") break
		if (c == "\"" || c == "'") {
			i++
			while (i <= n && substr(line, i, 1) != c) {
				if (substr(line, i, 1) == "\\") i++
				i++
			}
			out = out c c
			continue
		}
		out = out c
	}
	return out
}

function isheader(f) { return f ~ /\.h$/ }
function base(f) { sub(/.*\//, "", f); return f }
# the folder a file is in: the directory it is in, "" for src/ itself
function folderof(path,    d) {
	d = path
	if (d !~ /\//) return ""
	sub(/\/[^\/]*$/, "", d)
	sub(/.*\//, "", d)
	return d == "src" ? "" : d
}
# a file's level (-v levels="a b c|d": a over b over c and d): a .c file
# in src/ itself is above every folder, a header there below every folder
# (scd2.h, compat.h, metrics.h: shared declarations); a folder not in
# levels has none (-1)
function levelof(f,    fo) {
	fo = folder[f]
	if (fo == "") return isheader(f) ? 1000 : 0
	return (fo in rank) ? rank[fo] : -1
}

BEGIN {
	nl = split(levels, lv, / +/)
	for (i = 1; i <= nl; i++) {
		ns = split(lv[i], same, /\|/)
		for (j = 1; j <= ns; j++) rank[same[j]] = i
	}
}

FNR == 1 {
	file = base(FILENAME)
	folder[file] = folderof(FILENAME)
	files[file] = 1
	nfiles++
	order[nfiles] = file
	incomment = 0; depth = 0; inpp = 0; prev = ""; pending = ""; cur = ""
}

{
	raw = $0
	if (inpp) { inpp = (raw ~ /\\$/); next }
	if (!incomment && raw ~ /^[ \t]*#/) {
		if (raw ~ /^[ \t]*#[ \t]*include[ \t]*"/) {
			inc = raw
			sub(/^[^"]*"/, "", inc); sub(/".*/, "", inc)
			incl[file, base(inc)] = FNR
		}
		inpp = (raw ~ /\\$/)
		next
	}
	code = strip(raw)

	# a definition starts: name( at the start of a line at file scope
	if (depth == 0 && code ~ /^[A-Za-z_][A-Za-z0-9_]*\(/) {
		pending = code
		sub(/\(.*/, "", pending)
		pendstatic = (prev ~ /(^|[^A-Za-z0-9_])static([^A-Za-z0-9_]|$)/)
		pendline = FNR
	}
	# an extern function declaration in a header
	if (isheader(file) && depth == 0 && code ~ /(^|[^A-Za-z0-9_])extern[^A-Za-z0-9_]/) {
		decl = code
		sub(/.*(^|[^A-Za-z0-9_])extern[^A-Za-z0-9_]/, "", decl)
		if (match(decl, /[A-Za-z_][A-Za-z0-9_]*\(/)) {
			decl = substr(decl, RSTART, RLENGTH - 1)
			exported[decl] = file
		}
	}

	# walk the line: braces, identifiers, the body of the current function
	rest = code
	while (rest != "") {
		if (!match(rest, /[A-Za-z_][A-Za-z0-9_]*|[{};]/)) break
		tok = substr(rest, RSTART, RLENGTH)
		before = substr(rest, 1, RSTART - 1)
		rest = substr(rest, RSTART + RLENGTH)
		if (tok == "{") {
			if (depth == 0 && pending != "") {
				cur = pending; pending = ""
				key = file SUBSEP cur
				if (!((file, cur) in defline)) {
					defline[file, cur] = pendline
					defstatic[file, cur] = pendstatic
					ndef[cur]++
					deffiles[cur] = deffiles[cur] " " file
					if (!pendstatic) { had = (cur in extdef); extdef[cur] = had ? extdef[cur] " " file : file }
				}
				body[file, cur] = ""
			}
			depth++
		} else if (tok == "}") {
			depth--
			if (depth == 0 && cur != "") {
				bodies[file SUBSEP cur] = body[file, cur]
				cur = ""
			}
		} else if (tok == ";") {
			if (depth == 0) pending = ""
		} else if (!isheader(file) || cur != "") {
			# a reference (not a member name: x.f, x->f)
			if (before !~ /(\.|->)[ \t]*$/ && !((file, tok) in ref)) {
				ref[file, tok] = FNR
				refs[tok] = refs[tok] " " file
			}
		}
	}
	if (code ~ /[^ \t]/) prev = code
	if (cur != "" && depth > 0) {
		norm = code
		gsub(/[ \t]+/, " ", norm)
		body[file, cur] = body[file, cur] "|" norm
	}
}

# --- graphs ---------------------------------------------------------------

function addedge(g, u, v, why) {
	if ((g, u, v) in edge) return
	edge[g, u, v] = why
	nout[g, u]++
	out[g, u, nout[g, u]] = v
}

# a path v ... u in graph g (breadth first), as "v -> ... -> u", or ""
function path(g, v, u,    q, head, tail, x, i, y, from, seen, p) {
	split("", seen); split("", from); split("", q)
	head = 1; tail = 1; q[1] = v; seen[v] = 1
	while (head <= tail) {
		x = q[head++]
		if (x == u) break
		for (i = 1; i <= nout[g, x]; i++) {
			y = out[g, x, i]
			if (!(y in seen)) { seen[y] = 1; from[y] = x; q[++tail] = y }
		}
	}
	if (!(u in seen)) return ""
	p = u
	for (x = u; x != v; x = from[x]) p = from[x] SUBSEP p
	return p
}

function show(g, p,    n, a, i, s, w) {
	n = split(p, a, SUBSEP)
	s = a[1]
	for (i = 2; i <= n; i++) {
		w = edge[g, a[i - 1], a[i]]
		s = s " -> " a[i] (w != "" ? " (" w ")" : "")
	}
	return s
}

# the cycle a[1] ... a[n] (= a[1]) from its first file in name order
function rotate(a, n,    m, i, p) {
	m = 1
	for (i = 2; i < n; i++) if (a[i] < a[m]) m = i
	p = a[m]
	for (i = 1; i < n; i++) p = p SUBSEP a[(m + i - 1) % (n - 1) + 1]
	return p
}

# every cycle of g once: for each edge u -> v on a cycle, the cycle
# u -> v -> ... -> u, printed once per set of files
function cycles(g, tag,    k, parts, u, v, p, n, a, i, names, key, found) {
	found = 0
	for (k in edge) {
		split(k, parts, SUBSEP)
		if (parts[1] != g) continue
		u = parts[2]; v = parts[3]
		p = path(g, v, u)
		if (p == "") continue
		p = u SUBSEP p
		n = split(p, a, SUBSEP)
		split("", names)
		for (i = 1; i < n; i++) names[a[i]] = 1
		key = ""
		for (i = 1; i <= nfiles; i++) if (order[i] in names) key = key " " order[i]
		if (key in seenc) continue
		seenc[key] = 1
		print tag "  " show(g, rotate(a, n))
		found++
	}
	return found
}

END {
	# include edges
	for (k in incl) {
		split(k, parts, SUBSEP)
		if (parts[2] in files) addedge("inc", parts[1], parts[2], "")
	}
	# call edges: a .c file referencing a function another .c file exports
	for (k in ref) {
		split(k, parts, SUBSEP)
		b = parts[1]; f = parts[2]
		if (isheader(b) || !(f in extdef) || (b, f) in defline) continue
		definer = extdef[f]
		if (definer ~ / / || definer == b) continue
		addedge("call", b, definer, f)
	}
	if (edges) for (k in edge) {
		split(k, parts, SUBSEP)
		if (parts[1] == "call") print "edge  " parts[2] " -> " parts[3] " (" edge[k] ")"
	}
	# levels: a file may use (call, include) its own folder and the folders
	# below it, never one above it or beside it
	nf = 0
	if (levels != "") {
		for (f in files) if (folder[f] != "" && !(folder[f] in rank) && !(folder[f] in unlevelled)) {
			unlevelled[folder[f]] = 1
			print "level  folder " folder[f] "/ is on no level"
			nf++
		}
		for (k in edge) {
			split(k, parts, SUBSEP)
			u = parts[2]; v = parts[3]
			if (folder[u] == folder[v] || levelof(u) < 0 || levelof(v) < 0) continue
			if (levelof(u) < levelof(v)) continue
			what = parts[1] == "call" ? "calls " edge[k] " of" : "includes"
			print "level  " (folder[u] == "" ? "" : folder[u] "/") u " " what " " \
				(folder[v] == "" ? "" : folder[v] "/") v ", a folder " \
				(levelof(u) == levelof(v) ? "beside" : "above") " it"
			nf++
		}
	}
	print "check levels: " nf " findings"
	nf = cycles("inc", "include-cycle")
	print "check include-cycles: " nf " findings"
	nf = cycles("call", "call-cycle")
	print "check call-cycles: " nf " findings"

	# exported in a header, referenced by one .c file (or none)
	nf = 0
	for (f in exported) {
		n = split(refs[f], a, " ")
		users = ""; nu = 0
		for (i = 1; i <= n; i++) if (!isheader(a[i])) { nu++; users = users " " a[i] }
		if (nu <= 1 && (f in extdef)) {
			print "single-use  " f " (" exported[f] "): used only in" (users == "" ? " no file" : users)
			nf++
		}
	}
	print "check single-use-exports: " nf " findings"

	# duplicates: an exported name defined twice, or one body in two files
	nf = 0
	for (f in extdef) if (extdef[f] ~ / /) { print "duplicate  " f " defined in " extdef[f]; nf++ }
	for (k in bodies) {
		if (length(bodies[k]) < 120) continue
		split(k, parts, SUBSEP)
		if ((bodies[k] in firstbody) && firstfile[bodies[k]] != parts[1]) {
			split(firstbody[bodies[k]], o, SUBSEP)
			one = o[2] " (" o[1] ")"; two = parts[2] " (" parts[1] ")"
			if (o[1] > parts[1]) { t = one; one = two; two = t }
			print "duplicate  " one " and " two ": the same body"
			nf++
		} else if (!(bodies[k] in firstbody)) {
			firstbody[bodies[k]] = k
			firstfile[bodies[k]] = parts[1]
		}
	}
	print "check duplicates: " nf " findings"
}
