# kvs_pinger.py PORT GO [BYE]: connects to the gateway at 127.0.0.1:PORT
# (says "connected"), sends PINGs 101-103 once the file GO exists ("sent"),
# waits for their PONGs ("pongs"), then, given BYE, holds the connection
# until that file exists. For the fd-store tests: PINGs need the
# controller, so while none runs they wait in the kept punt socket.
import os, socket, sys, time
import kvs1
port, go = int(sys.argv[1]), sys.argv[2]
bye = sys.argv[3] if len(sys.argv) > 3 else None
s = socket.create_connection(("127.0.0.1", port))
print("connected", flush=True)
while not os.path.exists(go):
    time.sleep(0.02)
for rid in (101, 102, 103):
    s.sendall(kvs1.ping(rid))
print("sent", flush=True)
s.settimeout(60)
r, want = kvs1.Reader(s), {101, 102, 103}
while want:
    f = r.next()
    if f.type == kvs1.PONG:
        want.discard(f.req_id)
print("pongs", flush=True)
while bye and not os.path.exists(bye):
    time.sleep(0.02)
