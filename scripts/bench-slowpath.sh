#!/usr/bin/env bash
# The live controller's slow path: 4 kvsplice-sim backends and the gateway on
# loopback, REQUESTS prompts of TOKENS tokens that nobody holds (so every one
# goes to the controller), and the controller's own timing of each decision
# (kvsplice_decision_seconds on --metrics: hashing, deciding, installing and
# withdrawing routes, queueing the request for the kernel). Prints the mean,
# and routes installed and withdrawn per decision.
#
#   scripts/bench-slowpath.sh [BUILD]    (root; docs/EVALUATION.md, "Slow path")
set -euo pipefail

BUILD=${1:-build}
REQUESTS=${REQUESTS:-3000}
TOKENS=${TOKENS:-8000}
source "$(dirname "$0")/bench-lib.sh"
bench_setup bench-slowpath

bench_start_sims 4 --time-scale 0.001
# --kernel-place no: the kernel would place these prompts itself.
# --ctl-rate 0: each connection sends the controller far more new prompts
# a second than a client's budget allows (docs/RUNBOOK.md, "One client and
# the controller"); this measures the controller flat out.
"$BUILD/kvspliced" --listen 127.0.0.1:0 --port-file "$TMP/gw.port" --pin-dir "$PIN" \
	--kernel-place no --ctl-rate 0 "${BACKENDS[@]}" --metrics 127.0.0.1:0 --log-level info 2>"$TMP/gw.log" &
PIDS+=($!)
bench_wait_file "$TMP/gw.port"
for _ in $(seq 1 100); do grep -q "event=metrics_listening" "$TMP/gw.log" && break; sleep 0.05; done
mport=$(sed -n 's/.*event=metrics_listening.*port=\([0-9]*\).*/\1/p' "$TMP/gw.log" | head -1)
[ -n "$mport" ] || { echo "bench-slowpath: no metrics port in the log" >&2; exit 1; }

"$BUILD/kvsplice-bench" live --connect "127.0.0.1:$(cat "$TMP/gw.port")" --quiet \
	-n "$REQUESTS" -k 4 --prefixes 0 --suffix-tokens "$TOKENS" -m 1 >/dev/null
m=$(curl -s "127.0.0.1:$mport/metrics")
sum=$(awk '/^kvsplice_decision_seconds_sum/ { print $2 }' <<<"$m")
count=$(awk '/^kvsplice_decision_seconds_count/ { print $2 }' <<<"$m")
s=$("$BUILD/kvsplicectl" --pin-dir "$PIN" stats --json)
awk -v s="$sum" -v c="$count" -v i="$(jq .controller.routes_installed <<<"$s")" \
	-v w="$(jq .controller.routes_withdrawn <<<"$s")" -v t="$TOKENS" 'BEGIN {
	printf "%d slow-path decisions of %s-token prompts: %.1f us each; routes per decision: %.1f installed, %.1f withdrawn\n",
		c, t, s / c * 1e6, i / c, w / c }'
