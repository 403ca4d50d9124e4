#!/usr/bin/env bash
# The OpenAI front's cost (docs/EVALUATION.md, "The OpenAI front"), with wrk
# (HTTP/1.1 keep-alive, POST bodies from a Lua script):
#  1. Throughput: kvsplice-http -> kvspliced -> 2 kvsplice-sim at
#     --time-scale 0.001 (a backend that costs almost nothing), CONNS
#     concurrent clients for SECONDS, whole and streamed chat completions
#     of 8 tokens sharing a system prompt; requests per second, latency
#     percentiles, and CPU per request of the front, the controller and
#     the two simulators (user + system, /proc).
#  2. Added latency: one llama-server (BUILD/llama/tiny.gguf) called
#     directly, then through kvsplice-http -> kvspliced -> kvsplice-adapter,
#     one request at a time, the same body (1 token, a cached prompt):
#     the difference is what the front, the gateway and the adapter add.
#
#   scripts/bench-http.sh [BUILD]    (root; needs wrk: scripts/deps.sh wrk)
set -euo pipefail

BUILD=${1:-build}
SECONDS_RUN=${SECONDS_RUN:-10}
CONNS=${CONNS:-64}
source "$(dirname "$0")/bench-lib.sh"
bench_setup bench-http
command -v wrk >/dev/null || { echo "bench-http: needs wrk (scripts/deps.sh wrk)" >&2; exit 1; }

# wrk's Lua: POSTs BODY (a file), with {n} in it replaced by a counter so
# that every request asks something new after the shared system prompt.
cat >"$TMP/post.lua" <<'LUA'
local body = io.open(os.getenv("BODY_FILE")):read("*a")
local n = 0
request = function()
	n = n + 1
	return wrk.format("POST", nil, { ["Content-Type"] = "application/json" },
		(body:gsub("{n}", tostring(n))))
end
LUA
sys=$(awk 'BEGIN { for (i = 0; i < 30; i++) printf "Rule %d: be brief and exact. ", i }')
jq -nc --arg s "$sys" '{model:"m",max_tokens:8,messages:[{role:"system",content:$s},
	{role:"user",content:"Question {n}?"}]}' >"$TMP/whole.json"
jq -c '.stream = true' "$TMP/whole.json" >"$TMP/stream.json"

# wrk URL BODY_FILE CONNS SECONDS: "rps p50_ms p90_ms p99_ms requests errors"
wrk_run() {
	local out
	out=$(BODY_FILE=$2 wrk -t "$(($3 < 2 ? $3 : 2))" -c "$3" -d "${4}s" --latency -s "$TMP/post.lua" "$1")
	awk '
		function ms(v) { if (v ~ /us$/) return v / 1000; if (v ~ /ms$/) return v + 0; return v * 1000 }
		/^ +50%/ { p50 = ms($2) } /^ +90%/ { p90 = ms($2) } /^ +99%/ { p99 = ms($2) }
		/requests in/ { n = $1 } /Requests\/sec/ { rps = $2 }
		/Non-2xx/ { e += $NF }
		/Socket errors/ { gsub(/[^0-9 ]/, " "); for (i = 1; i <= NF; i++) e += $i }
		END { printf "%.0f %.2f %.2f %.2f %d %d\n", rps, p50, p90, p99, n, e }' <<<"$out"
}

cpu_of() { # PIDS...: their CPU ms, summed
	local t=0 p
	for p in "$@"; do t=$(awk -v a="$t" -v b="$(bench_cpu_ms "$p")" 'BEGIN { print a + b }'); done
	echo "$t"
}

start_gw() { # backends...
	rm -f "$TMP/gw.port"
	"$BUILD/kvspliced" --listen 127.0.0.1:0 --port-file "$TMP/gw.port" --pin-dir "$PIN" \
		--front-source 127.0.0.1/32 "$@" 2>"$TMP/gw.log" &
	GW=$!
	PIDS+=($GW)
	bench_wait_file "$TMP/gw.port"
	sleep 1 # the backends' first health check
}

start_front() {
	rm -f "$TMP/http.port"
	"$BUILD/kvsplice-http" --listen 127.0.0.1:0 --port-file "$TMP/http.port" \
		--gateway "127.0.0.1:$(cat "$TMP/gw.port")" --link-inflight 4096 2>"$TMP/http.log" &
	FRONT=$!
	PIDS+=($FRONT)
	bench_wait_file "$TMP/http.port"
	URL=http://127.0.0.1:$(cat "$TMP/http.port")
}

