#!/usr/bin/env bash
# A real inference server for tests on a machine with no GPU and no model hub
# (for the adapter that puts real servers behind the gateway): llama.cpp's
# llama-server built from the source that the npm package node-llama-cpp
# carries (llama/gitRelease.bundle), serving a tiny random-weight model made
# here (tests/helpers/llama2c_ckpt, converted by llama.cpp's own
# llama-convert-llama2c-to-ggml with the bundle's Llama SPM vocabulary). The
# text is meaningless; the tokenizer, the prefix cache and the usage figures
# are real.
#
#   scripts/llama-server.sh BUILD [DIR]   builds what is missing into DIR
#                                         (default BUILD/llama), prints
#                                         "server=PATH model=PATH"
# Needs npm (Node.js) and cmake, g++, git (make deps installs those); the
# first build takes ~11 minutes on two quiet cores, later runs reuse it.
set -euo pipefail

BUILD=$(cd "${1:?usage: $0 BUILD [DIR]}" && pwd)
DIR=${2:-$BUILD/llama}
NLC_VERSION=3.21.1
command -v npm >/dev/null || { echo "llama-server: npm (Node.js) is needed" >&2; exit 1; }
mkdir -p "$DIR"
cd "$DIR"

if [ ! -d llama.cpp ]; then
	if [ ! -f npm/node_modules/node-llama-cpp/llama/gitRelease.bundle ]; then
		echo "llama-server: fetching node-llama-cpp@$NLC_VERSION (its llama.cpp source)" >&2
		mkdir -p npm
		(cd npm && npm install --silent --ignore-scripts --no-audit --no-fund \
			"node-llama-cpp@$NLC_VERSION" >/dev/null)
	fi
	git clone -q npm/node_modules/node-llama-cpp/llama/gitRelease.bundle llama.cpp.tmp
	mv llama.cpp.tmp llama.cpp
fi
server=$DIR/llama.cpp/build/bin/llama-server
convert=$DIR/llama.cpp/build/bin/llama-convert-llama2c-to-ggml
if [ ! -x "$server" ] || [ ! -x "$convert" ]; then
	echo "llama-server: building llama-server (takes minutes)" >&2
	# The web UI would be downloaded at build time: not here, and not needed.
	cmake -S llama.cpp -B llama.cpp/build -DCMAKE_BUILD_TYPE=Release \
		-DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_CURL=OFF >/dev/null
	cmake --build llama.cpp/build -j"$(nproc)" \
		--target llama-server llama-convert-llama2c-to-ggml >/dev/null
fi
model=$DIR/tiny-llama.gguf
if [ ! -f "$model" ]; then
	"$BUILD/tests/helpers/llama2c_ckpt" "$DIR/tiny-llama2c.bin"
	"$convert" --copy-vocab-from-model llama.cpp/models/ggml-vocab-llama-spm.gguf \
		--llama2c-model "$DIR/tiny-llama2c.bin" --llama2c-output-model "$model.tmp" \
		>"$DIR/convert.log" 2>&1 || { tail -n 20 "$DIR/convert.log" >&2; exit 1; }
	mv "$model.tmp" "$model"
fi
echo "server=$server model=$model"
