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
#    body (request smuggling);
#  - clients that hold connections open: past --max-connections a new
#    one is answered 503 and closed, counted and logged, while those
#    open are served (before, every connection was kept, each holding a
#    descriptor, with no limit but ulimit -n);
#  - one source holding connections: past --max-source-conns its next one
#    is answered 429 and closed, counted and logged, while other sources
#    connect, and a --trusted-source (a proxy in front) is not counted
#    (before, one source could hold every one of --max-connections);
#  - a client that sends its headers a byte at a time, well within
#    --idle-timeout (the time between two bytes), is answered 408 and
#    closed at --request-timeout (before, it kept its connection for as
#    long as it liked: slowloris), while a kept-alive connection idle
#    between two requests for longer, and a stream longer than the
#    deadline, are not cut.
source "$(dirname "$0")/lib.sh"
kvs_setup

kvs_start_sim A --time-scale 0.1
kvs_start_gw --backend "127.0.0.1:$SIM_PORT_A" --front-source 127.0.0.0/8
[ "$(kvs_wait_backend 0 up)" = up ] || kvs_fail "backend not up"
# No request deadline here: the connections held below are idle, and
# this part is about descriptors.
kvs_start_http --links 1 --request-timeout 0
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

# restart_http FLAGS...: a front of its own for the next part.
restart_http() {
	kill "$HTTP_PID"
	wait "$HTTP_PID" || true
	kvs_start_http --links 1 "$@"
	kvs_wait_for "the front's link is up" \
		'[ "$(curl -s "$HTTP_URL/health" | jq -r .status)" = ok ]'
}

# 3. Connection limit: 4 held (no deadline), a fifth refused, the first
# still served, and once one leaves a new one is taken.
restart_http --max-connections 4 --request-timeout 0
got=$(PYTHONPATH="$(dirname "$0")/../helpers" python3 - "${HTTP_URL##*:}" <<'PY'
import socket, sys
from http_raw import answer, health
port = int(sys.argv[1])
held = [socket.create_connection(("127.0.0.1", port), timeout=20) for _ in range(4)]
for _ in range(200):  # until the front has accepted all 4
    line, h = health(held[0])
    if h["connections"] == 4:
        break
print("held:", line, h["connections"])
extra = socket.create_connection(("127.0.0.1", port), timeout=20)
print("fifth:", answer(extra))
line, h = health(held[0])
print("first again:", line, h["connections"], h["connections_refused"])
held[3].close()
for _ in range(200):  # until the front has seen it go
    line, h = health(held[0])
    if h["connections"] == 3:
        break
late = socket.create_connection(("127.0.0.1", port), timeout=20)
line, h = health(late)
print("after one left:", line, h["connections"])
PY
)
echo "$got"
assert_eq "4 connections held" "$(sed -n 's/^held: //p' <<<"$got")" "HTTP/1.1 200 OK 4"
assert_eq "the fifth: 503, closed" "$(sed -n 's/^fifth: //p' <<<"$got")" \
	"HTTP/1.1 503 Service Unavailable closed"
assert_eq "the first still served; 1 refused" "$(sed -n 's/^first again: //p' <<<"$got")" \
	"HTTP/1.1 200 OK 4 1"
assert_eq "one left: a new one served" "$(sed -n 's/^after one left: //p' <<<"$got")" \
	"HTTP/1.1 200 OK 4"
grep -q 'event=connections_full max_connections=4 refused=1' "$KVS_TMP/http.log" ||
	kvs_fail "no event=connections_full line"

# 4. Per source: 2 each. 127.0.0.2 holds 2 and its third is refused;
# 127.0.0.3 still connects; the trusted 127.0.0.4 holds 3; once .2 lets
# one go, it connects again.
restart_http --max-source-conns 2 --trusted-source 127.0.0.4/32 --request-timeout 0
got=$(PYTHONPATH="$(dirname "$0")/../helpers" python3 - "${HTTP_URL##*:}" <<'PY'
import socket, sys
from http_raw import answer, health
port = int(sys.argv[1])
def conn(src):
    return socket.create_connection(("127.0.0.1", port), timeout=20, source_address=(src, 0))
a = [conn("127.0.0.2") for _ in range(2)]
for _ in range(200):  # until the front has adopted both
    line, h = health(a[0])
    if h.get("connections") == 2:
        break
print("two from .2:", line, h.get("connections"), h.get("sources"))
third = conn("127.0.0.2")
print("third from .2:", answer(third))
b = conn("127.0.0.3")
print("from .3:", *health(b)[:1])
t = [conn("127.0.0.4") for _ in range(3)]
print("trusted:", " ".join(health(x)[0] for x in t))
line, h = health(b)
print("counted:", h["connections"], h["sources"], h["connections_refused_source"])
a[1].close()
for _ in range(200):  # until the front has seen it go
    line, h = health(a[0])
    if h["connections"] == 5:
        break
again = conn("127.0.0.2")
print("again from .2:", health(again)[0])
PY
)
echo "$got"
assert_eq "two from one source held" "$(sed -n 's/^two from .2: //p' <<<"$got")" \
	"HTTP/1.1 200 OK 2 1"
