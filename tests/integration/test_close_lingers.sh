#!/usr/bin/env bash
# Every close of a client by the gateway ends with the gateway's FIN after
# its ERROR, and what the client still sends is read and dropped until it
# closes (LINGER_MS at most): no reset. A socket closed with bytes unread
# sends a reset, which destroys what the gateway had not yet got out and
# tells the client "connection reset" rather than why. Each close, with a
# client that goes on sending until it hears, and 300 ms more
# (tests/helpers/close_sender.py):
#  - a bad frame (bad magic) and garbage after it;
#  - the same while an answer streams to the client (its CHUNKs must not
#    fail against the gateway's FIN and cut the linger short, and the
#    request is cancelled at its backend: on the kernel path the bad
#    frame's ERROR, counted as the end of a request, had left the client
#    with none in flight, and nothing was cancelled);
#  - PINGs past the budget of controller work (--ctl-close-after);
#  - a frame never finished (--frame-timeout-ms; on the kernel path the
#    strparser's own timer gives up on it during the linger);
#  - an idle client (--idle-timeout-ms) that sends just as it is closed.
# Each must get its ERROR, then EOF, and no send may fail; then every one
# of them is closed and out of the conns map, the gateway having read what
# each sent after its FIN (its debug log's dropped_bytes). A client that
# never stops sending is closed all the same (1 s after the FIN): it sees
# a reset. (Before 2026-12-04 the gateway closed 200 ms after the ERROR:
# every case reset.)
# datapath: both (tests/run.sh runs it on the userspace data path too)
source "$(dirname "$0")/lib.sh"
kvs_setup

kvs_start_sim A --time-scale 0.1 # a 4,000-token answer streams for seconds
kvs_start_gw --backend "127.0.0.1:$SIM_PORT_A" --frame-timeout-ms 300 --idle-timeout-ms 1000 \
	--ctl-rate 50 --ctl-burst 50 --ctl-close-after 100 --log-level debug
[ "$(kvs_wait_backend 0 up 400)" = up ] || kvs_fail "backend not up"
closed0=$(jget "$(kvs_stats)" .controller.clients_closed)

sender() { python3 "$(dirname "$0")/../helpers/close_sender.py" "$GW_PORT" "$1"; }
# case MODE CODE: two clients of the kind, each closed as it should be.
case_of() {
	local out i
	for i in 1 2; do
		out=$(sender "$1") ||
			kvs_fail "close_sender $1: $out"
		echo "$1: $out"
		assert_eq "$1: the gateway's ERROR" "$(sed -n 's/.*code=\([^ ]*\).*/\1/p' <<<"$out")" "$2"
		assert_eq "$1: how the stream ended" "$(sed -n 's/.*end=\([^ ]*\).*/\1/p' <<<"$out")" eof
		assert_eq "$1: a send reset" "$(sed -n 's/.*send_error=\([^ ]*\).*/\1/p' <<<"$out")" -
	done
}
case_of bad 1      # KVS_E_BAD_MAGIC
cancels0=$(jget "$(kvs_stats)" .controller.cancels_sent)
case_of streaming 1
kvs_wait_for "the 2 streaming requests cancelled" \
	'[ $(($(jget "$(kvs_stats)" .controller.cancels_sent) - cancels0)) -ge 2 ]'
case_of flood 10   # KVS_E_BUSY
case_of partial 11 # KVS_E_TIMEOUT
case_of idle 11

# One that never stops sending (for 30 s): closed by the gateway.
out=$(AFTER_MS=30000 sender bad)
echo "sending on: $out"
assert_eq "sending on: the gateway's ERROR" "$(sed -n 's/.*code=\([^ ]*\).*/\1/p' <<<"$out")" 1
case $(sed -n 's/.*send_error=\([^ ]*\).*/\1/p' <<<"$out") in
ECONNRESET | EPIPE) ;;
*) kvs_fail "a client that never stops sending was not closed: $out" ;;
esac

# Each closed in the end, its conns entry gone (the kernel path keeps it
# while the socket lingers out of the SOCKHASH), what came after the FIN
# read.
kvs_wait_for "the 11 clients closed" \
	'[ $(($(jget "$(kvs_stats)" .controller.clients_closed) - closed0)) -ge 11 ]'
read_after=$(grep -c 'event=client_linger_done .* dropped_bytes=[1-9]' "$KVS_TMP/gw.log" || true)
assert_ge "lingering closes that read what came" "$read_after" 11
clients() { "$KVS_BUILD/kvsplicectl" --pin-dir "$KVS_PIN" conns --json |
	jq '[.[] | select(.role == "client")] | length'; }
kvs_wait_for "no client left in the conns map" '[ "$(clients)" = 0 ]'

# The gateway still serves.
out=$(kvs_bench -n 50 -k 2 -d 2 --json --timeout-s 60) || kvs_fail "bench: $out"
assert_eq "requests after the closes" "$(jget "$out" .ok)" 50
echo "PASS test_close_lingers"
