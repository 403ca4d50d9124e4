#!/usr/bin/env bash
# New prefixes through the gateway, placed by the kernel (--kernel-place yes,
# the default) against handed to the controller (--kernel-place no): the
# time to first token of a request whose prefix nobody holds, and the
# controller's CPU time per request (user + system, from /proc), in one run
# so that the two sides share the machine's state. 4 kvsplice-sim backends
# at --time-scale 0.001 (model time all but gone: what is left is the
# gateway and the loopback), REQUESTS prompts of TOKENS tokens sharing
# nothing, one at a time over one connection.
#
#   scripts/bench-kernel-place.sh [BUILD]    (root; docs/EVALUATION.md,
#                                            "The kernel places every request")
set -euo pipefail

BUILD=${1:-build}
REQUESTS=${REQUESTS:-2000}
TOKENS=${TOKENS:-8000}
source "$(dirname "$0")/bench-lib.sh"
bench_setup bench-kernel-place

run() { # MODE: prints one line of figures
	local mode=$1 gw cpu0 cpu1 out s
	PIDS=()
	bench_start_sims 4 --time-scale 0.001
	rm -f "$TMP/gw.port"
	# --ctl-rate 0: one client's thousands of new prompts a second, all
	# the controller's with --kernel-place no, are over a client's budget.
	"$BUILD/kvspliced" --listen 127.0.0.1:0 --port-file "$TMP/gw.port" --pin-dir "$PIN" \
		--kernel-place "$mode" --ctl-rate 0 "${BACKENDS[@]}" 2>"$TMP/gw-$mode.log" &
	gw=$!
	PIDS+=($gw)
	bench_wait_file "$TMP/gw.port"
	cpu0=$(bench_cpu_ms "$gw")
	out=$("$BUILD/kvsplice-bench" live --connect "127.0.0.1:$(cat "$TMP/gw.port")" --quiet \
		-n "$REQUESTS" -k 1 -d 1 --prefixes 0 --suffix-tokens "$TOKENS" -m 1 --json)
	cpu1=$(bench_cpu_ms "$gw")
	s=$("$BUILD/kvsplicectl" --pin-dir "$PIN" stats --json)
	jq -r --arg mode "$mode" --argjson cpu "$(awk -v a="$cpu0" -v b="$cpu1" 'BEGIN { print b - a }')" \
		--argjson s "$s" '[$mode, .ok, (.ttft_p50_ms * 1000 | round), (.ttft_p90_ms * 1000 | round),
		  (.ttft_p99_ms * 1000 | round), ($cpu * 1000 / .ok | round),
		  ($s.fast_path_share * 1000 | round / 10)] | @tsv' <<<"$out"
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
}

echo "$REQUESTS requests of $TOKENS tokens, nothing shared, one at a time"
{
	printf 'kernel-place\tok\tTTFT p50 (us)\tp90\tp99\tcontroller CPU (us/request)\tin the kernel (%%)\n'
	run no
	run yes
} | column -t -s $'\t'