assert_eq "its third: 429, closed" "$(sed -n 's/^third from .2: //p' <<<"$got")" \
	"HTTP/1.1 429 Too Many Requests closed"
assert_eq "another source served" "$(sed -n 's/^from .3: //p' <<<"$got")" "HTTP/1.1 200 OK"
assert_eq "a trusted source holds 3" "$(sed -n 's/^trusted: //p' <<<"$got")" \
	"HTTP/1.1 200 OK HTTP/1.1 200 OK HTTP/1.1 200 OK"
assert_eq "6 open, 2 sources counted, 1 refused" "$(sed -n 's/^counted: //p' <<<"$got")" "6 2 1"
assert_eq "one let go: the source connects again" "$(sed -n 's/^again from .2: //p' <<<"$got")" \
	"HTTP/1.1 200 OK"
grep -q 'event=source_connections_full peer=127.0.0.2 max_source_conns=2 refused=1' \
	"$KVS_TMP/http.log" || kvs_fail "no event=source_connections_full line"

# 5. Slowloris: a byte of headers every 0.3 s, against --request-timeout
# 2 (and --idle-timeout 300): answered 408 and closed, within a cap far
# past the deadline (the old front kept it for as long as bytes came).
# Meanwhile a kept-alive connection answered before it began idles past
# the deadline, and is served again after it.
restart_http --request-timeout 2
got=$(python3 - "${HTTP_URL##*:}" <<'PY'
import socket, sys, time
port, cap = int(sys.argv[1]), 30
def ask(s):
    s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
    out = b""
    while not out.endswith(b"}"):
        d = s.recv(4096)
        if not d:
            return "closed"
        out += d
    return out.split(b"\r\n")[0].decode()
kept = socket.create_connection(("127.0.0.1", port), timeout=20)
print("kept:", ask(kept))
slow = socket.create_connection(("127.0.0.1", port), timeout=0.3)
start, got = time.monotonic(), b""
head = b"GET /health HTTP/1.1\r\n" + b"X-Slow: " + b"a" * 1000 + b"\r\n\r\n"
for i in range(len(head)):
    try:
        slow.send(head[i:i + 1])
    except OSError:  # closed while it was sending
        pass
    try:
        d = slow.recv(4096)
        got += d
        if not d:
            break
    except socket.timeout:
        pass
    except OSError:
        break
    if time.monotonic() - start > cap:
        break
took = time.monotonic() - start
print("slow:", got.split(b"\r\n")[0].decode() or "nothing",
      "closed" if took <= cap else "open after %d s" % cap)
print("kept again:", ask(kept))
PY
)
echo "$got"
assert_eq "kept-alive connection served" "$(sed -n 's/^kept: //p' <<<"$got")" "HTTP/1.1 200 OK"
assert_eq "slowloris: 408, closed" "$(sed -n 's/^slow: //p' <<<"$got")" \
	"HTTP/1.1 408 Request Timeout closed"
assert_eq "kept-alive connection idle past the deadline: served" \
	"$(sed -n 's/^kept again: //p' <<<"$got")" "HTTP/1.1 200 OK"
grep -q 'event=request_timeout .*request_timeout_s=2 timeouts=1' "$KVS_TMP/http.log" ||
	kvs_fail "no event=request_timeout line"
assert_eq "/health counts it" "$(curl -s "$HTTP_URL/health" | jq .request_timeouts)" 1

# 6. A stream that lasts longer than --request-timeout (2 s) ends whole.
t0=$(date +%s%3N)
out=$(curl -sS -N -m 120 "$HTTP_URL/v1/completions" \
	-d '{"prompt":"a long story","max_tokens":6000,"stream":true}') || kvs_fail "curl: $out"
ms=$(($(date +%s%3N) - t0))
echo "a stream of 6000 tokens: $ms ms"
assert_ge "the stream lasted past the deadline (ms)" "$ms" 4000
assert_eq "the long stream ends with [DONE]" "$(grep '^data: ' <<<"$out" | tail -n 1)" "data: [DONE]"
echo "PASS test_http_hostile"
