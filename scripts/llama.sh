#!/usr/bin/env bash
# A real inference server for tests on a machine with no GPU and no model hub
# (what kvsplice-adapter puts behind the gateway): llama.cpp's llama-server,
# built from the source that the npm package node-llama-cpp ships
# (llama/gitRelease.bundle), and a tiny random-weight model made here
# (tests/helpers/llama2c_ckpt, converted by llama.cpp's own
# llama-convert-llama2c-to-ggml with the bundle's Llama SPM vocabulary). The
# text is meaningless; the server, its tokenizer, its prefix cache and its
# usage figures are real.
#
#   scripts/llama.sh BUILD [PREFIX]     (make llama [LLAMA_PREFIX=DIR])
#
# 1. PREFIX/bin/llama-server (PREFIX defaults to /usr/local), with what making
#    the model needs in PREFIX/lib/kvsplice/llama (the converter, the
#    vocabulary GGUF, llama.cpp's LICENSE). Skipped when PREFIX/bin/llama-server
#    --version names LLAMA_COMMIT below and the rest is there: no network, no
#    npm. Else: npm pack node-llama-cpp@NLC_VERSION, clone its bundle (its HEAD
#    must be LLAMA_COMMIT) into BUILD/llama/llama.cpp, build the two programs
#    statically there (~12 minutes on two cores; kept, so a later run, for
#    another prefix too, only relinks) and install them. LLAMA_FORCE=1 builds
#    and installs even when installed; LLAMA_JOBS=N sets the build's jobs.
# 2. BUILD/llama/tiny.gguf, made when missing or older than the converter or
#    the checkpoint helper (BUILD/tests/helpers/llama2c_ckpt must be built).
#    It needs, at serve time: --override-kv llama.context_length=int:4096 -c 4096
#    (the converter writes a context length of 128).
#
# Prints what it did, then "server=PATH model=PATH" last. Needs cmake, g++,
# git (make deps) and, only when it builds, npm: when npm is missing it asks
# scripts/deps.sh for Debian's (not in deps.sh's list: Debian's npm conflicts
# with the nodejs of NodeSource, which provides npm itself).
set -euo pipefail

NLC_VERSION=3.21.1
LLAMA_COMMIT=80fb11ac73e66d89eae2c6a91d8a77428fa733ed # its gitRelease.bundle's HEAD
VOCAB=ggml-vocab-llama-spm.gguf
SERVE_FLAGS="--override-kv llama.context_length=int:4096 -c 4096"

BUILD=$(cd "${1:?usage: $0 BUILD [PREFIX]}" && pwd)
PREFIX=${2:-/usr/local}
case $PREFIX in /*) ;; *) PREFIX=$PWD/$PREFIX ;; esac
DIR=$BUILD/llama
SRC=$DIR/llama.cpp
SERVER=$PREFIX/bin/llama-server
LIBDIR=$PREFIX/lib/kvsplice/llama
CONVERT=$LIBDIR/llama-convert-llama2c-to-ggml
CKPT=$BUILD/tests/helpers/llama2c_ckpt
JOBS=${LLAMA_JOBS:-$(nproc)}
short=${LLAMA_COMMIT:0:7}
start=$SECONDS

say() { echo "llama: $*"; }
die() {
	echo "llama: $*" >&2
	exit 1
}
elapsed() {
	local s=$((SECONDS - start))
	printf '%dm%02ds' $((s / 60)) $((s % 60))
}

# The commit a llama-server was built from, as its --version prints it on
# stderr ("version: 0.4.0-dev (build 1, commit 80fb11a)"); empty when it
# does not run.
server_commit() {
	{ "$1" --version 2>&1 || true; } | sed -n 's/.*commit \([0-9a-f]\{7,\}\).*/\1/p' | head -n 1
}
# Whether a (short) commit is LLAMA_COMMIT.
is_ours() { [ -n "$1" ] && [ "${LLAMA_COMMIT#"$1"}" != "$LLAMA_COMMIT" ]; }
installed() {
	[ -x "$SERVER" ] && [ -x "$CONVERT" ] && [ -f "$LIBDIR/$VOCAB" ] &&
		is_ours "$(server_commit "$SERVER")"
}

# Prints "build N% (elapsed)" every tenth of cmake's progress.
progress() {
	local line pct last=-10

	while IFS= read -r line; do
		[[ $line =~ ^\[\ *([0-9]+)%\] ]] || continue
		pct=${BASH_REMATCH[1]}
		if ((pct >= last + 10)); then
			last=$((pct / 10 * 10))
			say "build $pct% ($(elapsed))"
		fi
	done
}

# The source: node-llama-cpp's bundle of llama.cpp, at LLAMA_COMMIT.
fetch_source() {
	local tmp=$DIR/fetch.tmp head

	if ! command -v npm >/dev/null; then
		say "npm is missing: installing Debian's (scripts/deps.sh npm)"
		"$(dirname "$0")/deps.sh" npm
	fi
	say "fetching node-llama-cpp@$NLC_VERSION (npm pack, ~35 MB) for its llama.cpp source"
	rm -rf "$tmp" "$SRC"
	mkdir -p "$tmp"
	(cd "$tmp" && npm pack --silent "node-llama-cpp@$NLC_VERSION" >/dev/null) ||
		die "npm pack node-llama-cpp@$NLC_VERSION failed"
	tar -xzf "$tmp/node-llama-cpp-$NLC_VERSION.tgz" -C "$tmp" package/llama/gitRelease.bundle
	git -c advice.detachedHead=false clone -q "$tmp/package/llama/gitRelease.bundle" "$tmp/llama.cpp"
	head=$(git -C "$tmp/llama.cpp" rev-parse HEAD)
	[ "$head" = "$LLAMA_COMMIT" ] ||
		die "node-llama-cpp@$NLC_VERSION ships llama.cpp $head, not $LLAMA_COMMIT: update the pin"
	mv "$tmp/llama.cpp" "$SRC"
	rm -rf "$tmp"
}

