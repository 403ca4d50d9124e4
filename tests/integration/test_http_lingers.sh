#!/usr/bin/env bash
# kvsplice-http answers a client it closes while the client is still
# sending, rather than resetting it (tools/kvsplice-http/linger.c): the
# socket is kept after the answer, shut for writing, and what comes is
# read and dropped until the client closes (5 s at most). Closed with
# bytes unread, a socket resets, and the client never sees the answer:
#  1. a body past 4 x --max-body, which libevent answers 413 (its own
#     HTML page) without reading: the real openai npm package reports
#     APIError 413 (before 2026-12-04: "Connection error", an
#     APIConnectionError, no status);
#  2. a request trickled in past --request-timeout by a client that sends
#     on: it reads the 408 and its sends do not fail (before: EPIPE);
#  3. a body past the limit announced in the headers, sent only once the
#     413 and the front's FIN have come (a sender whose window opens late:
#     nothing of the body is queued when libevent closes): its sends do
#     not fail either;
# and /health counts the lingering closes.
source "$(dirname "$0")/lib.sh"
kvs_setup

OPENAI_VERSION=6.30.1 # as test_openai_front.sh: runs on Node 20
NPM_DIR=$KVS_BUILD/npm
if [ "$(jq -r .version "$NPM_DIR/node_modules/openai/package.json" 2>/dev/null)" != "$OPENAI_VERSION" ]; then
	mkdir -p "$NPM_DIR"
	npm install --prefix "$NPM_DIR" --no-audit --no-fund --silent "openai@$OPENAI_VERSION" ||
		kvs_fail "npm install openai@$OPENAI_VERSION failed"
fi

kvs_start_sim A --time-scale 0.01
kvs_start_gw --backend "127.0.0.1:$SIM_PORT_A"
kvs_start_http --model sim-model --max-body 262144 --request-timeout 1
big() { NODE_PATH="$NPM_DIR/node_modules" timeout 120 node "$(dirname "$0")/../helpers/openai_big.cjs" \
	"$HTTP_URL" sim-model "$1"; }

# 1. Under the limit served; 2x answered by kvsplice-http; 40x by libevent
# (at 10 MB the old build's reset beat the 413 in 4 tries of 4, at 5 MB in
# 2 of 4).
assert_eq "a 0.1 MB message" "$(big 0.1)" '{"ok":true}'
assert_eq "0.5 MB, 2x --max-body" "$(big 0.5)" '{"error":"APIError","status":413}'
for i in 1 2 3; do
	assert_eq "10 MB, 40x --max-body ($i)" "$(big 10)" '{"error":"APIError","status":413}'
done

# 2. A request trickled past --request-timeout, the client sending on.
out=$(python3 - "$(cat "$KVS_TMP/http.port")" <<'PY'
import errno, socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n')
s.setblocking(False)
err, data, t0 = '-', b'', time.monotonic()
while time.monotonic() - t0 < 30:
    try:
        s.send(b'a' * 10)
    except BlockingIOError:
        pass
    except OSError as e:
        err = errno.errorcode[e.errno]
        break
    try:
        d = s.recv(65536)
        if not d:
            break
        data += d
    except BlockingIOError:
        pass
    except OSError as e:
        err = errno.errorcode[e.errno]
        break
    time.sleep(0.05)
print(data.split(b'\r\n')[0].decode(errors='replace'), '|', err)
PY
)
echo "trickled: $out"
assert_eq "trickled past --request-timeout" "$out" "HTTP/1.1 408 Request Timeout | -"

# 3. The body only after the 413.
out=$(python3 - "$(cat "$KVS_TMP/http.port")" <<'PY'
import errno, fcntl, socket, struct, sys, termios, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.settimeout(30)
s.sendall(b'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n'
          b'Content-Type: application/json\r\nContent-Length: 10485760\r\n\r\n')
data = b''
while True:  # the 413 and the front's FIN: libevent has let go of it
    d = s.recv(65536)
    if not d:
        break
    data += d
err = '-'
try:
    for i in range(64):
        s.sendall(b'a' * 16384)
    # Then until the front has taken it all (nothing left unacknowledged)
    # or reset the connection (the socket's state CLOSE).
    while True:
        if s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0] == 7:
            err = 'reset'
            break
        if struct.unpack('i', fcntl.ioctl(s, termios.TIOCOUTQ, b'\0' * 4))[0] == 0:
            break
        time.sleep(0.01)
except OSError as e:
    err = errno.errorcode[e.errno]
print(data.split(b'\r\n')[0].decode(errors='replace'), '|', err)
PY
)
echo "body after the 413: $out"
assert_eq "body sent after the 413" "$out" "HTTP/1.1 413 Request Entity Too Large | -"

lingered=$(curl -sS "$HTTP_URL/health" | jq .closes_lingered)
assert_ge "closes that lingered" "$lingered" 5
echo "PASS test_http_lingers"
