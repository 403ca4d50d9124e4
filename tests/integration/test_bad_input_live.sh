#!/usr/bin/env bash
# Bad input at a live gateway, next to a well-behaved client that must keep
# getting byte-exact answers throughout:
#  - 300 connections of random KVS1 streams, intact or damaged (bytes
#    flipped anywhere, cut short, garbage appended; tests/helpers/
#    frame_fuzzer.c): each answered exactly as the codec judges it - every
#    answer owed to a valid stream, an ERROR and a close for anything else,
#    never silence, never a malformed byte back;
#  - a slow sender that begins a frame and stalls (two of them: one at a
#    fresh connection, one behind a complete frame, where the kernel's
#    strparser sets no timer): ERROR timeout within the frame timeout and a
#    quarter, then closed;
#  - a flood of 5,000 tiny frames (PINGs) in one write: answered up to the
#    connection's budget of controller work (--ctl-burst, 1,000 at once),
#    the rest dropped and counted (test_ctl_fairness.sh has the flood of
#    many connections).
# datapath: both (tests/run.sh runs it on the userspace data path too)
source "$(dirname "$0")/lib.sh"
kvs_setup

kvs_start_sim A --time-scale 0.01
kvs_start_gw --backend "127.0.0.1:$SIM_PORT_A" --frame-timeout-ms 500

kvs_bench -n 600 -k 2 -d 2 --json --timeout-s 120 >"$KVS_TMP/good.json" &
good=$!

# Seed 13 draws two hard cases: a REQUEST with a non-zero status field (the
# kernel must refuse what the controller refuses, or the frames of every
# client punted after it are dropped) and one asking for 2^26 tokens (to be
# refused up front, not to wedge the simulator's queue for everybody behind
# it).
for seed in ${FUZZ_SEEDS:-7 13}; do
	out=$("$KVS_BUILD/tests/helpers/frame_fuzzer" "127.0.0.1:$GW_PORT" 300 "$seed") ||
		kvs_fail "seed $seed: random streams not answered as the codec judges them: $out"
	echo "fuzz seed $seed: $out"
	assert_eq "streams answered otherwise than the codec judged" "$(jget "$out" .wrong)" 0
	assert_eq "malformed frames from the gateway" "$(jget "$out" .malformed)" 0
	assert_ge "streams answered in full" "$(jget "$out" .complete)" 30
	assert_ge "streams refused with an ERROR and a close" "$(jget "$out" .closed_by_gateway)" 30
done

s0=$(kvs_stats)
dropped0=$("$KVS_BUILD/kvsplicectl" --pin-dir "$KVS_PIN" status --json | jq .ctl_budget.dropped)
PYTHONPATH="$(dirname "$0")/../helpers" python3 - "$GW_PORT" <<'PY' || kvs_fail "slow sender or flood not handled"
import socket, sys, time
import kvs1
port = int(sys.argv[1])
def cut(frame, payload_sent):
    """frame with only payload_sent bytes of its payload: a sender stalled mid-frame"""
    return frame[:kvs1.HDR.size + payload_sent]
def read_all(s, limit):
    s.settimeout(limit)
    data, t0 = b'', time.time()
    try:
        while True:
            d = s.recv(65536)
            if not d:
                return data, time.time() - t0, True
            data += d
    except socket.timeout:
        return data, time.time() - t0, False
for name, sent in (("fresh", cut(kvs1.request(b'x' * 100, 1), 30)),
                   ("behind a frame", kvs1.request(b'y' * 10, 1) +
                    cut(kvs1.request(b'z' * 2000, 2), 700))):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(sent)
    data, took, closed = read_all(s, 3)
    errs = [f for f in kvs1.split(data)[0] if f.type == kvs1.ERROR]
    ok = closed and errs and errs[-1].status == kvs1.E_TIMEOUT and took < 0.5 * 1.25 + 0.4
    print(f"slow sender, {name}: closed={closed} after {took:.2f} s, "
          f"error={errs[-1].text() if errs else None}")
    if not ok:
        sys.exit(1)
s = socket.create_connection(("127.0.0.1", port))
s.sendall(b''.join(kvs1.ping(i + 1) for i in range(5000)))
s.settimeout(10)
r, pongs = kvs1.Reader(s), 0
try:
    while pongs < 1000:  # --ctl-burst
        if r.next().type == kvs1.PONG:
            pongs += 1
except EOFError:
    pass
print(f"flood: {pongs} PONGs for 5000 PINGs so far")
if pongs < 1000:
    sys.exit(1)
PY
# The burst answered, then 1,000 a second: most of the rest dropped.
kvs_wait_for "the flood's PINGs past the budget are dropped" \
	'[ $(("$("$KVS_BUILD/kvsplicectl" --pin-dir "$KVS_PIN" status --json | jq .ctl_budget.dropped)" - dropped0)) -ge 3000 ]'
echo "ok: the flood's PINGs past the budget dropped"
s1=$(kvs_stats)
assert_eq "frame timeouts counted" \
	$(($(jget "$s1" .controller.frame_timeouts) - $(jget "$s0" .controller.frame_timeouts))) 2

wait $good || kvs_fail "the good client was affected: $(cat "$KVS_TMP/good.json")"
assert_eq "good client requests ok" "$(jq .ok "$KVS_TMP/good.json")" 600
kill -0 "$GW_PID" || kvs_fail "the gateway died"
echo "PASS test_bad_input_live"
