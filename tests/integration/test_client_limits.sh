#!/usr/bin/env bash
# What one client address may hold (--max-source-conns) and how long a
# client may sit idle (--idle-timeout-ms), issue 18, item 2:
#  - with --max-source-conns 3, the 4th connection from 127.0.0.1 is
#    answered busy (saying why) and closed, while 127.0.0.2 gets in and a
#    --front-source (127.0.0.3) holds more; once one of 127.0.0.1's
#    connections closes, 127.0.0.1 gets in again; a reload to 5 lets two
#    more in, not a third; after an upgrade (kvsplicectl upgrade) the new
#    controller counts the connections it took over: 127.0.0.1 is still
#    full, and the ones it holds still work (on the kernel's data path: an
#    upgrade does not hand over the userspace path's clients);
#  - with --idle-timeout-ms 1500, a client that sent one PING and nothing
#    since is answered timeout and closed, not before 1.5 s; a client
#    whose one slow request streams for longer is not closed, nor is one
#    that PINGs every 0.4 s, nor an idle front. On the kernel's data path
#    the controller never sees these clients' bytes: it reads the conns
#    map's counts and requests in flight.
# datapath: both (tests/run.sh runs it on the userspace data path too)
source "$(dirname "$0")/lib.sh"
kvs_setup

kvs_start_sim A --time-scale 25

# --- per-source limit ---------------------------------------------------
printf 'backend = 127.0.0.1:%s\nfront-source = 127.0.0.3/32\nmax-source-conns = 3\n' \
	"$SIM_PORT_A" >"$KVS_TMP/gw.conf"
kvs_start_gw --config "$KVS_TMP/gw.conf"
out=$(PYTHONPATH="$(dirname "$0")/../helpers" python3 - "$GW_PORT" "$KVS_TMP/gw.conf" \
	"$KVS_BUILD/kvsplicectl" "$KVS_PIN" "${KVS_DATAPATH:-kernel}" <<'PY'
import json, socket, subprocess, sys, time
import kvs1
port, conf, ctl, pin, datapath = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
PING = kvs1.ping(7)

def conn(src):
    """A connection from src that has sent a PING: a kvs1.Reader (its .sock)."""
    s = socket.socket()
    s.bind((src, 0))
    s.settimeout(10)
    s.connect(('127.0.0.1', port))
    s.sendall(PING)
    return kvs1.Reader(s)

def answer(c):
    """pong, busy:<message> (and the gateway closes it), or what came."""
    try:
        f = c.next()
    except EOFError:
        return 'eof'
    except OSError as e:
        return f'error:{e}'
    if f.type == kvs1.PONG:
        return 'pong'
    if f.type == kvs1.ERROR and f.status == kvs1.E_BUSY:
        try:
            closed = not c.buf and c.sock.recv(1) == b''
        except ConnectionResetError:
            closed = True
        return ('busy:' if closed else 'busy-not-closed:') + f.text()
    return f'other:{f.type}/{f.status}'

r = {}
a = [conn('127.0.0.1') for _ in range(3)]
r['first3'] = [answer(c) for c in a]
x = conn('127.0.0.1')
r['fourth'] = answer(x)
x.sock.close()
b = conn('127.0.0.2')
r['other_source'] = answer(b)
f = [conn('127.0.0.3') for _ in range(5)]
r['front'] = [answer(c) for c in f]
a[0].sock.close()
# The gateway counts the close once it has seen it: until then, busy.
deadline, r['after_close'] = time.time() + 10, 'none'
while time.time() < deadline:
    c = conn('127.0.0.1')
    r['after_close'] = answer(c)
    if r['after_close'] == 'pong':
        break
    c.sock.close()
    time.sleep(0.05)
with open(conf) as f:
    text = f.read().replace('max-source-conns = 3', 'max-source-conns = 5')
with open(conf, 'w') as f:
    f.write(text)
subprocess.run([ctl, '--pin-dir', pin, 'reload'], check=True, stdout=subprocess.DEVNULL)
more = [conn('127.0.0.1') for _ in range(3)]
r['after_reload'] = [answer(m).split(':')[0] for m in more]
if datapath == 'kernel':
    subprocess.run([ctl, '--pin-dir', pin, 'upgrade'], check=True, stdout=subprocess.DEVNULL)
    r['after_upgrade'] = answer(conn('127.0.0.1')).split(':')[0]
    r['after_upgrade_other'] = answer(conn('127.0.0.2'))
    a[1].sock.sendall(PING)
    r['held_after_upgrade'] = answer(a[1])
print(json.dumps(r))
PY
) || true
# The controller that took over is this test's to stop too.
NEW=$(jget "$("$KVS_BUILD/kvsplicectl" --pin-dir "$KVS_PIN" status --json)" .pid)
[ -n "$NEW" ] && [ "$NEW" != null ] && KVS_PIDS+=("$NEW")
[ -n "$out" ] && jq -e . >/dev/null <<<"$out" || kvs_fail "client script failed: $out"
echo "per source: $out"
assert_eq "first 3 from 127.0.0.1" "$(jget "$out" '.first3 | join(",")')" "pong,pong,pong"
case $(jget "$out" .fourth) in
"busy:kvsplice: too many connections from this address (at most 3)"*) echo "ok: 4th from 127.0.0.1 answered busy and closed" ;;
*) kvs_fail "4th from 127.0.0.1: $(jget "$out" .fourth)" ;;
esac
assert_eq "from 127.0.0.2 meanwhile" "$(jget "$out" .other_source)" pong
assert_eq "5 from the front 127.0.0.3" "$(jget "$out" '.front | join(",")')" "pong,pong,pong,pong,pong"
assert_eq "from 127.0.0.1 once one of its own closed" "$(jget "$out" .after_close)" pong
assert_eq "3 more from 127.0.0.1 after a reload to 5" "$(jget "$out" '.after_reload | join(",")')" \
	"pong,pong,busy"
