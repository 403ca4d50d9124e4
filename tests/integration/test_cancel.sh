#!/usr/bin/env bash
# CANCEL end to end. A client that goes away mid-stream (closing, or
# resetting) makes the gateway cancel its request at the backend: the
# simulator stops at once (its log says so, its PONG shows nothing
# running) and the backend's in-flight count and work go back to 0 long
# before the request would have finished. A client's own CANCEL ends its
# request with ERROR cancelled and the connection goes on serving, even a
# CANCEL sent right behind a request the controller still holds; a CANCEL
# for a request that is not in flight is dropped without an answer. A
# backend removed with a request still running has that request answered
# backend_gone by the gateway and cancelled at the backend, over a
# connection made for it.
# datapath: both (tests/run.sh runs it on the userspace data path too)
source "$(dirname "$0")/lib.sh"
kvs_setup

# ~1 ms a token: a request of 20,000 tokens would stream for ~20 s.
kvs_start_sim A --time-scale 0.1 --log-level debug
kvs_start_sim B --time-scale 0.1 --log-level debug
kvs_start_gw --backend "127.0.0.1:$SIM_PORT_A" --backend "127.0.0.1:$SIM_PORT_B" \
	--health-interval-ms 200 --drain-timeout-ms 300 --log-level debug
ctl() { "$KVS_BUILD/kvsplicectl" --pin-dir "$KVS_PIN" "$@"; }
busy() { ctl backends --json | jq '[.[] | .outstanding] | add'; }
count_inflight() { bpftool map dump pinned "$KVS_PIN/inflight" -j | jq length; }
# the backend at gateway index $1: its sim's name (A or B)
sim_of() { [ "$(ctl backends --json | jq -r ".[$1].backend")" = "127.0.0.1:$SIM_PORT_A" ] && echo A || echo B; }

# A KVS1 client: python3 kvs.py PORT STEP
cat >"$KVS_TMP/kvs.py" <<'PY'
import json, os, socket, struct, sys, time
import kvs1
port, step = int(sys.argv[1]), sys.argv[2]
def request(rid, maxt, salt=b''):
    # a prompt of its own (a new prefix: the controller decides it)
    return kvs1.request((salt + os.urandom(8).hex().encode()) * 16, rid, max_tokens=maxt)
class Conn:
    def __init__(self):
        self.s = socket.create_connection(("127.0.0.1", port))
        self.r = kvs1.Reader(self.s)
    def send(self, b):
        self.s.sendall(b)
    def next(self, timeout=10):
        self.s.settimeout(timeout)
        return self.r.next()
    def until_end(self, rid, timeout=10):
        """frames until rid's END or ERROR: (type, status, chunks, others seen)"""
        chunks, others = 0, []
        t0 = time.time()
        while True:
            f = self.next(max(0.1, timeout - (time.time() - t0)))
            if f.req_id != rid:
                others.append(f.req_id)
            elif f.type == kvs1.CHUNK:
                chunks += 1
            elif f.type in (kvs1.END, kvs1.ERROR):
                return f.type, f.status, chunks, others
def chunks(c, rid, n):
    for _ in range(n):
        f = c.next()
        assert (f.type, f.req_id) == (kvs1.CHUNK, rid), (f.type, f.status, f.req_id)
out = {}
if step in ('leave', 'reset'):
    # a long request, a few tokens read, then gone
    c = Conn()
    c.send(request(1, 20000))
    chunks(c, 1, 3)
    if step == 'reset':
        c.s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack('ii', 1, 0))
    c.s.close()
elif step == 'cancel':
    c = Conn()
    # its own CANCEL, mid-stream
    c.send(request(7, 20000))
    chunks(c, 7, 3)
    t0 = time.time()
    c.send(kvs1.cancel(7))
    t, st, n, others = c.until_end(7)
    out['mid_stream'] = {'type': t, 'status': st, 'ms': round((time.time() - t0) * 1000)}
    # right behind its request, in one write: the request is still with
    # the controller when the CANCEL reaches the kernel
    c.send(request(9, 20000) + kvs1.cancel(9))
    t, st, n, others = c.until_end(9)
    out['behind_request'] = {'type': t, 'status': st}
    # one for a request that is not in flight (finished, or never sent),
    # then the connection still serves
    c.send(kvs1.cancel(7) + kvs1.cancel(999) + request(8, 4))
    t, st, n, others = c.until_end(8)
    out['after'] = {'type': t, 'status': st, 'chunks': n, 'others': others}
    c.s.close()
elif step == 'long':
    # a long request, held open until the gateway ends it
    c = Conn()
    c.send(request(5, 20000))
    chunks(c, 5, 3)
    print(json.dumps({'started': True}), flush=True)
    t, st, n, others = c.until_end(5, 30)
    out = {'type': t, 'status': st}
