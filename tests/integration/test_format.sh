#!/usr/bin/env bash
# The sources keep the kernel style of .clang-format (make format applies
# it), so that a change's diff shows what it changes and not a reflow.
# Skipped (77) where clang-format is not installed.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
if ! command -v clang-format >/dev/null; then
	echo "clang-format not installed"
	exit 77
fi
if ! out=$(make -s -C "$ROOT" format-check 2>&1); then
	echo "$out" | head -n 40
	echo "FAIL: sources not in .clang-format's style: run make format"
	exit 1
fi
echo "PASS test_format"
