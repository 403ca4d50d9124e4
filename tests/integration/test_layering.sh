#!/usr/bin/env bash
# The layering check (scripts/layering.sh): first proves it can fail, on
# tiny objects built here - two files calling each other, a loop of three,
# user/core calling the daemon, the daemon calling the model, a tool calling
# another tool's folder - and that it passes a clean layout (a symbol
# defined in two tools' folders resolved to the caller's own); then runs it
# on $KVS_BUILD's objects, which must have no cycle and no call against the
# layers. Needs gcc and nm; no root, no daemon.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
B=${KVS_BUILD:-$ROOT/build}
CHECK=$ROOT/scripts/layering.sh
CC=${CC:-gcc}
fail() { echo "FAIL: $*" >&2; exit 1; }
TMP=$(mktemp -d /tmp/kvs-layering.XXXXXX)
trap 'rm -rf "$TMP"' EXIT

# obj DIR PATH.o 'C source': compiles the source to DIR/PATH.o.
obj() {
	mkdir -p "$(dirname "$1/$2")"
	printf '%s\n' "$3" >"$TMP/src.c"
	"$CC" -O0 -c "$TMP/src.c" -o "$1/$2"
}
# check DIR [args]: runs the check, sets out and rc.
check() {
	set +e
	out=$("$CHECK" "$@" 2>&1)
	rc=$?
	set -e
}
has() { # what text
	grep -qF -- "$2" <<<"$out" || fail "$1: the output lacks \"$2\":
$out"
}
want_rc() { # what rc
	[ "$rc" -eq "$2" ] || fail "$1: exit $rc, want $2:
$out"
}

# Two files calling each other.
D=$TMP/mutual
obj "$D" user/core/a.o 'int b(void); int a(void) { return b() + 1; }'
obj "$D" user/core/b.o 'int a(void); int b(void) { return a() - 1; }'
check "$D"
want_rc "mutual call" 1
has "mutual call" "cycle 1: user/core/a.c -> user/core/b.c -> user/core/a.c"
has "mutual call" "user/core/a.c -> user/core/b.c: b"
has "mutual call" "user/core/b.c -> user/core/a.c: a"
has "mutual call" "layering: 2 files, 2 edges, 1 cycle"
echo "ok: a.c <-> b.c fails, naming both files and both symbols"

# A loop of three, in the daemon's folder (allowed calls, still a loop).
D=$TMP/loop
obj "$D" user/kvspliced/p.o 'int q(void); int p(void) { return q(); }'
obj "$D" user/kvspliced/q.o 'int r(void); int q(void) { return r(); }'
obj "$D" user/kvspliced/r.o 'int p(void); int r(int x) { return x ? p() : 0; }'
check "$D"
want_rc "loop of three" 1
has "loop of three" "loop of 3 files (each reaches every other): user/kvspliced/p.c user/kvspliced/q.c user/kvspliced/r.c"
has "loop of three" "cycle 1: user/kvspliced/p.c -> user/kvspliced/q.c -> user/kvspliced/r.c -> user/kvspliced/p.c"
has "loop of three" "user/kvspliced/r.c -> user/kvspliced/p.c: p"
check "$D" --list
has "loop of three, --list" "user/kvspliced/q.c -> user/kvspliced/r.c"
echo "ok: p.c -> q.c -> r.c -> p.c fails, naming the loop"

# user/core calling the daemon.
D=$TMP/against
obj "$D" user/core/x.o 'int y(void); int x(void) { return y(); }'
obj "$D" user/kvspliced/y.o 'int y(void) { return 7; }'
check "$D"
want_rc "core calling the daemon" 1
has "core calling the daemon" \
	"against the layers: user/core/x.c calls user/kvspliced/y.c (y): user/core may call only user/core"
has "core calling the daemon" "no cycle, 1 call against the layers"
echo "ok: user/core/x.c calling user/kvspliced/y.c fails, naming the file and the symbol"

# The daemon calling the model; a tool calling another tool's folder.
D=$TMP/against2
obj "$D" user/model/m.o 'int m(void) { return 1; }'
obj "$D" user/kvspliced/g.o 'int m(void); int g(void) { return m(); }'
obj "$D" tools/one/main.o 'int two_helper(void); int main(void) { return two_helper(); }'
obj "$D" tools/two/main.o 'int two_helper(void) { return 2; } int main(void) { return two_helper(); }'
check "$D"
want_rc "daemon calling the model, tool calling a tool" 1
has "daemon calling the model" "user/kvspliced/g.c calls user/model/m.c (m): user/kvspliced may call only"
has "tool calling a tool" "tools/one/main.c calls tools/two/main.c (two_helper): tools/one may call only"
echo "ok: user/kvspliced -> user/model and tools/one -> tools/two fail"

# A clean layout: a tool on the model and core, the daemon on core, and
# usage() defined in both tools' folders (each resolves to its own).
D=$TMP/clean
obj "$D" user/core/log.o 'int kvs_log(int x) { return x; }'
obj "$D" user/core/buf.o 'int kvs_log(int); int buf(void) { return kvs_log(1); }'
obj "$D" user/model/eng.o 'int buf(void); int eng(void) { return buf(); }'
obj "$D" user/kvspliced/gw.o 'int buf(void); int kvs_log(int); int gw(void) { return buf() + kvs_log(2); }'
obj "$D" tools/one/main.o 'int eng(void); void usage(void); int main(void) { usage(); return eng(); }'
obj "$D" tools/one/usage.o 'void usage(void) {}'
obj "$D" tools/two/main.o 'int kvs_log(int); void usage(void); int main(void) { usage(); return kvs_log(0); }'
obj "$D" tools/two/usage.o 'void usage(void) {}'
check "$D" --list
want_rc "clean layout" 0
has "clean layout" "tools/one/main.c -> tools/one/usage.c user/model/eng.c"
has "clean layout" "tools/two/main.c -> tools/two/usage.c user/core/log.c"
has "clean layout" "user/core/log.c ->"
has "clean layout" "layering: 8 files, 8 edges, no cycle"
grep -q "several files" <<<"$out" && fail "clean layout: usage() said ambiguous:
$out"
echo "ok: a clean layout passes"

# A stale object (make's .o and .d left behind, its source gone from the
# tree) is left out: it links into nothing. Its caller here is named after
# a source the tree has, as in a real build.
for real in "$ROOT"/user/core/*.c; do break; done
real=${real#"$ROOT"/}
D=$TMP/stale
obj "$D" "${real%.c}.o" 'int gone_fn(void); int live_fn(void) { return gone_fn(); }'
obj "$D" user/core/gone_xyz.o 'int live_fn(void); int gone_fn(void) { return live_fn(); }'
echo "$D/user/core/gone_xyz.o: user/core/gone_xyz.c" >"$D/user/core/gone_xyz.d"
check "$D"
want_rc "stale object" 0
has "stale object" "left out 1 stale object"
has "stale object" "layering: 1 file, 0 edges, no cycle"
echo "ok: a stale object is left out"

check "$TMP/none"
want_rc "no objects" 77
echo "ok: no objects: skipped (77)"

# The tree itself.
check "$B"
[ "$rc" -ne 77 ] || fail "no objects under $B/user or $B/tools: build first"
[ "$rc" -eq 0 ] || fail "scripts/layering.sh $B (exit $rc):
$out"
echo "$out" | tail -n 1
echo "PASS test_layering"
