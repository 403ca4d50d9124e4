#!/usr/bin/env bash
# The kernel's cost per request when it hashes the prompt: one kvsplice-sim
# and the gateway on loopback, REQUESTS requests of TEMPLATE template +
# OWN own tokens (no cache key, so the verdict hashes every block of the
# window), and the verdict program's run time from the kernel's BPF
# statistics (kernel.bpf_stats_enabled, on for the measured requests only).
# Each request is one request frame and two response frames (max_tokens 1).
#
#   scripts/bench-verdict.sh [BUILD]     (root; docs/EVALUATION.md, "Slow path")
set -euo pipefail

BUILD=${1:-build}
REQUESTS=${REQUESTS:-2000}
TEMPLATE=${TEMPLATE:-6000}
OWN=${OWN:-2000}
source "$(dirname "$0")/bench-lib.sh"
bench_cleanup_hook() { sysctl -q kernel.bpf_stats_enabled=0; }
bench_setup bench-verdict

"$BUILD/kvsplice-sim" --port-file "$TMP/sim.port" --time-scale 0.001 2>"$TMP/sim.log" &
PIDS+=($!)
bench_wait_file "$TMP/sim.port"
"$BUILD/kvspliced" --listen 127.0.0.1:0 --port-file "$TMP/gw.port" --pin-dir "$PIN" \
	--backend "127.0.0.1:$(cat "$TMP/sim.port")" --log-level warn 2>"$TMP/gw.log" &
PIDS+=($!)
bench_wait_file "$TMP/gw.port"

load() {
	"$BUILD/kvsplice-bench" live --connect "127.0.0.1:$(cat "$TMP/gw.port")" --quiet -n "$1" \
		-k 2 --prefixes 8 --prefix-tokens "$TEMPLATE" --suffix-tokens "$OWN" -m 1 >/dev/null
}

load 200 # the templates' routes learned: the measured requests take the fast path
# our gateway's verdict: the one that uses the routes map pinned in $PIN
routes=$(bpftool map show pinned "$PIN/routes" -j | jq .id)
id=$(bpftool prog show -j | jq --argjson m "$routes" \
	'[.[] | select(.name == "kvs_verdict" and ((.map_ids // []) | index($m)))] | first | .id')
stats() { bpftool prog show id "$id" -j | jq -r '"\(.run_cnt // 0) \(.run_time_ns // 0)"'; }
sysctl -q kernel.bpf_stats_enabled=1
read -r c0 t0 < <(stats)
load "$REQUESTS"
read -r c1 t1 < <(stats)
sysctl -q kernel.bpf_stats_enabled=0
runs=$((c1 - c0))
[ "$runs" -gt 0 ] || { echo "bench-verdict: the verdict did not run" >&2; exit 1; }
echo "kvs_verdict: $runs runs for $REQUESTS requests of $((TEMPLATE + OWN)) tokens:" \
	"$(((t1 - t0) / runs)) ns per run, $(((t1 - t0) / REQUESTS)) ns per request"
