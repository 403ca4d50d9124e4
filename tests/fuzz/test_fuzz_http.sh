#!/usr/bin/env bash
# A short libFuzzer run over what an OpenAI client sends kvsplice-http
# (tests/fuzz/fuzz_http.c): the canonical body. 200,000 inputs from the
# seed corpus, fixed seed. Fails on any crash, sanitizer report or broken
# property (the canonical form means what the input meant, and is stable).
set -euo pipefail
B=${KVS_BUILD:-$(cd "$(dirname "$0")/../.." && pwd)/build}
HERE=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$B/fuzz/fuzz_http" -runs=200000 -seed=1 -error_exitcode=1 -timeout_exitcode=1 -max_len=4096 -artifact_prefix="$work/" "$work" \
	"$HERE/corpus_http" 2>&1 | tail -n 3
echo "PASS test_fuzz_http"
