#!/usr/bin/env bash
# make run: start simulated backends and the gateway on loopback, drive a
# shared-prefix workload through it, and print what happened beside the same
# workload sent straight to the backends round robin (no gateway).
#
# The workload is sized against the backends' KV capacity, as prefix-aware
# routing only pays when the live prefixes exceed one instance's cache but
# fit in the fleet's: 24 shared contexts of 3,000 tokens (72k tokens) over 4
# instances of 28.8k tokens each (115k in all, 62% used).
#
# TRACE=FILE replays a JSONL request trace instead (its arrival times, scaled
# by SPEED, and its prompt and output lengths), e.g. the public Mooncake
# trace on 7 instances of the default size:
#   TRACE=traces/mooncake_fast25_synthetic_trace.jsonl SPEED=10 \
#     TIME_SCALE=0.1 BACKENDS=7 KV_BLOCKS=81250 CONNECTIONS=64 make run
set -euo pipefail

BUILD=${1:-build}
BACKENDS=${BACKENDS:-4}
KV_BLOCKS=${KV_BLOCKS:-1800}   # 16-token blocks per instance
PREFIXES=${PREFIXES:-24}
PREFIX_TOKENS=${PREFIX_TOKENS:-3000}
SUFFIX_TOKENS=${SUFFIX_TOKENS:-500}
REQUESTS=${REQUESTS:-960}
CONNECTIONS=${CONNECTIONS:-8}
MAX_TOKENS=${MAX_TOKENS:-16}
TIME_SCALE=${TIME_SCALE:-0.02} # 1 s of model time = 20 ms here
TRACE=${TRACE:-}
SPEED=${SPEED:-1}

[ "$(id -u)" -eq 0 ] || { echo "make run needs root (BPF, sockmap)" >&2; exit 1; }
TMP=$(mktemp -d /tmp/kvsplice-demo.XXXXXX)
PIN=/sys/fs/bpf/kvsplice-demo-$$
source "$(dirname "$0")/bench-lib.sh" # bench_cpu_ms
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$TMP" "$PIN"
}
trap cleanup EXIT

start_sims() { # tag: starts BACKENDS fresh simulators, sets SIMS
	SIMS=()
	for i in $(seq 1 "$BACKENDS"); do
		"$BUILD/kvsplice-sim" --port-file "$TMP/$1$i.port" --id "$i" \
			--kv-blocks "$KV_BLOCKS" --time-scale "$TIME_SCALE" \
			--log-level warn 2>>"$TMP/sims.log" &
		PIDS+=($!)
	done
	for i in $(seq 1 "$BACKENDS"); do
		while [ ! -s "$TMP/$1$i.port" ]; do sleep 0.02; done
		SIMS+=("127.0.0.1:$(cat "$TMP/$1$i.port")")
	done
}

stop_all() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	PIDS=()
}

if [ -n "$TRACE" ]; then
	[ -r "$TRACE" ] || { echo "TRACE=$TRACE: cannot read it" >&2; exit 1; }
	WORKLOAD=(--trace "$TRACE" --speed "$SPEED" -k "$CONNECTIONS" --timeout-s 7200
		--fleet "$BACKENDS" --json)
	echo "kvsplice demo: $BACKENDS simulated backends ($((KV_BLOCKS * 16)) tokens of KV cache each),"
	echo "replaying $TRACE at ${SPEED}x its arrival rate over $CONNECTIONS connections."
else
	WORKLOAD=(-n "$REQUESTS" -k "$CONNECTIONS" -d 1 -m "$MAX_TOKENS" --prefixes "$PREFIXES"
		--prefix-tokens "$PREFIX_TOKENS" --suffix-tokens "$SUFFIX_TOKENS" --timeout-s 300
		--fleet "$BACKENDS" --json)
	echo "kvsplice demo: $BACKENDS simulated backends ($((KV_BLOCKS * 16)) tokens of KV cache each),"
	echo "$REQUESTS requests over $CONNECTIONS connections; each is one of $PREFIXES shared contexts of"
	echo "$PREFIX_TOKENS tokens plus $SUFFIX_TOKENS tokens of its own; $MAX_TOKENS tokens generated."
fi
echo

