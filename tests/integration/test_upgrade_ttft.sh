#!/usr/bin/env bash
# The backends' first-token histograms (the backend_ttft map, Prometheus'
# kvsplice_backend_ttft_seconds) across a take-over. A successor goes on
# with its predecessor's counts when the predecessor kept them: every
# controller since the map came says so of each slot in its STATE
# (KVS_HO_BE_TTFT). One of an earlier build neither counts nor clears them,
# and leaves the map pinned as a later controller left it (its pin list
# does not name it): upgraded again after a rollback, the successor found
# an earlier run's counts in its slots, another backend's where the slot
# had been given to another meanwhile (on the old code here: the counts of
# before, unchanged). Such a predecessor is played by this build's, its
# STATE relayed without the bit by a proxy on the hand-over socket.
source "$(dirname "$0")/lib.sh"
kvs_setup

kvs_start_sim A --time-scale 0.005
kvs_start_sim B --time-scale 0.005
a=127.0.0.1:$SIM_PORT_A b=127.0.0.1:$SIM_PORT_B
kvs_start_gw --backend "$a" --backend "$b" --metrics 127.0.0.1:0
MPORT=$(grep -o 'event=metrics_listening addr=[^ ]* port=[0-9]*' "$KVS_TMP/gw.log" | grep -o '[0-9]*$')
[ -n "$MPORT" ] || kvs_fail "no metrics_listening line"
# the TTFTs counted for each backend, "A B"
counts() {
	curl -sS "http://127.0.0.1:$MPORT/metrics" | awk -v a="{backend=\"$a\"}" -v b="{backend=\"$b\"}" '
		$1 == "kvsplice_backend_ttft_seconds_count" a { na = $2 }
		$1 == "kvsplice_backend_ttft_seconds_count" b { nb = $2 }
		END { print na + 0, nb + 0 }'
}

out=$(kvs_bench -n 60 -k 4 --prefixes 8 --json) || kvs_fail "load: $out"
before=$(counts)
read -r na nb <<<"$before"
assert_eq "TTFTs counted before the take-overs" $((na + nb)) 60

# A predecessor of this build: its counts go on.
kvs_start_successor --backend "$a" --backend "$b" --metrics 127.0.0.1:0
kvs_wait_for "the first controller's exit" "! kill -0 $GW_PID 2>/dev/null"
assert_eq "a successor of a controller that kept them: the same counts" "$(counts)" "$before"

# A predecessor that does not keep them: its STATE without KVS_HO_BE_TTFT.
python3 - "$KVS_TMP/proxy.sock" "/run/kvsplice/$(basename "$KVS_PIN").handover" \
	"$KVS_TMP/proxy.ready" <<'PY' 2>"$KVS_TMP/proxy.log" &
import select, socket, sys

BE_TTFT, BE_SIZE, MAX_BACKENDS = 16, 72, 64  # handover_msg.h
srv = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
srv.bind(sys.argv[1])
srv.listen(1)
open(sys.argv[3], "w").write("ready\n")
new, _ = srv.accept()
old = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
old.connect(sys.argv[2])
peer = {new: old, old: new}
while True:
    for s in select.select([new, old], [], [])[0]:
        msg, fds, _, _ = socket.recv_fds(s, 1 << 16, 253)
        if not msg:
            sys.exit(0)
        if s is old and int.from_bytes(msg[8:12], "little") == 2:  # STATE
            m = bytearray(msg)
            be = len(m) - BE_SIZE * MAX_BACKENDS
            for i in range(MAX_BACKENDS):
                f = be + i * BE_SIZE + 64
                flags = int.from_bytes(m[f:f + 4], "little") & ~BE_TTFT
                m[f:f + 4] = flags.to_bytes(4, "little")
            msg = bytes(m)
        socket.send_fds(peer[s], [msg], fds)
PY
KVS_PIDS+=($!)
kvs_wait_file "$KVS_TMP/proxy.ready"
"$KVS_BUILD/kvspliced" --listen 127.0.0.1:0 --port-file "$KVS_TMP/gw3.port" \
	--pin-dir "$KVS_PIN" --datapath "${KVS_DATAPATH:-kernel}" --takeover \
	--handover-socket "$KVS_TMP/proxy.sock" --backend "$a" --backend "$b" \
	--metrics 127.0.0.1:0 2>"$KVS_TMP/gw3.log" &
KVS_PIDS+=($!)
kvs_wait_for "the take-over through the proxy" "grep -q 'event=took_over' '$KVS_TMP/gw3.log'"
assert_eq "a successor of a controller that did not keep them: none" "$(counts)" "0 0"
grep -q 'event=ttft_cleared slots=2 ' "$KVS_TMP/gw3.log" ||
	kvs_fail "no event=ttft_cleared line: $(grep ttft "$KVS_TMP/gw3.log")"

# and it counts from there
out=$(kvs_bench -n 20 -k 2 --prefixes 4 --json) || kvs_fail "load after: $out"
read -r na nb <<<"$(counts)"
assert_eq "TTFTs counted after the take-over" $((na + nb)) 20
echo "PASS test_upgrade_ttft"
