#!/usr/bin/env bash
# kvsplice-http, the OpenAI front, over the gateway's kernel path to
# kvsplice-sim (which answers JSON requests in OpenAI's shapes):
#  - streamed and whole chat completions and completions come back as an
#    OpenAI server sends them (SSE events ending in [DONE]; one JSON body);
#  - bad input gets OpenAI error bodies (400 not JSON / no messages / a
#    wrong type, 404, 405, 413, 415 a compressed body) on one kept-alive
#    connection, which then still serves a good request; HEAD gets GET's
#    headers, no body;
#  - a front is one client with many users' requests: not in the
#    gateway's --front-source, it hits --max-client-inflight (429 busy);
#    in it, the same load passes;
#  - a client that leaves mid-stream, or before its whole answer, cancels
#    its request at the backend;
#  - with no gateway, /health and requests say 503; a gateway that drops
#    SYNs does not hold up the others;
#  - backends that die mid-stream end it with an OpenAI error event.
# datapath: both (tests/run.sh runs it on the userspace data path too)
source "$(dirname "$0")/lib.sh"
kvs_setup

# ~1 ms a token at --time-scale 0.1.
kvs_start_sim A --id 1 --time-scale 0.1 --log-level debug
kvs_start_sim B --id 2 --time-scale 0.1 --log-level debug
start_gw() {
	kvs_start_gw --backend "127.0.0.1:$SIM_PORT_A" --backend "127.0.0.1:$SIM_PORT_B" \
		--max-client-inflight 4 "$@"
	for i in 0 1; do
		[ "$(kvs_wait_backend $i up)" = up ] || kvs_fail "backend $i not up"
	done
}
start_gw
kvs_start_http --links 1 --link-inflight 64 --max-body 65536 --model sim-model
post() { # PATH BODY [curl flags]: the body, then the status on a line of its own
	curl -sS -N -w '\n%{http_code}\n' "$HTTP_URL$1" -H 'Content-Type: application/json' \
		-d "$2" "${@:3}"
}
status() { tail -n 1 <<<"$1"; }
body() { sed '$d' <<<"$1"; }

# 1. Shapes.
out=$(post /v1/chat/completions '{"model":"sim-model","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"hi"}],"max_tokens":5,"stream":true}')
assert_eq "streamed chat: status" "$(status "$out")" 200
events=$(body "$out" | grep '^data: ')
assert_eq "streamed chat: events (5 tokens, the last, [DONE])" "$(wc -l <<<"$events")" 7
assert_eq "streamed chat: ends with [DONE]" "$(tail -n 1 <<<"$events")" "data: [DONE]"
text=$(head -n 5 <<<"$events" | sed 's/^data: //' | jq -r '.choices[0].delta.content' | tr -d '\n')
assert_eq "streamed chat: 5 tokens of 4 bytes" "${#text}" 20
assert_eq "streamed chat: finish_reason" \
	"$(sed -n 6p <<<"$events" | sed 's/^data: //' | jq -r '.choices[0].finish_reason')" length
out=$(post /v1/completions '{"model":"sim-model","prompt":"Once upon a time","max_tokens":3}')
assert_eq "whole completion: status" "$(status "$out")" 200
assert_eq "whole completion: object" "$(body "$out" | jq -r .object)" text_completion
assert_eq "whole completion: usage" "$(body "$out" | jq -r .usage.completion_tokens)" 3
assert_eq "/v1/models" "$(curl -sf "$HTTP_URL/v1/models" | jq -r '.data[0].id')" sim-model
assert_eq "/v1/models/ (a trailing slash)" "$(curl -sf "$HTTP_URL/v1/models/" | jq -r '.data[0].id')" sim-model
assert_eq "/health" "$(curl -sf "$HTTP_URL/health" | jq -r .status)" ok
if [ "${KVS_DATAPATH:-kernel}" = kernel ]; then
	s=$(kvs_stats)
	assert_ge "requests the kernel placed" "$(jget "$s" .placed_cold)" 2
fi

