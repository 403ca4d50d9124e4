#!/usr/bin/env bash
# kvsplice on real inference servers (docs/EVALUATION.md, "Real servers"):
# SERVERS llama.cpp llama-server processes (the tiny model `make llama`
# makes), a kvsplice-adapter each; the same shared-prefix workload sent
# (1) through the gateway and (2) round robin straight to the adapters, each
# on a fresh fleet (empty caches); then what the adapter adds, against
# calling one server directly (kvsplice-bench http), with its CPU per
# request. Prints markdown tables; every figure is from the servers' own
# reports (cached_tokens) or measured by the client; and the gateway's
# TTFT histogram (/metrics, kvsplice_backend_ttft_seconds: the servers'
# own first-token times, as the adapters report them) beside the client's.
#
#   scripts/bench-real.sh BUILD
#
# Environment (defaults in brackets): SERVERS [3], SLOTS [2] per server,
# CTX [8192] tokens per server (shared by its slots), CACHE_RAM [0] MiB of
# llama.cpp's host prompt cache (0: a prefix lives only in a slot, so a
# server holds SLOTS prefixes, as a GPU's KV capacity holds a few),
# KV_TOKENS [CTX when CACHE_RAM is 0, else none] the adapters' --kv-tokens,
# REQUESTS [240], CONNECTIONS [6], PREFIXES [6], PREFIX_TOKENS [512] (of
# kvsplice-bench's synthetic words; about twice as many Llama tokens),
# SUFFIX_TOKENS [32], MAX_TOKENS [16], OVERHEAD_REQUESTS [200],
# LLAMA_SERVER, LLAMA_MODEL.
set -euo pipefail

BUILD=$(cd "${1:?usage: $0 BUILD}" && pwd)
SERVERS=${SERVERS:-3}
SLOTS=${SLOTS:-2}
CTX=${CTX:-8192}
CACHE_RAM=${CACHE_RAM:-0}
# What each adapter tells the gateway of its server's KV cache (llama.cpp
# says none): with no host prompt cache, its context, which its slots
# share; with one, unknown (its size is in MiB), so nothing is said.
KV_TOKENS=${KV_TOKENS-$([ "$CACHE_RAM" != 0 ] || echo "$CTX")}
REQUESTS=${REQUESTS:-240}
CONNECTIONS=${CONNECTIONS:-6}
PREFIXES=${PREFIXES:-6}
PREFIX_TOKENS=${PREFIX_TOKENS:-512}
SUFFIX_TOKENS=${SUFFIX_TOKENS:-32}
MAX_TOKENS=${MAX_TOKENS:-16}
OVERHEAD_REQUESTS=${OVERHEAD_REQUESTS:-200}
LLAMA_SERVER=${LLAMA_SERVER:-$(command -v llama-server || true)}
LLAMA_MODEL=${LLAMA_MODEL:-$BUILD/llama/tiny.gguf}
# Printable ASCII only: docs/RUNBOOK.md, "Real inference servers".
BODY='{"grammar":"root ::= [ -~]*"}'

[ -x "$LLAMA_SERVER" ] && [ -f "$LLAMA_MODEL" ] ||
	{ echo "bench-real: no llama-server or $LLAMA_MODEL: run make llama" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || { echo "bench-real: needs root (BPF, sockmap)" >&2; exit 1; }
TMP=$(mktemp -d /tmp/kvsplice-real.XXXXXX)
PIN=/sys/fs/bpf/kvsplice-real-$$
PIDS=()
stop_all() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	PIDS=()
}
trap 'stop_all; rm -rf "$TMP" "$PIN"' EXIT

# start_fleet TAG: SERVERS fresh servers and adapters; sets ADS (adapter
# addresses), LPORTS (server ports) and APIDS (adapter pids).
start_fleet() {
	local i port
	ADS=()
	LPORTS=()
	APIDS=()
	for i in $(seq 1 "$SERVERS"); do
		"$LLAMA_SERVER" -m "$LLAMA_MODEL" --host 127.0.0.1 --port 0 -t 1 -np "$SLOTS" \
			-c "$CTX" --cache-ram "$CACHE_RAM" --override-kv llama.context_length=int:4096 \
			--metrics >"$TMP/$1-llama$i.log" 2>&1 &
		PIDS+=($!)
	done
	for i in $(seq 1 "$SERVERS"); do
		port=""
		while [ -z "$port" ]; do
			sleep 0.1
			port=$(grep -a -o 'listening on http://127.0.0.1:[0-9]*' "$TMP/$1-llama$i.log" |
				sed 's/.*://' || true)
		done
		until curl -sf "http://127.0.0.1:$port/health" >/dev/null; do sleep 0.1; done
		LPORTS+=("$port")
		"$BUILD/kvsplice-adapter" --server "http://127.0.0.1:$port" --id "$i" \
			${KV_TOKENS:+--kv-tokens "$KV_TOKENS"} \
			--port-file "$TMP/$1-ad$i.port" --extra-body "$BODY" --log-level warn \
			2>>"$TMP/adapters.log" &
		PIDS+=($!)
		APIDS+=($!)
		while [ ! -s "$TMP/$1-ad$i.port" ]; do sleep 0.02; done
		ADS+=("127.0.0.1:$(cat "$TMP/$1-ad$i.port")")
	done
}

