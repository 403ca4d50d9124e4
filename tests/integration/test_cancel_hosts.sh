#!/usr/bin/env bash
# A backend finds a CANCEL's request by (gw_conn, req_id) among the
# connections of the CANCEL's host only: gw_conn is a socket cookie,
# unique on one host, so two gateways in front of one backend can send the
# same numbers. Two "gateways" (connections from 127.0.0.1 and from
# 127.0.0.2) each send request 1 for gw_conn 4242; a CANCEL from the first
# ends the first's request only, and one from the first host on another
# connection (a gateway's pool) still ends it. Checked on kvsplice-sim and
# on kvsplice-adapter (in front of tests/helpers/fake_openai).
source "$(dirname "$0")/lib.sh"
kvs_setup

cat >"$KVS_TMP/hosts.py" <<'PY'
import json, sys
import kvs1
port, mode = int(sys.argv[1]), sys.argv[2]
def first_chunk(r):
    while True:
        f = r.next()
        if f.type == kvs1.CHUNK:
            return
        if f.type in (kvs1.END, kvs1.ERROR):
            raise SystemExit('ended before its first chunk: type %d status %d' % (f.type, f.status))
def end_of(r):
    chunks = 0
    while True:
        f = r.next()
        if f.type == kvs1.CHUNK:
            chunks += 1
        elif f.type in (kvs1.END, kvs1.ERROR):
            return f.type, f.status, chunks
prompt = b'a prompt mode:stall ' + b'words ' * 40
gw1, gw2 = kvs1.connect(port, '127.0.0.1', 30), kvs1.connect(port, '127.0.0.2', 30)
r1, r2 = kvs1.Reader(gw1), kvs1.Reader(gw2)
for s in (gw1, gw2):
    s.sendall(kvs1.request(prompt, 1, max_tokens=20000, gw_conn=4242))
first_chunk(r1)
first_chunk(r2)
gw1.sendall(kvs1.cancel(1, gw_conn=4242))
t1, st1, _ = end_of(r1)
# The other host's request is still running: it streams on (the simulator)
# or is still open (the adapter's stalled stream). Proved by a PING on its
# connection: the backend handles frames in order on one loop and writes
# the ERROR of a request a CANCEL ends at once, so had the first host's
# CANCEL ended it, that ERROR would be on the way before the PONG (the
# CANCEL was handled before the first request's ERROR came back, and the
# PING was sent after it).
gw2.sendall(kvs1.ping(77))
early = None
while True:
    f = r2.next()
    if f.type == kvs1.PONG:
        break
    if f.type in (kvs1.END, kvs1.ERROR):
        early = [f.type, f.status]
        break
# Then its own host's CANCEL, sent on another connection of that host.
pool2 = kvs1.connect(port, '127.0.0.2', 30)
pool2.sendall(kvs1.cancel(1, gw_conn=4242))
t2, st2 = early if early else end_of(r2)[:2]
print(json.dumps({'first': [t1, st1], 'second': [t2, st2], 'ended_early': early}))
PY

check() { # NAME PORT
	local out
	out=$(PYTHONPATH="$(dirname "$0")/../helpers" timeout 60 python3 "$KVS_TMP/hosts.py" "$2" x) ||
		kvs_fail "$1: client failed: $out"
	# type 4 ERROR, status 14 cancelled, for both, each by its own host
	assert_eq "$1: the first host's CANCEL ends its own request" "$(jq -c .first <<<"$out")" "[4,14]"
	assert_eq "$1: the other host's request still running after it" \
		"$(jq -c .ended_early <<<"$out")" null
	assert_eq "$1: the other host's request ends by its own CANCEL only" \
		"$(jq -c .second <<<"$out")" "[4,14]"
}

kvs_start_sim S --time-scale 0.05
check kvsplice-sim "$SIM_PORT_S"

kvs_start_fake F
kvs_start_adapter A "$FAKE_URL_F" --stall-timeout 60
check kvsplice-adapter "$AD_PORT_A"
echo "PASS test_cancel_hosts"
