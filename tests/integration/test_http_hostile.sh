#!/usr/bin/env bash
# kvsplice-http against clients that abuse it:
#  - clients that hold every descriptor the front may open (its
#    RLIMIT_NOFILE set low here): the accepts that fail (EMFILE) rest the
#    listener for a second, logged once a rest, instead of libevent trying
#    again at once, for ever (100% CPU and a warning line each time:
#    800,000 lines in 6 s); the connections already open are served
#    meanwhile, and new ones are once descriptors free;
#  - a request with two Content-Length headers is answered 400 and its
#    connection closed (RFC 9112, 6.3): libevent framed the body by the
#    first, and served the rest of the bytes as another request, which a
#    proxy in front that framed by the other had passed on as part of the
#    body (request smuggling).
source "$(dirname "$0")/lib.sh"
kvs_setup

kvs_start_sim A --time-scale 0.1
kvs_start_gw --backend "127.0.0.1:$SIM_PORT_A" --front-source 127.0.0.0/8
[ "$(kvs_wait_backend 0 up)" = up ] || kvs_fail "backend not up"
kvs_start_http --links 1
kvs_wait_for "the front's link is up" \
	'[ "$(curl -s "$HTTP_URL/health" | jq -r .status)" = ok ]'

# 1. Out of descriptors. 64 for the front (about 10 its own), 80 clients.
prlimit --pid "$HTTP_PID" --nofile=64:64
cpu() { awk '{ print $14 + $15 }' "/proc/$HTTP_PID/stat"; } # ticks, user + system
lines() { wc -l <"$KVS_TMP/http.log"; }
python3 - "${HTTP_URL##*:}" "$KVS_TMP" <<'PY' &
import os, socket, sys, time
port, tmp = int(sys.argv[1]), sys.argv[2]
held = [socket.create_connection(("127.0.0.1", port)) for _ in range(80)]
open(tmp + "/held", "w").write("80")
while not os.path.exists(tmp + "/ask"):
    time.sleep(0.05)
# One that was accepted before the limit: still served.
held[0].settimeout(20)
held[0].sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
open(tmp + "/answer", "w").write(held[0].recv(4096).split(b"\r\n")[0].decode())
while not os.path.exists(tmp + "/release"):
    time.sleep(0.05)
PY
holder=$!
KVS_PIDS+=($holder)
kvs_wait_file "$KVS_TMP/held"
kvs_wait_for "an accept failed" "grep -q 'accept' '$KVS_TMP/http.log'"
c0=$(cpu) l0=$(lines)
sleep 1 # a window to measure the spin in
c1=$(cpu) l1=$(lines)
echo "out of descriptors, 1 s: $((c1 - c0)) ticks of CPU, $((l1 - l0)) log lines"
assert_le "CPU ticks in 1 s out of descriptors" $((c1 - c0)) 10
assert_le "log lines in 1 s out of descriptors" $((l1 - l0)) 3
grep -q 'event=accept_paused err="Too many open files"' "$KVS_TMP/http.log" ||
	kvs_fail "no event=accept_paused line"
touch "$KVS_TMP/ask"
kvs_wait_file "$KVS_TMP/answer"
assert_eq "a connection open before: served meanwhile" "$(cat "$KVS_TMP/answer")" "HTTP/1.1 200 OK"
touch "$KVS_TMP/release"
wait "$holder"
out=$(curl -sS -m 20 -w ' %{http_code}' "$HTTP_URL/v1/completions" \
	-d '{"prompt":"after the flood","max_tokens":2}') || kvs_fail "curl: $out"
assert_eq "descriptors freed: a new client served" "${out##* }" 200

# 2. Two Content-Length headers, the bytes after the first's length a
# request of their own.
got=$(python3 - "${HTTP_URL##*:}" <<'PY'
import socket, sys
smuggled = b"GET /v1/smuggled HTTP/1.1\r\nHost: x\r\n\r\n"
body = b'{"prompt":"x"}' + smuggled
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 14\r\n"
          b"Content-Length: %d\r\n\r\n" % len(body) + body)
out = b""
try:
    while True:
        d = s.recv(65536)
        if not d:
            break
        out += d
except socket.timeout:  # kept open: the answer says what came
    pass
statuses = [l.split(b" ")[1].decode() for l in out.split(b"\r\n") if l.startswith(b"HTTP/1.1 ")]
print(" ".join(statuses), "smuggled" if b"/v1/smuggled" in out else "-")
PY
)
assert_eq "two Content-Lengths: one 400, then closed" "$got" "400 -"
echo "PASS test_http_hostile"
