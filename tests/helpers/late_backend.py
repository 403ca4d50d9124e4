# A KVS1 backend whose PONGs can be held, as if its health check's PING or
# PONG waited in the gateway's kernel (tests/integration/test_health_late.sh):
#   late_backend.py TMP
# While TMP/late exists, it holds its PONGs to health checks (every PING
# but a new connection's probe, whose req_id starts with CR LF CR LF);
# while TMP/mute exists, every PONG. What it held goes once the file is
# gone. A REQUEST is answered with a CHUNK every 50 ms until TMP/finish
# exists (the test's cue, removed then), then an END. Its port in
# TMP/backend.port once it listens.
import os
import sys
import threading
import time

import kvs1
from held_backend import chunk, end, serve

tmp = sys.argv[1]
PROBE_TAG = 0x0d0a0d0a
held, held_lock = [], threading.Lock()


def holding(f):
    if os.path.exists(tmp + '/mute'):
        return True
    return os.path.exists(tmp + '/late') and f.req_id >> 32 != PROBE_TAG


def release():
    while True:
        time.sleep(0.02)
        with held_lock:
            keep = []
            for c, lock, f in held:
                if holding(f):
                    keep.append((c, lock, f))
                    continue
                with lock:
                    try:
                        c.sendall(kvs1.pong(f))
                    except OSError:
                        pass
            held[:] = keep


def on_ping(c, f, lock):
    with held_lock:
        if holding(f):
            held.append((c, lock, f))
            return
    with lock:
        c.sendall(kvs1.pong(f))


def stream(c, f, lock):
    i = 0
    while not os.path.exists(tmp + '/finish'):
        with lock:
            c.sendall(chunk(f, b'%d ' % i))
        i += 1
        time.sleep(0.05)
    os.unlink(tmp + '/finish')
    with lock:
        c.sendall(end(f, prompt=8, output=i))


def on_request(c, f, lock):
    threading.Thread(target=stream, args=(c, f, lock), daemon=True).start()


threading.Thread(target=release, daemon=True).start()
serve(tmp + '/backend.port', on_request, on_ping=on_ping)
threading.Event().wait()
