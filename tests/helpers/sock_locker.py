# Holds some of a gateway's TCP sockets owned (locked), as a psock's
# backlog does writing into one: bytes that arrive for a held socket wait in
# its backlog, and the strparser's worker (kstrp) runs their verdicts in
# process context, where a verdict from softirq can interrupt them
# (tests/integration/test_chunk_runs_nested.sh, test_request_nested.sh).
#
#   sock_locker.py PID TMP TAG [--local PORT] --remote PORT[,PORT...]
#
# Takes copies (pidfd_getfd) of process PID's established sockets whose
# local port is PORT (any, if not given) and whose peer's port is one of
# those given, writes TMP/locking.TAG once it holds them, and takes their
# lock again and again until TMP/stop exists.
import argparse
import ctypes
import os
import socket
import struct
import sys

ap = argparse.ArgumentParser()
ap.add_argument('pid', type=int)
ap.add_argument('tmp')
ap.add_argument('tag')
ap.add_argument('--local', type=int)
ap.add_argument('--remote', required=True)
a = ap.parse_args()
remote = {int(p) for p in a.remote.split(',')}


def port(addr):
    return int(addr.split(':')[1], 16)


inodes = set()
with open('/proc/net/tcp') as t:
    for line in t.readlines()[1:]:
        f = line.split()
        if (f[3] == '01' and port(f[2]) in remote and  # ESTABLISHED
                (a.local is None or port(f[1]) == a.local)):
            inodes.add('socket:[%s]' % f[9])
libc = ctypes.CDLL(None, use_errno=True)
pidfd = os.pidfd_open(a.pid)
socks = []
for fd in os.listdir('/proc/%d/fd' % a.pid):
    try:
        link = os.readlink('/proc/%d/fd/%s' % (a.pid, fd))
    except OSError:
        continue
    if link in inodes:
        got = libc.syscall(438, pidfd, int(fd), 0)  # pidfd_getfd
        if got < 0:
            sys.exit('pidfd_getfd: errno %d' % ctypes.get_errno())
        socks.append(socket.socket(fileno=got))
if not socks:
    sys.exit('no socket of process %d to ports %s' % (a.pid, a.remote))
print('holding %d sockets' % len(socks), file=sys.stderr)
open('%s/locking.%s' % (a.tmp, a.tag), 'w').close()
# A classic BPF filter that keeps every packet, long enough that attaching
# it (checked and translated under the socket lock) holds the lock most of
# the time: a loop of cheap setsockopts held it too little to matter.
SO_ATTACH_FILTER, SO_DETACH_FILTER, N = 26, 27, 4096
prog = (ctypes.c_uint64 * N)()
prog[N - 1] = 0x06 | (0xffffffff << 32)  # ret #-1 (BPF_RET|BPF_K); the rest ld #0
fprog = struct.pack('HxxxxxxQ', N, ctypes.addressof(prog))
while not os.path.exists(a.tmp + '/stop'):
    for _ in range(100):
        for s in socks:
            s.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, fprog)
for s in socks:
    s.setsockopt(socket.SOL_SOCKET, SO_DETACH_FILTER, 0)
    s.detach()
