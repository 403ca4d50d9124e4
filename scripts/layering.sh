#!/usr/bin/env bash
# Which file calls which, from the object files' symbols, and whether that
# graph respects the layers and has no cycle. Run by `make layering`.
#   scripts/layering.sh BUILD [--list] [--edges]
#
# Reads the userspace objects BUILD/user/**/*.o and BUILD/tools/**/*.o (not
# the tests, not the BPF objects). File A calls file B when A has an
# undefined symbol (nm: U, or a weak reference) that B defines (nm: T, D, B,
# R, W, ...). Symbols no object defines (libc, libbpf, liburing...) are not
# edges. A symbol defined in several objects resolves as the linker would:
# a strong definition before a weak one, then one in the caller's folder,
# then one the caller's layer may link; what stays ambiguous is said.
# Stale objects (a .o and .d make left, whose .c is gone from this tree)
# are left out, with a note.
#
# Fails (exit 1) when
#  - the graph has a cycle: names each loop's files and, for each of its
#    edges, the symbols that make it (every edge inside a cycle is shown in
#    at least one named loop);
#  - a call goes against the layers:
#      user/core       may call user/core only
#      user/model      may call user/core, user/model
#      user/kvspliced  may call user/core, user/kvspliced
#      user/kvspliced/datapath  (the BPF object and its maps, under
#                      user/kvspliced/datapath.h) may call user/core and
#                      itself only: never up into the daemon
#      tools/X         may call user/core, user/model, tools/X
#    (objects outside those folders are listed, not checked).
# Otherwise prints "layering: N files, M edges, no cycle" and exits 0.
#   --list   first prints the graph: "file -> dep dep ..." a line, sorted
#   --edges  first prints every edge with its symbols: "file -> dep: sym ..."
# Exit 77 when BUILD has no such objects (not built), 2 on a usage error.
set -u

usage() {
	echo "usage: $0 BUILD [--list] [--edges]" >&2
	exit 2
}

BUILD=""
LIST=0
EDGES=0
for a in "$@"; do
	case $a in
	--list) LIST=1 ;;
	--edges) EDGES=1 ;;
	-h | --help) usage ;;
	-*) echo "layering: unknown option $a" >&2 && usage ;;
	*) [ -z "$BUILD" ] || usage; BUILD=$a ;;
	esac
done
[ -n "$BUILD" ] || usage
if [ ! -d "$BUILD" ]; then
	echo "layering: skipped: no build directory $BUILD (build first)"
	exit 77
fi
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$BUILD" || exit 2

export LC_ALL=C
objs=()
while IFS= read -r -d '' f; do
	objs+=("$f")
