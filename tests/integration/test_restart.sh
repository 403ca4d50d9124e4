#!/usr/bin/env bash
# Controller restart without loss: while a client streams requests over
# connections it keeps open, a second kvspliced started with --takeover
# takes the listening socket, every client and backend connection
# (SCM_RIGHTS) and the pinned maps from the first, which exits. No
# connection drops, no request is lost or answered wrongly, and new
# clients connect to the same port afterwards. Then the controller is
# killed (SIGKILL): its connections die with it (documented), but a fresh
# controller on the same port serves new clients at once.
source "$(dirname "$0")/lib.sh"
kvs_setup

kvs_start_sim A --time-scale 0.02
kvs_start_sim B --time-scale 0.02
HO=$KVS_TMP/handover.sock
BACKENDS=(--backend "127.0.0.1:$SIM_PORT_A" --backend "127.0.0.1:$SIM_PORT_B")
kvs_start_gw "${BACKENDS[@]}" --handover-socket "$HO"
OLD=$GW_PID
[ -S "$HO" ] || kvs_fail "no hand-over socket"
assert_eq "hand-over socket mode (root alone)" "$(stat -c %a "$HO")" 700

# A client streaming for ~8 s over 4 connections it keeps open.
kvs_bench -n 800 -k 4 --rate 100 --prefixes 8 --prefix-tokens 1024 --suffix-tokens 64 -m 16 \
	--json --timeout-s 60 >"$KVS_TMP/during.json" 2>"$KVS_TMP/during.err" &
bench=$!
# Take over mid-stream: once the client's routes carry frames (a count
# that only grows, not a moment that may pass between two polls).
kvs_wait_for "100 of the client's frames on the kernel's routes" \
	'[ "$(jget "$(kvs_stats)" .fast_path_frames)" -ge 100 ]'
rm -f "$KVS_TMP/gw.port"
"$KVS_BUILD/kvspliced" --listen 127.0.0.1:0 --port-file "$KVS_TMP/gw.port" --pin-dir "$KVS_PIN" \
	"${BACKENDS[@]}" --handover-socket "$HO" --takeover 2>"$KVS_TMP/gw2.log" &
NEW=$!
KVS_PIDS+=($NEW)
kvs_wait_file "$KVS_TMP/gw.port"
assert_eq "port after the take-over" "$(cat "$KVS_TMP/gw.port")" "$GW_PORT"
kvs_wait_for "the old controller exited" '! kill -0 "$OLD" 2>/dev/null'
grep -q "event=handed_over" "$KVS_TMP/gw.log" || kvs_fail "old: no handed_over line"
grep -q "event=took_over" "$KVS_TMP/gw2.log" || kvs_fail "new: no took_over line"
echo "ok: $(grep -o 'event=took_over.*' "$KVS_TMP/gw2.log")"

wait $bench || kvs_fail "the client saw failures across the take-over: $(jq -c '{ok,errors,mismatches,lost}' "$KVS_TMP/during.json"); $(head -3 "$KVS_TMP/during.err")"
out=$(cat "$KVS_TMP/during.json")
assert_eq "requests answered byte for byte across the take-over" "$(jget "$out" .ok)" 800
assert_eq "lost" "$(jget "$out" .lost)" 0
GW_PID=$NEW
st=$(kvs_stats)
assert_ge "kernel routes kept (fast path after the take-over)" "$(jget "$st" .fast_path_frames)" 700
out=$(kvs_bench -n 100 -k 4 --prefixes 8 --prefix-tokens 1024 --json) ||
	kvs_fail "new clients after the take-over failed: $out"
assert_eq "new clients after the take-over: ok" "$(jget "$out" .ok)" 100
# The new controller can itself be taken over (its socket is live).
[ -S "$HO" ] || kvs_fail "the new controller has no hand-over socket"

