#!/usr/bin/env python3
"""Plays a gateway on one connection to a backend that groups its writes
by client (tests/integration/test_*_tx_order.sh): sends N requests for 5
clients, then reads every answer, at once (--mode fast) or, with a small
receive buffer, after a pause and slowly (--mode pause: the backend's sends
then stop short, mid-frame, again and again). Prints "ok FRAMES HASH" (the
hash of every request's CHUNK payloads in order and its END, the same every
run for a well-formed stream) or "BAD" and what was wrong: a frame of
another type or request, one for another client, one after its request's
END, a request unanswered or (--frames) answered with another count."""
import argparse
import hashlib
import socket
import sys
import time

import kvs1

ap = argparse.ArgumentParser()
ap.add_argument('--port', type=int, required=True)
ap.add_argument('--mode', choices=('fast', 'pause'), required=True)
ap.add_argument('--requests', type=int, required=True)
ap.add_argument('--max-tokens', type=int, required=True)
ap.add_argument('--prompt', required=True, help="request i's prompt: (PROMPT %% i) x REPEAT")
ap.add_argument('--repeat', type=int, default=1)
ap.add_argument('--slow-recv', type=int, default=8192, help='bytes a read, paused')
ap.add_argument('--timeout', type=float, default=20, help='seconds without a byte')
ap.add_argument('--frames', type=int, default=0, help="each request's frames (0: any)")
a = ap.parse_args()
n = a.requests

s = socket.socket()
if a.mode == 'pause':
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2048)
s.connect(('127.0.0.1', a.port))
s.settimeout(a.timeout)
for i in range(n):
    s.sendall(kvs1.request((a.prompt % i).encode() * a.repeat, i + 1, max_tokens=a.max_tokens,
                           gw_conn=1 + i % 5, gw_backend=7))
if a.mode == 'pause':
    time.sleep(1)  # the backend's queue grows past what the socket takes
    # Then read slowly with room for more than a segment: a window kept
    # under loopback's 64 KiB MSS let the backend's sends wait on TCP's
    # persist timer, 200 ms a few hundred bytes (a run took 12 minutes);
    # the backend's sends still stop short, its own buffer full.
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 18)
buf, got, ends, bad = b'', {}, 0, []
while ends < n and not bad:
    if a.mode == 'pause':  # and stays there: many sends stop short
        time.sleep(0.001)
    try:
        d = s.recv(65536 if a.mode == 'fast' else a.slow_recv)
    except socket.timeout:  # frames lost in a corrupt stream: ENDs missing
        bad.append('%d ENDs of %d after %g s without a byte' % (ends, n, a.timeout))
        break
    if not d:
        bad.append('the backend closed the connection')
        break
    buf += d
    fs, buf = kvs1.split(buf)
    for f in fs:
        if f.type not in (kvs1.CHUNK, kvs1.END) or not 1 <= f.req_id <= n:
            bad.append('a frame of type %d for request %d: %r' % (f.type, f.req_id,
                                                                  f.payload[:80]))
            break
        if f.gw_conn != 1 + (f.req_id - 1) % 5:
            bad.append('request %d for client %d' % (f.req_id, f.gw_conn))
        got.setdefault(f.req_id, [])
        if got[f.req_id][-1:] == ['END']:
            bad.append('a frame after the END of request %d' % f.req_id)
        # an END's timings may differ from run to run: only that it is there
        got[f.req_id].append('END' if f.type == kvs1.END else f.payload.hex())
        ends += f.type == kvs1.END
bad += ['request %d never answered' % k for k in range(1, n + 1) if k not in got][:3]
if a.frames:
    bad += ['request %d: %d frames' % (k, len(v)) for k, v in got.items() if len(v) != a.frames]
print('ok %d %s' % (sum(len(v) for v in got.values()),
                    hashlib.sha256(repr(sorted(got.items())).encode()).hexdigest())
      if not bad else 'BAD ' + '; '.join(bad[:3]))
sys.exit(0)
