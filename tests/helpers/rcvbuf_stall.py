#!/usr/bin/env python3
"""A client that stops reading can stall its own sends (no kvsplice here).

A server on loopback reads as fast as it can and answers each 344-byte
frame with 114 bytes (TCP_NODELAY, as the gateway answers busy); a client
sends 300 frames, PAUSE seconds apart, and reads nothing, with SO_RCVBUF
4096 set before connect, after connect, or not at all. Prints how many
bytes the server got within 10 s; exits 1 if not all of them. With the
buffer shrunk after connect, the client's kernel drops what does not fit,
shuts its window and discards the server's later segments, ACKs of its own
data included (docs/RUNBOOK.md, "Back-pressure").

    rcvbuf_stall.py before|after|none [PAUSE, default 0.0002]
"""
import socket
import sys
import threading
import time

FRAME, ANSWER, N = 344, 114, 300


def serve(ls, got):
    c, _ = ls.accept()
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    c.setblocking(False)
    pend, out = 0, b''
    while True:
        try:
            d = c.recv(65536)
            if not d:
                return
            got[0] += len(d)
            pend += len(d)
            out += b'e' * ANSWER * (pend // FRAME)
            pend %= FRAME
        except BlockingIOError:
            time.sleep(0.0005)
        except OSError:  # the client has gone (the run is over)
            return
        if out:
            try:
                out = out[c.send(out):]
            except BlockingIOError:
                pass
            except OSError:
                return


def main():
    mode = sys.argv[1]
    pause = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0002
    ls = socket.socket()
    ls.bind(('127.0.0.1', 0))
    ls.listen(1)
    got = [0]
    threading.Thread(target=serve, args=(ls, got), daemon=True).start()
    s = socket.socket()
    if mode == 'before':
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(ls.getsockname())
    if mode == 'after':
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    t0 = time.time()
    for _ in range(N):
        s.sendall(b'x' * FRAME)
        time.sleep(pause)
    while got[0] < N * FRAME and time.time() - t0 < 10:
        time.sleep(0.01)
    print(f"{mode}: the server got {got[0]} of {N * FRAME} bytes in {time.time() - t0:.2f} s")
    return 0 if got[0] == N * FRAME else 1


if __name__ == '__main__':
    sys.exit(main())