# A take-over by a controller with another backend list: it takes every
# socket, then applies its own list as a reload would (B drained, removed).
"$KVS_BUILD/kvspliced" --listen 127.0.0.1:0 --pin-dir "$KVS_PIN" \
	--backend "127.0.0.1:$SIM_PORT_A" --handover-socket "$HO" --takeover 2>"$KVS_TMP/gw3.log" &
NEW=$!
KVS_PIDS+=($NEW)
kvs_wait_for "B removed after a take-over without it" \
	'grep -q "event=backend_removed backend=127.0.0.1:$SIM_PORT_B" "$KVS_TMP/gw3.log"'
out=$(kvs_bench -n 20 -k 2 --prefixes 2 --json) || kvs_fail "after a take-over with one backend: $out"
assert_eq "backends serving after a take-over that lists A alone" "$(jget "$out" '.backends | length')" 1
echo "ok: a take-over with another backend list applies it"

# A hand-over request of another protocol version is refused; the running
# controller goes on.
python3 - "$HO" <<'PY' || kvs_fail "old-version take-over"
import socket, struct, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.connect(sys.argv[1])
s.send(struct.pack('IIII', 0x4b565348, 1, 1, 0))
m = s.recv(65536)
assert struct.unpack('IIII', m[:16])[3] == 0xffffffff, m[:16]
PY
kvs_wait_for "the refused hand-over logged" 'grep -q "event=handover_refused" "$KVS_TMP/gw3.log"'
grep -q 'event=handover_refused reason="hand-over version 1' "$KVS_TMP/gw3.log" ||
	kvs_fail "no handover_refused line"
echo "ok: a hand-over of another version is refused"

# A new controller that takes everything and dies before it says it runs:
# the running one carries on, whole (the hand-over runs between batches of
# completions, never inside one, so a failed one leaves the completion
# queue's head where the loop expects it).
HO_VERSION=$(sed -n 's/^#define KVS_HO_VERSION \([0-9]*\).*/\1/p' \
	"$(dirname "$0")/../../user/kvspliced/handover_msg.h")
python3 - "$HO" "$HO_VERSION" <<'PY' || kvs_fail "fake take-over"
import socket, struct, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.connect(sys.argv[1])
s.send(struct.pack('IIII', 0x4b565348, int(sys.argv[2]), 1, 0))  # KVS_HO_VERSION
while True:
    m, anc, flags, addr = s.recvmsg(65536, socket.CMSG_SPACE(4 * 200))
    if struct.unpack('IIII', m[:16])[2] == 5:  # DONE
        break
s.close()  # no ACK
PY
kvs_wait_for "the failed hand-over logged" 'grep -q "event=handover_failed" "$KVS_TMP/gw3.log"'
grep -q 'event=handover_failed .*action="carrying on"' "$KVS_TMP/gw3.log" ||
	kvs_fail "no handover_failed line"
out=$(kvs_bench -n 40 -k 2 --prefixes 4 --salt 5 --json --timeout-s 20) ||
	kvs_fail "after a take-over that died: $out"
assert_eq "requests ok after a take-over that died before its ACK" "$(jget "$out" .ok)" 40
kill -0 "$NEW" || kvs_fail "the running controller died"

# SIGKILL: established connections die with the process; a new one serves.
kill -9 "$NEW"
wait "$NEW" 2>/dev/null || true
rm -f "$KVS_TMP/gw.port"
"$KVS_BUILD/kvspliced" --listen "127.0.0.1:$GW_PORT" --port-file "$KVS_TMP/gw.port" \
	--pin-dir "$KVS_PIN" "${BACKENDS[@]}" 2>"$KVS_TMP/gw4.log" &
GW_PID=$!
KVS_PIDS+=($GW_PID)
kvs_wait_file "$KVS_TMP/gw.port"
out=$(kvs_bench -n 50 -k 2 --prefixes 2 --json) || kvs_fail "after a SIGKILL: $out"
assert_eq "requests ok on a fresh controller after a SIGKILL" "$(jget "$out" .ok)" 50
echo "PASS test_restart"