# 2. Bad input, all on one connection (curl --next reuses it).
big=$(head -c 70000 /dev/zero | tr '\0' a)
printf '{"messages":[{"role":"user","content":"%s"}]}' "$big" >"$KVS_TMP/big.json"
printf '{"prompt":"zipped","max_tokens":2}' | gzip >"$KVS_TMP/gz"
curl -sS -o /dev/null -w '%{http_code} %{num_connects}\n' \
	-H 'Content-Type: application/json' \
	"$HTTP_URL/v1/chat/completions" -d '{"messages": [' --next \
	-w '%{http_code} %{num_connects}\n' -o "$KVS_TMP/e2" \
	"$HTTP_URL/v1/chat/completions" -d '{"model":"m"}' --next \
	-w '%{http_code} %{num_connects}\n' -o "$KVS_TMP/e3" \
	"$HTTP_URL/v1/chat/completions" -d '{"messages":[{"role":"user"}],"stream":"yes"}' --next \
	-w '%{http_code} %{num_connects}\n' -o "$KVS_TMP/e4" "$HTTP_URL/v1/embeddings" -d '{}' --next \
	-w '%{http_code} %{num_connects}\n' -o "$KVS_TMP/e5" "$HTTP_URL/v1/chat/completions" --next \
	-w '%{http_code} %{num_connects}\n' -o "$KVS_TMP/e6" \
	"$HTTP_URL/v1/chat/completions" -d "@$KVS_TMP/big.json" --next \
	-w '%{http_code} %{num_connects}\n' -o "$KVS_TMP/e8" -H 'Content-Encoding: gzip' \
	"$HTTP_URL/v1/completions" --data-binary "@$KVS_TMP/gz" --next \
	-w '%{http_code} %{num_connects}\n' -o "$KVS_TMP/e7" \
	"$HTTP_URL/v1/completions" -d '{"prompt":"still here","max_tokens":2}' \
	>"$KVS_TMP/codes"
cat "$KVS_TMP/codes"
assert_eq "statuses: bad JSON, no messages, stream not boolean, 404, 405, 413, gzip, then OK" \
	"$(awk '{ printf "%s ", $1 }' "$KVS_TMP/codes")" "400 400 400 404 405 413 415 200 "
assert_eq "one connection for all eight" "$(awk '{ n += $2 } END { print n }' "$KVS_TMP/codes")" 1
assert_eq "gzip: code" "$(jq -r .error.code "$KVS_TMP/e8")" unsupported_media_type
assert_eq "no messages: param" "$(jq -r .error.param "$KVS_TMP/e2")" messages
assert_eq "no messages: type" "$(jq -r .error.type "$KVS_TMP/e2")" invalid_request_error
assert_eq "stream not boolean: param" "$(jq -r .error.param "$KVS_TMP/e3")" stream
assert_eq "404: code" "$(jq -r .error.code "$KVS_TMP/e4")" unknown_url
assert_eq "405: code" "$(jq -r .error.code "$KVS_TMP/e5")" method_not_allowed
assert_eq "413: code" "$(jq -r .error.code "$KVS_TMP/e6")" request_too_large
assert_eq "after the errors: served" "$(jq -r .usage.completion_tokens "$KVS_TMP/e7")" 2

