#!/usr/bin/env bash
# Out of descriptors (issue 18, item 2): a gateway started with a low
# RLIMIT_NOFILE (prlimit) and more clients than it has descriptors for.
#  - Every client gets an answer: those it has room for a PONG, the others
#    an ERROR busy from the reserve descriptor (then EOF), none left
#    hanging in the backlog.
#  - While full, with a new client every 100 ms and a kvsplicectl command
#    waiting on the control socket, the controller does not spin: its CPU
#    time over 3 s stays under a tenth of one core (it re-armed a failing
#    accept at once, for ever: a whole core), and the log says so in a few
#    counted lines (accept_failed ... count=N), not a line per failure.
#  - Once clients leave, new ones are accepted again at once and
#    kvsplicectl reaches the control socket; no descriptor is left behind.
# datapath: both (tests/run.sh runs it on the userspace data path too)
source "$(dirname "$0")/lib.sh"
command -v prlimit >/dev/null || { echo "prlimit (util-linux) is not installed"; exit 77; }
kvs_setup

NOFILE=64
kvs_start_sim A
prlimit --nofile=$NOFILE:$NOFILE "$KVS_BUILD/kvspliced" --listen 127.0.0.1:0 \
	--port-file "$KVS_TMP/gw.port" --pin-dir "$KVS_PIN" --datapath "${KVS_DATAPATH:-kernel}" \
	--backend "127.0.0.1:$SIM_PORT_A" 2>"$KVS_TMP/gw.log" &
GW_PID=$!
KVS_PIDS+=("$GW_PID")
kvs_wait_file "$KVS_TMP/gw.port"
GW_PORT=$(cat "$KVS_TMP/gw.port")
grep -q "^Max open files *$NOFILE *$NOFILE " "/proc/$GW_PID/limits" ||
	kvs_fail "the gateway does not run with RLIMIT_NOFILE $NOFILE: $(grep 'open files' "/proc/$GW_PID/limits")"

count_fds() { ls "/proc/$GW_PID/fd" | wc -l; }
# Descriptors above the limit (inherited from whoever started the test)
# take no room below it.
fds_below() { ls "/proc/$GW_PID/fd" | awk -v n=$NOFILE '$1 < n' | wc -l; }
fds0=$(count_fds)
room=$((NOFILE - $(fds_below)))
assert_ge "descriptors free for clients" "$room" 10
clients=$((room + 25))

