#!/usr/bin/env bash
# kvsplice-http lets go of a request's body once it has read it: with 48
# streamed requests of 900 KB bodies in flight at once (sent one after
# the other to a slow backend, their streams unread), the front's
# resident memory grows by less than 20 MB. Before, libevent kept each body until its response
# ended (for a stream, minutes): 48 x 0.9 MB at least, and up to
# --max-inflight x --max-body (4 GiB at the defaults) in all.
source "$(dirname "$0")/lib.sh"
kvs_setup

N=48
kvs_start_sim A --time-scale 1 # each prefill some seconds: they stay in flight
kvs_start_gw --backend "127.0.0.1:$SIM_PORT_A" --front-source 127.0.0.0/8
[ "$(kvs_wait_backend 0 up)" = up ] || kvs_fail "backend not up"
kvs_start_http --links 2
kvs_wait_for "the front's links are up" \
	'[ "$(curl -s "$HTTP_URL/health" | jq -r .gateway_links_up)" = 2 ]'
rss_kb() { awk '/^VmRSS/ { print $2 }' "/proc/$HTTP_PID/status"; }
before=$(rss_kb)

python3 - "${HTTP_URL##*:}" "$N" "$KVS_TMP" <<'PY' &
import json, os, socket, sys, time, urllib.request
port, n, tmp = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
def in_flight():
    with urllib.request.urlopen("http://127.0.0.1:%d/health" % port) as r:
        return json.load(r)["in_flight"]
socks = []
for i in range(n):
    body = json.dumps({"model": "m", "prompt": ("w%d " % i) * 225000, "max_tokens": 64,
                       "stream": True}).encode()
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n" % len(body) + body)
    socks.append(s)
    # one at a time: what the front keeps of each, not how many it reads
    # at once, is measured
    while in_flight() < i + 1:
        time.sleep(0.01)
open(tmp + "/sent", "w").write(str(n))
while not os.path.exists(tmp + "/release"):
    time.sleep(0.05)
PY
KVS_PIDS+=($!)
kvs_wait_file "$KVS_TMP/sent"
kvs_wait_for "$N requests in flight in the front" \
	'[ "$(curl -s "$HTTP_URL/health" | jq -r .in_flight)" = "$N" ]'
# Sent on: the kernel passed all of them to the backend, so none waits in
# the front's connections to the gateway either.
kvs_wait_for "the gateway passed them all on" \
	'[ "$("$KVS_BUILD/kvsplicectl" --pin-dir "$KVS_PIN" backends --json | jq ".[0].requests")" = "$N" ]'
assert_eq "still in flight (their streams go on)" "$(curl -s "$HTTP_URL/health" | jq -r .in_flight)" "$N"
grown=$((($(rss_kb) - before) / 1024))
echo "the front's resident memory grew by $grown MB"
# (ASan keeps freed memory in quarantine: there the figure says nothing)
if grep -q __asan_init <<<"$(nm -D "$KVS_BUILD/kvsplice-http" 2>/dev/null)"; then
	echo "ok: memory not judged under ASan"
else
	assert_le "the front's memory growth with $N bodies of 900 KB in flight (MB)" "$grown" 20
fi
touch "$KVS_TMP/release"
echo "PASS test_http_bodies"
