#!/usr/bin/env bash
# kvsplice-adapter writes what a turn of its loop queued in one write, each
# client's frames together (kvs_frames_by_client, tools/kvsplice-adapter/
# tx.c): never while a frame is part sent (tx_cut), or the stream to the
# gateway is corrupt. A test playing the gateway on one connection sends
# 300 requests for 5 clients to an adapter in front of tests/helpers/
# fake_openai (each answer three text events, the usage, [DONE]), read at
# once, then twice with a small receive buffer, read slowly after a pause
# (the adapter's sends then stop short again and again). Every time every
# frame is well formed and names the client its request came from, and
# each request's CHUNKs (the same texts, in the same order every time)
# end with its END. (test_sim_tx_order.sh does the same for kvsplice-sim.)
# Unlike that one, this test did not fail on an adapter that ignores
# tx_cut (and a kvs_frames_by_client without its magic check): the
# adapter pauses its transfers while its queue is above its high mark, so
# it seldom queues behind a part-sent frame. What it checks is the grouped
# stream under back-pressure: whole, each request's frames in order.
source "$(dirname "$0")/lib.sh"
kvs_setup
kvs_start_fake F
kvs_start_adapter A "$FAKE_URL_F"

read_answers() { # fast|pause
	PYTHONPATH="$(dirname "$0")/../helpers" python3 - "$AD_PORT_A" "$1" <<'PY'
import hashlib, socket, sys, time
import kvs1
port, mode, n = int(sys.argv[1]), sys.argv[2], 300
s = socket.socket()
if mode == 'pause':
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2048)
s.connect(('127.0.0.1', port))
s.settimeout(60)
for i in range(n):
    s.sendall(kvs1.request(b'tx order %d mode:ok ' % i * 8, i + 1, max_tokens=8,
                           gw_conn=1 + i % 5, gw_backend=7))
if mode == 'pause':
    time.sleep(1)  # the adapter's queue grows past what the socket takes
buf, got, ends, bad = b'', {}, 0, []
while ends < n and not bad:
    if mode == 'pause':  # and stays there: many sends stop short
        time.sleep(0.001)
    try:
        d = s.recv(65536 if mode == 'fast' else 1024)
    except socket.timeout:  # frames lost in a corrupt stream: ENDs missing
        bad.append('%d ENDs of %d after 60 s without a byte' % (ends, n))
        break
    if not d:
        bad.append('the adapter closed the connection')
        break
    buf += d
    fs, buf = kvs1.split(buf)
    for f in fs:
        if f.type not in (kvs1.CHUNK, kvs1.END) or not 1 <= f.req_id <= n:
            bad.append('a frame of type %d for request %d: %r' % (f.type, f.req_id, f.payload[:80]))
            break
        if f.gw_conn != 1 + (f.req_id - 1) % 5:
            bad.append('request %d for client %d' % (f.req_id, f.gw_conn))
        got.setdefault(f.req_id, [])
        if got[f.req_id][-1:] == ['END']:
            bad.append('a frame after the END of request %d' % f.req_id)
        # an END's timings differ from run to run: only that it is there
        got[f.req_id].append('END' if f.type == kvs1.END else f.payload.hex())
        ends += f.type == kvs1.END
bad += ['request %d never answered' % k for k in range(1, n + 1) if k not in got][:3]
print('ok %d %s' % (sum(len(v) for v in got.values()),
                    hashlib.sha256(repr(sorted(got.items())).encode()).hexdigest())
      if not bad else 'BAD ' + '; '.join(bad[:3]))
PY
}

fast=$(read_answers fast)
echo "read at once: $fast"
assert_eq "read at once" "${fast%% *}" ok
# Where the sends stop differs from run to run: two tries.
for i in 1 2; do
	slow=$(read_answers pause)
	echo "read after a pause ($i): $slow"
	assert_eq "read after a pause ($i), the same answers" "$slow" "$fast"
done
echo "PASS test_adapter_tx_order"