done < <(find user tools -type f -name '*.o' ! -name '*.bpf.o' -print0 2>/dev/null | sort -z)
if [ ${#objs[@]} -eq 0 ]; then
	echo "layering: skipped: no object files under $BUILD/user or $BUILD/tools (build first)"
	exit 77
fi

# Stale objects: make left BUILD/x.o and BUILD/x.d, and x.c is gone from the
# tree (renamed, split). Nothing links them; they would only add phantom
# edges. Judged only when BUILD is this tree's build (some object's source
# is here), so that a build of another checkout is read whole.
ours=0
for o in "${objs[@]}"; do
	[ -f "$ROOT/${o%.o}.c" ] && ours=1 && break
done
if [ $ours -eq 1 ]; then
	keep=()
	stale=()
	for o in "${objs[@]}"; do
		if [ -f "${o%.o}.d" ] && [ ! -f "$ROOT/${o%.o}.c" ]; then
			stale+=("$o")
		else
			keep+=("$o")
		fi
	done
	if [ ${#stale[@]} -gt 0 ]; then
		n=${#stale[@]}
		echo "layering: note: left out $n stale object$([ "$n" -gt 1 ] && echo s) (source gone from $ROOT): ${stale[*]}"
		objs=("${keep[@]}")
	fi
fi

nmerr=$(mktemp /tmp/layering-nm.XXXXXX)
trap 'rm -f "$nmerr"' EXIT
# -P: "file: name type value size" a line; -A names the object every line.
if ! syms=$(nm -P -A "${objs[@]}" 2>"$nmerr"); then
	# An object with no symbol at all is not an error (nm says so and
	# fails); anything else is.
	if grep -v ': no symbols$' "$nmerr" | grep -q .; then
		echo "layering: nm failed:" >&2
		cat "$nmerr" >&2
		exit 2
	fi
fi

# The object list first (every object is a node, even one with no symbol),
# a line "= file.o", then nm's lines.
{
	printf '= %s\n' "${objs[@]}"
	printf '%s\n' "$syms"
} | awk -v list="$LIST" -v edges="$EDGES" '
function src(o) { sub(/\.o$/, ".c", o); return o }
# The layer a file belongs to: its folder (user/core, user/model,
# user/kvspliced, user/kvspliced/datapath, tools/X), or "" outside them.
function layer(f,   n, p) {
	n = split(f, p, "/")
	if (n >= 4 && p[1] == "user" && p[2] == "kvspliced" && p[3] == "datapath")
		return "user/kvspliced/datapath"
	if (n >= 3 && p[1] == "user" && (p[2] == "core" || p[2] == "model" || p[2] == "kvspliced"))
		return p[1] "/" p[2]
	if (n >= 3 && p[1] == "tools")
		return p[1] "/" p[2]
	return ""
}
function dir(f) { sub(/\/[^\/]*$/, "", f); return f }
function allowed(la, lb) {
	if (la == "user/core") return lb == "user/core"
	if (la == "user/model") return lb == "user/core" || lb == "user/model"
	if (la == "user/kvspliced")
		return lb == "user/core" || lb == "user/kvspliced" || lb == "user/kvspliced/datapath"
	if (la == "user/kvspliced/datapath") return lb == "user/core" || lb == la
	if (la ~ /^tools\//) return lb == "user/core" || lb == "user/model" || lb == la
	return 1
}
function rule(la) {
	if (la == "user/core") return "user/core may call only user/core"
	if (la == "user/model") return "user/model may call only user/core and user/model"
	if (la == "user/kvspliced") return "user/kvspliced may call only user/core and user/kvspliced"
	if (la == "user/kvspliced/datapath")
		return "user/kvspliced/datapath may call only user/core and itself"
	return la " may call only user/core, user/model and " la
}
# Keeps in cand[1..n] those for which keep[] is set, if any is; returns n.
function narrow(n,   i, m, t) {
	m = 0
	for (i = 1; i <= n; i++)
		if (keep[i]) t[++m] = cand[i]
	if (m == 0) return n
	for (i = 1; i <= m; i++) cand[i] = t[i]
	return m
}
# Tarjan: the strongly connected components, comp[file] = number.
function strongconnect(v,   i, w) {
	idx[v] = low[v] = ++counter
	stk[++sp] = v
	onstk[v] = 1
	for (i = 1; i <= adjn[v]; i++) {
		w = adj[v, i]
		if (!(w in idx)) {
			strongconnect(w)
			if (low[w] < low[v]) low[v] = low[w]
		} else if (onstk[w] && idx[w] < low[v])
			low[v] = idx[w]
	}
	if (low[v] == idx[v]) {
		ncomp++
		do {
			w = stk[sp--]
			onstk[w] = 0
			comp[w] = ncomp
			compn[ncomp]++
		} while (w != v)
	}
}
# A shortest path from s to t inside the component of s (BFS); fills
# path[1..n] (s first, t last) and returns n, 0 if none.
function shortest(s, t,   q, head, tail, seen, par, i, v, w, n, r) {
	head = 1; tail = 0
	q[++tail] = s
	seen[s] = 1
	while (head <= tail) {
		v = q[head++]
		if (v == t) break
		for (i = 1; i <= adjn[v]; i++) {
			w = adj[v, i]
			if (comp[w] != comp[s] || (w in seen)) continue
			seen[w] = 1
			par[w] = v
			q[++tail] = w
		}
	}
	if (!(t in seen)) return 0
	n = 0
	for (v = t; v != s; v = par[v]) r[++n] = v
	r[++n] = s
	for (i = 1; i <= n; i++) path[i] = r[n + 1 - i]
	return n
}
function show_cycle(n,   i, line, a, b) {
	ncyc++
	line = "layering: cycle " ncyc ": "
	for (i = 1; i <= n; i++) line = line path[i] " -> "
	print line path[1]
	for (i = 1; i <= n; i++) {
		a = path[i]; b = path[i % n + 1]
		print "    " a " -> " b ": " esyms[a, b]
		covered[a, b] = 1
	}
}

$1 == "=" { o = $2; nfiles++; file[nfiles] = src(o); next }
NF >= 3 {
	o = $1; sub(/:$/, "", o); f = src(o); s = $2; t = $3
	if (t ~ /^[ABDGRSTiu]$/) { ndef[s]++; def[s, ndef[s]] = f; weak[s, f] = 0 }
	else if (t ~ /^[CVW]$/) { ndef[s]++; def[s, ndef[s]] = f; weak[s, f] = 1 }
	else if (t ~ /^[Uvw]$/) { nref++; rf[nref] = f; rs[nref] = s }
}
END {
	# Resolve every reference to the file that defines it.
	for (r = 1; r <= nref; r++) {
		f = rf[r]; s = rs[r]
		n = 0
		for (i = 1; i <= ndef[s]; i++)
			if (def[s, i] != f) cand[++n] = def[s, i]
		if (n == 0) continue
		if (n > 1) {
			for (i = 1; i <= n; i++) keep[i] = !weak[s, cand[i]]
			n = narrow(n)
		}
		if (n > 1) {
			for (i = 1; i <= n; i++) keep[i] = dir(cand[i]) == dir(f)
			n = narrow(n)
		}
		if (n > 1 && layer(f) != "") {
			for (i = 1; i <= n; i++) keep[i] = layer(cand[i]) != "" && allowed(layer(f), layer(cand[i]))
			n = narrow(n)
		}
		if (n > 1) {
			line = f " uses, defined in several files (an edge to each of"
			for (i = 1; i <= n; i++) line = line " " cand[i]
			line = line "):"
			if (!(line in amb)) { namb++; ambk[namb] = line; amb[line] = s }
			else amb[line] = amb[line] " " s
		}
		for (i = 1; i <= n; i++) {
			e = f SUBSEP cand[i]
			if (!(e in esyms)) { nedges++; esyms[e] = s }
			else if ((" " esyms[e] " ") !~ (" " s " ")) esyms[e] = esyms[e] " " s
			hasedge[e] = 1
		}
	}
	# Sort the files (the objects came sorted, but be sure), then the
	# adjacency lists in that order.
	for (i = 2; i <= nfiles; i++) {
		v = file[i]
		for (j = i - 1; j >= 1 && file[j] > v; j--) file[j + 1] = file[j]
		file[j + 1] = v
	}
	for (i = 1; i <= nfiles; i++) {
		a = file[i]; adjn[a] = 0
		for (j = 1; j <= nfiles; j++)
			if ((a, file[j]) in hasedge) adj[a, ++adjn[a]] = file[j]
	}
	if (list) {
		for (i = 1; i <= nfiles; i++) {
			a = file[i]; line = a " ->"
			for (j = 1; j <= adjn[a]; j++) line = line " " adj[a, j]
			print line
		}
	}
	if (edges) {
		for (i = 1; i <= nfiles; i++) {
			a = file[i]
			for (j = 1; j <= adjn[a]; j++) print a " -> " adj[a, j] ": " esyms[a, adj[a, j]]
		}
	}
	if (list || edges) print ""
	for (i = 1; i <= namb; i++) print "layering: note: " ambk[i] " " amb[ambk[i]]

	# Files outside the layer folders: listed, not checked.
	line = ""; nout = 0
	for (i = 1; i <= nfiles; i++)
		if (layer(file[i]) == "") { nout++; if (nout <= 8) line = line " " file[i] }
	if (nout) {
		if (nout > 8) line = line " ..."
		print "layering: note: " nout " files outside user/{core,model,kvspliced} and tools/<program>, not checked against the layers:" line
	}

	# Calls against the layers.
	nbad = 0
	for (i = 1; i <= nfiles; i++) {
		a = file[i]; la = layer(a)
		if (la == "") continue
		for (j = 1; j <= adjn[a]; j++) {
			b = adj[a, j]; lb = layer(b)
			if (allowed(la, lb) && lb != "") continue
			nbad++
			print "layering: against the layers: " a " calls " b " (" esyms[a, b] "): " rule(la)
		}
	}

	# Cycles: the strongly connected components of more than one file;
	# in each, first the pairs of files calling each other, then a
	# shortest loop through every edge no loop shown so far goes through.
	counter = 0; sp = 0; ncomp = 0
	for (i = 1; i <= nfiles; i++)
		if (!(file[i] in idx)) strongconnect(file[i])
	ncyc = 0; ngroups = 0; ingroups = 0
	for (c = 1; c <= ncomp; c++) {
		if (compn[c] < 2) continue
		ngroups++; ingroups += compn[c]
	}
	if (ngroups) {
		for (i = 1; i <= nfiles; i++) {
			a = file[i]
			if (compn[comp[a]] < 2 || (comp[a] in told)) continue
			told[comp[a]] = 1
			line = ""
			for (j = i; j <= nfiles; j++)
				if (comp[file[j]] == comp[a]) line = line " " file[j]
			print "layering: loop of " compn[comp[a]] " files (each reaches every other):" line
		}
		for (i = 1; i <= nfiles; i++) {
			a = file[i]
			for (j = 1; j <= adjn[a]; j++) {
				b = adj[a, j]
				if (b > a && ((b, a) in hasedge)) { path[1] = a; path[2] = b; show_cycle(2) }
			}
		}
		for (i = 1; i <= nfiles; i++) {
			a = file[i]
			for (j = 1; j <= adjn[a]; j++) {
				b = adj[a, j]
				if (comp[a] != comp[b] || ((a, b) in covered)) continue
				n = shortest(b, a)
				if (n == 0) continue
				# path is b ... a; the loop is a -> b ... a
				for (k = n; k >= 2; k--) path[k] = path[k - 1]
				path[1] = a
				show_cycle(n)
			}
		}
	}

	summary = "layering: " nfiles " file" (nfiles == 1 ? "" : "s") ", " (nedges + 0) " edge" (nedges == 1 ? "" : "s") ", "
	if (ncyc) summary = summary ncyc " cycle" (ncyc > 1 ? "s" : "") " among " ingroups " files (" ngroups " loop" (ngroups > 1 ? "s" : "") ")"
	else summary = summary "no cycle"
	if (nbad) summary = summary ", " nbad " call" (nbad > 1 ? "s" : "") " against the layers"
	print summary
	exit (ncyc || nbad) ? 1 : 0
}'
