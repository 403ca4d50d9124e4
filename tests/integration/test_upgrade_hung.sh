#!/usr/bin/env bash
# An upgrade whose successor hangs before it takes over: the running
# controller kills it (SIGKILL) once its deadline passes
# (KVSPLICED_UPGRADE_TIMEOUT_MS, here 5 s; 25 s by default), says so in its
# log (event=upgrade_timed_out), carries on serving, and the next upgrade is
# accepted. (Before: every later upgrade was refused "an upgrade is under
# way" for as long as the hung process lived.) A successor that has begun
# taking over is never killed, even if it outlives the deadline: here a fake
# one that takes the sockets, holds them past the deadline, lets the
# hand-over fail and exits by itself.
source "$(dirname "$0")/lib.sh"
kvs_setup

kvs_start_sim A --time-scale 0.01
mkdir -p "$KVS_TMP/sbin"
install -m 0755 "$KVS_BUILD/kvspliced" "$KVS_TMP/sbin/kvspliced"
# install FILE: put FILE in place as the program file (a rename, as
# install(1) and package managers do).
install_exe() { chmod +x "$1" && mv "$1" "$KVS_TMP/sbin/kvspliced"; }
DEADLINE_MS=5000
KVSPLICED_UPGRADE_TIMEOUT_MS=$DEADLINE_MS "$KVS_TMP/sbin/kvspliced" --listen 127.0.0.1:0 \
	--port-file "$KVS_TMP/gw.port" --pin-dir "$KVS_PIN" \
	--backend "127.0.0.1:$SIM_PORT_A" 2>"$KVS_TMP/gw.log" &
OLD=$!
KVS_PIDS+=($OLD)
kvs_wait_file "$KVS_TMP/gw.port"
GW_PORT=$(cat "$KVS_TMP/gw.port")
ctl() { "$KVS_BUILD/kvsplicectl" --pin-dir "$KVS_PIN" "$@"; }
kvs_wait_for "the controller answers" 'ctl status >/dev/null 2>&1'
# the pid of the Nth successor started (event=upgrade_started), once logged
started() { grep -o 'event=upgrade_started pid=[0-9]*' "$KVS_TMP/gw.log" | sed -n "$1s/.*pid=//p"; }

# 1. A successor that starts and never connects to the hand-over socket.
printf '#!/bin/sh\nexec sleep 300\n' >"$KVS_TMP/new"
install_exe "$KVS_TMP/new"
set +e
out=$(ctl upgrade 2>&1)
rc=$?
set -e
HUNG=$(started 1)
[ -n "$HUNG" ] || kvs_fail "no upgrade_started in the log"
KVS_PIDS+=($HUNG) # (killed by the cleanup, should it live)
assert_eq "exit status of an upgrade whose successor hangs" "$rc" 1
grep -q "the new controller (pid $HUNG) exited with 137 (killed: it had not begun taking over within the running controller.s deadline); pid $OLD carries on" <<<"$out" ||
	kvs_fail "kvsplicectl upgrade of a hung successor: $out"
echo "ok: kvsplicectl: $out"
line=$(grep "event=upgrade_timed_out pid=$HUNG " "$KVS_TMP/gw.log") ||
	kvs_fail "no upgrade_timed_out for pid $HUNG in the log"
waited=$(sed -n 's/.* waited_ms=\([0-9]*\).*/\1/p' <<<"$line")
assert_ge "waited before killing it (ms)" "$waited" "$DEADLINE_MS"
grep -q "event=upgrade_failed pid=$HUNG status=137" "$KVS_TMP/gw.log" ||
	kvs_fail "the killed successor was not reaped: $(grep upgrade "$KVS_TMP/gw.log")"
kvs_exited "$HUNG" || kvs_fail "the hung successor $HUNG still runs"
st=$(ctl status --json)
assert_eq "status: upgrade state" "$(jget "$st" .upgrade.state)" failed
assert_eq "status: upgrade status" "$(jget "$st" .upgrade.status)" 137
assert_eq "status: controller" "$(jget "$st" .pid)" "$OLD"
out=$(kvs_bench -n 20 -k 2 --prefixes 4 --json) || kvs_fail "after the hung upgrade: $out"
assert_eq "requests after the hung upgrade" "$(jget "$out" .ok)" 20

