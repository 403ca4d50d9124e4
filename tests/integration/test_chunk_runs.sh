#!/usr/bin/env bash
# Runs (bpf/datapath/response.bpf.h, response_run): a backend that writes a
# decode step's CHUNKs and ENDs for one client back to back has them
# redirected to the client in one message, not one each; every frame is
# still counted, and what may not go with a run goes alone.
#  - One write holding 3 requests' 10 steps of CHUNKs, two CHUNKs for a
#    client that does not exist (forged gw_conn) between them, then the 3
#    ENDs: the client gets every CHUNK of every request in order and its
#    ENDs, nothing of the forged ones; the kernel counts 33 response frames
#    and 2 dropped; the verdict runs 5 times for the 35 frames (two runs of
#    15, the forged two alone, the 3 ENDs in one run; 7 when ENDs went
#    alone), each END settled in its run: the backend's outstanding
#    requests and work back to 0, the ENDs' reports learnt (tokens, first
#    token times), the client's requests in flight back to 0.
#  - One write of 200 CHUNKs of 300 bytes for one request: delivered whole
#    and in order, in messages of at most 64 frames (at least 4).
# The verdict's runs are counted by the kernel's BPF statistics
# (kvs_verdict_runs).
source "$(dirname "$0")/lib.sh"
kvs_setup

kvs_bpf_stats_on

# The backend: answers PINGs; once it holds WANT requests (a line in
# $KVS_TMP/want), writes their answers in one write per connection (below).
PYTHONPATH="$(dirname "$0")/../helpers" python3 - "$KVS_TMP" <<'PY' 2>"$KVS_TMP/backend.log" &
import sys
import kvs1
from held_backend import HeldBackend, chunk, end

def answer(reqs):
    c = reqs[0][0]
    fs = [f for _, f in reqs]
    if len(fs) == 3:  # steps 0-4, a forged CHUNK, steps 5-9, another, the ENDs
        out = b''
        for step in range(10):
            if step == 5:
                out += kvs1.frame(kvs1.CHUNK, b'forged', req_id=99,
                                  gw_backend=fs[0].gw_backend, gw_conn=987654321)
            out += b''.join(chunk(f, b'%d:%d;' % (f.req_id, step)) for f in fs)
        out += kvs1.frame(kvs1.CHUNK, b'forged', req_id=99, gw_backend=fs[0].gw_backend,
                          gw_conn=987654321)
        out += b''.join(end(f, prompt=100 + f.req_id, cached=16, output=10,
                            queue_us=2000, prefill_us=3000) for f in fs)
    else:  # 200 CHUNKs of 300 bytes, then the END
        f = fs[0]
        out = b''.join(chunk(f, (b'%03d' % i) * 100) for i in range(200)) + end(f)
    c.sendall(out)

b = HeldBackend(sys.argv[1])
while True:
    answer(b.take(int(b.want())))
PY
KVS_PIDS+=($!)
kvs_wait_file "$KVS_TMP/backend.port"
# No health checks: their PINGs would run the verdict too.
kvs_start_gw --backend "127.0.0.1:$(cat "$KVS_TMP/backend.port")" --health-interval-ms 0
kvs_wait_for "the backend is up" '[ "$(kvs_wait_backend 0 up 0)" = up ]'


# --- three requests, their CHUNKs in runs ------------------------------------
st0=$(kvs_stats)
runs0=$(kvs_verdict_runs)
echo 3 >"$KVS_TMP/want"
PYTHONPATH="$(dirname "$0")/../helpers" python3 - "$GW_PORT" "$KVS_BUILD/kvsplicectl" "$KVS_PIN" \
	>"$KVS_TMP/client1.out" <<'PY'
import json
import subprocess
import sys
import kvs1
s = kvs1.connect(int(sys.argv[1]))
for i in (1, 2, 3):
    s.sendall(kvs1.request(b'chunk runs %d ' % i * 40, i, max_tokens=10))
r = kvs1.Reader(s)
got, ends, bad = {1: [], 2: [], 3: []}, 0, []
while ends < 3:
    f = r.next()
    if f.type == kvs1.CHUNK and f.req_id in got:
        got[f.req_id].append(f.payload)
    elif f.type == kvs1.END:
        ends += 1
        if len(got[f.req_id]) != 10:
            bad.append('END of %d after %d CHUNKs' % (f.req_id, len(got[f.req_id])))
    else:
        bad.append('unexpected frame type %d req %d' % (f.type, f.req_id))
for i in (1, 2, 3):
    if got[i] != [b'%d:%d;' % (i, k) for k in range(10)]:
        bad.append('request %d: CHUNKs %r' % (i, got[i]))
# Redirected after the verdict counted them: the kernel's count of this
# client's requests in flight is back to 0 before the ENDs arrive.
conns = json.loads(subprocess.check_output([sys.argv[2], '--pin-dir', sys.argv[3], 'conns',
                                            '--json']))
