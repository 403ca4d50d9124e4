#!/usr/bin/env python3
"""A client the gateway closes while it is still sending, as a client that
pipelines from one thread and reads from another does.

usage: close_sender.py PORT MODE
  MODE bad:     a bad frame (bad magic), then more bytes every 10 ms;
       streaming: a request of 4,000 tokens, and once its first CHUNK has
                come (its answer streaming while the gateway closes), as bad;
       flood:   PINGs as fast as the socket takes them (over --ctl-rate);
       partial: a REQUEST header announcing 4 KiB, then a byte every 20 ms
                (never finished: --frame-timeout-ms);
       idle:    nothing (--idle-timeout-ms), until the gateway closes.
It sends (idle: nothing) without reading until the gateway's FIN or reset
reaches its socket (TCP_INFO's state leaves ESTABLISHED), goes on sending
for AFTER_MS more (default 300: what a client's sending thread does before
it hears), then reads to the end and closes. Prints one line:
  code=N end=eof|reset|timeout send_error=NAME|- sent=N
code: the first ERROR's status (the gateway's word on why); end: how the
stream ended; send_error: the first error a send got (ECONNRESET or EPIPE:
the gateway reset the connection)."""
import errno
import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kvs1  # noqa: E402

TCP_ESTABLISHED = 1


def state(s):
    return s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0]


port, mode = int(sys.argv[1]), sys.argv[2]
after_s = int(os.environ.get('AFTER_MS', '300')) / 1000
s = kvs1.connect(port)
pre = b''
if mode == 'streaming':
    s.sendall(kvs1.request(b'a long answer, streaming while the gateway closes', 1,
                           max_tokens=4000))
    while not kvs1.split(pre)[0]:
        d = s.recv(65536)
        if not d:
            sys.exit('close_sender: the gateway closed before the first CHUNK')
        pre += d
    mode = 'bad'
s.setblocking(False)
if mode == 'bad':
    s.send(b'A' * 64)
    filler, pause = b'B' * 64, 0.01
elif mode == 'flood':
    filler, pause = b''.join(kvs1.ping(i) for i in range(1, 17)), 0.001
elif mode == 'idle':
    filler, pause = kvs1.ping(1), 0.01
elif mode == 'partial':
    s.send(kvs1.request(b'x' * 4096, 1)[:kvs1.HDR.size])
    filler, pause = b'x', 0.02
else:
    sys.exit(f'close_sender: unknown mode {mode}')

deadline = time.monotonic() + 30
data, end, send_error, sent, heard = pre, 'timeout', '', 0, None
while time.monotonic() < deadline and (heard is None or time.monotonic() < heard + after_s):
    if heard is None and state(s) != TCP_ESTABLISHED:
        heard = time.monotonic()
    elif heard is None and mode == 'idle':
        time.sleep(pause)
        continue
    try:
        sent += s.send(filler)
    except BlockingIOError:
        pass
    except OSError as e:
        send_error = errno.errorcode.get(e.errno, str(e.errno))
        break
    time.sleep(pause)
s.setblocking(True)
s.settimeout(max(1, deadline - time.monotonic()))
try:
    while True:
        d = s.recv(65536)
        if not d:
            end = 'eof'
            break
        data += d
except socket.timeout:
    pass
except OSError as e:
    end = 'reset' if e.errno == errno.ECONNRESET else errno.errorcode.get(e.errno, str(e.errno))
s.close()
got, _ = kvs1.split(data)
err = next((f for f in got if f.type == kvs1.ERROR), None)
print(f"code={err.status if err else '-'} end={end} send_error={send_error or '-'} sent={sent}")
