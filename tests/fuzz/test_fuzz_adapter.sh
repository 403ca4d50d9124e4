#!/usr/bin/env bash
# A short libFuzzer run over what an inference server sends the adapter
# (tests/fuzz/fuzz_adapter.c): SSE splitting, OpenAI events, error bodies,
# /metrics. 200,000 inputs from the seed corpus, fixed seed. Fails on any
# crash, sanitizer report or broken property.
set -euo pipefail
B=${KVS_BUILD:-$(cd "$(dirname "$0")/../.." && pwd)/build}
HERE=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$B/fuzz/fuzz_adapter" -runs=200000 -seed=1 -error_exitcode=1 -timeout_exitcode=1 -max_len=8192 -artifact_prefix="$work/" "$work" \
	"$HERE/corpus_adapter" 2>&1 | tail -n 3
echo "PASS test_fuzz_adapter"
