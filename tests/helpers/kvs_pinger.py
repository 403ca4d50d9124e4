# kvs_pinger.py PORT GO [BYE]: connects to the gateway at 127.0.0.1:PORT
# (says "connected"), sends PINGs 101-103 once the file GO exists ("sent"),
# waits for their PONGs ("pongs"), then, given BYE, holds the connection
# until that file exists. For the fd-store tests: PINGs need the
# controller, so while none runs they wait in the kept punt socket.
import os, socket, struct, sys, time
port, go = int(sys.argv[1]), sys.argv[2]
bye = sys.argv[3] if len(sys.argv) > 3 else None
s = socket.create_connection(("127.0.0.1", port))
print("connected", flush=True)
while not os.path.exists(go):
    time.sleep(0.02)
for rid in (101, 102, 103):
    s.sendall(struct.pack('>IBBHHHIQQQIIIIQ', 0x4b565331, 1, 5, 0, 64, 0, 0, rid,
                          0, 0, 0, 0, 0, 0, 0))
print("sent", flush=True)
s.settimeout(60)
buf, want = b'', {101, 102, 103}
while want:
    while len(buf) < 64 or len(buf) < 64 + struct.unpack('>I', buf[12:16])[0]:
        d = s.recv(65536)
        if not d:
            raise EOFError('gateway closed the connection')
        buf += d
    n = 64 + struct.unpack('>I', buf[12:16])[0]
    f, buf = buf[:n], buf[n:]
    if f[5] == 6:
        want.discard(struct.unpack('>Q', f[16:24])[0])
print("pongs", flush=True)
while bye and not os.path.exists(bye):
    time.sleep(0.02)
