#!/usr/bin/env bash
# kvsplice-http with two gateways, one of which fails every request at once:
#  - no backend up behind it (no_backend): the front shuns it (the fewest in
#    flight would send it most requests, as it answers at once) and sends
#    the requests it refused once more, to the healthy gateway: no client
#    sees an error;
#  - draining for a stop (busy, "the gateway is stopping"): the same;
#  - with only one gateway, a refusal is the client's answer (nothing to
#    retry on).
# The refusing gateway runs on the userspace data path (a second kernel
# data path on one host would share nothing here, and need not be tested).
source "$(dirname "$0")/lib.sh"
kvs_setup

kvs_start_sims "A B" --time-scale 0.1
kvs_start_gw "${KVS_BACKENDS[@]}"
for i in 0 1; do
	[ "$(kvs_wait_backend $i up)" = up ] || kvs_fail "backend $i not up"
done
GOOD=$GW_PORT

# A second gateway whose only backend is a port nobody listens on.
python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' \
	>"$KVS_TMP/dead.port"
start_bad() { # [kvspliced flags...]: the second gateway; sets BAD and BAD_PID
	rm -f "$KVS_TMP/bad.port"
	"$KVS_BUILD/kvspliced" --listen 127.0.0.1:0 --port-file "$KVS_TMP/bad.port" \
		--pin-dir "$KVS_PIN-bad" --datapath user "$@" 2>>"$KVS_TMP/bad.log" &
	BAD_PID=$!
	KVS_PIDS+=($BAD_PID)
	kvs_wait_file "$KVS_TMP/bad.port"
	BAD=$(cat "$KVS_TMP/bad.port")
}
start_bad --backend "127.0.0.1:$(cat "$KVS_TMP/dead.port")"

# N clients, each sending M streamed completions one after the other;
# prints one line per request: its HTTP status, and "error" if its stream
# ended in an error event.
load() { # N M
	local i
	for i in $(seq 1 "$1"); do
		(
			for k in $(seq 1 "$2"); do
				out=$(curl -sS -N -m 30 -w '\n%{http_code}' "$HTTP_URL/v1/completions" \
					-d "{\"prompt\":\"client $i request $k\",\"max_tokens\":4,\"stream\":true}" 2>&1)
				code=$(tail -n 1 <<<"$out")
				grep -q '"error"' <<<"$out" && code="$code-error"
				echo "$code"
			done
		) &
	done
	wait
}
health() { curl -sf "$HTTP_URL/health"; }

# 1. Only the refusing gateway: its refusal is the answer, nothing retried.
kvs_start_http --links 2 --gateway "127.0.0.1:$BAD"
out=$(curl -sS -w '\n%{http_code}' "$HTTP_URL/v1/completions" -d '{"prompt":"alone","max_tokens":2}')
assert_eq "one gateway, no backend: 503" "$(tail -n 1 <<<"$out")" 503
assert_eq "its code" "$(sed '$d' <<<"$out" | jq -r .error.code)" no_backend
assert_eq "nothing retried" "$(health | jq -r .retried)" 0
kill "$HTTP_PID"

# 2. Both: every request served, the refused ones through the good gateway.
kvs_start_http --links 2 --gateway "127.0.0.1:$BAD" --gateway "127.0.0.1:$GOOD"
kvs_wait_for "both gateways' links up" '[ "$(health | jq -r .gateway_links_up)" = 4 ]'
codes=$(load 4 30 | sort | uniq -c | awk '{ printf "%s:%s ", $2, $1 }')
echo "two gateways, one with no backend: $codes"
assert_eq "every request served" "$codes" "200:120 "
retried=$(health | jq -r .retried)
echo "retried on the good gateway: $retried of 120"
assert_ge "the refusing gateway was tried (and its refusals retried)" "$retried" 1
# Shunned after each refusal, for longer each time: it gets few of them
# (without it, the fewest in flight gave it most: it answers at once).
assert_le "the refusing gateway got few requests" "$retried" 60
grep -q 'event=gateway_shunned gateway=127.0.0.1:'"$BAD"' refused_in_a_row=2' "$KVS_TMP/http.log" ||
	kvs_fail "no second shunning, for longer: $(grep gateway_shunned "$KVS_TMP/http.log" | head -3)"
kill "$HTTP_PID"
kill "$BAD_PID"
wait "$BAD_PID" 2>/dev/null || true

# 3. The second gateway healthy, then stopping: it drains what it has and
# refuses the rest (busy); the front sends those to the other gateway.
start_bad --backend "127.0.0.1:$SIM_PORT_A" --stop-drain-ms 60000
kvs_start_http --links 2 --gateway "127.0.0.1:$BAD" --gateway "127.0.0.1:$GOOD"
kvs_wait_for "both gateways' links up" '[ "$(health | jq -r .gateway_links_up)" = 4 ]'
kvs_wait_for "the second gateway's backend up" "grep -q 'event=backend_up' '$KVS_TMP/bad.log'"
# A long stream holds the stop's drain open while the load runs.
curl -sS -N "$HTTP_URL/v1/completions" \
	-d '{"prompt":"hold the drain","max_tokens":20000,"stream":true}' >"$KVS_TMP/hold" 2>&1 &
hold=$!
kvs_wait_for "the stream has begun" "[ \"\$(grep -c '^data: ' '$KVS_TMP/hold')\" -ge 1 ]"
kill -TERM "$BAD_PID"
kvs_wait_for "the second gateway draining" "grep -q 'event=stop_draining' '$KVS_TMP/bad.log'"
# (ties go to the first link: the stream is the second gateway's)
grep -q 'event=stop_draining in_flight=1 ' "$KVS_TMP/bad.log" ||
	kvs_fail "the stream did not hold the drain: $(grep stop_draining "$KVS_TMP/bad.log")"
before=$(health | jq -r .retried)
codes=$(load 4 20 | sort | uniq -c | awk '{ printf "%s:%s ", $2, $1 }')
echo "two gateways, one stopping: $codes"
assert_eq "every request served while one gateway stops" "$codes" "200:80 "
retried=$(($(health | jq -r .retried) - before))
echo "retried: $retried of 80"
assert_le "the stopping gateway got few requests" "$retried" 40
kill "$hold" 2>/dev/null || true
echo "PASS test_http_gateways"