print(json.dumps(out), flush=True)
PY
kvs() { PYTHONPATH="$(dirname "$0")/../helpers" python3 "$KVS_TMP/kvs.py" "$GW_PORT" "$@"; }

# Waits until no request is in flight at any backend; prints the ms it took.
wait_released() {
	local t0 end=$((SECONDS + 30))
	t0=$(date +%s%N)
	while [ "$(busy)" != 0 ] && [ $SECONDS -le $end ]; do
		sleep 0.05
	done
	echo $((($(date +%s%N) - t0) / 1000000))
}

# 1. Clients that go away mid-stream, by closing and by resetting.
n0=$(cat "$KVS_TMP"/[AB].log | grep -c "event=cancelled" || true)
for how in leave reset; do
	kvs "$how" >/dev/null || kvs_fail "client ($how)"
	ms=$(wait_released)
	assert_eq "requests in flight after a client left ($how)" "$(busy)" 0
	assert_le "ms until the backend's request was released ($how; it had ~20 s to run)" "$ms" 10000
done
n=$(cat "$KVS_TMP"/[AB].log | grep -c "event=cancelled req=1 " || true)
assert_eq "requests the simulators cancelled for clients gone" "$((n - n0))" 2
be=$(ctl backends --json)
assert_eq "work still charged" "$(jget "$be" '[.[].outstanding_work] | add')" 0
if [ "${KVS_DATAPATH:-kernel}" = kernel ]; then
	assert_eq "inflight records left" "$(count_inflight)" 0
fi
# the simulators' own load, as their PONGs (every 200 ms) report it
kvs_wait_for "the simulators report nothing running" \
	'[ "$(ctl backends --json | jq "[.[].pong.running] | add")" = 0 ]'
st=$(kvs_stats)
assert_ge "CANCELs the gateway sent for clients gone" "$(jget "$st" .controller.cancels_sent)" 2

# 2. The client's own CANCELs.
out=$(kvs cancel) || kvs_fail "client CANCEL: $out"
echo "cancel: $out"
assert_eq "mid-stream CANCEL: answered with" "$(jget "$out" '[.mid_stream.type, .mid_stream.status] | @csv')" "4,14"
assert_le "mid-stream CANCEL: ms to ERROR cancelled" "$(jget "$out" .mid_stream.ms)" 2000
assert_eq "CANCEL right behind its request: answered with" \
	"$(jget "$out" '[.behind_request.type, .behind_request.status] | @csv')" "4,14"
assert_eq "request after CANCELs of nothing in flight: its END" "$(jget "$out" .after.type)" 3
assert_eq "its tokens" "$(jget "$out" .after.chunks)" 4
assert_eq "answers to the CANCELs of nothing in flight" "$(jget "$out" '.after.others | length')" 0
grep -q "event=cancelled req=7 " "$KVS_TMP"/[AB].log || kvs_fail "no simulator cancelled request 7"
grep -q "event=cancelled req=9 " "$KVS_TMP"/[AB].log || kvs_fail "no simulator cancelled request 9"
st=$(kvs_stats)
if [ "${KVS_DATAPATH:-kernel}" = kernel ]; then
	assert_ge "CANCELs the kernel sent to backends" "$(jget "$st" .cancel_frames)" 4
	assert_ge "CANCELs of nothing in flight, dropped" "$(jget "$st" .drop_cancel)" 2
else
	assert_eq "clients' CANCELs the userspace path forwarded" \
		"$(jget "$st" .controller.user_path_cancels)" 2
	assert_eq "clients' CANCELs of nothing in flight, dropped" \
		"$(jget "$st" .controller.user_cancels_dropped)" 2
fi
assert_eq "requests in flight afterwards" "$(wait_released >/dev/null; busy)" 0

# 3. A backend removed with a request running: the client is answered
# backend_gone when the drain times out, and the backend told to stop.
coproc LONG { kvs long; }
read -r -t "$KVS_WAIT_S" line <&"${LONG[0]}" || kvs_fail "the long request did not start"
b=$(ctl backends --json | jq '[.[] | select(.outstanding > 0)][0].index')
victim=$(sim_of "$b")
addr=$(ctl backends --json | jq -r ".[$b].backend")
ctl backend remove "$addr" >/dev/null || kvs_fail "remove $addr"
read -r -t "$KVS_WAIT_S" line <&"${LONG[0]}" || kvs_fail "the long request was not ended"
assert_eq "the removed backend's request: answered with" "$(jget "$line" '[.type, .status] | @csv')" "4,9"
kvs_wait_for "the removed backend ($victim) cancels the request it was serving" \
	'grep -q "event=cancelled req=5 " "$KVS_TMP/$victim.log"'
grep -q "event=cancels_sent backend=$addr requests=1 written=1" "$KVS_TMP/gw.log" ||
	kvs_fail "no cancels_sent line for $addr"
echo "PASS test_cancel"
