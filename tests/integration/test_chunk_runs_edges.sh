#!/usr/bin/env bash
# Runs of CHUNKs (bpf/datapath/response.bpf.h, response_run) at their
# edges: what a backend may write that a run must not swallow or lose.
#  - A malformed CHUNK in the middle of a client's run (a header the parser
#    trusts, but flags a CHUNK may not carry): the CHUNKs before and after
#    it reach the client, in order, with the END; it alone is dropped
#    (drop_bad_upstream 1) and every other frame counted.
#  - A run cut anywhere across the backend's writes (inside a header, inside
#    a payload, at a frame's end), each piece its own segment: every CHUNK
#    arrives once and in order.
#  - A backend's ERROR in a run, after 5 CHUNKs, all in one write: one
#    redirect (two when ERRORs went alone), the client gets the CHUNKs and
#    the ERROR, and the request is settled in the run (the backend's ENDs
#    count one more, its outstanding requests and work back to 0).
#  - A run for a client that has gone: every frame of it counted as dropped
#    (drop_no_client, one per frame), none as a response, and the backend's
#    outstanding count back to 0 after the END.
#  - A run is never longer than the largest frame (--max-frame 4096 here):
#    the strparser aborts a socket on a message longer than its receive
#    buffer, which is sized and checked for the largest frame only. 20
#    CHUNKs of 1,000 bytes and their END in one write take at least 7
#    redirects (3 CHUNKs a run, the END in the last), not 2.
# The verdict's runs are counted by the kernel's BPF statistics
# (kvs_verdict_runs).
source "$(dirname "$0")/lib.sh"
kvs_setup

kvs_bpf_stats_on

# The backend: answers PINGs; once it holds a request and $KVS_TMP/want
# names a scenario, writes that scenario's answer (below).
PYTHONPATH="$(dirname "$0")/../helpers" python3 - "$KVS_TMP" <<'PY' 2>"$KVS_TMP/backend.log" &
import sys, time
import kvs1
from held_backend import HeldBackend, chunk, end

def answer(what, c, f):
    if what == 'mid':  # C0-C4, a CHUNK with the JSON flag (REQUEST only), C5-C9, END
        out = b''.join(chunk(f, b'c%d;' % i) for i in range(5))
        out += chunk(f, b'bad', flags=2)
        out += b''.join(chunk(f, b'c%d;' % i) for i in range(5, 10)) + end(f)
        c.sendall(out)
    elif what == 'split':  # 40 CHUNKs and the END, cut at awkward places
        out = b''.join(chunk(f, b'c%d;' % i + b'x' * (i * 37 % 300)) for i in range(40))
        out += end(f)
        cuts, at = [], 0
        for step in (10, 70, 3, 500, 64, 1, 1200, 129, 2000):  # inside headers, payloads
            at += step
            cuts.append(at)
        prev = 0
        for cut in cuts + [len(out)]:
            c.sendall(out[prev:cut])
            prev = cut
            time.sleep(0.02)  # a segment of its own (NODELAY); not a wait for a result
    elif what == 'cap':  # 20 CHUNKs of 1,000 bytes and the END, one write
        c.sendall(b''.join(chunk(f, b'c%d;' % i + b'x' * (996 - len(b'c%d;' % i)))
                           for i in range(20)) + end(f))
    elif what == 'error':  # C0-C4, then the backend's ERROR (status 11), one write
        c.sendall(b''.join(chunk(f, b'c%d;' % i) for i in range(5)) +
                  kvs1.frame(kvs1.ERROR, b'engine failed', req_id=f.req_id, status=11,
                             gw_backend=f.gw_backend, gw_conn=f.gw_conn))
    elif what == 'gone':  # 10 CHUNKs and the END for a client that has left
        c.sendall(b''.join(chunk(f, b'c%d;' % i) for i in range(10)) + end(f))

b = HeldBackend(sys.argv[1], nodelay=True)
while True:
    what = b.want()
    c, f = b.take(1)[0]
    answer(what, c, f)
PY
KVS_PIDS+=($!)
kvs_wait_file "$KVS_TMP/backend.port"
# No health checks: their PINGs would run the verdict too.
kvs_start_gw --backend "127.0.0.1:$(cat "$KVS_TMP/backend.port")" --health-interval-ms 0 \
	--max-frame 4096
kvs_wait_for "the backend is up" '[ "$(kvs_wait_backend 0 up 0)" = up ]'

delta() { echo $(($(jget "$st" ".$1") - $(jget "$st0" ".$1"))); }

