#!/usr/bin/env bash
# Upgrade in place, as under systemd: `kvsplicectl upgrade` makes the
# running controller start its program file anew (a newly installed binary)
# with --takeover; the successor takes every socket, the old one names it
# to systemd (MAINPID=, on $NOTIFY_SOCKET, here a socket the test reads) and
# exits 0. Requests stream through it on open connections and none fails.
# An upgrade whose new binary does not start leaves the running one serving,
# and says so. (A real systemd is not run here: PID 1 is not systemd.)
source "$(dirname "$0")/lib.sh"
kvs_setup

kvs_start_sim A --time-scale 0.01
kvs_start_sim B --time-scale 0.01
mkdir -p "$KVS_TMP/sbin"
install -m 0755 "$KVS_BUILD/kvspliced" "$KVS_TMP/sbin/kvspliced"

# The notification socket, as systemd would offer it: messages to a file.
python3 - "$KVS_TMP/notify.sock" "$KVS_TMP/notify.log" <<'PY' &
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
with open(sys.argv[2], 'a', buffering=1) as log:
    while True:
        log.write(s.recv(4096).decode().replace('\n', ' ') + '\n')
PY
KVS_PIDS+=($!)
for i in $(seq 1 40); do [ -S "$KVS_TMP/notify.sock" ] && break; sleep 0.05; done

NOTIFY_SOCKET=$KVS_TMP/notify.sock "$KVS_TMP/sbin/kvspliced" --listen 127.0.0.1:0 \
	--port-file "$KVS_TMP/gw.port" --pin-dir "$KVS_PIN" \
	--backend "127.0.0.1:$SIM_PORT_A" --backend "127.0.0.1:$SIM_PORT_B" 2>"$KVS_TMP/gw.log" &
OLD=$!
KVS_PIDS+=($OLD)
kvs_wait_file "$KVS_TMP/gw.port"
GW_PORT=$(cat "$KVS_TMP/gw.port")
ctl() { "$KVS_BUILD/kvsplicectl" --pin-dir "$KVS_PIN" "$@"; }
for i in $(seq 1 40); do grep -q "READY=1" "$KVS_TMP/notify.log" 2>/dev/null && break; sleep 0.05; done
grep -q "READY=1" "$KVS_TMP/notify.log" || kvs_fail "no READY=1 notification"
echo "ok: READY=1 once listening"

# A failed upgrade: the installed "binary" does not start.
printf '#!/bin/sh\nexit 3\n' >"$KVS_TMP/new"
chmod +x "$KVS_TMP/new"
mv "$KVS_TMP/new" "$KVS_TMP/sbin/kvspliced"
set +e
out=$(ctl upgrade 2>&1)
rc=$?
set -e
assert_eq "exit status of a failed upgrade" "$rc" 1
grep -q "exited with 3; pid $OLD carries on" <<<"$out" || kvs_fail "failed upgrade: $out"
assert_eq "controller after a failed upgrade" "$(jget "$(ctl status --json)" .pid)" "$OLD"
out=$(kvs_bench -n 40 -k 2 --prefixes 4 --json) || kvs_fail "after a failed upgrade: $out"
assert_eq "requests after a failed upgrade" "$(jget "$out" .ok)" 40

# The real upgrade, with requests streaming over 4 open connections.
install -m 0755 "$KVS_BUILD/kvspliced" "$KVS_TMP/new"
mv "$KVS_TMP/new" "$KVS_TMP/sbin/kvspliced"
kvs_bench -n 500 --rate 100 -k 4 --prefixes 8 --prefix-tokens 512 --json \
	>"$KVS_TMP/during.json" &
load=$!
sleep 1.5
routes_before=$(jget "$(ctl stats --json)" .routes)
out=$(ctl upgrade) || kvs_fail "upgrade: $out"
NEW=$(jget "$(ctl status --json)" .pid)
KVS_PIDS+=($NEW)
grep -q "^upgraded: controller pid $NEW took over from pid $OLD" <<<"$out" || kvs_fail "upgrade: $out"
set +e
wait "$OLD"
rc=$?
set -e
assert_eq "the old controller's exit status" "$rc" 0
grep -q "MAINPID=$NEW" "$KVS_TMP/notify.log" || kvs_fail "systemd not told: $(cat "$KVS_TMP/notify.log")"
echo "ok: MAINPID=$NEW notified"
[ "$(readlink "/proc/$NEW/exe")" = "$KVS_TMP/sbin/kvspliced" ] || kvs_fail "new controller's program"
wait "$load" || kvs_fail "load across the upgrade: $(cat "$KVS_TMP/during.json")"
res=$(cat "$KVS_TMP/during.json")
assert_eq "requests answered across the upgrade" "$(jget "$res" .ok)" 500
assert_eq "errors across the upgrade" "$(jget "$res" .errors)" 0
# Same prefix hash on both sides: the learned routes are kept (a successor
# with another KVS_HASH_VERSION flushes them, and logs routes_flushed).
[ "$routes_before" -gt 0 ] || kvs_fail "no routes learned before the upgrade"
[ "$(jget "$(ctl stats --json)" .routes)" -ge "$routes_before" ] ||
	kvs_fail "routes lost across the upgrade: $routes_before before"
grep -q "event=took_over" "$KVS_TMP/gw.log" || kvs_fail "the successor's log is not in gw.log"
if grep -q "event=routes_flushed" "$KVS_TMP/gw.log"; then
	kvs_fail "routes flushed across an upgrade to the same hash: $(grep routes_flushed "$KVS_TMP/gw.log")"
fi
# The successor can be upgraded in turn (its own sockets are live).
out=$(ctl upgrade) || kvs_fail "second upgrade: $out"
NEWER=$(jget "$(ctl status --json)" .pid)
KVS_PIDS+=($NEWER)
[ "$NEWER" != "$NEW" ] || kvs_fail "second upgrade kept pid $NEW"
out=$(kvs_bench -n 40 -k 2 --prefixes 4 --json) || kvs_fail "after two upgrades: $out"
assert_eq "requests after two upgrades" "$(jget "$out" .ok)" 40
echo "PASS test_upgrade"
