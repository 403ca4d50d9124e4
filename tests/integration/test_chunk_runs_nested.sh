#!/usr/bin/env bash
# Two runs walked on one CPU at once (bpf/datapath/response.bpf.h,
# upstream_run): a verdict run by the strparser's worker (kstrp), in process
# context, interrupted by one from softirq. Each walk must keep its own
# state: a walk that shared the other's would redirect its frames to the
# other run's client, or drop them, and settle the wrong ENDs.
#  - Backend "owned": the gateway's connections to it are held by two loops
#    (copies of the gateway's sockets, pidfd_getfd) that take the socket
#    lock, as a psock's backlog does writing a request into it: its bytes
#    wait in the socket's backlog and kstrp runs their verdicts. It streams
#    runs of 63 CHUNKs.
#  - Backend "free" streams runs of 2 CHUNKs, a write each: verdicts in
#    softirq, which RPS (below) runs on the other CPU by an interrupt.
# Clients hold a stream each, on either backend, until each has its CHUNKs;
# then the backends END them. Every frame a client gets must be its own
# (its gw_conn and request, the CHUNKs numbered without a gap, then the
# END), and the backends' outstanding requests and work must come back to
# 0. With one walk state a CPU (83d6065) it failed in each of 4 runs on a
# 2-core VM (CHUNKs lost, frames of another client), in 1 of 2 with
# NCHUNKS=20000; with a state a walk in progress it passed 5 of 5.
# In a network namespace of its own whose loopback spreads its packets over
# every CPU (kvs_rps_netns).
source "$(dirname "$0")/lib.sh"
kvs_rps_netns "$0"
kvs_setup

NCLIENTS=${NCLIENTS:-8} # streams, over both backends
NCHUNKS=${NCHUNKS:-60000} # CHUNKs each client must get before its END

# A backend streaming every REQUEST it gets, $2 CHUNKs a write, until
# $KVS_TMP/stop exists; then the request's END.
backend() { # NAME CHUNKS_A_WRITE
	PYTHONPATH="$(dirname "$0")/../helpers" python3 - "$KVS_TMP" "$1" "$2" <<'PY' \
		2>"$KVS_TMP/backend-$1.log" &
import os, sys, threading
from held_backend import chunk, end, serve
tmp, name, per = sys.argv[1], sys.argv[2], int(sys.argv[3])

def stream(c, f, lock):
    i = 0
    while not os.path.exists(tmp + '/stop'):
        for _ in range(50):
            out = b''.join(chunk(f, b'%d;' % (i + k)) for k in range(per))
            i += per
            with lock:
                c.sendall(out)
    with lock:
        c.sendall(end(f, prompt=1, output=i))

serve('%s/%s.port' % (tmp, name),
      lambda c, f, lock: threading.Thread(target=stream, args=(c, f, lock), daemon=True).start(),
      nodelay=True)
threading.Event().wait()
PY
	KVS_PIDS+=($!)
	kvs_wait_file "$KVS_TMP/$1.port"
}
backend owned 63
backend free 2
kvs_start_gw --backend "127.0.0.1:$(cat "$KVS_TMP/owned.port")" \
	--backend "127.0.0.1:$(cat "$KVS_TMP/free.port")" --pool 1 --health-interval-ms 0
kvs_wait_for "the backends are up" \
	'[ "$(kvs_wait_backend 0 up 0)" = up ] && [ "$(kvs_wait_backend 1 up 0)" = up ]'

# The gateway's connections to "owned", held by two loops that take their
# socket lock, until $KVS_TMP/stop exists.
for k in 1 2; do
	python3 "$(dirname "$0")/../helpers/sock_locker.py" "$GW_PID" "$KVS_TMP" "$k" \
		--remote "$(cat "$KVS_TMP/owned.port")" 2>"$KVS_TMP/locker$k.log" &
	KVS_PIDS+=($!)
done
kvs_wait_for "the connections to owned are held" \
	"[ -e '$KVS_TMP/locking.1' ] && [ -e '$KVS_TMP/locking.2' ]"

