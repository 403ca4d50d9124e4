#!/usr/bin/env bash
# Added capacity, live (docs/EVALUATION.md, "Added capacity"): 4
# kvsplice-sim backends behind the gateway and a workload whose prefixes
# are all held once it has run once (the same prompts every run); then, one
# run each: backend slot 3 drained; undrained; again; a fifth backend
# added; again. Prints, per run, the requests the gateway sent each slot
# (its PONG, slot by slot), load max/mean by requests over the whole fleet
# (idle backends as 0), TTFT and the hit rate.
#
#   scripts/bench-capacity.sh [BUILD]    (root)
#   WORKLOAD=prefixes|conversations  N=requests a run  RATE=per second
#   (open loop; 0: closed loop, 8 connections x depth 4)  SCALE=time scale
#   GROW=1: run k sends k x N requests, so that conversations go deeper
#   every run (turns past the last run's are new prefixes), as a live
#   service's do; default 0, every run the same N prompts
set -euo pipefail

BUILD=${1:-build}
WORKLOAD=${WORKLOAD:-prefixes}
N=${N:-600}
RATE=${RATE:-100}
SCALE=${SCALE:-0.01}
GROW=${GROW:-0}
source "$(dirname "$0")/bench-lib.sh"
bench_setup bench-capacity

bench_start_sims 5 --time-scale "$SCALE"
fifth=${BACKENDS[9]}
"$BUILD/kvspliced" --listen 127.0.0.1:0 --port-file "$TMP/gw.port" --pin-dir "$PIN" \
	"${BACKENDS[@]:0:8}" 2>"$TMP/gw.log" &
PIDS+=($!)
bench_wait_file "$TMP/gw.port"
ctl() { "$BUILD/kvsplicectl" --pin-dir "$PIN" "$@"; }
wait_up() { # N: until N backends are up
	for _ in $(seq 1 200); do
		[ "$(ctl backends --json | jq '[.[] | select(.state == "up")] | length')" = "$1" ] &&
			return 0
		sleep 0.05
	done
	echo "bench-capacity: $1 backends never came up" >&2
	exit 1
}
wait_up 4

case $WORKLOAD in
prefixes) work=(--prefixes 64 --prefix-tokens 2048 --suffix-tokens 256 --hint) ;;
conversations) work=(--conversations 64 --turn-tokens 256) ;;
*) echo "bench-capacity: WORKLOAD is prefixes or conversations" >&2; exit 2 ;;
esac
if [ "$RATE" = 0 ]; then load=(-k 8 -d 4); else load=(-k 8 --rate "$RATE"); fi

runs=0
run() { # LABEL
	local r n=$N
	runs=$((runs + 1))
	[ "$GROW" = 1 ] && n=$((N * runs))
	r=$("$BUILD/kvsplice-bench" live --connect "127.0.0.1:$(cat "$TMP/gw.port")" --quiet \
		-n "$n" "${load[@]}" "${work[@]}" -m 16 --timeout-s 600 --json) || {
		echo "bench-capacity: run '$1' failed: $r" >&2
		exit 1
	}
	jq -r --arg l "$1" --arg n "$n" '"\($l), \($n) requests: per slot " +
		([.gateway_slots[] | "\(.slot)=\(.requests)"] | join(" ")) +
		"; max/mean \(.load_max_over_mean) over \(.fleet) (\(.idle_backends) idle)" +
		"; TTFT p50/p90/p99 \(.ttft_p50_ms | . * 100 | round / 100)/\(.ttft_p90_ms | . * 100 | round / 100)/\(.ttft_p99_ms | . * 100 | round / 100) ms" +
		"; hit \(.hit_rate * 1000 | round / 10)%"' <<<"$r"
}

echo "$WORKLOAD, $N requests a run (GROW=$GROW), rate $RATE/s (0: closed loop), time scale $SCALE"
run "warm-up (4 backends)"
run "again (all prefixes held)"
slot3=$(ctl backends --json | jq -r '.[3].backend')
ctl backend drain "$slot3" >/dev/null
run "slot 3 drained"
ctl backend undrain "$slot3" >/dev/null
run "slot 3 undrained"
run "again"
ctl backend add "${fifth#--backend }" >/dev/null
wait_up 5
run "a fifth backend added (slot 4)"
run "again"
