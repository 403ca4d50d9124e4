# syn_blackhole.py PORT_FILE: a loopback port whose connects hang, as a
# backend's host that has gone does (its SYNs unanswered): a listener that
# never accepts, its accept queue full, so the kernel drops every further
# SYN. Writes the port to PORT_FILE once that is so; runs until killed.
import os
import socket
import sys
import time

lst = socket.socket()
lst.bind(("127.0.0.1", 0))
lst.listen(0)  # a queue of one
port = lst.getsockname()[1]
fillers = []
# Connections until one hangs: the queue is full from then on.
while True:
    c = socket.socket()
    c.settimeout(0.5)
    try:
        c.connect(("127.0.0.1", port))
        fillers.append(c)
    except socket.timeout:
        c.close()  # not a connect of the gateway's in SYN-SENT
        break
tmp = sys.argv[1] + ".tmp"
with open(tmp, "w") as f:
    f.write("%d\n" % port)
os.rename(tmp, sys.argv[1])
while True:
    time.sleep(3600)