if [ "${KVS_DATAPATH:-kernel}" = kernel ]; then
	assert_eq "from 127.0.0.1 after an upgrade (its 5 taken over)" \
		"$(jget "$out" .after_upgrade)" busy
	assert_eq "from 127.0.0.2 after an upgrade" "$(jget "$out" .after_upgrade_other)" pong
	assert_eq "a connection taken over, still served" "$(jget "$out" .held_after_upgrade)" pong
fi
assert_ge "controller.clients_over_source" "$(jget "$(kvs_stats)" .controller.clients_over_source)" 1
kill "$NEW"
wait "$GW_PID" 2>/dev/null || true # the first controller, gone after an upgrade
for _ in $(seq 1 100); do kill -0 "$NEW" 2>/dev/null || break; sleep 0.05; done

# --- idle timeout -------------------------------------------------------
rm -rf "$KVS_PIN" # the first gateway's (it has exited); cleanup removes the second's
KVS_PIN=$KVS_PIN-2
rm -f "$KVS_TMP/gw.port"
kvs_start_gw --backend "127.0.0.1:$SIM_PORT_A" --idle-timeout-ms 1500 \
	--front-source 127.0.0.3/32
out=$(PYTHONPATH="$(dirname "$0")/../helpers" python3 - "$GW_PORT" <<'PY'
import json, socket, sys, threading, time
import kvs1
port = int(sys.argv[1])

def conn(src='127.0.0.1'):
    """A connection from src: a kvs1.Reader (its .sock)."""
    s = socket.socket()
    s.bind((src, 0))
    s.connect(('127.0.0.1', port))
    return kvs1.Reader(s)

def read_frame(c, timeout):
    """(type, status), or ('eof', 0) / ('silent', 0)."""
    c.sock.settimeout(timeout)
    try:
        f = c.next()
    except (EOFError, ConnectionResetError):
        return ('eof', 0)
    except socket.timeout:
        return ('silent', 0)
    return (f.type, f.status)

r = {}

def idle():
    c = conn()
    c.sock.sendall(kvs1.ping(1))
    r['idle_pong'] = read_frame(c, 10)[0]
    t0 = time.time()
    t, st = read_frame(c, 10)
    r['idle_answer'] = f'{t}/{st}'
    r['idle_after_ms'] = round(1000 * (time.time() - t0))
    r['idle_then'] = read_frame(c, 5)[0]

def slow():
    c = conn()
    t0 = time.time()
    c.sock.sendall(kvs1.request(b'a slow request ' * 20, 2, max_tokens=20))
    kinds = []
    while True:
        t, st = read_frame(c, 30)
        kinds.append(t)
        if t != kvs1.CHUNK:
            break
    r['slow_end'] = f'{t}/{st}'
    r['slow_ms'] = round(1000 * (time.time() - t0))
    r['slow_chunks'] = kinds.count(kvs1.CHUNK)

def pinger():
    c = conn()
    got = []
    for i in range(10):
        c.sock.sendall(kvs1.ping(100 + i))
        got.append(read_frame(c, 10)[0])
        time.sleep(0.4)
    r['pinger'] = got.count(kvs1.PONG)

def front():
    c = conn('127.0.0.3')
    c.sock.sendall(kvs1.ping(1))
    r['front_pong'] = read_frame(c, 10)[0]
    r['front_after_4s'] = read_frame(c, 4)[0]

ts = [threading.Thread(target=f) for f in (idle, slow, pinger, front)]
for t in ts:
    t.start()
for t in ts:
    t.join()
print(json.dumps(r))
PY
) || kvs_fail "client script failed: $out"
echo "idle: $out"
assert_eq "idle client: its PING answered" "$(jget "$out" .idle_pong)" 6
assert_eq "idle client: then ERROR timeout (4/11)" "$(jget "$out" .idle_answer)" 4/11
assert_ge "idle client: closed after (ms)" "$(jget "$out" .idle_after_ms)" 1500
assert_eq "idle client: then closed" "$(jget "$out" .idle_then)" eof
assert_eq "slow request: ended with END (3/0), not closed" "$(jget "$out" .slow_end)" 3/0
assert_ge "slow request took (ms), longer than the timeout and two scans" \
	"$(jget "$out" .slow_ms)" 2500
assert_eq "pinging client: every PING answered" "$(jget "$out" .pinger)" 10
assert_eq "idle front: answered" "$(jget "$out" .front_pong)" 6
assert_eq "idle front: left open for 4 s" "$(jget "$out" .front_after_4s)" silent
assert_eq "controller.clients_idle_closed" \
	"$(jget "$(kvs_stats)" .controller.clients_idle_closed)" 1
echo "PASS test_client_limits"
