#!/usr/bin/env bash
# A short libFuzzer run over the KVS1 codec (tests/fuzz/fuzz_codec.c):
# 500,000 inputs from the seed corpus, fixed seed. Fails on any crash,
# sanitizer report or broken round-trip property. `make fuzz` runs longer.
set -euo pipefail
B=${KVS_BUILD:-$(cd "$(dirname "$0")/../.." && pwd)/build}
HERE=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$B/fuzz/fuzz_codec" -runs=500000 -seed=1 -error_exitcode=1 -timeout_exitcode=1 -artifact_prefix="$work/" "$work" "$HERE/corpus" 2>&1 |
	tail -n 3
echo "PASS test_fuzz_codec"