be() { jget "$("$KVS_BUILD/kvsplicectl" --pin-dir "$KVS_PIN" backends --json)" ".[$1].$2"; }
ends0_0=$(be 0 ends)
ends0_1=$(be 1 ends)
ends0=$((ends0_0 + ends0_1))
st0=$(kvs_stats)
delta() { echo $(($(jget "$st" ".$1") - $(jget "$st0" ".$1"))); }

# The clients, a stream each; each writes its verdict to $KVS_TMP/client.K
# once it has its CHUNKs (or a frame it should not have), then reads on
# until its END and prints it.
PYTHONPATH="$(dirname "$0")/../helpers" python3 - "$GW_PORT" "$NCLIENTS" "$NCHUNKS" "$KVS_TMP" \
	>"$KVS_TMP/clients.out" <<'PY' &
import struct, sys, threading
import kvs1
port, nclients, nchunks, tmp = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
out = [None] * nclients

def client(k):
    s = kvs1.connect(port, timeout=30)
    s.sendall(kvs1.request(b'nested runs, stream %d. ' % k * 8, 1, max_tokens=4096))
    r, want, gw_conn, said = kvs1.Reader(s), 0, None, False
    try:
        while True:
            f = r.next()
            gw_conn = gw_conn or f.gw_conn
            if f.gw_conn != gw_conn or f.req_id != 1:
                out[k] = 'a frame not its own: req %d gw_conn %x (own %x)' % (
                    f.req_id, f.gw_conn, gw_conn)
                break
            if f.type == kvs1.END:
                got = struct.unpack('>I', f.payload[8:12])[0]
                out[k] = 'ok' if got == want else 'END after %d CHUNKs of %d' % (want, got)
                break
            if f.type != kvs1.CHUNK or f.payload != b'%d;' % want:
                out[k] = 'type %d %r, want CHUNK %d' % (f.type, f.payload[:12], want)
                break
            want += 1
            if want == nchunks:
                open('%s/client.%d' % (tmp, k), 'w').close()
                said = True
    except (OSError, EOFError) as e:
        out[k] = 'after %d CHUNKs: %s' % (want, e)
    if not said:
        open('%s/client.%d' % (tmp, k), 'w').close()

ts = [threading.Thread(target=client, args=(k,)) for k in range(nclients)]
for t in ts:
    t.start()
for t in ts:
    t.join()
print('\n'.join(out))
PY
CLIENTS_PID=$!
kvs_wait_for "every client has its CHUNKs or a frame not its own" \
	'[ "$(ls "$KVS_TMP"/client.* 2>/dev/null | wc -l)" = "$NCLIENTS" ]' 300
touch "$KVS_TMP/stop"
wait "$CLIENTS_PID"
cat "$KVS_TMP/clients.out"
st=$(kvs_stats)
echo "drop_no_client $(delta drop_no_client) drop_bad_upstream $(delta drop_bad_upstream)" \
	"inflight_lost $(delta inflight_lost) outstanding $(be 0 outstanding) $(be 1 outstanding)" \
	"ends $(($(be 0 ends) + $(be 1 ends) - ends0))"
assert_eq "clients that got their own frames, all of them" \
	"$(grep -c '^ok$' "$KVS_TMP/clients.out")" "$NCLIENTS"
assert_ge "streams the owned backend carried" $(($(be 0 ends) - ends0_0)) 1
assert_ge "streams the free backend carried" $(($(be 1 ends) - ends0_1)) 1
assert_eq "ENDs counted" $(($(be 0 ends) + $(be 1 ends) - ends0)) "$NCLIENTS"
kvs_wait_for "outstanding requests back to 0" \
	'[ "$(be 0 outstanding)" = 0 ] && [ "$(be 1 outstanding)" = 0 ]'
assert_eq "outstanding work of owned" "$(be 0 outstanding_work)" 0
assert_eq "outstanding work of free" "$(be 1 outstanding_work)" 0
st=$(kvs_stats)
assert_eq "frames dropped for want of a client" "$(delta drop_no_client)" 0
assert_eq "bad frames from backends" "$(delta drop_bad_upstream)" 0
assert_eq "ENDs without their record" "$(delta inflight_lost)" 0
echo "PASS test_chunk_runs_nested"
