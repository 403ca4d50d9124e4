#!/usr/bin/env bash
# The pin directory. One not on bpffs is refused with what is wrong
# (event=pin_dir_not_bpffs and how to mount one), not with a hint about
# root, and is not made. One the controller made is removed at a clean
# exit once its pins are gone, so that empty pin dirs do not pile up, and
# so is one it found holding a kvspliced's pins: left by a controller
# killed before its clean exit, or handed over by an upgrade (the old
# controller leaves it to the new one, which removes it at its own clean
# exit). One with pins left (--keep-pins) and one the operator made (found
# empty) are left where they are. A nested one (DIR/a/b): exactly the
# levels the controller made are removed, after a clean exit and after a
# refused take-over, never one that was there.
source "$(dirname "$0")/lib.sh"
kvs_setup

kvs_start_sim A --time-scale 0.01
be=(--backend "127.0.0.1:$SIM_PORT_A")
start_gw() {
	rm -f "$KVS_TMP/gw.port" # kvs_start_gw waits for it: this run's, not the last
	kvs_start_gw "$@"
}
stop_gw() {
	kill "$GW_PID"
	wait "$GW_PID" 2>/dev/null || true
}

# Not on bpffs (/tmp, or wherever KVS_TMP is: not bpffs).
notbpf=$KVS_TMP/pins/gw
set +e
timeout 20 "$KVS_BUILD/kvspliced" --listen 127.0.0.1:0 --pin-dir "$notbpf" "${be[@]}" \
	2>"$KVS_TMP/notbpf.log"
rc=$?
set -e
assert_eq "exit status with a pin dir not on bpffs" "$rc" 1
grep -q "event=pin_dir_not_bpffs dir=$notbpf .*mount -t bpf bpf DIR" "$KVS_TMP/notbpf.log" ||
	kvs_fail "no pin_dir_not_bpffs line: $(tail -3 "$KVS_TMP/notbpf.log")"
grep -qi "root" "$KVS_TMP/notbpf.log" && kvs_fail "it blames root: $(grep -i root "$KVS_TMP/notbpf.log")"
[ -e "$KVS_TMP/pins" ] && kvs_fail "it made $KVS_TMP/pins"
echo "ok: a pin dir not on bpffs is refused, and said so"

# Made by the controller: gone after a clean exit.
start_gw "${be[@]}"
[ -e "$KVS_PIN/routes" ] || kvs_fail "no pins in $KVS_PIN"
stop_gw
[ -e "$KVS_PIN" ] && kvs_fail "$KVS_PIN left after a clean exit: $(ls -a "$KVS_PIN")"
echo "ok: the pin dir it made is gone after a clean exit"

# Left by a controller killed with SIGKILL (its pins stay): the next one
# clears the stale pins, and at its clean exit removes the directory as if
# it had made it, rather than leave it empty for good.
start_gw "${be[@]}"
kill -KILL "$GW_PID"
wait "$GW_PID" 2>/dev/null || true
[ -e "$KVS_PIN/routes" ] || kvs_fail "SIGKILL: no pins left behind to adopt"
start_gw "${be[@]}"
stop_gw
[ -e "$KVS_PIN" ] && kvs_fail "a killed controller's pin dir, reused, is left after a clean exit: $(ls -a "$KVS_PIN")"
echo "ok: a pin dir left by a killed controller is gone after the next one's clean exit"

# Nested, none of it there: every level it made goes (the test's own
# KVS_PIN is the top one, so that the cleanup removes what a failure
# leaves).
start_gw "${be[@]}" --pin-dir "$KVS_PIN/a/b"
[ -e "$KVS_PIN/a/b/routes" ] || kvs_fail "no pins in $KVS_PIN/a/b"
stop_gw
[ -e "$KVS_PIN" ] && kvs_fail "nested: left after a clean exit: $(find "$KVS_PIN")"
echo "ok: a nested pin dir it made is gone after a clean exit, with the levels above it"

# Nested under a directory the operator made: that one stays.
mkdir -m 0700 "$KVS_PIN"
start_gw "${be[@]}" --pin-dir "$KVS_PIN/a/b"
stop_gw
[ -d "$KVS_PIN" ] || kvs_fail "nested: the operator's $KVS_PIN was removed"
[ -e "$KVS_PIN/a" ] && kvs_fail "nested: left after a clean exit: $(find "$KVS_PIN")"
echo "ok: a nested pin dir under the operator's: only the levels it made are gone"
rmdir "$KVS_PIN"