echo "1/2 round robin, straight to the backends (no gateway)..."
start_sims rr
targets=()
for s in "${SIMS[@]}"; do targets+=(--connect "$s"); done
"$BUILD/kvsplice-bench" live "${targets[@]}" "${WORKLOAD[@]}" >"$TMP/rr.json"
stop_all

echo "2/2 through the kvsplice gateway..."
start_sims kv
backends=()
for s in "${SIMS[@]}"; do backends+=(--backend "$s"); done
"$BUILD/kvspliced" --listen 127.0.0.1:0 --port-file "$TMP/gw.port" --pin-dir "$PIN" ${GW_FLAGS:-} \
	"${backends[@]}" 2>"$TMP/gw.log" &
GW=$!
PIDS+=($GW)
while [ ! -s "$TMP/gw.port" ]; do sleep 0.02; done
# The controller's CPU time (user + system, ms) over the run.
cpu0=$(bench_cpu_ms "$GW")
"$BUILD/kvsplice-bench" live --connect "127.0.0.1:$(cat "$TMP/gw.port")" "${WORKLOAD[@]}" \
	>"$TMP/kv.json"
cpu1=$(bench_cpu_ms "$GW")
"$BUILD/kvsplicectl" --pin-dir "$PIN" stats --json >"$TMP/stats.json"
"$BUILD/kvsplicectl" --pin-dir "$PIN" backends >"$TMP/backends.txt"
stop_all

echo
jq -r -n --slurpfile rr "$TMP/rr.json" --slurpfile kv "$TMP/kv.json" '
	def pct(a; b): if a == 0 then "" else "\(((b - a) / a * 100) | round)%" end;
	def row(name; key; fmt):
		[name, ($rr[0][key] | fmt), ($kv[0][key] | fmt), pct($rr[0][key]; $kv[0][key])];
	def ms: . * 10 | round / 10 | tostring;
	def f2: . * 100 | round / 100 | tostring;
	def pc: . * 1000 | round / 10 | tostring + "%";
	(["", "round robin", "kvsplice", "change"]),
	row("requests ok"; "ok"; tostring),
	row("TTFT p50 (ms)"; "ttft_p50_ms"; ms),
	row("TTFT p90 (ms)"; "ttft_p90_ms"; ms),
	row("TTFT p99 (ms)"; "ttft_p99_ms"; ms),
	row("end-to-end p50 (ms)"; "e2e_p50_ms"; ms),
	row("end-to-end p90 (ms)"; "e2e_p90_ms"; ms),
	row("throughput (req/s)"; "throughput_rps"; f2),
	row("output tokens/s"; "output_tok_s"; ms),
	row("cache hit rate"; "hit_rate"; pc),
	row("load max/mean"; "load_max_over_mean"; f2)
	| @tsv' | column -t -s $'\t'

echo
jq -r --argjson cpu "$(awk -v a="$cpu0" -v b="$cpu1" 'BEGIN { print b - a }')" '
	([.backends[].req_bytes] | add) as $bytes |
	(.fast_path_frames + .slow_path_frames) as $reqs |
	"kernel fast path: \(.fast_path_frames) requests routed in the kernel, \(.slow_path_frames) by the controller (\(.fast_path_share * 1000 | round / 10)% in the kernel)",
	"request bytes: \($bytes - .controller.slow_bytes) of \($bytes) routed in the kernel (\(if $bytes > 0 then (($bytes - .controller.slow_bytes) / $bytes * 1000 | round / 10) else 0 end)%)",
	"placed by the kernel: \(.placed_cold) new, \(.placed_shallow) past a shallow match, \(.placed_spill) spilled, \(.kept_holder) kept on a holder past its bound; reports lost: \(.reports_lost)",
	"controller CPU: \($cpu | round) ms, \(if $reqs > 0 then ($cpu * 1000 / $reqs | round) else 0 end) us a request",
	"responses spliced back by the kernel: \(.resp_frames) frames; controller copied \(.controller.slow_bytes) bytes",
	"routes installed: \(.routes)"' "$TMP/stats.json"
echo
echo "per backend (through the gateway):"
cat "$TMP/backends.txt"
echo
echo "Times are wall-clock on this machine with the simulators' model time scaled by $TIME_SCALE;"
echo "each simulator batches like vLLM (continuous batching, chunked prefill)."