echo "## 1. Throughput: front -> gateway -> 2 kvsplice-sim (--time-scale 0.001), $CONNS connections, ${SECONDS_RUN} s"
echo
bench_start_sims 2 --time-scale 0.001
SIMS=("${PIDS[@]}")
start_gw "${BACKENDS[@]}"
start_front
echo "| request | req/s | p50 ms | p90 ms | p99 ms | requests | errors | front µs/req | controller µs/req | sims µs/req |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for kind in whole stream; do
	f0=$(cpu_of "$FRONT") g0=$(cpu_of "$GW") s0=$(cpu_of "${SIMS[@]}")
	read -r rps p50 p90 p99 n e < <(wrk_run "$URL/v1/chat/completions" "$TMP/$kind.json" "$CONNS" "$SECONDS_RUN")
	f1=$(cpu_of "$FRONT") g1=$(cpu_of "$GW") s1=$(cpu_of "${SIMS[@]}")
	awk -v k="$kind" -v rps="$rps" -v a="$p50" -v b="$p90" -v c="$p99" -v n="$n" -v e="$e" \
		-v f="$((${f1%.*} - ${f0%.*}))" -v g="$((${g1%.*} - ${g0%.*}))" -v s="$((${s1%.*} - ${s0%.*}))" \
		'BEGIN { printf "| %s | %d | %.2f | %.2f | %.2f | %d | %d | %.0f | %.0f | %.0f |\n",
			k, rps, a, b, c, n, e, f * 1000 / n, g * 1000 / n, s * 1000 / n }'
done
for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
wait 2>/dev/null || true
PIDS=()

LLAMA_MODEL=${LLAMA_MODEL:-$BUILD/llama/tiny.gguf}
if ! command -v llama-server >/dev/null || [ ! -f "$LLAMA_MODEL" ]; then
	echo
	echo "(part 2 skipped: no llama-server or $LLAMA_MODEL; make llama)"
	exit 0
fi
echo
echo "## 2. Added latency: llama-server directly, and through front -> gateway -> adapter (1 connection, ${SECONDS_RUN} s each)"
echo
llama-server -m "$LLAMA_MODEL" --host 127.0.0.1 --port 0 -t 1 -np 1 -c 4096 \
	--override-kv llama.context_length=int:4096 --metrics \
	>"$TMP/llama.log" 2>&1 &
PIDS+=($!)
LLAMA=$!
for _ in $(seq 1 600); do
	port=$(grep -a -o 'listening on http://127.0.0.1:[0-9]*' "$TMP/llama.log" | head -n 1 | sed 's/.*://' || true)
	[ -n "$port" ] && curl -sf "http://127.0.0.1:$port/health" >/dev/null && break
	sleep 0.1
done
"$BUILD/kvsplice-adapter" --server "http://127.0.0.1:$port" --port-file "$TMP/ad.port" 2>"$TMP/ad.log" &
AD=$!
PIDS+=($AD)
bench_wait_file "$TMP/ad.port"
start_gw --backend "127.0.0.1:$(cat "$TMP/ad.port")"
start_front
jq -c '.max_tokens = 1 | .messages[1].content = "The same question."' "$TMP/whole.json" >"$TMP/one.json"
echo "| path | req/s | p50 ms | p90 ms | p99 ms | requests | errors | front µs/req | controller µs/req | adapter µs/req | llama-server µs/req |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for path in direct front; do
	[ "$path" = direct ] && u="http://127.0.0.1:$port" || u=$URL
	f0=$(cpu_of "$FRONT") g0=$(cpu_of "$GW") a0=$(cpu_of "$AD") l0=$(cpu_of "$LLAMA")
	read -r rps p50 p90 p99 n e < <(wrk_run "$u/v1/chat/completions" "$TMP/one.json" 1 "$SECONDS_RUN")
	f1=$(cpu_of "$FRONT") g1=$(cpu_of "$GW") a1=$(cpu_of "$AD") l1=$(cpu_of "$LLAMA")
	awk -v k="$path" -v rps="$rps" -v a="$p50" -v b="$p90" -v c="$p99" -v n="$n" -v e="$e" \
		-v f="$((${f1%.*} - ${f0%.*}))" -v g="$((${g1%.*} - ${g0%.*}))" \
		-v d="$((${a1%.*} - ${a0%.*}))" -v l="$((${l1%.*} - ${l0%.*}))" \
		'BEGIN { printf "| %s | %d | %.2f | %.2f | %.2f | %d | %d | %.0f | %.0f | %.0f | %.0f |\n",
			k, rps, a, b, c, n, e, f * 1000 / n, g * 1000 / n, d * 1000 / n, l * 1000 / n }'
done
