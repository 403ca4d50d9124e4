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
import socket, struct, sys, json, time
port, mode = int(sys.argv[1]), sys.argv[2]
HDR = '>IBBHHHIQQQIIIIQ'
def frame(t, req_id, payload=b'', max_tokens=0, gw_conn=0):
    return struct.pack(HDR, 0x4b565331, 1, t, 0, 64, 0, len(payload), req_id, 0, 0, 0, 0,
                       max_tokens, 0, gw_conn) + payload
def conn(src):
    s = socket.socket()
    s.bind((src, 0))
    s.connect(('127.0.0.1', port))
    s.settimeout(30)
    return s
def read_frame(s, buf):
    while len(buf) < 64:
        d = s.recv(65536)
        if not d:
            raise EOFError
        buf += d
    t, st, plen, rid = struct.unpack('>xxxxxBxxxxHIQ', buf[:24])
    while len(buf) < 64 + plen:
        buf += s.recv(65536)
    return (t, st, rid), buf[64 + plen:]
def first_chunk(s):
    buf = b''
    while True:
        (t, st, rid), buf = read_frame(s, buf)
        if t == 2:
            return buf
        if t in (3, 4):
            raise SystemExit('ended before its first chunk: type %d status %d' % (t, st))
def end_of(s, buf):
    chunks = 0
    while True:
        (t, st, rid), buf = read_frame(s, buf)
        if t == 2:
            chunks += 1
        elif t in (3, 4):
            return t, st, chunks
prompt = b'a prompt mode:stall ' + b'words ' * 40
gw1, gw2 = conn('127.0.0.1'), conn('127.0.0.2')
for s in (gw1, gw2):
    s.sendall(frame(1, 1, prompt, 20000, 4242))
b1, b2 = first_chunk(gw1), first_chunk(gw2)
gw1.sendall(frame(7, 1, gw_conn=4242))
t1, st1, _ = end_of(gw1, b1)
# The other host's request is still running: it streams on (the simulator)
# or is still open (the adapter's stalled stream) until its own host's
# CANCEL, sent on another connection of that host.
pool2 = conn('127.0.0.2')
time.sleep(0.2)
pool2.sendall(frame(7, 1, gw_conn=4242))
t2, st2, chunks2 = end_of(gw2, b2)
print(json.dumps({'first': [t1, st1], 'second': [t2, st2]}))
PY

check() { # NAME PORT
	local out
	out=$(timeout 60 python3 "$KVS_TMP/hosts.py" "$2" x) || kvs_fail "$1: client failed: $out"
	# type 4 ERROR, status 14 cancelled, for both, each by its own host
	assert_eq "$1: the first host's CANCEL ends its own request" "$(jq -c .first <<<"$out")" "[4,14]"
	assert_eq "$1: the other host's request ends by its own CANCEL only" \
		"$(jq -c .second <<<"$out")" "[4,14]"
}

kvs_start_sim S --time-scale 0.05
check kvsplice-sim "$SIM_PORT_S"

kvs_start_fake F
kvs_start_adapter A "$FAKE_URL_F" --stall-timeout 60
check kvsplice-adapter "$AD_PORT_A"
echo "PASS test_cancel_hosts"