# 2. A successor that begins taking over and outlives the deadline: a fake
# that speaks the hand-over (HELLO, then every message up to DONE), holds
# the sockets past the deadline, hangs up without its ACK and lives on a
# while. It must not be killed: the old controller carries on once the
# hand-over fails, and reaps it when it exits (status 0).
ver=$(sed -n 's/^#define KVS_HO_VERSION \([0-9]*\).*/\1/p' "$(dirname "$0")/../../user/kvspliced/handover_msg.h")
cat >"$KVS_TMP/fake_successor.py" <<'PY'
import socket, struct, sys, time
args = sys.argv[1:]
path = args[args.index('--handover-socket') + 1]
version, hold = int(sys.argv[1]), float(sys.argv[2])
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.connect(path)
s.send(struct.pack('<4I', 0x4b565348, version, 1, 0))  # HELLO
while True:
    msg, anc, _, _ = s.recvmsg(1 << 20, socket.CMSG_SPACE(64 * 4))
    for lvl, typ, data in anc:  # the sockets handed over: not ours to keep
        if lvl == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
            for fd in struct.unpack('%di' % (len(data) // 4), data[:len(data) - len(data) % 4]):
                socket.close(fd)
    if len(msg) < 16 or struct.unpack('<4I', msg[:16])[2] == 5:  # DONE
        break
print('fake successor: got DONE', flush=True, file=sys.stderr)
time.sleep(hold)  # past the deadline, mid-hand-over
s.close()         # no ACK: the hand-over fails
time.sleep(hold)  # and past it again, after
PY
hold=$(awk -v d=$DEADLINE_MS 'BEGIN { print d / 1000 + 1 }')
# (the interpreter itself, not a version manager's shim: it must connect
# well within the deadline on a busy machine)
py=$(python3 -c 'import sys; print(sys.executable)')
printf '#!/bin/sh\nexec %s %s %s %s "$@"\n' "$py" "$KVS_TMP/fake_successor.py" "$ver" "$hold" >"$KVS_TMP/new"
install_exe "$KVS_TMP/new"
set +e
out=$(ctl upgrade 2>&1)
rc=$?
set -e
FAKE=$(started 2)
KVS_PIDS+=($FAKE)
grep -q "fake successor: got DONE" "$KVS_TMP/gw.log" || kvs_fail "the fake never got its DONE"
grep -q "event=handover_failed" "$KVS_TMP/gw.log" || kvs_fail "no handover_failed"
if grep -q "event=upgrade_timed_out pid=$FAKE " "$KVS_TMP/gw.log"; then
	kvs_fail "a successor that had begun taking over was killed: $(grep "pid=$FAKE" "$KVS_TMP/gw.log")"
fi
assert_eq "exit status of an upgrade whose successor exits" "$rc" 1
grep -q "the new controller (pid $FAKE) exited with 0; pid $OLD carries on" <<<"$out" ||
	kvs_fail "kvsplicectl upgrade of the fake: $out"
grep -q "event=upgrade_failed pid=$FAKE status=0" "$KVS_TMP/gw.log" ||
	kvs_fail "the fake's exit: $(grep "pid=$FAKE" "$KVS_TMP/gw.log")"
echo "ok: a successor past the deadline mid-hand-over was not killed"
out=$(kvs_bench -n 20 -k 2 --prefixes 4 --json) || kvs_fail "after the failed hand-over: $out"
assert_eq "requests after the failed hand-over" "$(jget "$out" .ok)" 20

# 3. The next upgrade is accepted, and takes over.
install -m 0755 "$KVS_BUILD/kvspliced" "$KVS_TMP/new"
install_exe "$KVS_TMP/new"
out=$(ctl upgrade 2>&1) || kvs_fail "the upgrade after a hung one: $out"
NEW=$(jget "$(ctl status --json)" .pid)
KVS_PIDS+=($NEW)
grep -q "^upgraded: controller pid $NEW took over from pid $OLD" <<<"$out" ||
	kvs_fail "upgrade after a hung one: $out"
out=$(kvs_bench -n 20 -k 2 --prefixes 4 --json) || kvs_fail "after the upgrade: $out"
assert_eq "requests after the upgrade" "$(jget "$out" .ok)" 20
echo "PASS test_upgrade_hung"