# 2b. HEAD (load balancers' checks): GET's answer without its body, on a
# kept-alive connection. libevent wrote the body anyway, which the next
# response on the connection then began with, and HEAD /health was 405.
heads=$(python3 - "${HTTP_URL##*:}" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
s.sendall(b"HEAD /health HTTP/1.1\r\nHost: x\r\n\r\n"
          b"HEAD /v1/models HTTP/1.1\r\nHost: x\r\n\r\n"
          b"HEAD /v1/completions HTTP/1.1\r\nHost: x\r\n\r\n"
          b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
data = b""
while True:
    b = s.recv(65536)
    if not b:
        break
    data += b
out = []
for i in range(3):  # a HEAD's answer: headers, then the next status line
    head, _, data = data.partition(b"\r\n\r\n")
    out.append(head.split(b" ")[1].decode())
    if b"content-length: " not in head.lower():
        out.append("no-length")
head, _, body = data.partition(b"\r\n\r\n")
out.append(head.split(b" ")[1].decode() if head.startswith(b"HTTP/1.1 ") else "garbage")
print(" ".join(out))
PY
)
assert_eq "HEAD /health, /v1/models, /v1/completions, then GET /health" "$heads" "200 200 405 200"

# 3. The gateway's per-connection limit: 12 requests at once on the
# front's one connection, against --max-client-inflight 4.
burst() { # prints the statuses of 12 concurrent 200-token requests
	for i in $(seq 1 12); do
		curl -sS -o /dev/null -w '%{http_code}\n' "$HTTP_URL/v1/completions" \
			-d "{\"prompt\":\"burst $1 $i\",\"max_tokens\":200}" &
	done
	wait
}
codes=$(burst a | sort | uniq -c | awk '{ printf "%s:%s ", $2, $1 }')
echo "not a front source: $codes"
[[ $codes == *429:* ]] || kvs_fail "a front the gateway does not know passed its client limit: $codes"
kill "$GW_PID"
wait "$GW_PID" 2>/dev/null || true
# A clean stop unpins every map (the reports ring was once left behind).
assert_eq "maps left pinned after a clean stop" "$(ls -A "$KVS_PIN" 2>/dev/null | tr '\n' ' ')" ""
kvs_wait_for "front sees the gateway gone" '[ "$(curl -s "$HTTP_URL/health" | jq -r .status)" = no_gateway ]'
out=$(post /v1/completions '{"prompt":"nobody there","max_tokens":2}')
assert_eq "no gateway: 503" "$(status "$out")" 503
assert_eq "no gateway: code" "$(body "$out" | jq -r .error.code)" no_backend
rm -f "$KVS_TMP/gw.port"
start_gw --front-source 127.0.0.0/8
kill "$HTTP_PID"
kvs_start_http --links 1 --link-inflight 64
codes=$(burst b | sort | uniq -c | awk '{ printf "%s:%s ", $2, $1 }')
echo "front source: $codes"
assert_eq "a front source is not held to the client limit" "$codes" "200:12 "

# 3b. A second gateway that drops every SYN (a listener whose backlog is
# full) must not hold up the requests the first one can take: the front
# connects without blocking its loop (a blocking connect held it 2 s per
# attempt, every 500 ms, per link: each request took seconds).
cat >"$KVS_TMP/blackhole.py" <<'PY'
import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(0)
port = s.getsockname()[1]
fill = []
for i in range(3):
    c = socket.socket(); c.setblocking(False)
    try: c.connect(("127.0.0.1", port))
    except BlockingIOError: pass
    fill.append(c)
open(sys.argv[1] + ".tmp", "w").write(str(port))
import os; os.rename(sys.argv[1] + ".tmp", sys.argv[1])
time.sleep(3600)
PY
python3 "$KVS_TMP/blackhole.py" "$KVS_TMP/bh.port" &
KVS_PIDS+=($!)
kvs_wait_file "$KVS_TMP/bh.port"
kill "$HTTP_PID"
kvs_start_http --links 2 --link-inflight 64 --gateway "127.0.0.1:$GW_PORT" \
	--gateway "127.0.0.1:$(cat "$KVS_TMP/bh.port")"
ok=0
for i in $(seq 1 6); do
	curl -sSf -m 3 -o /dev/null "$HTTP_URL/v1/completions" -d '{"prompt":"around a dead gateway","max_tokens":2}' &&
		ok=$((ok + 1))
done
assert_eq "served beside a gateway that drops SYNs" "$ok" 6

# 4. A client that leaves mid-stream: its request is cancelled at the sim.
timeout 1 curl -sS -N "$HTTP_URL/v1/chat/completions" \
	-d '{"messages":[{"role":"user","content":"a long answer"}],"max_tokens":20000,"stream":true}' \
	>"$KVS_TMP/left" 2>/dev/null || true
assert_ge "it had begun streaming" "$(grep -c '^data: ' "$KVS_TMP/left")" 1
cancelled() { cat "$KVS_TMP"/A.log "$KVS_TMP"/B.log | grep -c "event=cancelled" || true; }
kvs_wait_for "the sim cancels it" '[ "$(cancelled)" -ge 1 ]'
echo "ok: cancelled at the backend"
# And one that leaves before any byte of its answer (a whole response,
# written only at its END): the front watches its socket.
timeout 1 curl -sS "$HTTP_URL/v1/completions" -d '{"prompt":"a long whole answer","max_tokens":20000}' \
	>/dev/null 2>&1 || true
kvs_wait_for "the sim cancels the whole one too" '[ "$(cancelled)" -ge 2 ]'
echo "ok: a whole request whose client left is cancelled"

# 5. The backends die mid-stream: the stream ends with an OpenAI error
# event (the gateway's backend_gone), not a cut connection.
curl -sS -N "$HTTP_URL/v1/chat/completions" \
	-d '{"messages":[{"role":"user","content":"cut short"}],"max_tokens":20000,"stream":true}' \
	>"$KVS_TMP/cut" 2>/dev/null &
cut=$!
kvs_wait_for "the stream has begun" '[ "$(grep -c "^data: " "$KVS_TMP/cut")" -ge 10 ]'
kill -9 "${KVS_PIDS[0]}" "${KVS_PIDS[1]}" # both simulators
wait "$cut" || kvs_fail "curl failed: the stream was cut, not ended"
last=$(grep '^data: ' "$KVS_TMP/cut" | tail -n 1 | sed 's/^data: //')
echo "last event: $last"
assert_eq "the last event is an error" "$(jq -r .error.code <<<"$last")" backend_gone
assert_eq "its type" "$(jq -r .error.type <<<"$last")" server_error
echo "PASS test_http_front"