live() { # ARGS...: kvsplice-bench live on the workload, JSON
	"$BUILD/kvsplice-bench" live --verify framing -n "$REQUESTS" -k "$CONNECTIONS" \
		--prefixes "$PREFIXES" --prefix-tokens "$PREFIX_TOKENS" --suffix-tokens "$SUFFIX_TOKENS" \
		--max-tokens "$MAX_TOKENS" --declare-true-length --fleet "$SERVERS" --timeout-s 600 \
		--json "$@"
}

row() { # NAME JSON
	jq -r --arg n "$1" '"| \($n) | \(.ok)/\(.requests) | \(.ttft_p50_ms | . * 10 | round / 10) | \(.ttft_p90_ms | . * 10 | round / 10) | \(.ttft_p99_ms | . * 10 | round / 10) | \(.hit_rate * 1000 | round / 10) % | \(.throughput_rps * 10 | round / 10) | \(.output_tok_s | round) | \([.backends[].requests] | map(tostring) | join(" / ")) |"' <<<"$2"
}

echo "bench-real: $SERVERS llama-server ($SLOTS slots, $CTX tokens, cache-ram $CACHE_RAM MiB)," \
	"$REQUESTS requests over $CONNECTIONS connections, $PREFIXES prefixes of $PREFIX_TOKENS" \
	"tokens + $SUFFIX_TOKENS, $MAX_TOKENS out" >&2

# 1. Round robin, straight to the adapters.
start_fleet rr
rr_args=()
for a in "${ADS[@]}"; do rr_args+=(--connect "$a"); done
rr=$(live "${rr_args[@]}")
stop_all

# 2. Through the gateway.
start_fleet kvs
gw_args=()
for a in "${ADS[@]}"; do gw_args+=(--backend "$a"); done
"$BUILD/kvspliced" --listen 127.0.0.1:0 --port-file "$TMP/gw.port" --pin-dir "$PIN" \
	"${gw_args[@]}" --metrics 127.0.0.1:0 2>"$TMP/gw.log" &
PIDS+=($!)
while [ ! -s "$TMP/gw.port" ]; do sleep 0.02; done
until mport=$(grep -o 'event=metrics_listening addr=[^ ]* port=[0-9]*' "$TMP/gw.log" |
	grep -o '[0-9]*$'); do sleep 0.02; done
for i in $(seq 0 $((SERVERS - 1))); do
	until [ "$("$BUILD/kvsplicectl" --pin-dir "$PIN" backends --json | jq -r ".[$i].state")" = up ]; do
		sleep 0.1
	done
done
kvs=$(live --connect "127.0.0.1:$(cat "$TMP/gw.port")")
# What the gateway's index of each server ended at (blocks of 16 tokens;
# its start: what the adapter said, --kv-tokens / 16, else 81,250).
index=$("$BUILD/kvsplicectl" --pin-dir "$PIN" backends --json |
	jq -r '[.[] | "\(.index_blocks) (said \(.pong.kv_total_blocks))"] | join(" / ")')
curl -s "http://127.0.0.1:$mport/metrics" >"$TMP/metrics.txt"
stop_all

