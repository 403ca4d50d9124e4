#!/usr/bin/env bash
# An upgrade that moves --listen (and --metrics) under the descriptor store: the successor
# listens at the new address and closes the socket it was handed, but the
# store (systemd, here tests/helpers/fdstore_harness) holds its own copy of
# that socket, which stays listening at the old address (clients queued
# there, never accepted) and comes back with the new one after a crash.
# The store must hold the new listening socket alone, and a controller
# restarted after a crash listen where the configuration says, also when
# the file's --listen changed before the crash. Moved by an upgrade that
# turns the store off, the old copy goes too.
source "$(dirname "$0")/lib.sh"
kvs_setup

kvs_start_sim A --time-scale 0.01
ST=$KVS_TMP/store
conf=$KVS_TMP/kvspliced.conf
st() { sed -n "s/^$1=//p" "$ST" 2>/dev/null; }
num() { local v; v=$(st "$1"); echo "${v:-0}"; }
ctl() { "$KVS_BUILD/kvsplicectl" --pin-dir "$KVS_PIN" "$@"; }
cat >"$conf" <<CONF
listen = 127.0.0.1:0
metrics = 127.0.0.1:0
pin-dir = $KVS_PIN
backend = 127.0.0.1:$SIM_PORT_A
CONF
"$KVS_BUILD/tests/helpers/fdstore_harness" --state "$ST" -- \
	"$KVS_BUILD/kvspliced" --config "$conf" --port-file "$KVS_TMP/gw.port" 2>"$KVS_TMP/gw.log" &
HARNESS=$!
KVS_PIDS+=($HARNESS)
kvs_wait_file "$KVS_TMP/gw.port"
kvs_wait_for "READY=1 and the listener in the store" \
	'[ "$(num ready)" = 1 ] && [ "$(num fds.kvs-listen)" = 1 ] && [ "$(num fds.kvs-metrics)" = 1 ]'

m0=$(num msgs)
sed -i -e 's/^listen = .*/listen = 127.0.0.6:0/' -e 's/^metrics = .*/metrics = 127.0.0.6:0/' "$conf"
out=$(ctl upgrade) || kvs_fail "upgrade: $out"
NEW=$(jget "$(ctl status --json)" .pid)
grep -q "event=listen_moved from=127.0.0.1:" "$KVS_TMP/gw.log" || kvs_fail "listener not moved"
# (its first two datagrams: the listening socket, then the metrics one)
kvs_wait_for "the successor's hand-in" '[ "$(num pid)" = "$NEW" ] && [ "$(num msgs)" -ge $((m0 + 2)) ]'
assert_eq "listening sockets in the store after the move" "$(num fds.kvs-listen)" 1
assert_eq "metrics sockets in the store after the move" "$(num fds.kvs-metrics)" 1

kill -9 "$NEW"
kvs_wait_for "the restarted controller ready" '[ "$(num starts)" = 2 ] && [ "$(num ready)" = 1 ]'
addr=$(jget "$(ctl status --json)" .listen)
assert_eq "address of the controller restarted after the move" "${addr%:*}" 127.0.0.6
out=$("$KVS_BUILD/kvsplice-bench" live --connect "$addr" --quiet -n 10 -k 2 --prefixes 2 --json) ||
	kvs_fail "requests at the new address: $out"
assert_eq "requests at the new address after the restart" "$(jget "$out" .ok)" 10

# --listen changed in the file, then a crash: the controller restarted with
# the store's listening socket listens where the file now says, and the
# store holds that one alone.
sed -i -e 's/^listen = .*/listen = 127.0.0.8:0/' "$conf"
OLD=$(jget "$(ctl status --json)" .pid)
kill -9 "$OLD"
kvs_wait_for "the controller restarted after the second crash" \
	'[ "$(num starts)" = 3 ] && [ "$(num ready)" = 1 ] && [ "$(num pid)" != "$OLD" ]'
addr=$(jget "$(ctl status --json)" .listen)
assert_eq "address after a crash with --listen changed" "${addr%:*}" 127.0.0.8
grep -q "event=listen_moved from=127.0.0.6:.* to=127.0.0.8:" "$KVS_TMP/gw.log" ||
	kvs_fail "no listen_moved line for the restart"
out=$("$KVS_BUILD/kvsplice-bench" live --connect "$addr" --quiet -n 10 -k 2 --prefixes 2 --json) ||
	kvs_fail "requests at the address the restart moved to: $out"
assert_eq "requests at the address the restart moved to" "$(jget "$out" .ok)" 10
kvs_wait_for "one listening socket in the store after the restart's move" \
	'[ "$(num fds.kvs-listen)" = 1 ]'

# Moved again by an upgrade that also turns the store off: the copy of the
# socket left behind goes all the same (none is handed in any more).
sed -i -e 's/^listen = .*/listen = 127.0.0.7:0/' "$conf"
echo "fd-store = no" >>"$conf"
out=$(ctl upgrade) || kvs_fail "upgrade turning the store off: $out"
kvs_wait_for "no listening socket left in the store" '[ "$(num fds.kvs-listen)" = 0 ]'
echo "PASS test_fdstore_listen_moved"