# --keep-pins: the pins and their directory stay.
start_gw "${be[@]}" --keep-pins
stop_gw
[ -e "$KVS_PIN/routes" ] || kvs_fail "--keep-pins: pins gone"
echo "ok: --keep-pins keeps the pins and their directory"
rm -rf "$KVS_PIN"

# Made by the operator: emptied, kept.
mkdir -m 0700 "$KVS_PIN"
start_gw "${be[@]}"
stop_gw
[ -d "$KVS_PIN" ] || kvs_fail "the operator's pin dir was removed"
[ -z "$(ls -A "$KVS_PIN")" ] || kvs_fail "pins left: $(ls -A "$KVS_PIN")"
echo "ok: a pin dir the operator made is emptied and kept"
rmdir "$KVS_PIN"

# An upgrade: the old controller, which made the dir, exits after handing
# the pins over; the new one has them, in place.
mkdir -p "$KVS_TMP/sbin"
install -m 0755 "$KVS_BUILD/kvspliced" "$KVS_TMP/sbin/kvspliced"
rm -f "$KVS_TMP/gw.port"
"$KVS_TMP/sbin/kvspliced" --listen 127.0.0.1:0 --port-file "$KVS_TMP/gw.port" \
	--pin-dir "$KVS_PIN" "${be[@]}" 2>"$KVS_TMP/gw.log" &
OLD=$!
KVS_PIDS+=($OLD)
kvs_wait_file "$KVS_TMP/gw.port"
GW_PORT=$(cat "$KVS_TMP/gw.port")
out=$("$KVS_BUILD/kvsplicectl" --pin-dir "$KVS_PIN" upgrade) || kvs_fail "upgrade: $out"
NEW=$("$KVS_BUILD/kvsplicectl" --pin-dir "$KVS_PIN" status --json | jq .pid)
KVS_PIDS+=($NEW)
kvs_wait_for "the old controller exits" "! kill -0 $OLD 2>/dev/null"
[ -e "$KVS_PIN/routes" ] || kvs_fail "pins gone after the upgrade: $(ls -A "$KVS_PIN" 2>&1)"
out=$(kvs_bench -n 20 -k 2 --prefixes 4 --json) || kvs_fail "after the upgrade: $out"
assert_eq "requests after the upgrade" "$(jget "$out" .ok)" 20

# A take-over refused (another, nested pin-dir: no maps there) after the
# successor made the levels: it removes them as it exits, the running
# controller carries on.
nest=$KVS_PIN-nest
trap 'rm -rf "$nest"; kvs_cleanup' EXIT
set +e
timeout 60 "$KVS_BUILD/kvspliced" --listen 127.0.0.1:0 --pin-dir "$nest/a/b" "${be[@]}" --takeover \
	--handover-socket "/run/kvsplice/$(basename "$KVS_PIN").handover" 2>"$KVS_TMP/refused.log"
rc=$?
set -e
assert_eq "exit status of a refused take-over" "$rc" 1
grep -q "event=takeover_refused reason=\"no maps pinned at $nest/a/b\"" "$KVS_TMP/refused.log" ||
	kvs_fail "not refused for its pin dir: $(tail -3 "$KVS_TMP/refused.log")"
[ -e "$nest" ] && kvs_fail "nested: left after a refused take-over: $(find "$nest")"
echo "ok: a refused take-over removes the nested levels it made"
kvs_wait_for "the running controller answers again" \
	"[ \"\$(\"$KVS_BUILD/kvsplicectl\" --pin-dir \"$KVS_PIN\" status --json | jq .pid)\" = $NEW ]"
out=$(kvs_bench -n 20 -k 2 --prefixes 4 --json) || kvs_fail "after the refused take-over: $out"
assert_eq "requests after the refused take-over" "$(jget "$out" .ok)" 20

# The upgraded controller's clean exit: the directory its predecessor made
# and handed over goes with it.
kill "$NEW"
kvs_wait_for "the upgraded controller exits" "! kill -0 $NEW 2>/dev/null"
[ -e "$KVS_PIN" ] && kvs_fail "left after the upgraded controller's clean exit: $(ls -a "$KVS_PIN")"
echo "ok: a pin dir handed over by an upgrade is gone after the new controller's clean exit"
echo "PASS test_pin_dir"
