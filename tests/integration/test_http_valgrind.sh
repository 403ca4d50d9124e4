#!/usr/bin/env bash
# kvsplice-http under valgrind (memcheck), over the gateway to
# kvsplice-sim: streamed and whole requests, bad bodies, clients that leave
# before and during their answer, many at once, connections refused at
# --max-connections and cut at --request-timeout, the gateway killed
# mid-stream and back, then a stop with requests in flight; beside it a
# second gateway with no backend up, whose refusals are retried on the
# first: no invalid read or write, nothing definitely or indirectly lost.
source "$(dirname "$0")/lib.sh"
kvs_setup
command -v valgrind >/dev/null || kvs_fail "valgrind is not installed (make deps)"
if grep -q __asan_init <<<"$(nm -D "$KVS_BUILD/kvsplice-http" 2>/dev/null)"; then
	echo "PASS test_http_valgrind (skipped: $KVS_BUILD is an ASan build)"
	exit 0
fi

kvs_start_sim A --time-scale 0.1
start_gw() {
	kvs_start_gw --backend "127.0.0.1:$SIM_PORT_A" --front-source 127.0.0.1/32 "$@"
	[ "$(kvs_wait_backend 0 up)" = up ] || kvs_fail "backend not up"
}
start_gw
GW=$GW_PORT
# The second gateway: its only backend a port nobody listens on.
dead=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$KVS_BUILD/kvspliced" --listen 127.0.0.1:0 --port-file "$KVS_TMP/bad.port" --pin-dir "$KVS_PIN-bad" \
	--datapath user --backend "127.0.0.1:$dead" 2>"$KVS_TMP/bad.log" &
KVS_PIDS+=($!)
kvs_wait_file "$KVS_TMP/bad.port"
valgrind --leak-check=full --show-leak-kinds=definite,indirect \
	--errors-for-leak-kinds=definite,indirect --error-exitcode=3 \
	"$KVS_BUILD/kvsplice-http" --listen 127.0.0.1:0 --port-file "$KVS_TMP/http.port" \
	--gateway "127.0.0.1:$GW" --gateway "127.0.0.1:$(cat "$KVS_TMP/bad.port")" --links 2 --max-body 4096 --max-connections 40 \
	--request-timeout 5 2>"$KVS_TMP/valgrind.log" &
VG=$!
KVS_PIDS+=($VG) # cleaned up on every path
KVS_WAIT_S=180 kvs_wait_file "$KVS_TMP/http.port"
U=http://127.0.0.1:$(cat "$KVS_TMP/http.port")
chat() { # MAX_TOKENS STREAM
	printf '{"messages":[{"role":"user","content":"valgrind %s"}],"max_tokens":%s,"stream":%s}' \
		"$RANDOM" "$1" "$2"
}

n=0
for i in $(seq 1 20); do
	curl -sSf -N "$U/v1/chat/completions" -d "$(chat 4 true)" | grep -q '^data: \[DONE\]' && n=$((n + 1))
	curl -sSf "$U/v1/completions" -d '{"prompt":"whole","max_tokens":3}' | jq -e .usage >/dev/null &&
		n=$((n + 1))
done
assert_eq "answers under valgrind" "$n" 40
for body in '{"messages":' '{"model":"x"}' "$(head -c 5000 /dev/zero | tr '\0' a)"; do
	curl -sS -o /dev/null "$U/v1/chat/completions" -d "$body"
done
curl -sS -o /dev/null "$U/nowhere"
# Clients that leave: before the answer begins, and mid-stream; and many at once.
for i in 1 2 3; do
	timeout 0.3 curl -sS "$U/v1/completions" -d '{"prompt":"leave early","max_tokens":20000}' \
		>/dev/null 2>&1 || true
	timeout 0.5 curl -sS -N "$U/v1/chat/completions" -d "$(chat 20000 true)" >/dev/null 2>&1 || true
done
many=()
for i in $(seq 1 30); do
	timeout 2 curl -sS -N "$U/v1/chat/completions" -d "$(chat 200 true)" >/dev/null 2>&1 &
	many+=($!)
done
wait "${many[@]}" || true
# 45 connections with half a request each: 40 cut at the deadline, the
# rest refused (or cut, if some had closed); one that leaves with half a
# request; two requests pipelined on one connection.
got=$(python3 - "${U##*:}" <<'PY'
import socket, sys
port = int(sys.argv[1])
held = [socket.create_connection(("127.0.0.1", port), timeout=120) for _ in range(45)]
gone = socket.create_connection(("127.0.0.1", port), timeout=120)
gone.sendall(b"GET /health HTTP/1.1\r\nHo")
gone.close()
closed = 0
for s in held:
    try:
        s.sendall(b"GET /he")
        while s.recv(4096):
            pass
    except OSError:
        pass
    closed += 1
two = socket.create_connection(("127.0.0.1", port), timeout=120)
two.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n" * 2)
out = b""
while out.count(b"HTTP/1.1 200") < 2:
    d = two.recv(4096)
    if not d:
        break
    out += d
print(closed, out.count(b"HTTP/1.1 200"))
PY
)
assert_eq "held connections closed; pipelined answers" "$got" "45 2"
h=$(curl -sS "$U/health")
assert_ge "connections refused" "$(jq .connections_refused <<<"$h")" 1
assert_ge "requests cut at the deadline" "$(jq .request_timeouts <<<"$h")" 1
assert_ge "requests the second gateway refused, retried" "$(jq .retried <<<"$h")" 1
# The gateway goes away mid-stream, and comes back.
curl -sS -N "$U/v1/chat/completions" -d "$(chat 20000 true)" >"$KVS_TMP/cut" 2>/dev/null &
cut=$!
kvs_wait_for "the stream has begun" '[ -s "$KVS_TMP/cut" ]'
kill -9 "$GW_PID"
wait "$cut" || true
grep -q '"error"' "$KVS_TMP/cut" || kvs_fail "no error event when the gateway went away"
rm -f "$KVS_TMP/gw.port"
start_gw --listen "127.0.0.1:$GW"
kvs_wait_for "the front reconnects" '[ "$(curl -s "$U/health" | jq -r .gateway_links_up)" = 4 ]' 120
# A stop with requests in flight.
left=()
for i in 1 2 3; do
	curl -sS -N "$U/v1/chat/completions" -d "$(chat 20000 true)" >"$KVS_TMP/inflight$i" 2>/dev/null &
	left+=($!)
done
kvs_wait_for "three streams have begun" \
	'[ -s "$KVS_TMP/inflight1" ] && [ -s "$KVS_TMP/inflight2" ] && [ -s "$KVS_TMP/inflight3" ]' 120
kill "$VG"
rc=0
wait "$VG" || rc=$?
wait "${left[@]}" 2>/dev/null || true
if [ "$rc" -ne 0 ]; then
	grep -v '^ts=' "$KVS_TMP/valgrind.log" | grep -A 24 -m 8 -E 'Invalid|uninitialised|lost in|Mismatched' >&2
	tail -n 12 "$KVS_TMP/valgrind.log" >&2
	kvs_fail "valgrind reported errors (exit $rc)"
fi
grep -q "ERROR SUMMARY: 0 errors" "$KVS_TMP/valgrind.log" || kvs_fail "valgrind found errors"
echo "ok: $(grep 'ERROR SUMMARY' "$KVS_TMP/valgrind.log" | sed 's/==[0-9]*== //')"
echo "PASS test_http_valgrind"