port = s.getsockname()[1]
mine = [c for c in conns if c['role'] == 'client' and c['remote'].endswith(':%d' % port)]
if len(mine) != 1 or mine[0]['inflight'] != 0:
    bad.append('the client in the conns table: %r' % mine)
print('ok' if not bad else '; '.join(bad))
PY
runs1=$(kvs_verdict_runs)
assert_eq "what the client received" "$(cat "$KVS_TMP/client1.out")" ok
kvs_wait_for "every frame is counted" \
	'st=$(kvs_stats); [ $(($(jget "$st" .resp_frames) - $(jget "$st0" .resp_frames))) -ge 33 ]'
assert_eq "response frames counted" $(($(jget "$st" .resp_frames) - $(jget "$st0" .resp_frames))) 33
assert_eq "forged CHUNKs dropped" \
	$(($(jget "$st" .drop_no_client) - $(jget "$st0" .drop_no_client))) 2
assert_eq "bad frames from the backend" \
	$(($(jget "$st" .drop_bad_upstream) - $(jget "$st0" .drop_bad_upstream))) 0
# 3 REQUESTs, then the backend's 35 frames in 5 messages (one write: one skb
# on loopback; a kernel that split it would make a few more).
runs=$((runs1 - runs0 - 3))
echo "verdict runs for the backend's 35 frames: $runs"
assert_ge "verdict runs for the backend's 35 frames" "$runs" 5
assert_le "verdict runs for the backend's 35 frames" "$runs" 6
be=$("$KVS_BUILD/kvsplicectl" --pin-dir "$KVS_PIN" backends --json)
assert_eq "outstanding requests after the ENDs" "$(jget "$be" '.[0].outstanding')" 0
assert_eq "outstanding work after the ENDs" "$(jget "$be" '.[0].outstanding_work')" 0
assert_eq "ENDs counted" "$(jget "$be" '.[0].ends')" 3
assert_eq "the ENDs' prompt tokens learnt (101 + 102 + 103)" "$(jget "$be" '.[0].prompt_tokens')" 306
assert_eq "the ENDs' cached tokens learnt" "$(jget "$be" '.[0].cached_tokens')" 48
assert_eq "the ENDs' first token times counted" "$(jget "$be" '.[0].ttft.count')" 3
assert_eq "the ENDs' first token time, mean (2 + 3 ms)" "$(jget "$be" '.[0].ttft.mean_ms')" 5
# The backend's own counts: a run's frames and bytes added at once.
assert_eq "frames counted against the backend (the forged too)" "$(jget "$be" '.[0].responses')" 35
assert_eq "bytes counted against the backend (30 x 68 + 2 x 70 + 3 x 96)" \
	"$(jget "$be" '.[0].resp_bytes')" 2468

# --- one request, 200 CHUNKs: runs capped -------------------------------------
runs0=$(kvs_verdict_runs)
echo 1 >"$KVS_TMP/want"
PYTHONPATH="$(dirname "$0")/../helpers" python3 - "$GW_PORT" >"$KVS_TMP/client2.out" <<'PY'
import sys
import kvs1
s = kvs1.connect(int(sys.argv[1]))
s.sendall(kvs1.request(b'a long stream ' * 40, 5, max_tokens=200))
r = kvs1.Reader(s)
got = []
while True:
    f = r.next()
    if f.type != kvs1.CHUNK:
        break
    got.append(f.payload)
want = [(b'%03d' % i) * 100 for i in range(200)]
print('ok' if f.type == kvs1.END and got == want else
      'type %d after %d CHUNKs, in order: %s' % (f.type, len(got), got == want[:len(got)]))
PY
runs=$(($(kvs_verdict_runs) - runs0 - 1))
assert_eq "the long stream, received" "$(cat "$KVS_TMP/client2.out")" ok
kvs_wait_for "the long stream counted against the backend" \
	'[ "$(jget "$("$KVS_BUILD/kvsplicectl" --pin-dir "$KVS_PIN" backends --json)" ".[0].responses")" -ge 236 ]'
be=$("$KVS_BUILD/kvsplicectl" --pin-dir "$KVS_PIN" backends --json)
assert_eq "frames counted against the backend, after the long stream" \
	"$(jget "$be" '.[0].responses')" 236
assert_eq "bytes counted against the backend, after it (+ 200 x 364 + 96)" \
	"$(jget "$be" '.[0].resp_bytes')" $((2468 + 72896))
echo "verdict runs for 200 CHUNKs and an END: $runs"
assert_ge "verdict runs for 200 CHUNKs and an END (64 frames a run at most)" "$runs" 4
assert_le "verdict runs for 200 CHUNKs and an END" "$runs" 25
echo "PASS test_chunk_runs"
