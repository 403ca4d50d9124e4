#!/usr/bin/env bash
# make soak: the gateway under mixed load for SOAK_MINUTES (default 3):
# steady shared-prefix traffic, clients that leave mid-stream, random
# garbage, a backend killed and restarted every third round. After each
# round it prints the controller's RSS and descriptors and the map sizes;
# at the end it checks
# they came back: after the load stops, conns and inflight are where they
# started, and RSS is within SOAK_RSS_SLACK_KB (default 8192) of its value
# after the first round (allocations that last a run, like the index, are
# made then). Exit status 1 if not.
set -euo pipefail
BUILD=${1:-build}
export KVS_BUILD=$(cd "$BUILD" && pwd)
MINUTES=${SOAK_MINUTES:-3}
SLACK_KB=${SOAK_RSS_SLACK_KB:-8192}
source "$(dirname "$0")/../tests/integration/lib.sh"
kvs_setup

kvs_start_sim A --id 1 --time-scale 0.01 --kv-blocks 4000 --log-level warn
kvs_start_sim B --id 2 --time-scale 0.01 --kv-blocks 4000 --log-level warn
kvs_start_gw --backend "127.0.0.1:$SIM_PORT_A" --backend "127.0.0.1:$SIM_PORT_B" \
	--backend-kv-blocks 4000 --frame-timeout-ms 500 --log-level warn

rss_kb() { awk '/^VmRSS/ { print $2 }' "/proc/$GW_PID/status"; }
fds() { ls "/proc/$GW_PID/fd" | wc -l; }
entries() { bpftool map dump pinned "$KVS_PIN/$1" -j | jq length; }
sample() { # label
	printf '%-10s rss_kb=%-7s fds=%-5s conns=%-5s inflight=%-5s routes=%s\n' "$1" "$(rss_kb)" \
		"$(fds)" "$(entries conns)" "$(entries inflight)" "$(entries routes)"
}

round() { # one round of mixed load, ~20 s
	kvs_bench -n 1500 -k 8 --rate 80 --prefixes 40 --prefix-tokens 1024 --suffix-tokens 128 \
		--timeout-s 120 --json >"$KVS_TMP/round.json" &
	local b=$!
	"$KVS_BUILD/tests/helpers/churn_client" "127.0.0.1:$GW_PORT" 500 8 16 >/dev/null || true
	"$KVS_BUILD/tests/helpers/frame_fuzzer" "127.0.0.1:$GW_PORT" 100 "$RANDOM" \
		>"$KVS_TMP/fuzz.json" 2>/dev/null || echo "  frame fuzzer: $(cat "$KVS_TMP/fuzz.json")"
	wait $b || true
	jq -r '"  round: \(.ok)/\(.requests) ok, TTFT p50 \(.ttft_p50_ms | floor) ms"' "$KVS_TMP/round.json"
}

conns0=$(entries conns)
sample start
round
sample warm
rss_warm=$(rss_kb)
end=$(($(date +%s) + MINUTES * 60))
n=1
while [ "$(date +%s)" -lt "$end" ]; do
	round
	n=$((n + 1))
	if [ $((n % 3)) = 0 ]; then # a backend dies and comes back between rounds
		kill -9 "${KVS_PIDS[1]}"
		wait "${KVS_PIDS[1]}" 2>/dev/null || true
		"$KVS_BUILD/kvsplice-sim" --port "$SIM_PORT_B" --id 2 --time-scale 0.01 \
			--kv-blocks 4000 --log-level warn 2>>"$KVS_TMP/B.log" &
		KVS_PIDS[1]=$!
		echo "  backend B restarted"
	fi
	sample "round $n"
done
sleep 2 # answers to vanished clients drain
sample end
rss_end=$(rss_kb)
ok=1
[ "$(entries conns)" = "$conns0" ] || { echo "soak: conns $(entries conns), started at $conns0"; ok=0; }
[ "$(entries inflight)" = 0 ] || { echo "soak: inflight records left: $(entries inflight)"; ok=0; }
[ $((rss_end - rss_warm)) -le "$SLACK_KB" ] ||
	{ echo "soak: RSS grew $((rss_end - rss_warm)) kB after the first round (slack $SLACK_KB)"; ok=0; }
kvs_stats | jq -c '{fast_path_frames, slow_path_frames, drop_no_client, pass_bad_frame,
	failed: .controller.failed_inflight, timeouts: .controller.frame_timeouts}'
[ $ok = 1 ] && echo "soak: PASS ($n rounds, RSS $rss_warm -> $rss_end kB)" || { echo "soak: FAIL"; exit 1; }