out=$(PYTHONPATH="$(dirname "$0")/../helpers" python3 - "$GW_PORT" "$clients" "$GW_PID" \
	"$KVS_BUILD/kvsplicectl" "$KVS_PIN" <<'PY'
import json, os, select, socket, subprocess, sys, time
import kvs1
port, n, pid, ctl, pin = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
PING = kvs1.ping(7)
hz = os.sysconf('SC_CLK_TCK')

def cpu_ticks():
    f = open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()
    return int(f[11]) + int(f[12])  # utime + stime

def connect():
    s = socket.create_connection(('127.0.0.1', port), timeout=5)
    s.sendall(PING)
    return s

def classify(socks, wait):
    """Each socket's first answer: pong, busy (then eof), other, or none."""
    got, bufs, msgs = {}, {s: b'' for s in socks}, []
    deadline = time.time() + wait
    while len(got) < len(socks) and time.time() < deadline:
        r, _, _ = select.select([s for s in socks if s not in got], [], [], 0.1)
        for s in r:
            try:
                d = s.recv(4096)
            except OSError:
                d = b''
            bufs[s] += d
            frames, _ = kvs1.split(bufs[s])
            if frames:
                f = frames[0]
                if f.type == kvs1.PONG:
                    got[s] = 'pong'
                elif f.type == kvs1.ERROR and f.status == kvs1.E_BUSY:
                    got[s] = 'busy'
                    msgs.append(f.text())
                else:
                    got[s] = f'other:{f.type}/{f.status}'
            elif not d:
                got[s] = 'eof'
    res = [got.get(s, 'none') for s in socks]
    return res, msgs

def eof_after_busy(socks):
    """The busy ones are closed by the gateway: EOF (or a reset) follows."""
    ok = 0
    for s in socks:
        s.settimeout(5)
        try:
            while s.recv(4096):
                pass
            ok += 1
        except (ConnectionResetError, BrokenPipeError):
            ok += 1
        except OSError:
            pass
    return ok

# 1. More clients than descriptors, all at once.
socks = [connect() for _ in range(n)]
res, msgs = classify(socks, 20)
served = [s for s, r in zip(socks, res) if r == 'pong']
busy = [s for s, r in zip(socks, res) if r == 'busy']
first = {'pong': len(served), 'busy': len(busy),
         'other': len(socks) - len(served) - len(busy),
         'closed_after_busy': eof_after_busy(busy),
         'msg': msgs[0] if msgs else ''}
for s in busy:
    s.close()

# 2. Held full for 3 s: a new client every 100 ms, and kvsplicectl
# waiting on the control socket (its accept fails too).
ctlp = subprocess.Popen(['timeout', '2', ctl, '--pin-dir', pin, 'status'],
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
t0, c0 = time.time(), cpu_ticks()
late = []
while time.time() - t0 < 3:
    late.append(connect())
    time.sleep(0.1)
lres, _ = classify(late, 10)
wall, cpu = time.time() - t0, cpu_ticks() - c0
ctlp.wait()
for s in late:
    s.close()

# 3. Some clients leave: once the gateway has closed them (and let go
# of their descriptors), new ones take their place (not busy).
def closed():
    st = subprocess.check_output([ctl, '--pin-dir', pin, 'stats', '--json'])
    return json.loads(st)['controller']['clients_closed']
before = closed()
for s in served[:5]:
    s.close()
t1 = time.time()
while closed() < before + 5 and time.time() - t1 < 10:
    time.sleep(0.02)
again = []
for _ in range(3):
    again.append(connect())
ares, _ = classify(again, 10)
print(json.dumps({**first,
                  'late': len(late), 'late_busy': lres.count('busy'),
                  'late_other': len(late) - lres.count('busy'),
                  'cpu_pct': round(100.0 * cpu / hz / wall),
                  'after_leave_pong': ares.count('pong'),
                  'after_leave_ms': round(1000 * (time.time() - t1))}))
for s in served[5:] + again:
    s.close()
PY
) || kvs_fail "client script failed: $out"
echo "clients: $out"
assert_eq "clients neither answered PONG nor busy" "$(jget "$out" .other)" 0
assert_ge "clients served" "$(jget "$out" .pong)" $((room - 3))
assert_ge "clients answered busy rather than left hanging" "$(jget "$out" .busy)" 20
assert_eq "busy clients then closed" "$(jget "$out" .closed_after_busy)" "$(jget "$out" .busy)"
grep -q "out of descriptors" <<<"$(jget "$out" .msg)" ||
	kvs_fail "the busy message does not say why: $(jget "$out" .msg)"
assert_eq "clients arriving while full answered busy" "$(jget "$out" .late_other)" 0
assert_ge "clients arriving while full" "$(jget "$out" .late)" 10
assert_le "controller CPU while full (% of a core)" "$(jget "$out" .cpu_pct)" 10
assert_eq "new clients served once others left" "$(jget "$out" .after_leave_pong)" 3
echo "new clients served $(jget "$out" .after_leave_ms) ms after others left"

lines=$(grep -c 'event=accept_failed' "$KVS_TMP/gw.log" || true)
assert_ge "accept_failed lines" "$lines" 1
assert_le "accept_failed lines (one per 10 s, with a count)" "$lines" 3
grep -m1 'event=accept_failed' "$KVS_TMP/gw.log" | grep -q 'count=[0-9]' ||
	kvs_fail "accept_failed has no count: $(grep -m1 'event=accept_failed' "$KVS_TMP/gw.log")"
assert_le "gateway log lines" "$(wc -l <"$KVS_TMP/gw.log")" 40

st=$(kvs_stats)
assert_ge "controller.accept_failed" "$(jget "$st" .controller.accept_failed)" 1
assert_eq "controller.clients_shed" "$(jget "$st" .controller.clients_shed)" \
	$(($(jget "$out" .busy) + $(jget "$out" .late_busy)))

# Everybody gone: accepted again, kvsplicectl answered, nothing left open.
kvs_wait_for "the gateway holds as many descriptors as before ($fds0)" \
	'[ "$(count_fds)" = "$fds0" ]'
pong=$(PYTHONPATH="$(dirname "$0")/../helpers" python3 - "$GW_PORT" <<'PY'
import socket, sys
import kvs1
s = socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=10)
s.sendall(kvs1.ping(9))
print(kvs1.Reader(s).next().type)
PY
)
assert_eq "a new client's PING answered (frame type 6, PONG)" "$pong" 6
"$KVS_BUILD/kvsplicectl" --pin-dir "$KVS_PIN" status >/dev/null ||
	kvs_fail "kvsplicectl does not reach the control socket any more"
echo "ok: kvsplicectl status answered"
echo "PASS test_descriptors"