# Statically (the installed programs need no library of the build tree),
# only the two programs, and nothing fetched at build time: the web UI
# (LLAMA_USE_PREBUILT_UI would download it), tests (they download models),
# curl, openssl.
build() {
	local bdir=$SRC/build

	cmake -S "$SRC" -B "$bdir" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
		-DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_BUILD_TESTS=OFF \
		-DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF >"$DIR/cmake.log" 2>&1 || {
		tail -n 30 "$DIR/cmake.log" >&2
		die "cmake failed (all of it: $DIR/cmake.log)"
	}
	if [ -x "$bdir/bin/llama-server" ]; then
		say "updating the build in $bdir (log: $DIR/build.log)"
	else
		say "building llama-server and llama-convert-llama2c-to-ggml ($JOBS jobs;" \
			"~12 minutes on two cores; log: $DIR/build.log)"
	fi
	if ! cmake --build "$bdir" -j"$JOBS" --target llama-server llama-convert-llama2c-to-ggml \
		2>&1 | tee "$DIR/build.log" | progress; then
		tail -n 30 "$DIR/build.log" >&2
		die "build failed after $(elapsed) (all of it: $DIR/build.log)"
	fi
	say "built in $(elapsed)"
}

# Each program through a temporary name, so that a running server keeps its
# binary and an interrupted install is never taken for a complete one.
install_all() {
	local bin=$SRC/build/bin libs

	install -m 0755 "$bin/llama-convert-llama2c-to-ggml" "$CONVERT.tmp.$$"
	mv -f "$CONVERT.tmp.$$" "$CONVERT"
	install -m 0644 "$SRC/models/$VOCAB" "$SRC/LICENSE" "$LIBDIR/"
	echo "llama.cpp $LLAMA_COMMIT from node-llama-cpp@$NLC_VERSION" >"$LIBDIR/SOURCE"
	install -m 0755 "$bin/llama-server" "$SERVER.tmp.$$"
	mv -f "$SERVER.tmp.$$" "$SERVER"
	is_ours "$(server_commit "$SERVER")" ||
		die "$SERVER does not run or is not commit $short: $("$SERVER" --version 2>&1 | head -n 3)"
	libs=$(ldd "$SERVER" "$CONVERT" | grep -E 'not found|lib(llama|ggml|mtmd)' || true)
	[ -z "$libs" ] || die "the installed programs need libraries of the build tree: $libs"
	say "installed $SERVER (commit $short) and, in $LIBDIR, the converter and $VOCAB"
}

mkdir -p "$DIR"
if [ "${LLAMA_FORCE:-0}" != 1 ] && installed; then
	say "$SERVER (commit $short, node-llama-cpp@$NLC_VERSION) already installed"
else
	# Before a long build: fail now if PREFIX is not ours to write.
	if ! { mkdir -p "$PREFIX/bin" "$LIBDIR" && [ -w "$PREFIX/bin" ] && [ -w "$LIBDIR" ]; }; then
		die "cannot write $PREFIX/bin and $LIBDIR: run as root, or LLAMA_PREFIX=DIR"
	fi
	c=$(server_commit "$SERVER")
	if [ "${LLAMA_FORCE:-0}" = 1 ]; then
		say "LLAMA_FORCE=1: building"
	elif is_ours "$c"; then
		say "$SERVER is commit $c but $LIBDIR lacks the converter or the vocabulary: building"
	elif [ -e "$SERVER" ]; then
		say "$SERVER is ${c:+commit $c}${c:-of no commit it names}, not commit $short: building"
	else
		say "no llama-server (commit $short) in $PREFIX/bin: building"
	fi
	[ "$(git -C "$SRC" rev-parse HEAD 2>/dev/null || true)" = "$LLAMA_COMMIT" ] || fetch_source
	build
	install_all
fi

model=$DIR/tiny.gguf
[ -x "$CKPT" ] || die "$CKPT is missing (make $CKPT)"
if [ ! -s "$model" ] || [ "$CONVERT" -nt "$model" ] || [ "$CKPT" -nt "$model" ]; then
	"$CKPT" "$DIR/tiny.llama2c"
	(cd "$DIR" && "$CONVERT" --copy-vocab-from-model "$LIBDIR/$VOCAB" \
		--llama2c-model "$DIR/tiny.llama2c" --llama2c-output-model "$model.tmp") \
		>"$DIR/convert.log" 2>&1 || {
		tail -n 20 "$DIR/convert.log" >&2
		die "converting the checkpoint failed (all of it: $DIR/convert.log)"
	}
	mv "$model.tmp" "$model"
	rm -f "$DIR/tiny.llama2c"
	say "made $model (random weights, the Llama SPM vocabulary: 32000 tokens)"
else
	say "model $model is up to date"
fi
say "serve it: $SERVER -m $model $SERVE_FLAGS [--host 127.0.0.1 --port P -np N --metrics]"
case "$(command -v llama-server || true)" in
"$SERVER") ;;
"") say "note: $PREFIX/bin is not in PATH (tests look for llama-server there)" ;;
*) say "note: llama-server in PATH is $(command -v llama-server), not $SERVER" ;;
esac
echo "server=$SERVER model=$model"
