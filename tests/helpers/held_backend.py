# A KVS1 backend a test scripts frame by frame (tests/integration/
# test_chunk_runs*.sh): it answers PINGs and holds every REQUEST until the
# test's own code writes the answer it wants, in the writes it wants.
#   b = HeldBackend(tmp)   listens; writes tmp/backend.port once it does
#   b.want()               the next line the shell writes to tmp/want
#   b.take(n)              the next n requests held: [(socket, Frame)]
# Each request held also writes the count held so far to tmp/held.
import os
import socket
import struct
import threading
import time

import kvs1


def chunk(f, text, flags=0):
    """A CHUNK answering request frame f (its routing fields echoed);
    flags (header bytes 6-7) for a test of a CHUNK the gateway must refuse."""
    raw = kvs1.frame(kvs1.CHUNK, text, req_id=f.req_id, gw_backend=f.gw_backend,
                     gw_conn=f.gw_conn)
    return raw[:6] + flags.to_bytes(2, 'big') + raw[8:]


def end(f, prompt=0, cached=0, output=0, queue_us=0, prefill_us=0):
    """An END answering request frame f: a struct kvs_end with these
    counts, the rest zeros."""
    payload = struct.pack('>5I', prompt, cached, output, queue_us, prefill_us)
    return kvs1.frame(kvs1.END, payload + bytes(32 - len(payload)), req_id=f.req_id,
                      gw_backend=f.gw_backend, gw_conn=f.gw_conn)


class HeldBackend:
    def __init__(self, tmp, nodelay=False):
        self.tmp, self.nodelay = tmp, nodelay
        self.held, self.cv = [], threading.Condition()
        self.ls = socket.socket()
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(16)
        threading.Thread(target=self._accept, daemon=True).start()
        with open(tmp + '/backend.port', 'w') as p:
            p.write(str(self.ls.getsockname()[1]))

    def _accept(self):
        while True:
            c, _ = self.ls.accept()
            if self.nodelay:
                c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, c):
        r = kvs1.Reader(c)
        while True:
            try:
                f = r.next()
            except (EOFError, OSError):
                return
            if f.type == kvs1.PING:
                c.sendall(kvs1.pong(f))
            elif f.type == kvs1.REQUEST:
                with self.cv:
                    self.held.append((c, f))
                    n = len(self.held)
                    self.cv.notify_all()
                with open(self.tmp + '/held', 'w') as h:
                    h.write(str(n))

    def want(self):
        path = self.tmp + '/want'
        while not os.path.exists(path):  # the shell's cue, polled
            time.sleep(0.02)
        with open(path) as w:
            line = w.read().strip()
        os.unlink(path)
        return line

    def take(self, n):
        with self.cv:
            self.cv.wait_for(lambda: len(self.held) >= n)
            got = self.held[:n]
            del self.held[:n]
        return got