# A client: one request, then every frame up to its END, checked against
# the CHUNK texts expected (their first 4+ bytes: "cN;").
client() { # WANT NCHUNKS [LAST: the frame type that ends it, 3 END (default) or 4 ERROR]
	echo "$1" >"$KVS_TMP/want"
	PYTHONPATH="$(dirname "$0")/../helpers" python3 - "$GW_PORT" "$2" "${3:-3}" <<'PY'
import sys
import kvs1
s = kvs1.connect(int(sys.argv[1]))
n, last = int(sys.argv[2]), int(sys.argv[3])
s.sendall(kvs1.request(b'chunk run edges ' * 40, 7, max_tokens=n))
r = kvs1.Reader(s)
got = []
while True:
    f = r.next()
    if f.type != kvs1.CHUNK:
        break
    got.append(f.payload.split(b';')[0].decode())
want = ['c%d' % i for i in range(n)]
print('ok' if f.type == last and got == want else
      'type %d after CHUNKs %s' % (f.type, got))
PY
}

# --- a malformed CHUNK in the middle of a run ---------------------------------
st0=$(kvs_stats)
assert_eq "CHUNKs around a malformed one" "$(client mid 10)" ok
kvs_wait_for "every frame is counted" \
	'st=$(kvs_stats); [ $(($(delta resp_frames) + $(delta drop_bad_upstream))) -ge 12 ]'
assert_eq "response frames counted" "$(delta resp_frames)" 11
assert_eq "the malformed CHUNK dropped" "$(delta drop_bad_upstream)" 1
assert_eq "nothing dropped for want of a client" "$(delta drop_no_client)" 0

# --- a run cut across segments ------------------------------------------------
st0=$(kvs_stats)
assert_eq "CHUNKs cut across segments" "$(client split 40)" ok
kvs_wait_for "every frame is counted" \
	'st=$(kvs_stats); [ "$(delta resp_frames)" -ge 41 ]'
assert_eq "response frames counted" "$(delta resp_frames)" 41
assert_eq "no bad frames" "$(delta drop_bad_upstream)" 0

# --- a run no longer than the largest frame ----------------------------------
runs0=$(kvs_verdict_runs)
assert_eq "CHUNKs of a capped run" "$(client cap 20)" ok
runs=$(($(kvs_verdict_runs) - runs0 - 1))
echo "verdict runs for 20 CHUNKs of 1,000 bytes and an END: $runs"
assert_ge "verdict runs for 20 CHUNKs of 1,000 bytes and an END (3 a run)" "$runs" 7

# --- an ERROR in a run ----------------------------------------------------------
be() { jget "$("$KVS_BUILD/kvsplicectl" --pin-dir "$KVS_PIN" backends --json)" ".[0].$1"; }
ends0=$(be ends)
runs0=$(kvs_verdict_runs)
assert_eq "CHUNKs, then the backend's ERROR" "$(client error 5 4)" ok
runs=$(($(kvs_verdict_runs) - runs0 - 1))
assert_eq "verdict runs for 5 CHUNKs and an ERROR in one write" "$runs" 1
assert_eq "the ERROR ends its request at the backend" $(($(be ends) - ends0)) 1
assert_eq "outstanding requests after the ERROR" "$(be outstanding)" 0
assert_eq "outstanding work after the ERROR" "$(be outstanding_work)" 0

# --- a run for a client that has gone -----------------------------------------
st0=$(kvs_stats)
rm -f "$KVS_TMP/held"
PYTHONPATH="$(dirname "$0")/../helpers" python3 - "$GW_PORT" "$KVS_TMP" <<'PY'
import os, socket, struct, sys, time
import kvs1
s = kvs1.connect(int(sys.argv[1]))
s.sendall(kvs1.request(b'chunk run edges gone ' * 40, 8, max_tokens=10))
while not os.path.exists(sys.argv[2] + '/held'):  # the backend holds it
    time.sleep(0.02)
s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack('ii', 1, 0))  # a reset
s.close()
PY
clients() { "$KVS_BUILD/kvsplicectl" --pin-dir "$KVS_PIN" conns --json |
	jq '[.[] | select(.role == "client")] | length'; }
kvs_wait_for "the client is gone" '[ "$(clients)" = 0 ]'
echo gone >"$KVS_TMP/want"
kvs_wait_for "the run is counted" \
	'st=$(kvs_stats); [ "$(delta drop_no_client)" -ge 11 ]'
assert_eq "dropped for want of a client" "$(delta drop_no_client)" 11
assert_eq "response frames counted" "$(delta resp_frames)" 0
kvs_wait_for "outstanding back to 0" \
	'[ "$(jget "$("$KVS_BUILD/kvsplicectl" --pin-dir "$KVS_PIN" backends --json)" ".[0].outstanding")" = 0 ]'
echo "PASS test_chunk_runs_edges"
