#!/usr/bin/env bash
# A stop (SIGTERM) drains before it closes (--stop-drain-ms, default 10 s):
# a request in flight runs to its END; a new request on a connection made
# before is answered busy ("the gateway is stopping"); a new connection is
# refused at once; the controller exits as soon as nothing is in flight
# (event=stop_drained), well within the limit. A second SIGTERM ends the
# drain at once. Before, a stop closed every connection: the client of a
# request in flight saw its connection close with no answer.
# datapath: both (tests/run.sh runs it on the userspace data path too)
source "$(dirname "$0")/lib.sh"
kvs_setup

# ~2-3 s a request: 150 tokens of decode at the simulator's real pace
kvs_start_sim A --time-scale 1
start_gw() {
	rm -f "$KVS_TMP/gw.port" "$KVS_TMP"/{inflight,termed}
	kvs_start_gw --backend "127.0.0.1:$SIM_PORT_A"
	[ "$(kvs_wait_backend 0 up 400)" = up ] || kvs_fail "backend not up"
}

# A: a long request, in flight when the stop comes; B: connected before
# the stop, sends a request during the drain; then a new connection.
cat >"$KVS_TMP/clients.py" <<'PY'
import json, os, socket, sys, time
import kvs1
port, tmp = int(sys.argv[1]), sys.argv[2]
out = {}
a, b = kvs1.connect(port, timeout=60), kvs1.connect(port, timeout=60)
a.sendall(kvs1.request(b'a long answer, please. ' * 40, 1, max_tokens=150))
ra = kvs1.Reader(a)
first = ra.next()
out['a_first'] = first.type
open(os.path.join(tmp, 'inflight'), 'w').close()
while not os.path.exists(os.path.join(tmp, 'termed')):
    time.sleep(0.01)
b.sendall(kvs1.request(b'a new one during the stop. ' * 40, 2, max_tokens=1))
try:
    f = kvs1.Reader(b).until_end()
    out['b'] = [f.type, f.text()]
except EOFError:
    out['b'] = 'closed'
try:
    socket.create_connection(('127.0.0.1', port), timeout=5).close()
    out['new_conn'] = 'accepted'
except ConnectionRefusedError:
    out['new_conn'] = 'refused'
except OSError as e:
    out['new_conn'] = str(e)
try:
    f = ra.until_end()
    out['a'] = f.type
except EOFError:
    out['a'] = 'closed'
print(json.dumps(out))
PY
# A alone, for the second signal: in flight, then whatever comes.
cat >"$KVS_TMP/client_a.py" <<'PY'
import json, os, sys
import kvs1
port, tmp = int(sys.argv[1]), sys.argv[2]
a = kvs1.connect(port, timeout=60)
a.sendall(kvs1.request(b'a long answer, please. ' * 40, 1, max_tokens=150))
ra = kvs1.Reader(a)
ra.next()
open(os.path.join(tmp, 'inflight'), 'w').close()
try:
    print(json.dumps({'a': ra.until_end().type}))
except EOFError:
    print(json.dumps({'a': 'closed'}))
PY

start_gw
PYTHONPATH="$(dirname "$0")/../helpers" python3 "$KVS_TMP/clients.py" "$GW_PORT" "$KVS_TMP" \
	>"$KVS_TMP/clients.out" 2>&1 &
clients=$!
kvs_wait_for "a request in flight" '[ -e "$KVS_TMP/inflight" ]'
kill -TERM "$GW_PID"
kvs_wait_for "the gateway draining" 'grep -q "event=stop_draining in_flight=1 " "$KVS_TMP/gw.log"'
touch "$KVS_TMP/termed"
wait "$clients" || kvs_fail "clients failed: $(cat "$KVS_TMP/clients.out")"
out=$(tail -1 "$KVS_TMP/clients.out")
echo "clients: $out"
assert_eq "the request in flight: its END (type 3), not a close" "$(jget "$out" .a)" 3
assert_eq "a request during the stop: ERROR (type 4)" "$(jget "$out" '.b[0]')" 4
grep -q "the gateway is stopping" <<<"$(jget "$out" '.b[1]')" ||
	kvs_fail "the ERROR does not say why: $out"
assert_eq "a new connection during the stop" "$(jget "$out" .new_conn)" refused
kvs_wait_for "the gateway exited once drained" '! kill -0 "$GW_PID" 2>/dev/null'
grep -q "event=stop_drained" "$KVS_TMP/gw.log" || kvs_fail "no stop_drained in the log"

# A second SIGTERM: at once, the request in flight or not.
start_gw
PYTHONPATH="$(dirname "$0")/../helpers" python3 "$KVS_TMP/client_a.py" "$GW_PORT" "$KVS_TMP" \
	>"$KVS_TMP/client_a.out" 2>&1 &
client=$!
kvs_wait_for "a request in flight" '[ -e "$KVS_TMP/inflight" ]'
kill -TERM "$GW_PID"
kvs_wait_for "the gateway draining" 'grep -q "event=stop_draining" "$KVS_TMP/gw.log"'
kill -TERM "$GW_PID"
kvs_wait_for "the gateway exited at the second signal" '! kill -0 "$GW_PID" 2>/dev/null'
wait "$client" || true
assert_eq "the request in flight at the second signal" "$(jget "$(tail -1 "$KVS_TMP/client_a.out")" .a)" closed
grep -q "event=stop_drained" "$KVS_TMP/gw.log" && kvs_fail "drained though stopped at once"
echo "PASS test_stop_drain"