echo "| policy | ok | TTFT P50 ms | P90 | P99 | servers' hit rate | req/s | output tok/s | requests per server |"
echo "|---|---|---|---|---|---|---|---|---|"
row "round robin (no gateway)" "$rr"
row "kvsplice" "$kvs"
echo
echo "the gateway's index of each server at the end, blocks: $index"
# The fleet's TTFT from the gateway's histogram, as Prometheus's
# histogram_quantile reads it (linear within a bucket), beside the
# client's: the servers' own times leave out the client's network, the
# gateway and the adapter's KVS1 side.
python3 - "$TMP/metrics.txt" "$(jq -c '[.ttft_p50_ms, .ttft_p90_ms, .ttft_p99_ms, .ok]' <<<"$kvs")" <<'PY'
import json, re, sys
text, (c50, c90, c99, ok) = open(sys.argv[1]).read(), json.loads(sys.argv[2])
buckets, total = {}, {"queue": 0.0, "prefill": 0.0, "sum": 0.0, "count": 0}
for line in text.splitlines():
    m = re.match(r'kvsplice_backend_ttft_seconds_bucket\{backend="[^"]*",le="([^"]+)"\} (\S+)', line)
    if m:
        le = float("inf") if m.group(1) == "+Inf" else float(m.group(1))
        buckets[le] = buckets.get(le, 0) + float(m.group(2))
    for k, name in (("queue", "queue_seconds_total"), ("prefill", "prefill_seconds_total"),
                    ("sum", "ttft_seconds_sum"), ("count", "ttft_seconds_count")):
        if line.startswith("kvsplice_backend_" + name + "{"):
            total[k] += float(line.split()[-1])
bounds = sorted(buckets)
def quantile(q):
    n, rank, lo, below = buckets[float("inf")], q * buckets[float("inf")], 0.0, 0.0
    for le in bounds:
        if buckets[le] >= rank:
            if le == float("inf"):
                return lo * 1000
            return (lo + (le - lo) * (rank - below) / max(buckets[le] - below, 1)) * 1000
        lo, below = le, buckets[le]
if not total["count"]:
    sys.exit("bench-real: the gateway's histogram counted nothing")
print()
print("| TTFT ms | P50 | P90 | P99 | mean | requests | queue / prefill |")
print("|---|---|---|---|---|---|---|")
print("| the client's (kvsplice-bench) | %.1f | %.1f | %.1f | | %d | |" % (c50, c90, c99, ok))
print("| the gateway's histogram (servers' own) | ~%.1f | ~%.1f | ~%.1f | %.1f | %d | %.0f%% / %.0f%% |" % (
    quantile(0.5), quantile(0.9), quantile(0.99), total["sum"] / total["count"] * 1000,
    total["count"], 100 * total["queue"] / total["sum"], 100 * total["prefill"] / total["sum"]))
PY

# 3. The adapter's cost: one server, one request at a time, the same
#    prompt each time (cached after the first), direct and through it.
SERVERS=1 start_fleet ov
awk -v n="$PREFIX_TOKENS" 'BEGIN { for (i = 0; i < n / 8; i++) printf "Line %d of the shared instructions says little. ", i }' \
	>"$TMP/prompt"
overhead_live() { # N
	"$BUILD/kvsplice-bench" live --connect "${ADS[0]}" --verify framing -n "$1" -k 1 \
		--prompt-file "$TMP/prompt" --prefixes 1 --suffix-tokens 0 --max-tokens "$MAX_TOKENS" \
		--declare-true-length --json
}
overhead_live 5 >/dev/null # the prompt into the server's cache
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
t0=$(ticks "${APIDS[0]}")
via=$(overhead_live "$OVERHEAD_REQUESTS")
t1=$(ticks "${APIDS[0]}")
direct=$("$BUILD/kvsplice-bench" http --url "http://127.0.0.1:${LPORTS[0]}" --prompt-file "$TMP/prompt" \
	-n "$OVERHEAD_REQUESTS" --max-tokens "$MAX_TOKENS" --extra-body "$BODY" --json)
hz=$(getconf CLK_TCK)
echo
echo "| path | TTFT P50 ms | TTFT P90 ms | end-to-end P50 ms | P90 |"
echo "|---|---|---|---|---|"
jq -r '"| direct HTTP (kvsplice-bench http) | \(.ttft_p50_ms * 100 | round / 100) | \(.ttft_p90_ms * 100 | round / 100) | \(.e2e_p50_ms * 100 | round / 100) | \(.e2e_p90_ms * 100 | round / 100) |"' <<<"$direct"
jq -r '"| KVS1 through kvsplice-adapter | \(.ttft_p50_ms * 100 | round / 100) | \(.ttft_p90_ms * 100 | round / 100) | \(.e2e_p50_ms * 100 | round / 100) | \(.e2e_p90_ms * 100 | round / 100) |"' <<<"$via"
echo
awk -v a="$t0" -v b="$t1" -v n="$OVERHEAD_REQUESTS" -v hz="$hz" \
	'BEGIN { printf "adapter CPU: %.3f ms per request (%d requests, user+system)\n", (b - a) * 1000 / hz / n, n }'
