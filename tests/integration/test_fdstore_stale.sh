#!/usr/bin/env bash
# After a crash under the descriptor store, the pinned conns map holds
# entries for sockets that are gone: clients that reset while no
# controller ran (the store dropped their copy), and the dead controller's
# inject socket (a restart makes a new pair). The restarted controller
# adopts the maps as they are; entries no socket of its own matches must
# go, or each crash leaves more behind in a map of 65536 entries (and
# `kvsplicectl conns` lists connections that do not exist).
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

# 8 clients that connect, wait for the word, then reset (SO_LINGER 0).
cat >"$KVS_TMP/hold.py" <<'PY'
import os, socket, struct, sys, time
port, go = int(sys.argv[1]), sys.argv[2]
ss = [socket.create_connection(("127.0.0.1", port)) for _ in range(8)]
print("connected", flush=True)
while not os.path.exists(go):
    time.sleep(0.02)
for s in ss:
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack('ii', 1, 0))
    s.close()
print("reset", flush=True)
PY
python3 "$KVS_TMP/hold.py" "$GW_PORT" "$KVS_TMP/go" >"$KVS_TMP/hold.out" 2>&1 &
HOLDER=$!
KVS_PIDS+=($HOLDER)
kvs_wait_for "the 8 clients in the store" '[ "$(num fds.kvs-client)" -ge 8 ]'
assert_eq "client entries before the crash" "$(entries 1)" 8

touch "$HOLD"
kill -9 "$(num pid)"
kvs_wait_for "the harness holding the dead controller" '[ "$(num held)" = 1 ]'
touch "$KVS_TMP/go"
wait $HOLDER || kvs_fail "the clients: $(cat "$KVS_TMP/hold.out")"
kvs_wait_for "their copies dropped from the store" '[ "$(num fds.kvs-client)" = 0 ]'
rm -f "$HOLD"
kvs_wait_for "the restarted controller ready" '[ "$(num starts)" = 2 ] && [ "$(num ready)" = 1 ]'
grep -q "event=restarted_from_fd_store" "$KVS_TMP/gw.log" || kvs_fail "not restarted from the store"
assert_eq "client entries after the restart (all reset while it was dead)" "$(entries 1)" 0
assert_eq "inject entries after the restart (its own only)" "$(entries 3)" 1
out=$(kvs_bench -n 20 -k 2 --prefixes 2 --json) || kvs_fail "after the restart: $out"
assert_eq "requests after the restart" "$(jget "$out" .ok)" 20
echo "PASS test_fdstore_stale"
