#!/usr/bin/env bash
# After a crash under the descriptor store, the pinned conns map holds
# entries for sockets that are gone: clients that reset while no
# controller ran (the store dropped their copy), and the dead controller's
# inject socket (a restart makes a new pair). The restarted controller
# adopts the maps as they are; entries no socket of its own matches must
# go, or each crash leaves more behind in a map of 65536 entries (and
# `kvsplicectl conns` lists connections that do not exist). And what such
# a client had punted (a PING, here) stays in the kept punt socket: it is
# a frame like the others, and the live client's PINGs before it are
# answered after the restart (the resynchronisation took a frame naming a
# client it did not adopt for a broken stream and threw all of it away).
source "$(dirname "$0")/lib.sh"
kvs_setup

kvs_start_sim A --time-scale 0.02
ST=$KVS_TMP/store
HOLD=$KVS_TMP/hold
st() { sed -n "s/^$1=//p" "$ST" 2>/dev/null; }
num() { local v; v=$(st "$1"); echo "${v:-0}"; }
# conns map entries by role (1 client, 3 inject), as the kernel holds them
entries() {
	bpftool map dump pinned "$KVS_PIN/conns" -j |
		jq --argjson r "$1" '[.[] | select(.formatted.value.role == $r)] | length'
}

"$KVS_BUILD/tests/helpers/fdstore_harness" --state "$ST" --hold "$HOLD" -- \
	"$KVS_BUILD/kvspliced" --listen 127.0.0.1:0 --port-file "$KVS_TMP/gw.port" \
	--pin-dir "$KVS_PIN" --backend "127.0.0.1:$SIM_PORT_A" 2>"$KVS_TMP/gw.log" &
HARNESS=$!
KVS_PIDS+=($HARNESS)
kvs_wait_file "$KVS_TMP/gw.port"
GW_PORT=$(cat "$KVS_TMP/gw.port")
kvs_wait_for "READY=1 and the listener in the store" \
	'[ "$(num ready)" = 1 ] && [ "$(num fds.kvs-listen)" = 1 ]'

# A client that sends 3 PINGs at the word and waits for their PONGs.
python3 "$(dirname "$0")/../helpers/kvs_pinger.py" "$GW_PORT" "$KVS_TMP/go-ping" "$KVS_TMP/go-ping-bye" >"$KVS_TMP/pinger.out" 2>&1 &
PINGER=$!
KVS_PIDS+=($PINGER)
kvs_wait_for "the pinger connected" 'grep -q connected "$KVS_TMP/pinger.out"'

# 8 clients that connect; at the word the first sends a PING, at the next
# all reset (SO_LINGER 0).
cat >"$KVS_TMP/hold.py" <<'PY'
import os, socket, struct, sys, time
import kvs1
port, ping, go = int(sys.argv[1]), sys.argv[2], sys.argv[3]
ss = [socket.create_connection(("127.0.0.1", port)) for _ in range(8)]
print("connected", flush=True)
while not os.path.exists(ping):
    time.sleep(0.02)
ss[0].sendall(kvs1.ping(7))
print("pinged", flush=True)
while not os.path.exists(go):
    time.sleep(0.02)
for s in ss:
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack('ii', 1, 0))
    s.close()
print("reset", flush=True)
PY
PYTHONPATH="$(dirname "$0")/../helpers" python3 "$KVS_TMP/hold.py" "$GW_PORT" "$KVS_TMP/go-hold-ping" "$KVS_TMP/go" \
	>"$KVS_TMP/hold.out" 2>&1 &
HOLDER=$!
KVS_PIDS+=($HOLDER)
kvs_wait_for "the 9 clients in the store" '[ "$(num fds.kvs-client)" -ge 9 ]'
assert_eq "client entries before the crash" "$(entries 1)" 9

touch "$HOLD"
kill -9 "$(num pid)"
kvs_wait_for "the harness holding the dead controller" '[ "$(num held)" = 1 ]'
pings() { jget "$(kvs_stats)" .pass_other; }
p0=$(pings)
touch "$KVS_TMP/go-ping"
kvs_wait_for "the live client's 3 PINGs punted" '[ "$(pings)" -ge $((p0 + 3)) ]'
touch "$KVS_TMP/go-hold-ping"
kvs_wait_for "the doomed client's PING punted" '[ "$(pings)" -ge $((p0 + 4)) ]'
touch "$KVS_TMP/go"
wait $HOLDER || kvs_fail "the clients: $(cat "$KVS_TMP/hold.out")"
kvs_wait_for "their copies dropped from the store" '[ "$(num fds.kvs-client)" = 1 ]'
rm -f "$HOLD"
kvs_wait_for "the restarted controller ready" '[ "$(num starts)" = 2 ] && [ "$(num ready)" = 1 ]'
grep -q "event=restarted_from_fd_store" "$KVS_TMP/gw.log" || kvs_fail "not restarted from the store"
assert_eq "client entries after the restart (the pinger's; 8 reset while it was dead)" \
	"$(entries 1)" 1
kvs_wait_for "the PONGs to the PINGs sent while no controller ran" \
	'grep -q pongs "$KVS_TMP/pinger.out" || ! kill -0 $PINGER 2>/dev/null'
grep -q pongs "$KVS_TMP/pinger.out" || kvs_fail "no PONGs: $(cat "$KVS_TMP/pinger.out")"
touch "$KVS_TMP/go-ping-bye"
wait $PINGER || kvs_fail "the pinger: $(cat "$KVS_TMP/pinger.out")"
echo "ok: the live client's PINGs answered after the restart"
assert_eq "inject entries after the restart (its own only)" "$(entries 3)" 1
out=$(kvs_bench -n 20 -k 2 --prefixes 2 --json) || kvs_fail "after the restart: $out"
assert_eq "requests after the restart" "$(jget "$out" .ok)" 20
echo "PASS test_fdstore_stale"
