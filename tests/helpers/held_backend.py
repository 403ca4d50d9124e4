# KVS1 backends a test scripts (tests/integration/test_chunk_runs*.sh,
# test_request_nested.sh, and late_backend.py):
#   serve(port_file, on_request)  listens on loopback, writes its port to
#                          port_file once it does, answers PINGs, and calls
#                          on_request(socket, Frame, lock) for each REQUEST
#                          (lock: the connection's, held for each write)
#   b = HeldBackend(tmp)   one that holds every REQUEST until the test's own
#                          code writes the answer it wants, in the writes it
#                          wants; its port in tmp/backend.port
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


def serve(port_file, on_request, nodelay=False, on_ping=None):
    """A backend on 127.0.0.1 (a thread a connection, PINGs answered, or
    given to on_ping(socket, Frame, lock)); returns its listening socket
    once port_file holds its port."""
    def conn(c):
        if nodelay:
            c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        lock, r = threading.Lock(), kvs1.Reader(c)
        while True:
            try:
                f = r.next()
            except (EOFError, OSError):
                return
            if f.type == kvs1.PING and on_ping:
                on_ping(c, f, lock)
            elif f.type == kvs1.PING:
                with lock:
                    c.sendall(kvs1.pong(f))
            elif f.type == kvs1.REQUEST:
                on_request(c, f, lock)

    def accept():
        while True:
            c, _ = ls.accept()
            threading.Thread(target=conn, args=(c,), daemon=True).start()

    ls = socket.socket()
    ls.bind(('127.0.0.1', 0))
    ls.listen(16)
    threading.Thread(target=accept, daemon=True).start()
    with open(port_file + '.tmp', 'w') as p:
        p.write(str(ls.getsockname()[1]))
    os.rename(port_file + '.tmp', port_file)
    return ls


class HeldBackend:
    def __init__(self, tmp, nodelay=False):
        self.tmp = tmp
        self.held, self.cv = [], threading.Condition()
        self.ls = serve(tmp + '/backend.port', self._hold, nodelay)

    def _hold(self, c, f, lock):
        with self.cv:
            self.held.append((c, f))
            n = len(self.held)
            self.cv.notify_all()
        with open(self.tmp + '/held', 'w') as h:
            h.write(str(n))

    def want(self):
        path = self.tmp + '/want'
        line = ''
        # The shell's cue, polled. Its `echo WORD >want` creates the file
        # before it writes the word: read until the line is there (a
        # scenario read as '' was answered with nothing, and the test's
        # client waited out its 60 s).
        while not line.endswith('\n'):
            time.sleep(0.02)
            try:
                with open(path) as w:
                    line = w.read()
            except FileNotFoundError:
                pass
        os.unlink(path)
        return line.strip()

    def take(self, n):
        with self.cv:
            self.cv.wait_for(lambda: len(self.held) >= n)
            got = self.held[:n]
            del self.held[:n]
        return got
